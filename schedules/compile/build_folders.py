"""Build folders that commands keep for users (``--keep-temps``) or remove.

A kept folder holds what a build wrote on the way (the probe compiles of kernel-level
fuse_ext) and IREE's own per-dispatch files: each dispatch's LLVM IR, assembly and object
file (x86) or SPIR-V (Vulkan), its linked binary and a standalone benchmark module
(:func:`with_executable_dumps`). A sweep's kept candidate also gets ``compile.sh``, the
iree-compile command line that rebuilds it byte for byte from the files beside it
(:func:`write_compile_script`; IREE records the input file's path in the ``.vmfb``, so
the command names the files where they are).
"""

from __future__ import annotations

import dataclasses
import shlex
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from tdsched.targets.compiler import format_command

from .pipeline import Plan

EXECUTABLES = "executables"
"""The subfolder of a kept build folder that IREE's per-dispatch files go to."""
COMPILE_SCRIPT = "compile.sh"

_DUMPS = ("intermediates", "binaries", "benchmarks")
"""IREE's ``--iree-hal-dump-executable-*-to`` dumps that leave the ``.vmfb`` as it is
(``sources`` and ``configurations`` add debug locations naming the dumped files, so a
build that writes them is not the same binary)."""


def executable_dump_flags(folder: Path) -> tuple[str, ...]:
    """iree-compile flags that write each dispatch's intermediates (LLVM IR, assembly,
    object files; SPIR-V), binaries and benchmark modules under ``folder``."""
    return tuple(f"--iree-hal-dump-executable-{dump}-to={folder}" for dump in _DUMPS)


def with_executable_dumps(p: Plan, folder: Path) -> Plan:
    """``p``, its compiles also writing IREE's per-dispatch files under ``folder`` (the
    output is the same ``.vmfb``; the printed command line shows the flags)."""
    flags = (*p.recipe.compile_flags, *executable_dump_flags(folder))
    return dataclasses.replace(p, recipe=dataclasses.replace(p.recipe, compile_flags=flags))


@contextmanager
def build_folder(kept: Path | None, prefix: str) -> Iterator[Path]:
    """Where a build writes its files: ``kept`` (created if missing; it stays), or a new
    temporary folder named ``prefix...``, removed when the block ends."""
    if kept is not None:
        kept.mkdir(parents=True, exist_ok=True)
        yield kept
        return
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        yield Path(tmp)


@contextmanager
def kept_temps(keep: bool, prefix: str) -> Iterator[Path]:
    """A command's folder for intermediate build files: temporary, or with ``keep`` a new
    folder that stays and is named on stderr when the block ends, also when it fails
    (``tdsched: build files kept in DIR``, as ``tdsched run --keep-temps`` says)."""
    kept = Path(tempfile.mkdtemp(prefix=prefix)) if keep else None
    try:
        with build_folder(kept, prefix) as folder:
            yield folder
    finally:
        if kept is not None:
            print(f"tdsched: build files kept in {kept}", file=sys.stderr)


def write_compile_script(folder: Path, command: Sequence[str]) -> Path:
    """Write ``folder/compile.sh``, an executable script that runs ``command`` (the
    iree-compile command line of the build in ``folder``); executable by whom the umask
    lets read it, as ``chmod +x`` would make it."""
    script = folder / COMPILE_SCRIPT
    script.write_text(
        "#!/bin/sh\n# The iree-compile command of this build (tdsched sweep --keep-temps).\n"
        f"exec {format_command(command)}\n"
    )
    readable = script.stat().st_mode & 0o444
    script.chmod(script.stat().st_mode | readable >> 2)
    return script


def move_compile_script(folder: Path, new: Path) -> None:
    """Rewrite ``folder/compile.sh`` (when there is one) for the folder's files moving to
    ``new`` (a build kept on another node; the ``.vmfb`` it makes names the new paths)."""
    script = folder / COMPILE_SCRIPT
    if script.is_file():
        command = shlex.split(script.read_text().splitlines()[-1].removeprefix("exec "))
        write_compile_script(folder, [arg.replace(str(folder), str(new)) for arg in command])
