"""The whole-model races of ``tdsched tune``: choices that a task's own timing cannot
make, taken by running model recipes against IREE's default build of the model, and
recorded beside them so that a re-run reuses the choice instead of flipping on noise.

1. **Model rewrites**, before the tasks are extracted: graph rewrites that change which
   ops IREE's dispatches hold (:data:`MODEL_REWRITES`: 1x1 convolutions as matmuls, then
   the other convolutions as im2col gathers and matmuls, then softmax ops with ``exp``
   computed once). Each, in turn, is tried on top
   of the rewrites kept before it: where it changes the model, a recipe with those graph
   steps and it (``OUT/<model>.<rewrite>.yaml``) is run, and the rewrite is kept when
   the model is correct and ``WIN`` faster than without it. A convolution rewrite not kept
   on every convolution it takes is raced again on one group of identical convolutions at a time
   (most FLOP first; ``OUT/<model>.<rewrite>-<n>.yaml``), selected by layer, each group
   kept when it wins on top of the groups kept before it: a gather that pays for a
   strided layer need not pay for the others. The tasks are then those of the rewritten
   model, and every model recipe starts with the steps kept. Where the model has NCHW
   convolutions, the race is run twice: on the model as imported and on the model run in
   NHWC (:data:`LAYOUT_STEP`, ``channels_last``, the base of the second race whatever its
   own speedup: its gain may come only with the rewrites after it), and the faster end
   result is kept, NHWC only when it is ``WIN`` faster. A run within ``CLOSE`` of
   the bar is a close call: the rewrite and the steps kept before it are run until each
   has ``CLOSE_CALL_RUNS`` runs, and their medians decide (the noise between two runs of
   a small model is of the size of the gains raced).
2. **Layouts**, after the sweeps: the tasks' recipe against the one with every matmul
   task that has a correct packed candidate packed (a task's own timing misjudges what
   packing saves in the model); the faster is kept, on medians of ``CLOSE_CALL_RUNS``
   runs each when their first runs are within ``CLOSE`` of each other.

Each decision is recorded in ``OUT/`` (:data:`GRAPH_RACE_FILE`, :data:`LAYOUT_RACE_FILE`)
under a key of what was raced (the model's text and the steps; the two recipes'
schedules), and reused only for the same key.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from iree.compiler import ir
from tdsched.targets import Target
from tdsched.targets.workload import Workload
from tdsched.transform_lib.graph import conv1x1_to_matmul, im2col
from tdsched.transform_lib.graph.conv_matmul import ConvGroup, ConvRewrite, convs_taken
from tdsched.transform_lib.graph.report import rewrite_text

from ..base.files import write_atomically
from ..compile.graph_rewrites import rewrite_stage
from ..dsl.steps import (
    ChannelsLastStep,
    Conv1x1ToMatmulStep,
    DecomposeSoftmaxStep,
    GraphRewriteStep,
    Im2colStep,
)
from ..dsl.values import MatchSpec
from ..frontends.yaml_writer import recipe_yaml
from ..measure.run_report import RunReport
from ..measure.status import Status
from .outcome import TuneOutcome
from .tolerance import TOLERANCE
from .tuning import WIN

GRAPH_RACE_FILE = "graph-race.json"
"""Where the model-rewrite race's decision is kept, beside the model recipe."""
LAYOUT_RACE_FILE = "layout-race.json"
"""Where the layout race's decision is kept, beside the model recipe."""

LAYOUT_STEP = ChannelsLastStep()
"""The layout the model-rewrite race is run a second time in (see the module docstring)."""
MODEL_REWRITES: tuple[GraphRewriteStep, ...] = (
    Conv1x1ToMatmulStep(),
    Im2colStep(),
    DecomposeSoftmaxStep(),
)
"""The graph rewrites tried on the whole model, in order (steps without options), each
on top of those kept before it."""
CLOSE = 0.1
"""A model run whose speedup is within this fraction of the bar a rewrite must clear is a
close call: the rewrite and the steps kept before it are run again (see the module
docstring)."""
CLOSE_CALL_RUNS = 3
"""Runs of each side a close call is decided on, by their medians."""
CONV_REWRITES: dict[type[GraphRewriteStep], ConvRewrite] = {
    Conv1x1ToMatmulStep: conv1x1_to_matmul.REWRITE,
    Im2colStep: im2col.REWRITE,
}
"""How each convolution rewrite of :data:`MODEL_REWRITES` takes convolutions (to race
them by group); the others are raced on the whole model only."""

