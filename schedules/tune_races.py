"""The whole-model races of ``tdsched tune``: choices that a task's own timing cannot
make, taken by running model recipes against IREE's default build of the model, and
recorded beside them so that a re-run reuses the choice instead of flipping on noise.

1. **Model rewrites**, before the tasks are extracted: graph rewrites that change which
   ops IREE's dispatches hold (:data:`MODEL_REWRITES`: 1x1 convolutions as matmuls, then
   the other convolutions as im2col gathers and matmuls). Each, in turn, is tried on top
   of the rewrites kept before it: where it changes the model, a recipe with those graph
   steps and it (``OUT/<model>.<rewrite>.yaml``) is run, and the rewrite is kept when
   the model is correct and ``WIN`` faster than without it. The tasks are then those of
   the rewritten model, and every model recipe starts with the steps kept.
2. **Layouts**, after the sweeps: the tasks' recipe against the one with every matmul
   task that has a correct packed candidate packed (a task's own timing misjudges what
   packing saves in the model); the faster is kept.

Each decision is recorded in ``OUT/`` (:data:`GRAPH_RACE_FILE`, :data:`LAYOUT_RACE_FILE`)
under a key of what was raced (the model's text and the steps; the two recipes'
schedules), and reused only for the same key.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from tdsched.targets import Target
from tdsched.targets.workload import Workload
from tdsched.transform_lib.graph.report import rewrite_text

from .evaluation import Status
from .files import write_atomically
from .graph_rewrites import rewrite_stage
from .run_report import RunReport
from .steps import Conv1x1ToMatmulStep, GraphRewriteStep, Im2colStep
from .tune import TOLERANCE, WIN, TuneOutcome

GRAPH_RACE_FILE = "graph-race.json"
"""Where the model-rewrite race's decision is kept, beside the model recipe."""
LAYOUT_RACE_FILE = "layout-race.json"
"""Where the layout race's decision is kept, beside the model recipe."""

MODEL_REWRITES: tuple[GraphRewriteStep, ...] = (Conv1x1ToMatmulStep(), Im2colStep())
"""The graph rewrites tried on the whole model, in order (steps without options), each
on top of those kept before it."""

Check = Callable[[Path], RunReport]
"""Runs a model recipe as ``tdsched run`` does: checked, and timed against IREE default."""


@dataclass(frozen=True)
class ModelRewrites:
    """What the model-rewrite race kept: the graph steps every model recipe starts with
    (none: the model as imported), the model the tasks come from, the speedup the steps
    gave IREE's own pipeline (1.0 without them), and a line per rewrite raced (none: no
    rewrite changed the model, nothing was raced)."""

    steps: tuple[dict[str, Any], ...]
    workload: Workload
    speedup: float = 1.0
    lines: tuple[str, ...] = ()


def race_model_rewrites(
    workload: Workload, spec: Mapping[str, Any], out: Path, target: Target, check: Check
) -> ModelRewrites:
    """Try :data:`MODEL_REWRITES` on ``workload`` one by one and keep each that makes the
    model run correct and ``WIN`` faster than the rewrites kept before it (see the module
    docstring). ``spec`` is the model recipe's ``workload``."""
    record = out / GRAPH_RACE_FILE
    names = [step.primitive for step in MODEL_REWRITES]
    key = {"model": _digest(workload.mlir.encode()), "graph": _digest(json.dumps(names).encode())}
    earlier = earlier_race(record, key, ("rewritten", "as imported"))
    kept_steps = earlier.get("steps") if earlier is not None else None
    if earlier is not None and isinstance(kept_steps, list) and set(kept_steps) <= set(names):
        steps = [step for step in MODEL_REWRITES if step.primitive in kept_steps]
        text = _rewritten(workload.mlir, steps, target)
        lines = tuple(f"{line} (raced by an earlier run)" for line in earlier["line"].split("\n"))
        speedup = float(earlier.get("speedup") or 1.0)
    else:
        steps, text, speedup, lines = _race(workload, spec, out, target, check)
        if not lines:
            return ModelRewrites((), workload)
        document = {
            "key": key,
            "kept": "rewritten" if steps else "as imported",
            "steps": [step.primitive for step in steps],
            "line": "\n".join(lines),
            "speedup": speedup,
        }
        write_atomically(record, json.dumps(document, indent=1).encode())
    if not steps:
        return ModelRewrites((), workload, lines=lines)
    rewritten = dataclasses.replace(workload, mlir=text)
    graph: tuple[dict[str, Any], ...] = tuple({step.primitive: {}} for step in steps)
    return ModelRewrites(graph, rewritten, speedup, lines)


