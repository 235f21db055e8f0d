# PYTHON_ARGCOMPLETE_OK
"""The ``tdsched`` command line: show, apply, compile, run, sweep and regression-gate
schedule recipes, and lower models to the linalg they schedule."""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys
from collections.abc import Sequence

import argcomplete
from tdsched.targets.iree_version import iree_compiler_version

from .commands import COMMANDS, REGRESS_HISTORY, command_module

_DESCRIPTION = """\
tdsched: say *how* a linalg workload is computed, as a schedule recipe (YAML or Python),
and get transform-dialect scripts that IREE obeys on x86 (llvm-cpu) and Vulkan.

A RECIPE is a path to a .yaml/.py recipe or the name of a shipped one (e.g. matmul_x86).
Parameters declared by the recipe can be overridden with --param NAME=VALUE.
"""

_EPILOG = """\
examples:
  tdsched show matmul_x86                      print the generated transform scripts
  tdsched apply matmul_x86                     IR after the graph schedule and each kernel schedule
  tdsched explain matmul_x86                   loop nest before and after each schedule step
  tdsched apply matmul_x86 --step tile --diff  what each tile step changed in the IR
  tdsched compile matmul_x86 -o mm.vmfb --print-command
  tdsched run matmul_x86 --json                check vs numpy and time vs IREE default
  tdsched run matmul_vulkan --target vulkan --param TM=32
  tdsched check before.mlir after.mlir         same results in numpy? (payload schedules)
  tdsched sweep matmul_x86 --param M=512 --param N=512 --param K=512
                                               search the recipe's space, write the best
  tdsched report tdsched-sweeps.db --plot s.png --x TM --y TN
  tdsched regress perf.yaml                    gate recipes against a committed baseline
  tdsched lower small_cnn --layers             a model lowered to linalg (builder, ONNX, TOSA)
  tdsched list                                 the shipped recipes
  tdsched schema -o tdsched-recipe.schema.json JSON Schema of recipe files, for editors
"""


def _version() -> str:
    """``tdsched X (IREE Y, Python Z)``: what a bug report needs."""
    try:
        ours = importlib.metadata.version("tdsched")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout, not installed
        ours = "unknown"
    python = ".".join(map(str, sys.version_info[:3]))
    return f"tdsched {ours} (IREE {iree_compiler_version()}, Python {python})"


def make_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argument parser (exposed for docs and tests): every command's, or with
    ``only``, that command's alone (what parsing its command line needs, without
    importing the others)."""
    parser = argparse.ArgumentParser(
        prog="tdsched",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=_version())
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="print every iree-compile command line to stderr as it runs (also in the "
        "child processes of run, sweep and regress)",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    for name in (only,) if only else COMMANDS:
        command_module(name).add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tdsched`` console script."""
    words = _routed(sys.argv[1:] if argv is None else list(argv))
    named = _command_named(words)
    if named is None and "--version" in words:
        print(_version())  # what argparse's version action prints, without the parsers
        return 0
    # Shell completion needs every command's options; a command line needs its own.
    completing = "_ARGCOMPLETE" in os.environ
    parser = make_parser(None if completing else named)
    argcomplete.autocomplete(parser)
    args = parser.parse_args(words)
    return _run(args)


def _run(args: argparse.Namespace) -> int:
    """Run the parsed command; errors a user can fix become one line and exit status 2."""
    from .output_paths import check_paths

    if args.verbose:
        from tdsched.targets.compiler import VERBOSE_ENV

        os.environ[VERBOSE_ENV] = "1"
    try:
        check_paths(args)
        return command_module(args.command).run(args)
    except KeyboardInterrupt:
        print("tdsched: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`tdsched report DB --csv - | head`): stop quietly.
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (Python flushes stdout at exit)
        return 0
    except Exception as exc:
        if not _user_error(exc):
            raise
        print(f"tdsched: error: {exc}", file=sys.stderr)
        return 2


def _user_error(exc: Exception) -> bool:
    """Whether ``exc`` is one a user can fix, said in one line: RecipeError,
    ScheduleError and workload errors (ValueErrors), a failed compile, a missing device.
    (The compiler and runtime modules are imported only here, once something failed.)"""
    from tdsched.targets.compiler import CompileError
    from tdsched.targets.runtime import DeviceError

    return isinstance(exc, ValueError | CompileError | DeviceError)


def _routed(argv: list[str]) -> list[str]:
    """``argv`` with ``regress history`` made the one word its parser is registered as
    (``regress``'s own first argument is a baseline file, so it cannot hold subcommands)."""
    commands = [i for i, word in enumerate(argv) if not word.startswith("-")]
    if commands and argv[commands[0] : commands[0] + 2] == ["regress", "history"]:
        at = commands[0]
        return [*argv[:at], REGRESS_HISTORY, *argv[at + 2 :]]
    return argv


def _command_named(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names (its first word that is not an option), where that is
    one of :data:`COMMANDS`; ``None`` otherwise (none, a misspelt one, or ``-v``'s
    place taken by a value), and then every command's parser is built."""
    words = [word for word in argv if not word.startswith("-")]
    return words[0] if words and words[0] in COMMANDS else None


if __name__ == "__main__":
    sys.exit(main())
