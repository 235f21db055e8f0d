"""The model recipe a tune writes (``OUT/<model>.tuned.yaml`` and the packed
alternative): the model's workload and rewrites, then per task that won its winning kernel
schedules (or config) as the winner ran them, or its packed layout as an ``mmt4d`` graph
step; the other tasks keep IREE's pipeline, with the reason in the recipe's
``provenance``."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base.errors import RecipeError, Where
from ..base.files import write_atomically
from ..dsl.params import resolve
from ..dsl.recipe import KernelSchedule, Recipe
from ..dsl.space import ParamValue
from ..dsl.steps import Mmt4dStep
from ..dsl.values import MatchSpec
from ..frontends.loading import load
from ..frontends.step_documents import kernel_document, step_document
from ..frontends.yaml_writer import recipe_yaml
from .tasks import Task
from .templates import UKERNELS_OFF
from .tolerance import TOLERANCE
from .tuning import TaskTuning, TuneOptions


@dataclass(frozen=True)
class ModelSpec:
    """What every model recipe of a tune starts with: its name, its ``workload`` and the
    graph steps of the model rewrites."""

    name: str
    workload: Mapping[str, Any]
    graph: tuple[Mapping[str, Any], ...]
    tolerance: Mapping[str, float] = field(default_factory=lambda: dict(TOLERANCE))
    """What the model recipe is checked within (:mod:`.tolerance`)."""


def packable(tunings: Sequence[TaskTuning]) -> list[TaskTuning]:
    """The tasks whose choice in the packed layout (a correct packed candidate not found
    wrong in the model) differs from their choice in the tasks' recipe."""
    return [t for t in tunings if t.chosen(True) != t.chosen(False)]


def write_model_recipe(
    path: Path,
    model: ModelSpec,
    tunings: list[TaskTuning],
    o: TuneOptions,
    packed: bool = False,
    only: Collection[str] | None = None,
    packing: Collection[str] | None = None,
) -> int:
    """Write the model recipe (``packed``: every task with a correct packed candidate
    packed, or with ``packing`` only the tasks it names; ``only``: the names of the tasks
    that keep their schedules, the others IREE's pipeline, ``None`` all); return how many
    task schedules (kernels and packed graph steps) it holds."""
    kernels: list[dict[str, Any]] = []
    graph: list[dict[str, Any]] = []
    # In task order (t0, t1, ...), not by their profiled time: the same schedules write
    # the same recipe in every run (tdsched tune's layout race keys on it).
    for tuning in sorted(tunings, key=lambda t: (len(t.task.name), t.task.name)):
        name = tuning.task.name
        chosen = tuning.chosen(packed and (packing is None or name in packing))
        if chosen is None or (only is not None and name not in only):
            continue
        assert tuning.recipe is not None
        ran = _as_run(tuning.recipe, chosen.params, o)
        if dict(ran.parameters).get("LAYOUT") == "packed":
            graph.append(_packed_step(tuning.task, tuning.recipe, ran))
            continue
        kernels += [kernel_document(_unconditional(k)) for k in ran.kernels]
    steps = [dict(step) for step in model.graph] + graph
    document = {
        "name": model.name,
        "description": (
            f"{model.name}: schedules tuned by tdsched tune for {len(kernels) + len(graph)} tasks"
        ),
        "workload": dict(model.workload),
        "targets": [o.build.name],
        "tolerance": dict(model.tolerance),
        **({"compile_flags": [UKERNELS_OFF]} if graph else {}),
        **({"graph": steps} if steps else {}),
        "kernels": kernels,
        "provenance": {
            "tool": "tdsched tune",
            "date": time.strftime("%Y-%m-%d"),
            "threads": o.build.threads,
            "tasks": [t.as_dict() for t in tunings],
        },
    }
    header = (
        "# Written by tdsched tune: one kernel schedule per task that beat IREE's pipeline;\n"
        "# the other tasks keep it (provenance.tasks says why).\n"
        "# Run it with: tdsched run {this file}\n"
    )
    write_atomically(path, (header + recipe_yaml(document)).encode())
    return len(kernels) + len(graph)


def _as_run(recipe: Path, values: Mapping[str, ParamValue], o: TuneOptions) -> Recipe:
    """The task recipe (as tune wrote it, or as the user edited it since) as its winner
    ran it: resolved at ``values`` for the tune's build, so what a ``when`` leaves out
    is gone and every ``${...}`` is filled in."""
    build = o.build
    return resolve(load(str(recipe)), values, build.cpu_threads, build.name, build.machine)


def _unconditional(kernel: KernelSchedule) -> KernelSchedule:
    """``kernel`` and its steps without their ``when``: they held for the winner, and
    the model recipe does not declare the template's parameters."""
    steps = tuple(dataclasses.replace(step, when=None) for step in kernel.steps)
    return dataclasses.replace(kernel, steps=steps, when=None)


def _packed_step(task: Task, recipe: Path, ran: Recipe) -> dict[str, Any]:
    """The task's winning packed layout as a graph step of the model recipe: its
    template's ``mmt4d`` step with the winning tile, limited to the task's root layers
    (in the model, other matmuls keep their own schedules)."""
    applying = [step for step in ran.graph if isinstance(step, Mmt4dStep)]
    if not applying:
        values = ", ".join(f"{k}={v}" for k, v in ran.parameters)
        raise RecipeError(
            Where(str(recipe), field="graph"),
            f"no mmt4d step applies to the task's packed winner ({values}); keep the "
            "template's mmt4d steps and their 'when' conditions on LAYOUT and UNPACK",
        )
    ops = MatchSpec(op=task.root.op, layers=tuple(task.layers))
    return step_document(dataclasses.replace(applying[0], ops=ops, when=None))