MIN_GROUP_SHARE = 0.05
"""The least share of a rewrite's FLOP a group of convolutions holds to be raced alone: a
smaller group cannot move the model's time by the tune's margin unless it runs several
times faster, and each group raced costs a model run or more."""

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
    other_layout: tuple[dict[str, Any], ...] | None = None
    """Where both layouts raced: the steps the race in the layout not kept ended with
    (the IREE race tries them with a configuration's flags, which can turn the race)."""


def race_model_rewrites(
    workload: Workload, spec: Mapping[str, Any], out: Path, target: Target, check: Check
) -> ModelRewrites:
    """Try :data:`MODEL_REWRITES` on ``workload`` one by one and keep each that makes the
    model run correct and ``WIN`` faster than the rewrites kept before it; a convolution
    rewrite that loses on every convolution is raced again a group of identical
    convolutions at a time (see the module docstring). ``spec`` is the model recipe's
    ``workload``."""
    record = out / GRAPH_RACE_FILE
    names = [LAYOUT_STEP.primitive, *(step.primitive for step in MODEL_REWRITES)]
    raced = json.dumps([*names, "by convolution group"]).encode()
    key = {"model": _digest(workload.mlir.encode()), "graph": _digest(raced)}
    earlier = earlier_race(record, key, ("rewritten", "as imported"))
    recorded = _recorded_steps(earlier.get("steps")) if earlier is not None else None
    if earlier is not None and recorded is not None:
        steps = recorded
        other = _recorded_steps(earlier.get("other_layout"))
        text = _rewritten(workload.mlir, steps, target)
        lines = tuple(f"{line} (raced by an earlier run)" for line in earlier["line"].split("\n"))
        speedup = float(earlier.get("speedup") or 1.0)
    else:
        steps, text, speedup, lines, other = _race(workload, spec, out, target, check)
        if not lines:
            return ModelRewrites((), workload)
        document = {
            "key": key,
            "kept": "rewritten" if steps else "as imported",
            "steps": [step_document(step) for step in steps],
            "line": "\n".join(lines),
            "speedup": speedup,
            "other_layout": None if other is None else [step_document(s) for s in other],
        }
        write_atomically(record, json.dumps(document, indent=1).encode())
    documents = None if other is None else tuple(step_document(step) for step in other)
    if not steps:
        return ModelRewrites((), workload, lines=lines, other_layout=documents)
    rewritten = dataclasses.replace(workload, mlir=text)
    graph = tuple(step_document(step) for step in steps)
    return ModelRewrites(graph, rewritten, speedup, lines, documents)


def step_document(step: GraphRewriteStep) -> dict[str, Any]:
    """A raced rewrite as a recipe's graph schedule writes it: ``{im2col: {}}``, or
    ``{im2col: {ops: {layer: [...]}}}`` when it is limited to some layers."""
    layers = step.ops.layers if step.ops is not None else ()
    return {step.primitive: {"ops": {"layer": list(layers)}} if layers else {}}


def _recorded_steps(documents: Any) -> list[GraphRewriteStep] | None:
    """The steps an earlier race kept, from their documents (:func:`step_document`), or
    ``None`` when the record does not hold such documents."""
    if not isinstance(documents, list):
        return None
    by_name = {step.primitive: step for step in (LAYOUT_STEP, *MODEL_REWRITES)}
    steps = []
    for document in documents:
        if not isinstance(document, dict) or len(document) != 1:
            return None
        [(name, options)] = document.items()
        ops = options.get("ops", {}) if isinstance(options, dict) else None
        layers = ops.get("layer", []) if isinstance(ops, dict) else None
        if name not in by_name or not isinstance(layers, list):
            return None
        if not all(isinstance(layer, str) for layer in layers):
            return None
        steps.append(_limited(by_name[name], layers) if layers else by_name[name])
    return steps


def _limited(step: GraphRewriteStep, layers: Sequence[str]) -> GraphRewriteStep:
    """``step`` limited to the convolutions of ``layers``."""
    return dataclasses.replace(step, ops=MatchSpec(layers=tuple(layers)))