def _race(
    workload: Workload, spec: Mapping[str, Any], out: Path, target: Target, check: Check
) -> tuple[list[GraphRewriteStep], str, float, tuple[str, ...]]:
    """Race each rewrite that changes the model on top of those kept so far; return the
    steps kept, the model they make, its speedup over IREE default (1.0: as imported)
    and a line per rewrite raced."""
    kept: list[GraphRewriteStep] = []
    text, best = workload.mlir, 1.0
    lines: list[str] = []
    for step in MODEL_REWRITES:
        candidate, report = rewrite_text(text, rewrite_stage(step, target).rewrite)
        if not report.changed:
            continue
        steps = [*kept, step]
        path = out / f"{workload.name}.{step.primitive}.yaml"
        _write_graph_recipe(path, workload.name, spec, target, steps)
        what = f"{'+ ' if kept else ''}{step.primitive} ({report.summary})"
        speedup, line = _judge(check(path), what, path, best)
        lines.append(line)
        if speedup is not None:
            kept, text, best = steps, candidate, speedup
    return kept, text, best, tuple(lines)


def _rewritten(text: str, steps: list[GraphRewriteStep], target: Target) -> str:
    for step in steps:
        text, _ = rewrite_text(text, rewrite_stage(step, target).rewrite)
    return text


def _judge(report: RunReport, what: str, path: Path, best: float) -> tuple[float | None, str]:
    """The rewritten model's speedup if it is kept (correct, and ``WIN`` faster than
    ``best``, the speedup without this rewrite), and the line saying so."""
    speedup = report.speedup
    if report.status is not Status.OK or speedup is None:
        return None, f"graph    {what}: {report.status}, not kept ({path})"
    than = "" if best == 1.0 else f" (without it {best:.2f}x)"
    if speedup >= best * WIN:
        verdict = "kept: the tasks are the rewritten model's"
        return speedup, f"graph    {what}: {speedup:.2f}x IREE default{than}, {verdict}"
    return None, f"graph    {what}: {speedup:.2f}x IREE default{than}, not kept"


def _write_graph_recipe(
    path: Path, name: str, spec: Mapping[str, Any], target: Target, steps: list[GraphRewriteStep]
) -> None:
    document = {
        "name": f"{name}_graph",
        "description": "tdsched tune: the model rewrites alone, raced against IREE default",
        "workload": dict(spec),
        "targets": [target.name],
        "tolerance": TOLERANCE,
        "graph": [{step.primitive: {}} for step in steps],
    }
    write_atomically(path, yaml.safe_dump(document, sort_keys=False).encode())


def race_layouts(outcome: TuneOutcome, check: Check | None) -> tuple[RunReport | None, str | None]:
    """Run the tasks' recipe and the packed one, and keep the faster (each timed against
    IREE default in its own run, so their speedups are compared) as ``outcome.recipe``;
    return the kept one's report and a line saying what was raced and kept.

    The decision is recorded in ``OUT/``:data:`LAYOUT_RACE_FILE` with the two recipes'
    digests (their schedules, not the profile in their provenance): a later run that
    writes the same two recipes keeps the same one and runs only it. With ``check``
    None (``--no-check``) nothing runs: a recorded decision is still taken up (no report),
    and without one the tasks' recipe stays, unraced (``None, None``)."""
    assert outcome.packed is not None
    path, count = outcome.packed
    record = outcome.recipe.parent / LAYOUT_RACE_FILE
    key = {"tasks": schedules_digest(outcome.recipe), "packed": schedules_digest(path)}
    earlier = earlier_race(record, key, ("tasks", "packed"))
    if earlier is not None:
        if earlier["kept"] == "packed":
            write_atomically(outcome.recipe, path.read_bytes())
            outcome.kernels = count
        report = check(outcome.recipe) if check is not None else None
        return report, f"{earlier['line']} (raced by an earlier run)"
    if check is None:
        return None, None
    report, packed = check(outcome.recipe), check(path)
    ours, theirs = report.speedup, packed.speedup
    kept = "tasks"
    if packed.status is not Status.OK or theirs is None:
        line = f"layouts  packed matmuls: {packed.status}, not kept ({path})"
    elif ours is not None and report.status is Status.OK and ours >= theirs:
        line = f"layouts  packed matmuls {theirs:.2f}x vs {ours:.2f}x: not kept ({path})"
    else:
        write_atomically(outcome.recipe, path.read_bytes())
        outcome.kernels = count
        shown = f"{ours:.2f}x" if ours is not None else str(report.status)
        line = f"layouts  packed matmuls {theirs:.2f}x vs {shown}: kept (from {path})"
        kept, report = "packed", packed
    document = {"key": key, "kept": kept, "line": line}
    write_atomically(record, json.dumps(document, indent=1).encode())
    return report, line


def schedules_digest(recipe: Path) -> str:
    """A model recipe's digest without its ``provenance`` (which holds this run's
    profile of the tasks): the same schedules give the same digest."""
    document = yaml.safe_load(recipe.read_text())
    document.pop("provenance", None)
    return _digest(json.dumps(document, sort_keys=True).encode())


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def earlier_race(
    record: Path, key: Mapping[str, str], choices: tuple[str, str]
) -> dict[str, Any] | None:
    """The decision recorded in ``record`` for ``key``, if it is one of ``choices``."""
    try:
        saved = json.loads(record.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(saved, dict) or saved.get("key") != dict(key):
        return None
    if saved.get("kept") not in choices or not isinstance(saved.get("line"), str):
        return None
    return saved
