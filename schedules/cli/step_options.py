"""What ``tdsched apply --step`` and ``tdsched explain`` share: the ``--step`` option and the
step trace of the recipe they print."""

from __future__ import annotations

import argparse
import sys

from ..compile.step_trace import (
    StepSelector,
    StepTrace,
    parse_step_selector,
    recipe_schedules,
    select_steps,
    trace,
)
from .recipe_options import plan_from


def add_step_options(parser: argparse.ArgumentParser, what: str) -> None:
    """``--step``: the steps whose effect ``apply`` or ``explain`` prints (``what`` says
    what is printed after them)."""
    parser.add_argument(
        "--step",
        action="append",
        type=_step_selector,
        metavar="[SCHEDULE:]N|PRIMITIVE",
        help=f"{what} only this step (repeatable): its number (from 1) or primitive name "
        "(every step of it), optionally after the schedule's name ('graph' or a kernel "
        "name), e.g. 3, tile, matmul:2, graph:fuse_ext; a bare number selects that step in "
        "every schedule that has it",
    )


def _step_selector(text: str) -> StepSelector:
    try:
        return parse_step_selector(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def traced(args: argparse.Namespace) -> tuple[StepTrace, set[tuple[str, int]] | None]:
    """The recipe's step trace and the steps ``--step`` selects (``None``: all)."""
    p = plan_from(args, input_file=args.input, trace_steps=True)
    selected = select_steps(recipe_schedules(p), args.step) if args.step else None
    return trace(p), selected


def trace_failed(found: StepTrace) -> int:
    """The exit status of a traced command: 2, said on stderr, when a step failed."""
    if found.failure is None:
        return 0
    print(f"tdsched: error: {found.failure}", file=sys.stderr)
    return 2