def _race(
    workload: Workload, spec: Mapping[str, Any], out: Path, target: Target, check: Check
) -> tuple[list[GraphRewriteStep], str, float, tuple[str, ...], list[GraphRewriteStep] | None]:
    """Race the rewrites on the model as imported and, where it has NCHW convolutions, on
    the model in NHWC; keep the faster end result. Returns the steps kept, the model
    they make, its speedup over IREE default (1.0: as imported), a line per race, and
    the steps the other layout's race ended with (None: one layout raced)."""
    plain = _Race(workload, spec, out, target, check)
    _race_rewrites(plain, workload.name)
    nhwc = _Race(workload, spec, out, target, check, prefix="[NHWC] ")
    if not nhwc.adopt(LAYOUT_STEP, f"{workload.name}.{LAYOUT_STEP.primitive}"):
        return plain.kept, plain.text, plain.best, (*plain.lines, *nhwc.lines), None
    _race_rewrites(nhwc, f"{workload.name}.{LAYOUT_STEP.primitive}")
    plain_best, nhwc_best = plain.best, nhwc.best
    if _close(nhwc_best, plain_best * WIN):
        plain_best, nhwc_best = plain.settle(), nhwc.settle()
    won = nhwc_best >= plain_best * WIN
    verdict = (
        f"layout   NHWC {nhwc_best:.2f}x IREE default against NCHW {plain_best:.2f}x: "
        f"{'NHWC' if won else 'NCHW'} kept"
    )
    chosen, other = (nhwc, plain) if won else (plain, nhwc)
    lines = (*plain.lines, *nhwc.lines, verdict)
    return chosen.kept, chosen.text, chosen.best, lines, other.kept


def _race_rewrites(race: _Race, stem: str) -> None:
    """Race each of :data:`MODEL_REWRITES` that changes the model on top of those kept so
    far, on every convolution it takes and, when that is not kept, one group of
    identical convolutions at a time (recipes ``OUT/<stem>.<rewrite>[-<n>].yaml``)."""
    for step in MODEL_REWRITES:
        if race.attempt(step, step.primitive, f"{stem}.{step.primitive}"):
            continue
        groups = _selectable_groups(race.text, step)
        chosen: list[str] = []
        for number, group in enumerate(groups, 1):
            layers = [name for name in group.layers if name is not None]
            what = f"{step.primitive} on {_named(layers)}"
            path = f"{stem}.{step.primitive}-{number}"
            if race.attempt(_limited(step, [*chosen, *layers]), what, path, replaces=bool(chosen)):
                chosen += layers


@dataclass(frozen=True)
class Pruned:
    """What :func:`prune_conv_rewrites` kept: the graph steps (as a recipe writes them),
    the recipe that runs them, and a line per group raced (none: none was)."""

    graph: list[dict[str, Any]]
    recipe: Path
    lines: tuple[str, ...]


def prune_conv_rewrites(
    workload: Workload,
    spec: Mapping[str, Any],
    out: Path,
    target: Target,
    check: Check,
    graph: Sequence[Mapping[str, Any]],
    recipe: Path,
    speedup: float,
    stem: str,
    progress: Callable[[str], None] | None = None,
) -> Pruned:
    """Race the convolution rewrites among the graph steps ``graph`` again, one group of
    identical convolutions at a time, the other way round: each group (most FLOP
    first, at least :data:`MIN_GROUP_SHARE` of the rewrite's FLOP) left to IREE as a
    convolution, kept so when that runs correct and ``WIN`` faster than the steps kept
    so far (close calls decided as in the model-rewrite race).

    ``recipe`` runs ``graph`` as it is, ``speedup`` times IREE default; each recipe raced
    (``OUT/<stem>.without-<n>.yaml``) is it with other graph steps, so it keeps the
    recipe's flags and tolerance. The model-rewrite race judges a rewrite by IREE's
    default pipeline; a configuration's flags change what it is worth (with data tiling
    an im2col gather packs its matrix, and for a convolution with few input channels
    that can cost more than the matmul saves). A step whose convolutions cannot all be
    named by layer is not raced, nor is ``graph`` when it holds a step the model-rewrite
    race does not write (a packed kernel's ``mmt4d``, which selects matmuls a rewrite
    left out would take away). ``progress`` is given each line as it is decided."""
    documents = [dict(step) for step in graph]
    steps = _recorded_steps(documents)
    if steps is None:
        return Pruned(documents, recipe, ())
    document = yaml.safe_load(recipe.read_text())
    entries = {
        k: document[k] for k in ("description", "tolerance", "compile_flags") if k in document
    }
    race = _Race(workload, spec, out, target, check, recipe=entries)
    race.kept, race.kept_recipe, race.kept_runs = list(steps), recipe, [speedup]
    number = 0
    for step in steps:  # the groups on the model the steps kept before it make
        before = race.kept[: race.kept.index(step)]
        taken = _named_groups(_rewritten(workload.mlir, before, target), step)
        left = [layer for group in taken for layer in group.layers if layer is not None]
        total = sum(group.flop for group in taken)
        current: GraphRewriteStep | None = step
        for group in taken:
            if current is None or group.flop < MIN_GROUP_SHARE * total:
                continue
            number += 1
            layers = [layer for layer in group.layers if layer is not None]
            rest = [layer for layer in left if layer not in layers]
            limited = _limited(step, rest) if rest else None
            at = race.kept.index(current)
            candidate = [*race.kept[:at], *([limited] if limited else []), *race.kept[at + 1 :]]
            label = f"{step.primitive} without {_named(layers)}"
            kept = "kept: those convolutions stay convolutions"
            if race.race(candidate, label, f"{stem}.without-{number}", kept):
                left, current = rest, limited
            if progress is not None:
                progress(race.lines[-1])
    assert race.kept_recipe is not None
    return Pruned([step_document(s) for s in race.kept], race.kept_recipe, tuple(race.lines))


