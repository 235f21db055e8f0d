"""Invoking iree-compile, and refusing every silent fallback.

The command line comes from ``iree.compiler.tools`` (so it is exactly what IREE's Python
API would run) and is returned for users to reproduce builds without tdsched. After a
build, stderr is scanned: iree-compile exits 0 when a transform library fails to load or
matches nothing, so tdsched requires, for each kernel schedule, the remark its strategy
or config emits, and turns any ``error:`` line into a failure.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from iree.compiler.tools import core

from .target import Target

APPLIED_REMARK = "tdsched applied kernel schedule"
"""Prefix of the remark each kernel schedule emits when it is attached to a dispatch."""
_REMARK = re.compile(re.escape(APPLIED_REMARK) + r" '([^']+)'")


class CompileError(RuntimeError):
    """iree-compile failed, or a schedule did not apply. The message says which and why."""

    def __init__(self, message: str, command: Sequence[str] = (), stderr: str = "") -> None:
        super().__init__(message)
        self.command = list(command)
        self.stderr = stderr


@dataclass(frozen=True)
class CompileRequest:
    """One iree-compile invocation.

    ``kernel_library`` is a transform library for ``@__kernel_config``;
    ``expected_kernels`` the kernel schedule names that must report they applied.
    """

    input_file: Path
    target: Target
    output_file: Path
    kernel_library: Path | None = None
    expected_kernels: tuple[str, ...] = ()
    extra_flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class CompileResult:
    command: list[str]
    stderr: str
    applied: dict[str, int] = field(default_factory=dict)
    """Kernel schedule name → number of dispatches it was attached to."""


def compile_command(request: CompileRequest) -> list[str]:
    """The exact iree-compile command line for ``request``."""
    flags = list(request.target.flags)
    if request.kernel_library is not None:
        flags.append(f"--iree-codegen-transform-dialect-library={request.kernel_library}")
    flags.extend(request.extra_flags)
    options = core.CompilerOptions(
        output_file=str(request.output_file),
        target_backends=[request.target.backend],
        extra_args=flags,
        output_mlir_debuginfo=False,
    )
    with core.TempFileSaver() as tfs:
        return core.build_compile_command_line(str(request.input_file), tfs, options)


def format_command(command: Sequence[str]) -> str:
    """A shell-quoted command line."""
    return shlex.join(command)


def run_compile(request: CompileRequest, timeout_s: float = 600.0) -> CompileResult:
    """Compile, then check that no error was reported and every kernel schedule applied."""
    command = compile_command(request)
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        raise CompileError(f"iree-compile ran longer than {timeout_s:.0f} s", command) from exc
    stderr = proc.stderr
    if proc.returncode != 0:
        raise CompileError(
            f"iree-compile failed (exit {proc.returncode}):\n{_error_excerpt(stderr)}", command, stderr
        )
    if "Failed to load transform library" in stderr:
        raise CompileError(
            f"IREE could not load the kernel transform library {request.kernel_library} "
            f"(it would have silently used its default pipeline):\n{_error_excerpt(stderr)}",
            command,
            stderr,
        )
    if re.search(r"(^|\s)error:", stderr):
        raise CompileError(f"iree-compile reported errors:\n{_error_excerpt(stderr)}", command, stderr)
    applied: dict[str, int] = {}
    for name in _REMARK.findall(stderr):
        applied[name] = applied.get(name, 0) + 1
    missing = [k for k in request.expected_kernels if k not in applied]
    if missing:
        raise CompileError(
            "kernel schedule(s) "
            + ", ".join(repr(m) for m in missing)
            + " matched no dispatch, so IREE would have used its default pipeline for them. "
            "Check the schedule's 'match' (op name, kind, shape, dtype) against the dispatch "
            "root ops; `tdsched apply` shows the dispatches",
            command,
            stderr,
        )
    return CompileResult(command, stderr, applied)


def _error_excerpt(stderr: str, limit: int = 40) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    errors = [i for i, ln in enumerate(lines) if "error" in ln]
    start = max(0, errors[0] - 2) if errors else max(0, len(lines) - limit)
    return "\n".join(lines[start : start + limit])
