"""The model recipe a tune writes (``OUT/<model>.tuned.yaml`` and the packed
alternative): the model's workload and rewrites, then per task that won its winning kernel
schedules (or config) as the winner ran them, or its packed layout as an ``mmt4d`` graph
step; the other tasks keep IREE's pipeline, with the reason in the recipe's
``provenance``."""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..base.errors import RecipeError, Where
from ..base.files import write_atomically
from ..dsl.params import substitute_plain
from ..dsl.space import ParamValue
from ..frontends.yaml_writer import recipe_yaml
from .tasks import Task
from .templates import UKERNELS_OFF, conditions_hold
from .tuning import TOLERANCE, TaskTuning, TuneOptions


@dataclass(frozen=True)
class ModelSpec:
    """What every model recipe of a tune starts with: its name, its ``workload`` and the
    graph steps of the model rewrites."""

    name: str
    workload: Mapping[str, Any]
    graph: tuple[Mapping[str, Any], ...]


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
        template = yaml.safe_load(tuning.recipe.read_text())
        values = {**template.get("parameters", {}), **chosen.params}
        if values.get("LAYOUT") == "packed":
            graph.append(_packed_step(tuning.task, tuning.recipe, template, values))
            continue
        kernels += _kernels_taken(tuning.recipe, template, values)
    steps = [dict(step) for step in model.graph] + graph
    document = {
        "name": model.name,
        "description": (
            f"{model.name}: schedules tuned by tdsched tune for {len(kernels) + len(graph)} tasks"
        ),
        "workload": dict(model.workload),
        "targets": [o.build.name],
        "tolerance": TOLERANCE,
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


def _kernels_taken(
    recipe: Path, template: Mapping[str, Any], values: Mapping[str, ParamValue]
) -> list[dict[str, Any]]:
    """The task template's kernels as the winner ran them, with their own matches: those
    whose ``when`` holds at ``values``, their schedule or config filled in."""
    taken = []
    for index, kernel in enumerate(template["kernels"]):
        if not _applies(kernel, values):
            continue
        body = "config" if "config" in kernel else "schedule"
        where = Where(str(recipe), field=f"kernels[{index}].{body}")
        filled = substitute_plain(kernel[body], values, where)
        if body == "schedule":
            filled = _steps_taken(filled, values)
        taken.append({"name": kernel["name"], "match": kernel["match"], body: filled})
    return taken


def _steps_taken(
    steps: list[dict[str, Any]], values: Mapping[str, ParamValue]
) -> list[dict[str, Any]]:
    """The schedule ``steps`` as the winner ran them: a step whose ``when`` condition
    fails at ``values`` left out, the condition dropped from the others (the model
    recipe does not declare the template's parameters)."""
    taken = []
    for step in steps:
        ((name, options),) = step.items()
        if _applies(options, values):
            taken.append({name: {k: v for k, v in options.items() if k != "when"}})
    return taken


def _packed_step(
    task: Task, recipe: Path, template: Mapping[str, Any], values: Mapping[str, Any]
) -> dict[str, Any]:
    """The task's winning packed layout as a graph step of the model recipe: its
    template's ``mmt4d`` step with the winning tile, limited to the task's root layers
    (in the model, other matmuls keep their own schedules)."""
    applying = [i for i, step in enumerate(template.get("graph") or []) if _packs(step, values)]
    if not applying:
        raise RecipeError(
            Where(str(recipe), field="graph"),
            "no mmt4d step applies to the task's packed winner "
            f"({', '.join(f'{k}={v}' for k, v in values.items())}); keep the template's "
            "mmt4d steps and their 'when' conditions on LAYOUT and UNPACK",
        )
    where = Where(str(recipe), field=f"graph[{applying[0]}]")
    step = substitute_plain(template["graph"][applying[0]], values, where)
    options = dict(step["mmt4d"])
    options.pop("when", None)
    options["ops"] = {"op": task.root.op, "layer": list(task.layers)}
    return {"mmt4d": options}


def _packs(step: Mapping[str, Any], values: Mapping[str, Any]) -> bool:
    """Whether a template's graph ``step`` is an ``mmt4d`` step whose ``when`` (if any)
    holds for ``values``."""
    options = step.get("mmt4d")
    return isinstance(options, dict) and _applies(options, values)


def _applies(options: Mapping[str, Any], values: Mapping[str, Any]) -> bool:
    """Whether a template step with ``options`` runs at ``values``: it has no ``when``,
    or its ``when`` holds."""
    when = options.get("when")
    return when is None or conditions_hold([when], values)
