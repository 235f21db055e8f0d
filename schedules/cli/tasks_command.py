"""``tdsched tasks MODEL``: the distinct dispatches of a model and their share of IREE
default's time (:mod:`.tasks`), the first step of tuning it."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

import yaml
from tdsched.targets.compiler import check_gpu
from tdsched.targets.dispatch_profile import ProfileError
from tdsched.targets.target import TARGET_NAMES, run_conditions
from tdsched.targets.timing import Timing, time_interleaved
from tdsched.targets.workload import Workload, check_memory, random_inputs
from tdsched.transform_lib.census import StructuredOp, read_census

from ..base.text_table import aligned
from ..compile.pipeline import census_output
from ..measure.peers import onnxruntime_available, onnxruntime_call
from ..tune.task_match import Ambiguous, ModelOps, kernel_match
from ..tune.tasks import ModelTasks, Task, extract_tasks
from .args import (
    add_cpu_options,
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

--match prints each task's kernel match: the op name (or kind), loop bounds and dtype of
the op IREE configures in its dispatches, plus the keys (inputs, used_by, body) that tell
it apart from every other op of the model. Pasted into a kernel schedule or config, it
selects that task's dispatches and nothing else; a task whose op no match tells apart
from another task's says so.
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
        "--match",
        action="store_true",
        help="also print each task's kernel match (YAML), one that selects that task alone",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")


def add_profiled_model_arguments(p: argparse.ArgumentParser) -> None:
    """MODEL, how to lower it, and how its IREE default build is profiled: ``--target``,
    ``--cpu``, ``--cpu-features``, ``--gpu``, ``--threads``, ``--rounds``, ``--seed``
    (shared by ``tasks`` and ``tune``)."""
    add_model_arguments(p)
    p.add_argument(
        "--target", choices=TARGET_NAMES, default="x86", help="target to build for (default x86)"
    )
    add_cpu_options(p)
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
    census = census_output(workload.mlir, target)
    try:
        found = extract_tasks(
            workload,
            target,
            threads,
            rounds=args.rounds,
            seed=args.seed,
            time_it=time_it,
            census=census,
        )
    except ProfileError as exc:
        raise ValueError(f"{args.model}: cannot profile IREE default's build: {exc}") from exc
    matches = task_matches(found, read_census(census), by_kind=target.is_gpu) if args.match else {}
    ort = onnxruntime_ms(workload, threads, args.rounds, args.seed) if time_it else None
    if args.json:
        document = found.as_dict()
        document["onnxruntime_ms"] = ort.as_dict() if ort else None
        for task in document["tasks"]:
            if task["name"] in matches:
                task["match"] = matches[task["name"]]
        print(json.dumps(document, indent=2))
        return 0
    print("\n".join(task_lines(found, ort)))
    if args.match:
        for task in found.tasks:
            print(match_lines(task, matches[task.name]))
    return 0


def task_matches(
    found: ModelTasks, census: Sequence[StructuredOp], by_kind: bool
) -> dict[str, dict[str, Any] | str]:
    """Each task's kernel match (:func:`..tune.task_match.kernel_match`), or why there is
    none: the task whose op the same match would also select. ``by_kind``: match
    contractions by kind, as kernels on Vulkan do."""
    model = ModelOps.of(census, found.tasks)
    matches: dict[str, dict[str, Any] | str] = {}
    for task in found.tasks:
        try:
            matches[task.name] = kernel_match(task, model, by_kind)
        except Ambiguous as exc:
            matches[task.name] = (
                f"no kernel match selects it alone: task {exc.other} has an op that agrees "
                "with its op on name, loop bounds, dtype, input count, the op using its "
                "result and its body"
            )
    return matches


def onnxruntime_ms(
    workload: Workload, threads: int | None, rounds: int, seed: int
) -> Timing | None:
    """onnxruntime's time per call of the model on seeded inputs, as ``run --peers`` runs
    it, ``rounds`` timed calls; ``None`` on a GPU target (``threads`` None), for a
    workload with no ONNX model, or without onnxruntime."""
    if threads is None or workload.onnx is None or not onnxruntime_available():
        return None
    call = onnxruntime_call(workload.onnx(), random_inputs(workload, seed), threads)

    def run() -> None:
        call()

    return time_interleaved({"onnxruntime": run}, repeats=rounds)["onnxruntime"]


def task_lines(found: ModelTasks, onnxruntime: Timing | None = None) -> list[str]:
    """The heading and the table of ``tdsched tasks`` (``onnxruntime``: its time per
    call of the model, for the heading)."""
    where = run_conditions(found.target, found.threads)
    heading = (
        f"tasks of {found.workload} on {where}: {found.dispatch_count} dispatches, "
        f"{len(found.tasks)} tasks"
    )
    if found.call_ms is not None and found.in_dispatches is not None:
        heading += (
            f" (IREE default: {found.call_ms.median:.3f} ms per call, "
            f"{found.in_dispatches:.0%} of it in dispatches"
        )
        if onnxruntime is not None:
            heading += f"; onnxruntime: {onnxruntime.median:.3f} ms per call"
        heading += ")"
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


def match_lines(task: Task, match: dict[str, Any] | str) -> str:
    """A comment naming ``task``'s op and layers, then its kernel ``match`` as one line
    of YAML (or, where it has none, a comment saying why)."""
    op = task.ops[task.iree_root_position]
    layers = f" (layers: {', '.join(task.layers)})" if task.layers else ""
    head = f"# {task.name}: {task.kind}, IREE's root {op.describe()}{layers}"
    if isinstance(match, str):
        return f"{head}\n# {match}"
    flow = yaml.safe_dump(match, default_flow_style=True, sort_keys=False, width=10**6)
    return f"{head}\nmatch: {flow.strip()}"
