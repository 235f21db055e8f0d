"""``tdsched tasks MODEL``: the distinct dispatches of a model and their share of IREE
default's time (:mod:`.tasks`), the first step of tuning it."""

from __future__ import annotations

import argparse
import json
from typing import Any

from tdsched.targets.compiler import check_gpu
from tdsched.targets.dispatch_profile import ProfileError
from tdsched.targets.target import TARGET_NAMES, run_conditions
from tdsched.targets.workload import check_memory

from ..base.text_table import aligned
from ..tune.tasks import ModelTasks, Task, extract_tasks
from .args import (
    add_gpu_option,
    add_threads_option,
    build_target_from,
    non_negative_int,
    positive_int,
)
from .lower_command import add_model_arguments, lower

DESCRIPTION = """\
List the tasks of MODEL: the distinct dispatches IREE's default build forms from it, each
with the layers it comes from, how often it runs per call and its share of IREE default's
time (from a HAL profile of that build, on seeded random inputs). A task is the dispatches
that hold the same structured ops with the same loop bounds and element types (the root op
and its fused epilogue): identical layers are one task. Most time first.

A kernel schedule written for a task selects all its layers with
`match: {layer: [LAYERS]}` (printed by --match).
"""


def add_parser(sub: Any) -> None:
    """Register ``tasks`` on the ``tdsched`` subcommand parser."""
    p = sub.add_parser(
        "tasks",
        help="list a model's distinct dispatches (tasks) and their share of IREE default's time",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_profiled_model_arguments(p)
    p.add_argument(
        "--no-time",
        action="store_true",
        help="only group the dispatches (no build, no profile): runs are dispatch functions",
    )
    p.add_argument(
        "--match", action="store_true", help="also print each task's kernel match (YAML)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")


def add_profiled_model_arguments(p: argparse.ArgumentParser) -> None:
    """MODEL, how to lower it, and how its IREE default build is profiled: ``--target``,
    ``--gpu``, ``--threads``, ``--rounds``, ``--seed`` (shared by ``tasks`` and
    ``tune``)."""
    add_model_arguments(p)
    p.add_argument(
        "--target", choices=TARGET_NAMES, default="x86", help="target to build for (default x86)"
    )
    add_gpu_option(p)
    add_threads_option(p)
    p.add_argument(
        "--rounds",
        type=positive_int,
        default=3,
        help="profiled runs of IREE default; each task's time is its median (default 3)",
    )
    p.add_argument("--seed", type=non_negative_int, default=0, help="random seed (default 0)")


def run(args: argparse.Namespace) -> int:
    """Extract and print the tasks of ``args.model``."""
    build = build_target_from(args)
    target = build.compile_target
    check_gpu(target)  # before the model is lowered and profiled
    workload = lower(args)
    threads = build.cpu_threads
    time_it = not args.no_time
    if time_it:
        check_memory(workload)  # the profile runs it
    try:
        found = extract_tasks(
            workload, target, threads, rounds=args.rounds, seed=args.seed, time_it=time_it
        )
    except ProfileError as exc:
        raise ValueError(f"{args.model}: cannot profile IREE default's build: {exc}") from exc
    if args.json:
        print(json.dumps(found.as_dict(), indent=2))
        return 0
    print("\n".join(task_lines(found)))
    if args.match:
        for task in found.tasks:
            print(f"# {task.name}: {task.kind} {task.root.describe()}")
            print(match_yaml(task))
    return 0


def task_lines(found: ModelTasks) -> list[str]:
    """The heading and the table of ``tdsched tasks``."""
    where = run_conditions(found.target, found.threads)
    heading = (
        f"tasks of {found.workload} on {where}: {found.dispatch_count} dispatches, "
        f"{len(found.tasks)} tasks"
    )
    if found.call_ms is not None and found.in_dispatches is not None:
        heading += (
            f" (IREE default: {found.call_ms.median:.3f} ms per call, "
            f"{found.in_dispatches:.0%} of it in dispatches)"
        )
    header = ["task", "kind", "root op (loop bounds)", "dtype", "epilogue", "runs", "root layers"]
    timed = found.call_ms is not None
    if timed:
        header += ["ms/call", "share"]
    rows = [header]
    for task in found.tasks:
        row = [
            task.name,
            task.kind,
            task.root.describe(),
            task.root.dtype or "?",
            ", ".join(task.epilogue) or "-",
            str(task.runs),
            _layers(task),
        ]
        if timed:
            row += [f"{task.time_ms or 0.0:.3f}", f"{task.share or 0.0:.1%}"]
        rows.append(row)
    return [heading, *aligned(rows)]


def _layers(task: Task, shown: int = 4) -> str:
    if not task.layers:
        return "-"
    more = len(task.layers) - shown
    return ", ".join(task.layers[:shown]) + (f" (+{more})" if more > 0 else "")


def match_yaml(task: Task) -> str:
    """The kernel ``match`` that selects every layer of ``task``, as YAML."""
    if not task.layers:
        return f"match: {{kind: {task.kind}}}  # no layer names: narrow it by shape"
    return f"match: {{layer: [{', '.join(json.dumps(layer) for layer in task.layers)}]}}"
