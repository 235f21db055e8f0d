"""``tdsched explain RECIPE``: the loop nest before each schedule and after each of its steps."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..compile.step_views import explain_json, explain_text
from .recipe_options import add_recipe_arguments
from .step_options import add_step_options, trace_failed, traced


def add_parser(sub: Any) -> None:
    explain = sub.add_parser(
        "explain",
        help="print the loop nest before each schedule and after each of its steps",
        description="For the graph schedule (on the module) and each kernel schedule (on "
        "each dispatch it applies to), print the loop nest read from the IR before the "
        "first step and after every step: each scf.for / scf.forall with its range, step, "
        "trip count and role (parallel, reduction; a forall's workgroup or thread mapping), "
        "and in each body the linalg ops with their operand shapes and the vector ops with "
        "their vector types. Lines marked + and - are what the step changed; a step that "
        "changed nothing, or failed (e.g. left a handle empty), is flagged with '!'.",
    )
    add_recipe_arguments(explain)
    explain.add_argument(
        "--input", type=Path, help="explain on this .mlir module instead of the recipe's workload"
    )
    add_step_options(explain, "print the loop nest after")
    explain.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    found, selected = traced(args)
    if args.json:
        print(json.dumps(explain_json(found, selected), indent=2))
    else:
        print("\n".join(explain_text(found, selected)))
    return trace_failed(found)