@dataclass
class _Race:
    """The model-rewrite race so far: the steps kept, the model they make, the runs of
    their recipe (its speedups over IREE default; none while the model is as imported,
    which is IREE default: 1.0 exactly), and a line per rewrite raced."""

    workload: Workload
    spec: Mapping[str, Any]
    out: Path
    target: Target
    check: Check
    kept: list[GraphRewriteStep] = dataclasses.field(default_factory=list)
    kept_recipe: Path | None = None
    kept_runs: list[float] = dataclasses.field(default_factory=list)
    lines: list[str] = dataclasses.field(default_factory=list)
    prefix: str = ""
    """Put before each line's label (which race of several it is)."""
    recipe: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """Entries each recipe raced holds besides its graph steps (a configuration's
    ``compile_flags``, the model recipe's ``tolerance``): none, a plain graph recipe."""

    def __post_init__(self) -> None:
        self.text = self.workload.mlir

    def adopt(self, step: GraphRewriteStep, name: str) -> bool:
        """Make ``step`` the base of this race when it changes the model and runs correct,
        whatever its speedup; ``False`` (and a line when it ran) otherwise."""
        candidate, report = rewrite_text(self.text, rewrite_stage(step, self.target).rewrite)
        if not report.changed:
            return False
        path = self.out / f"{name}.yaml"
        self._write(path, [step])
        runs = _first_run(self.check, path)
        label = f"{self.prefix}{step.primitive} ({report.summary})"
        if isinstance(runs, RunReport):
            self.lines.append(f"graph    {label}: {runs.status}, not raced ({path})")
            return False
        self.lines.append(f"graph    {label}: {runs[0]:.2f}x IREE default, the base of this race")
        self.kept, self.text, self.kept_recipe, self.kept_runs = [step], candidate, path, runs
        return True

    def settle(self) -> float:
        """The kept steps' speedup on :data:`CLOSE_CALL_RUNS` runs (a close call)."""
        if self.kept_recipe is not None:
            self.kept_runs += _more_runs(self.check, self.kept_recipe, self.kept_runs)
        return self.best

    @property
    def best(self) -> float:
        """The kept steps' speedup over IREE default: the median of their runs."""
        return statistics.median(self.kept_runs) if self.kept_runs else 1.0

    def attempt(self, step: GraphRewriteStep, what: str, name: str, replaces: bool = False) -> bool:
        """Race ``step`` on top of the steps kept (``replaces``: instead of the last kept,
        which it extends); keep it when it changes the model and wins. ``name`` names the
        recipe written for it (``OUT/<name>.yaml``)."""
        base = self.kept[:-1] if replaces else self.kept
        before = _rewritten(self.workload.mlir, base, self.target) if replaces else self.text
        candidate, report = rewrite_text(before, rewrite_stage(step, self.target).rewrite)
        if not report.changed:
            return False
        label = f"{self.prefix}{'+ ' if self.kept else ''}{what} ({report.summary})"
        won = self.race([*base, step], label, name)
        if won:
            self.text = candidate
        return won

    def race(
        self,
        steps: list[GraphRewriteStep],
        label: str,
        name: str,
        verdict: str = "kept: the tasks are the rewritten model's",
    ) -> bool:
        """Race the graph ``steps`` against those kept, in a recipe ``OUT/<name>.yaml``;
        keep them when they run correct and ``WIN`` faster (:attr:`text`, the model
        they make, is the caller's to update). ``label`` and ``verdict`` (said when
        kept) make the line."""
        path = self.out / f"{name}.yaml"
        self._write(path, steps)
        runs = _first_run(self.check, path)
        if isinstance(runs, RunReport):
            self.lines.append(f"graph    {label}: {runs.status}, not kept ({path})")
            return False
        speedup = statistics.median(runs)
        if _close(speedup, self.best * WIN):
            runs += _more_runs(self.check, path, runs)
            if self.kept_recipe is not None:
                self.kept_runs += _more_runs(self.check, self.kept_recipe, self.kept_runs)
            speedup = statistics.median(runs)
        won = speedup >= self.best * WIN
        self.lines.append(_line(label, runs, self.best, verdict if won else None))
        if won:
            self.kept, self.kept_recipe, self.kept_runs = steps, path, runs
        return won

    def _write(self, path: Path, steps: list[GraphRewriteStep]) -> None:
        """A recipe of the graph ``steps`` (with :attr:`recipe`'s entries) at ``path``."""
        document = {
            "name": f"{self.workload.name}_graph",
            "description": "tdsched tune: the model rewrites alone, raced against IREE default",
            "workload": dict(self.spec),
            "targets": [self.target.name],
            "tolerance": TOLERANCE,
            **self.recipe,
            "graph": [step_document(step) for step in steps],
        }
        write_atomically(path, recipe_yaml(document).encode())


