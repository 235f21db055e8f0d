"""Argument types for the command line: values checked when parsed, so ``--jobs 0``,
``--atol -1`` or ``--budget nan`` is refused with the option's name and the allowed range,
before any work."""

from __future__ import annotations

import argparse
import math
import re
import shlex
from collections.abc import Callable, Sequence
from pathlib import Path

from tdsched.targets.target import DEFAULT_THREADS

from ..compile.build_target import BuildTarget
from ..frontends.recipe_trust import ALLOW_PYTHON_WORKLOAD, ALLOW_UNSAFE_FLAGS, Trust


def _number(
    kind: Callable[[str], float], low: float, inclusive: bool, what: str, high: float = math.inf
) -> Callable[[str], float]:
    """A finite ``kind`` from ``low`` (``inclusive`` or not) to ``high``, described as
    ``what``."""

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"expected {what}, got {text} (not a finite number)")
        if value < low or (value == low and not inclusive) or value > high:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text}")
        return value

    parse.__name__ = what  # argparse names the type in its messages
    return parse


positive_int = _number(int, 1, True, "an integer >= 1")
non_negative_int = _number(int, 0, True, "an integer >= 0")
positive_float = _number(float, 0, False, "a number > 0")
non_negative_float = _number(float, 0, True, "a number >= 0")
fraction = _number(float, 0, True, "a number from 0 to 1", high=1)
open_fraction = _number(float, 0, False, "a number above 0 and below 1", high=math.nextafter(1, 0))
MINUTES_PER_YEAR = 525_600
minutes = _number(
    float,
    0,
    False,
    f"a number of minutes > 0, at most a year ({MINUTES_PER_YEAR})",
    MINUTES_PER_YEAR,
)
"""A time budget: any longer is a typo, and ``1e308`` minutes overflows in seconds."""

_GPU_NAME = re.compile(r"[A-Za-z0-9][\w.+-]*")


def vulkan_target_name(text: str) -> str:
    """``--gpu``: the name of one of IREE's Vulkan targets; which names IREE knows is
    checked when it compiles (an empty name would silently build for the generic target)."""
    if not _GPU_NAME.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"expected the name of one of IREE's Vulkan targets (ampere, rdna3, valhall, "
            f"rtx4090, ...), got {text!r}"
        )
    return text


def add_cpu_options(parser: argparse.ArgumentParser) -> None:
    """``--cpu NAME`` and ``--cpu-features LIST``: the x86 CPU to build for; its vector ISA
    and CPU model also select among a shape table's entries."""
    parser.add_argument(
        "--cpu",
        default="host",
        help="x86: LLVM CPU name to build for, e.g. haswell (AVX2) or znver4 (AVX-512) "
        "(default: host, this machine); a shape table prefers the entries tuned for its "
        "vector ISA and for this CPU model",
    )
    parser.add_argument("--cpu-features", help="x86: LLVM CPU features, e.g. +avx512f")


def build_target_from(args: argparse.Namespace) -> BuildTarget:
    """The build a command line asks for: ``--target`` (None: the recipe's first),
    ``--cpu`` / ``--cpu-features`` / ``--gpu`` where the command has them, and
    ``--threads``. Options of the other target are refused (ValueError) when the target is
    named, before any work."""
    build = BuildTarget(
        args.target,
        cpu=getattr(args, "cpu", "host"),
        cpu_features=getattr(args, "cpu_features", None),
        gpu=getattr(args, "gpu", None),
        threads=getattr(args, "threads", DEFAULT_THREADS),
    )
    if build.target is not None:
        build.compile_target  # noqa: B018 (refuses options of the other target)
    return build


def run_command(recipe: str | Path, options: Sequence[str] = ()) -> str:
    """The ``tdsched run`` command line of ``recipe`` with ``options`` (such as
    :meth:`BuildTarget.run_flags`), shell-quoted: a
    printed command is pasted into a shell, whatever its paths and values hold."""
    return shlex.join(["tdsched", "run", str(recipe), *options])


def add_gpu_option(parser: argparse.ArgumentParser) -> None:
    """``--gpu NAME``: the Vulkan GPU to build for; it also selects among a shape table's
    entries."""
    parser.add_argument(
        "--gpu",
        type=vulkan_target_name,
        help="vulkan: the GPU to build for, one of IREE's Vulkan targets (--iree-vulkan-target: "
        "ampere, rdna3, valhall, rtx4090, ...; default: IREE's generic Vulkan target, which "
        "runs on any Vulkan 1.3 device); a shape table prefers the entries tuned for it",
    )


def add_threads_option(parser: argparse.ArgumentParser) -> None:
    """``--threads N``: x86 runtime worker threads, with the one default every command
    shares (:data:`~tdsched.targets.target.DEFAULT_THREADS`)."""
    parser.add_argument(
        "--threads",
        type=positive_int,
        default=DEFAULT_THREADS,
        help=f"x86 CPU threads the build runs on (default {DEFAULT_THREADS}, the same for "
        "run, sweep, regress and peak; 1 runs on IREE's local-sync driver, 2 or more on "
        "local-task workers, with the calling thread under SCHED_BATCH so that it does "
        "not preempt them; it also selects a shape table's entries tuned for that count; "
        "ignored on Vulkan)",
    )


def add_trust_options(parser: argparse.ArgumentParser) -> None:
    """The command-line grants (:class:`Trust`) of a command that loads recipe files."""
    parser.add_argument(
        ALLOW_UNSAFE_FLAGS,
        action="store_true",
        help="let a YAML recipe's compile_flags and baseline.flags pass iree-compile options "
        "that name programs, files or folders, or that are not --iree-* options (refused "
        "by default: a recipe file must not run programs or write files; give this only "
        "for a recipe you trust)",
    )
    parser.add_argument(
        ALLOW_PYTHON_WORKLOAD,
        action="store_true",
        help="let a YAML recipe's workload be a Python model file (model: FILE.py), which "
        "runs that file (refused by default; give this only for files you trust)",
    )


def trust_from(args: argparse.Namespace) -> Trust:
    """The grants given on the command line (see :func:`add_trust_options`)."""
    return Trust(unsafe_flags=args.allow_unsafe_flags, python_workload=args.allow_python_workload)
