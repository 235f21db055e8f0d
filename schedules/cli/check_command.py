"""``tdsched check BEFORE AFTER``: do two .mlir modules compute the same results (evaluated
in numpy)?"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from tdsched.targets.ir_eval import DEFAULT_ATOL, DEFAULT_RTOL, check_files

from .args import non_negative_float, non_negative_int, positive_int


def add_parser(sub: Any) -> None:
    check = sub.add_parser(
        "check",
        help="check that two .mlir modules compute the same results (numpy evaluation)",
        description="Evaluate the entry function of BEFORE and AFTER (tensor-level linalg, "
        "tensor, scf, arith, math and affine ops, including host-level scf.for/scf.forall "
        "loops that IREE cannot compile) in numpy, in float64, on the same seeded random "
        "inputs, and compare each result. Exit status: 0 equivalent, 1 mismatch, 2 error.",
    )
    check.add_argument("before", type=Path, metavar="BEFORE", help="the reference module")
    check.add_argument("after", type=Path, metavar="AFTER", help="the transformed module")
    check.add_argument(
        "--function", help="public entry function (default: BEFORE's only public one)"
    )
    check.add_argument(
        "--seed", type=non_negative_int, default=0, help="random input seed (default 0)"
    )
    check.add_argument(
        "--rtol",
        type=non_negative_float,
        default=DEFAULT_RTOL,
        help=f"tolerance relative to max|BEFORE result| (default {DEFAULT_RTOL:g})",
    )
    check.add_argument(
        "--atol",
        type=non_negative_float,
        default=DEFAULT_ATOL,
        help=f"absolute tolerance (default {DEFAULT_ATOL:g})",
    )
    check.add_argument(
        "--dynamic-size",
        type=positive_int,
        metavar="N",
        help="evaluate a function with dynamic dims (tensor<?x...>) with N, N+1, ... for "
        "the dynamic dims of its arguments, each its own size except dims BEFORE's ops "
        "make equal (required for such functions)",
    )
    check.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    report = check_files(
        args.before,
        args.after,
        args.function,
        seed=args.seed,
        rtol=args.rtol,
        atol=args.atol,
        dynamic_size=args.dynamic_size,
    )
    print(json.dumps(report.to_json(), indent=2) if args.json else report.format_table())
    return 0 if report.equivalent else 1