def _first_run(check: Check, recipe: Path) -> list[float] | RunReport:
    """One run of ``recipe``: its speedup, or the report when it is not correct."""
    report = check(recipe)
    if report.status is not Status.OK or report.speedup is None:
        return report
    return [report.speedup]


def _more_runs(check: Check, recipe: Path, runs: list[float]) -> list[float]:
    """The runs that bring ``runs`` of ``recipe`` to :data:`CLOSE_CALL_RUNS` (one that is
    not correct, or not timed, adds nothing)."""
    more: list[float] = []
    for _ in range(CLOSE_CALL_RUNS - len(runs)):
        report = check(recipe)
        if report.status is Status.OK and report.speedup is not None:
            more.append(report.speedup)
    return more


def _close(speedup: float, bar: float) -> bool:
    """Whether one run's ``speedup`` is too near ``bar`` to decide on (:data:`CLOSE`)."""
    return abs(speedup / bar - 1.0) < CLOSE


def _line(label: str, runs: list[float], best: float, kept: str | None) -> str:
    """The ``graph`` line of one rewrite raced: its speedup (the median of its runs,
    listed when there are several), the speedup without it, and the verdict (``kept``:
    what is said when it is kept; None: it is not)."""
    speedup = statistics.median(runs)
    shown = f"{speedup:.2f}x IREE default"
    if len(runs) > 1:
        shown += f" (median of {len(runs)} runs: {', '.join(f'{r:.2f}x' for r in runs)})"
    than = "" if best == 1.0 else f" (without it {best:.2f}x)"
    return f"graph    {label}: {shown}{than}, {kept or 'not kept'}"


def _selectable_groups(text: str, step: GraphRewriteStep) -> list[ConvGroup]:
    """The groups of identical convolutions ``step`` would rewrite in ``text``, most FLOP
    first, that can be selected by layer (every member has a layer name) and hold at
    least :data:`MIN_GROUP_SHARE` of the FLOP the rewrite takes; none when there are
    fewer than two groups (one group is what was raced whole), and none for a rewrite
    that does not take convolutions."""
    groups = _groups(text, step)
    if len(groups) < 2:
        return []
    total = sum(group.flop for group in groups)
    return [
        group
        for group in groups
        if None not in group.layers and group.flop >= MIN_GROUP_SHARE * total
    ]


def _groups(text: str, step: GraphRewriteStep) -> list[ConvGroup]:
    """The groups of identical convolutions the rewrite ``step`` takes in ``text`` without
    a selection, most FLOP first (none for a step that takes no convolutions)."""
    how = CONV_REWRITES.get(type(step))
    if how is None:
        return []
    with ir.Context(), ir.Location.unknown():
        return convs_taken(ir.Module.parse(text), how)


def _named_groups(text: str, step: GraphRewriteStep) -> list[ConvGroup]:
    """The groups of convolutions ``step`` takes in ``text``, limited to its layers where
    it selects some; none where one of them has no layer name (what the step takes
    could not be written as a list of layers)."""
    groups = _groups(text, step)
    if any(None in group.layers for group in groups):
        return []
    selected = set(step.ops.layers) if step.ops is not None and step.ops.layers else None
    if selected is None:
        return groups
    limited = []
    for group in groups:
        layers = tuple(layer for layer in group.layers if layer in selected)
        if layers:  # identical convolutions: each member holds an equal share of the FLOP
            flop = group.flop * len(layers) // len(group.layers)
            limited.append(dataclasses.replace(group, layers=layers, flop=flop))
    return sorted(limited, key=lambda group: -group.flop)


