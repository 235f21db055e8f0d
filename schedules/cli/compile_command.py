"""``tdsched compile RECIPE -o OUT.vmfb``: build the scheduled module, with its input and
scripts written beside it so the printed iree-compile command reproduces the build."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tdsched.targets.compiler import format_command

from ..compile.build_folders import EXECUTABLES, kept_temps, with_executable_dumps
from ..compile.pipeline import build, compile_plan
from .output_paths import writes
from .recipe_options import add_recipe_arguments, plan_from


def add_parser(sub: Any) -> None:
    comp = sub.add_parser(
        "compile",
        help="compile with IREE and write the scripts beside the output",
        description="Compile the recipe's workload with its schedules. The input module and "
        "scripts are written next to OUTPUT (OUTPUT minus .vmfb plus .input.mlir, "
        ".graph.mlir, .kernels.mlir) so the printed iree-compile command reproduces the build. "
        "Intermediate files (the probe compiles of kernel-level fuse_ext) go to a temporary "
        "folder that is removed, unless --keep-temps.",
    )
    add_recipe_arguments(comp)
    output = comp.add_argument("-o", "--output", type=Path, required=True, help="output .vmfb")
    writes(comp, output)
    comp.add_argument("--print-command", action="store_true", help="print the iree-compile command")
    comp.add_argument(
        "--keep-temps",
        action="store_true",
        help="keep the intermediate files, and IREE's per-dispatch files (LLVM IR, assembly, "
        "objects or SPIR-V, binaries, benchmark modules) under executables/, in a folder "
        "printed on stderr; the .vmfb is the same",
    )


def run(args: argparse.Namespace) -> int:
    p = plan_from(args)
    output: Path = args.output
    with kept_temps(args.keep_temps, "tdsched-compile-") as scratch:
        if args.keep_temps:
            p = with_executable_dumps(p, scratch / EXECUTABLES)
        files = build(p, output.parent, stem=output.with_suffix("").name, scratch=scratch)
        result = compile_plan(p, files, output)
    if args.print_command:
        print(format_command(result.command))
    print(f"wrote {output}", file=sys.stderr)
    return 0
