"""Invoking iree-compile, and refusing every silent fallback.

The command line comes from ``iree.compiler.tools`` (so it is exactly what IREE's Python
API would run) and is returned for users to reproduce builds without tdsched. After a
build, stderr is scanned: iree-compile exits 0 when a transform library fails to load or
matches nothing, so any ``error:`` line is a failure, and the markers that schedule steps
print (``transform.print`` titles, on stdout) are collected for the caller to require.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from iree.compiler.tools import core

from . import compile_cache
from .target import Target


class CompileError(RuntimeError):
    """iree-compile failed, or a schedule did not apply. The message says which and why."""

    def __init__(
        self, message: str, command: Sequence[str] = (), stderr: str = "", stdout: str = ""
    ) -> None:
        super().__init__(message)
        self.command = list(command)
        self.stderr = stderr
        self.stdout = stdout  # what it printed before failing: the schedule's step markers


@dataclass(frozen=True)
class CompileRequest:
    """One iree-compile invocation.

    ``kernel_library`` is a transform library for ``@__kernel_config``.
    """

    input_file: Path
    target: Target
    output_file: Path
    kernel_library: Path | None = None
    extra_flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class CompileResult:
    """A successful build: its command, output file, and what iree-compile printed."""

    command: list[str]
    output: Path
    stdout: str
    stderr: str


KEEP_F64 = "--iree-input-demote-f64-to-f32=false"
"""Added for a module that computes in f64: iree-compile demotes f64 to f32 by default,
which changes the module's signature (its f64 inputs are then rejected) and its
numerics. tdsched builds what the module says; IREE default is built the same way."""

_F64 = re.compile(r"[x<]f64>")
"""An f64 element type (``tensor<8x16xf64>``, ``tensor<f64>``); f64 attributes that
only annotate ops (``tdsched.eps = 1.0e-05 : f64``) do not count."""


def compile_command(request: CompileRequest) -> list[str]:
    """The exact iree-compile command line for ``request``. Raises :class:`CompileError`
    for an f64 module on a GPU target (see :func:`_precision_flags`)."""
    flags = list(request.target.flags) + _precision_flags(request)
    if request.kernel_library is not None:
        flags.append(f"--iree-codegen-transform-dialect-library={request.kernel_library}")
        # Schedule steps prove they applied by printing markers; dispatches compiled on
        # parallel threads interleave those prints, so compile them one at a time.
        flags.append("--mlir-disable-threading")
    flags.extend(request.extra_flags)
    options = core.CompilerOptions(
        output_file=str(request.output_file),
        target_backends=[request.target.backend],
        extra_args=flags,
        output_mlir_debuginfo=False,
    )
    with core.TempFileSaver() as tfs:
        command: list[str] = core.build_compile_command_line(str(request.input_file), tfs, options)
    return command


def _precision_flags(request: CompileRequest) -> list[str]:
    """:data:`KEEP_F64` when the input module has f64 tensors. On a GPU target such a
    module is refused: IREE's default Vulkan target has no Float64 capability (checked
    with IREE 3.13: ``failed to legalize operation 'arith.constant'`` on an f64 matmul)."""
    if not _F64.search(request.input_file.read_text(errors="replace")):
        return []
    if request.target.is_gpu:
        raise CompileError(
            f"the workload computes in f64, which IREE's {request.target.name} target "
            "cannot compile (its SPIR-V environment has no "
            "Float64 capability): build it for x86, which computes f64 as written, or make "
            "the workload f32"
        )
    return [KEEP_F64]


def format_command(command: Sequence[str]) -> str:
    """A shell-quoted command line."""
    return shlex.join(command)


VERBOSE_ENV = "TDSCHED_VERBOSE"
"""Set to 1 (``tdsched -v``) to print every iree-compile command line to stderr before it
runs; an environment variable so that child processes (run, sweep workers) inherit it."""

VERBOSE_PREFIX = "tdsched: iree-compile: "
"""How such a line starts (a parent that logs a child's stderr relays these lines)."""


def verbose() -> bool:
    """Whether iree-compile command lines are printed (``tdsched -v``)."""
    return os.environ.get(VERBOSE_ENV) == "1"


def _announce(command: list[str]) -> None:
    if verbose():
        print(f"{VERBOSE_PREFIX}{format_command(command)}", file=sys.stderr, flush=True)


def _invoke(command: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    _announce(command)
    try:
        return subprocess.run(
            command, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise CompileError(f"iree-compile ran longer than {timeout_s:.0f} s", command) from exc


_UNKNOWN_GPU = re.compile(r"Unknown Vulkan target '([^']*)'")
"""iree-compile's words for an ``--iree-vulkan-target`` it does not know (IREE 3.13 then
crashes in VerifyDevicesPass)."""


def _refuse_unknown_gpu(command: list[str], stderr: str) -> None:
    """Say which ``--gpu`` IREE does not know, and the names it does, rather than the
    stack dump iree-compile then prints."""
    unknown = _UNKNOWN_GPU.search(stderr)
    if unknown:
        raise CompileError(
            f"IREE has no Vulkan target {unknown.group(1)!r} (--gpu): name an architecture "
            "(ampere, turing, volta, pascal, rdna3, rdna2, cdna3, valhall, adreno, ...) or a "
            "product IREE knows (a100, rtx4090, rtx3090, mi300x, rx7900xtx, ...); a newer GPU "
            "runs code built for an older architecture of its vendor (an H100: ampere)",
            command,
            stderr,
        )


def run_compile(request: CompileRequest, timeout_s: float = 600.0) -> CompileResult:
    """Compile, then check that no error was reported; collect the step markers.

    With ``TDSCHED_COMPILE_CACHE`` set, a build made before with the same inputs is copied
    from that cache instead (:mod:`.compile_cache`; the command line is still printed)."""
    command = compile_command(request)
    cache_key = compile_cache.key(command)
    if cache_key is not None and (printed := compile_cache.load(cache_key)) is not None:
        _announce(command)
        return CompileResult(command, request.output_file, *printed)
    started = time.monotonic()
    proc = _invoke(command, timeout_s)
    stderr = proc.stderr
    _refuse_unknown_gpu(command, stderr)
    if proc.returncode < 0:
        raise CompileError(crash_message(-proc.returncode, stderr), command, stderr, proc.stdout)
    if proc.returncode != 0:
        raise CompileError(
            f"iree-compile failed (exit {proc.returncode}):\n{_error_excerpt(stderr)}",
            command,
            stderr,
            proc.stdout,
        )
    if "Failed to load transform library" in stderr:
        raise CompileError(
            f"IREE could not load the kernel transform library {request.kernel_library} "
            f"(it would have silently used its default pipeline):\n{_error_excerpt(stderr)}",
            command,
            stderr,
        )
    if re.search(r"(^|\s)error:", stderr):
        raise CompileError(
            f"iree-compile reported errors:\n{_error_excerpt(stderr)}", command, stderr, proc.stdout
        )
    if cache_key is not None:
        compile_cache.store(cache_key, proc.stdout, stderr, time.monotonic() - started)
    return CompileResult(command, request.output_file, proc.stdout, stderr)


GPU_PROBE = """\
func.func @gpu_probe(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = arith.addf %a, %a : tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""
"""A module small enough to build in a second: IREE only says it has no such Vulkan
target when it compiles something for it."""


def check_gpu(target: Target) -> None:
    """Refuse a Vulkan ``target`` built for a GPU IREE does not know (``--gpu``) before a
    command's long work, by building :data:`GPU_PROBE` for it (nothing to do on x86 or
    without ``--gpu``)."""
    if not target.is_gpu or not any(f.startswith("--iree-vulkan-target=") for f in target.flags):
        return
    with tempfile.TemporaryDirectory(prefix="tdsched-gpu-probe-") as tmp:
        source = Path(tmp) / "probe.mlir"
        source.write_text(GPU_PROBE)
        run_compile(CompileRequest(source, target, Path(tmp) / "probe.vmfb"), timeout_s=120.0)


def probe_compile(request: CompileRequest, timeout_s: float = 600.0) -> str:
    """Run a compile only for what its schedule prints; return stdout, even on failure.

    Used to see dispatches as kernel strategies see them: the probe's strategies stop
    early, so iree-compile is expected to fail after printing. A compile that failed
    before printing anything (a flag iree-compile rejects, or a dispatch IREE's own
    pipeline cannot build) raises :class:`CompileError` with iree-compile's words.
    """
    command = compile_command(request)
    proc = _invoke(command, timeout_s)
    _refuse_unknown_gpu(command, proc.stderr)
    if proc.returncode != 0 and not proc.stdout.strip():
        raise CompileError(
            "iree-compile failed before it reached the dispatches tdsched asked it to print "
            "(a flag it rejects, or a dispatch that no kernel schedule matched and IREE's "
            f"own pipeline cannot build):\n{_error_excerpt(proc.stderr)}",
            command,
            proc.stderr,
        )
    return proc.stdout


_CRASH_SITES = (
    re.compile(r"Model<[\w:]*::(\w+Op)>::apply"),  # a transform op being applied
    re.compile(r"(\w+Pass)\w*::runOnOperation"),  # else the pass that was running
)


def crash_message(signal_number: int, stderr: str) -> str:
    """One line for an iree-compile that died of a signal: which signal, the transform op
    (or pass) its stack dump shows it in, and the file the whole dump is kept in."""
    try:
        name = signal.Signals(signal_number).name
    except ValueError:
        name = f"signal {signal_number}"
    site = next((m.group(1) for p in _CRASH_SITES if (m := p.search(stderr))), None)
    where = f" in {site}" if site else ""
    fd, path = tempfile.mkstemp(prefix="tdsched-iree-compile-crash-", suffix=".txt")
    with os.fdopen(fd, "w") as dump:
        dump.write(stderr)
    return (
        f"iree-compile crashed ({name}){where}: an IREE bug, or a schedule IREE does not "
        f"check; its stack dump is in {path}"
    )


WORKER_STACK_BYTES = 131072
"""The stack of each IREE CPU worker thread (``--task_worker_stack_size``'s default): a
dispatch on ``local-task`` (more than one thread) must fit in it, or the run crashes."""

_STACK_FLAG = re.compile(r"^--iree-llvmcpu-stack-allocation-limit=(\d+)$")


def stack_crash_hint(flags: Sequence[str], threads: int) -> str | None:
    """Why a run may have died of SIGSEGV, when ``flags`` let a dispatch use more stack
    than a worker thread has half of (``None`` on one thread, which runs on the caller's
    stack, or without such a flag)."""
    limits = [int(m.group(1)) for f in flags if (m := _STACK_FLAG.match(f))]
    if threads == 1 or not limits or max(limits) <= WORKER_STACK_BYTES // 2:
        return None
    return (
        f"compile_flags allow {max(limits)} bytes of stack per dispatch, and IREE's CPU "
        f"worker threads have {WORKER_STACK_BYTES}: a dispatch that uses more than they "
        "have crashes the run. Keep --iree-llvmcpu-stack-allocation-limit at "
        f"{WORKER_STACK_BYTES // 2} or below and make the tiles it reports smaller, or run "
        "on --threads 1"
    )


_STACK_LIMIT = re.compile(r"exceeded stack allocation limit of (\d+) bytes.*?Got (\d+)", re.S)


_TWO_ROOTS = "multiple ops within dispatch trying to set the translation info"


def explain(stderr: str) -> str | None:
    """tdsched's words for an IREE error whose cause is not obvious from its text, or
    ``None``. The stack-allocation limit: IREE keeps each thread's tiles (vectors, and the
    buffers a kernel allocates) on the stack, so the innermost tiles must fit in it. Two
    root configs in one dispatch: a config kernel's match took two of its ops (or two
    config kernels took one each)."""
    if _TWO_ROOTS in stderr:
        return (
            "a kernel config reached two ops of one dispatch, and IREE takes one root "
            "config per dispatch (its error: 'multiple ops within dispatch trying to set "
            "the translation info'). Make each config kernel's match select one op per "
            "dispatch: add the keys that tell the ops apart ('inputs', 'used_by'), as "
            "`tdsched tasks MODEL --match` prints them, or give the other op its tile sizes "
            "with 'root: false' (docs/primitives/config.md)"
        )
    found = _STACK_LIMIT.search(stderr)
    if found is None:
        return None
    limit, got = int(found.group(1)), int(found.group(2))
    return (
        f"the schedule's innermost tiles need {got} bytes of stack per thread, and IREE "
        f"allows {limit}: make the last tile sizes before 'vectorize' (register tiles, and "
        f"the reduction tile) smaller, so that for each operand the product of its tile "
        f"sizes times the element size (4 bytes for f32) stays within {limit}, e.g. "
        f"RM * RN * 4 <= {limit}; in a sweep, add it as a constraint"
    )


_LINE_LIMIT = 300
"""Longer diagnostic lines are cut: IREE prints whole target attributes (2 KB of CPU
features) in some notes, which hide the error around them."""


def _cut(line: str) -> str:
    if len(line) <= _LINE_LIMIT:
        return line
    return f"{line[:_LINE_LIMIT]} ... [{len(line) - _LINE_LIMIT} more characters]"


def _error_excerpt(stderr: str, limit: int = 40) -> str:
    hint = explain(stderr)
    lines = [_cut(ln) for ln in stderr.splitlines() if ln.strip()]
    errors = [i for i, ln in enumerate(lines) if "error" in ln]
    start = max(0, errors[0] - 2) if errors else max(0, len(lines) - limit)
    excerpt = "\n".join(lines[start : start + limit])
    return f"{hint}\n{excerpt}" if hint else excerpt
