"""``tdsched apply RECIPE``: the IR after the graph schedule and after each kernel schedule
(``--step``/``--diff``: after each step, or what each step changed)."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from ..compile.pipeline import build, kernels_after_schedule
from ..compile.step_views import ir_text
from .recipe_options import add_recipe_arguments, plan_from
from .show_command import SEPARATOR
from .step_options import add_step_options, trace_failed, traced


def add_parser(sub: Any) -> None:
    apply = sub.add_parser(
        "apply",
        help="print the IR after the graph schedule and after each kernel schedule",
        description="Print the module after the graph schedule (what iree-compile receives), "
        "then, for each strategy kernel schedule, its dispatch function right after the "
        "schedule's steps (before bufferization and lowering).",
    )
    add_recipe_arguments(apply)
    apply.add_argument(
        "--input", type=Path, help="apply to this .mlir module instead of the recipe's workload"
    )
    add_step_options(apply, "print the IR after")
    apply.add_argument(
        "--diff",
        action="store_true",
        help="print, for each step (or each --step), the unified diff of the IR before and "
        "after it instead of the whole IR; a step that changed nothing is flagged",
    )


def run(args: argparse.Namespace) -> int:
    if args.step or args.diff:
        found, selected = traced(args)
        print("\n".join(ir_text(found, selected, args.diff)))
        return trace_failed(found)
    p = plan_from(args, input_file=args.input, print_after_schedule=True)
    with tempfile.TemporaryDirectory(prefix="tdsched-apply-") as tmp:
        files = build(p, Path(tmp))
        for report in files.reports:
            print("\n".join(f"// {line}" for line in report.splitlines()))
        print(f"// module after the graph schedule ({p.recipe.name}, {p.target.name})")
        print(files.input_file.read_text(), end="")
        after = kernels_after_schedule(p, files) if p.scripts.kernel_library else {}
    for kernel in p.recipe.kernels:
        print(SEPARATOR)
        if kernel.config is not None:
            print(
                f"// kernel '{kernel.name}': config only, "
                "IREE's pipeline runs with its lowering config"
            )
            continue
        print(f"// kernel '{kernel.name}': dispatch function after its schedule steps")
        print(after.get(kernel.name, "// (no dispatch printed)"))
    return 0