def _named(layers: Sequence[str], shown: int = 3) -> str:
    """``a, b, c and 4 more``: the layers a limited rewrite takes."""
    more = f" and {len(layers) - shown} more" if len(layers) > shown else ""
    return ", ".join(layers[:shown]) + more


def _rewritten(text: str, steps: list[GraphRewriteStep], target: Target) -> str:
    for step in steps:
        text, _ = rewrite_text(text, rewrite_stage(step, target).rewrite)
    return text


@dataclass(frozen=True)
class LayoutRace:
    """What :func:`race_layouts` did."""

    report: RunReport | None
    """The kept recipe's check (``None``: nothing ran)."""
    line: str | None
    """What was raced and kept (``None``: no race, none recorded)."""
    packed_failure: RunReport | None = None
    """The packed recipe's check where it failed (a build or run that failed, wrong
    results) in this race."""


def race_layouts(outcome: TuneOutcome, check: Check | None) -> LayoutRace:
    """Run the tasks' recipe and the packed one, and keep the faster (each timed against
    IREE default in its own run, so their speedups are compared) as ``outcome.recipe``;
    return the kept one's report and a line saying what was raced and kept.

    The decision is recorded in ``OUT/``:data:`LAYOUT_RACE_FILE` with the two recipes'
    digests (their schedules, not the profile in their provenance): a later run that
    writes the same two recipes keeps the same one and runs only it. With ``check``
    None (``--no-check``) nothing runs: a recorded decision is still taken up (no report),
    and without one the tasks' recipe stays, unraced (no report, no line)."""
    assert outcome.packed is not None
    path, count = outcome.packed
    record = outcome.recipe.parent / LAYOUT_RACE_FILE
    key = {"tasks": schedules_digest(outcome.recipe), "packed": schedules_digest(path)}
    earlier = earlier_race(record, key, ("tasks", "packed"))
    if earlier is not None:
        if earlier["kept"] == "packed":
            write_atomically(outcome.recipe, path.read_bytes())
            outcome.kernels, outcome.packed_kept = count, True
        report = check(outcome.recipe) if check is not None else None
        return LayoutRace(report, f"{earlier['line']} (raced by an earlier run)")
    if check is None:
        return LayoutRace(None, None)
    report, packed = check(outcome.recipe), check(path)
    ours, theirs = report.speedup, packed.speedup
    ours_ok = report.status is Status.OK
    kept, runs = "tasks", ""
    close = ours_ok and packed.status is Status.OK
    if close and ours is not None and theirs is not None and _close(theirs, ours):
        ours = statistics.median([ours, *_more_runs(check, outcome.recipe, [ours])])
        theirs = statistics.median([theirs, *_more_runs(check, path, [theirs])])
        runs = f" (medians of {CLOSE_CALL_RUNS} runs each)"
    if packed.status is not Status.OK or theirs is None:
        line = f"layouts  packed matmuls: {packed.status}, not kept ({path})"
    elif ours is not None and ours_ok and ours >= theirs:
        line = f"layouts  packed matmuls {theirs:.2f}x vs {ours:.2f}x{runs}: not kept ({path})"
    else:
        write_atomically(outcome.recipe, path.read_bytes())
        outcome.kernels, outcome.packed_kept = count, True
        shown = f"{ours:.2f}x" if ours is not None else str(report.status)
        line = f"layouts  packed matmuls {theirs:.2f}x vs {shown}{runs}: kept (from {path})"
        kept, report = "packed", packed
    document = {"key": key, "kept": kept, "line": line}
    write_atomically(record, json.dumps(document, indent=1).encode())
    failed = packed.status not in (Status.OK, Status.TIMEOUT)
    return LayoutRace(report, line, packed if failed else None)


def schedules_digest(recipe: Path) -> str:
    """A model recipe's digest without its ``provenance`` (which holds this run's
    profile of the tasks): the same schedules give the same digest."""
    document = yaml.safe_load(recipe.read_text())
    document.pop("provenance", None)
    return _digest(json.dumps(document, sort_keys=True).encode())


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def earlier_race(
    record: Path, key: Mapping[str, str], choices: tuple[str, ...]
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
