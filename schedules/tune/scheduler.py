"""``tdsched tune``: make a whole model faster, task by task, within a time budget.

1. **Tasks.** The model's distinct dispatches, weighed by a profile of IREE's default
   build (:mod:`.tasks`).
2. **A workload and a template per task.** Each task worth tuning is written as a
   standalone workload and a recipe whose one kernel comes from :mod:`.templates`
   (x86: a kernel schedule) or :mod:`.templates_vulkan` (Vulkan: a lowering config
   for IREE's pipeline), under ``OUT/tasks/``. A recipe already there is kept, so a
   user's edits to it are what the next run sweeps.
3. **Sweeps sharing the budget.** Each task is swept (the sweep engine: checked
   candidates, racing, one results database ``OUT/tune.db``) in rounds of
   ``round_size`` candidates: first every task once, most time first, then the task with
   the largest expected gain, in the manner of Ansor's task scheduler: its time per call
   in the model, divided by its best speedup so far, times the relative gain its last
   round found (at least ``MIN_GAIN`` divided by the rounds it has had, so a task that
   stopped improving yields to the others). A round never starts past the budget. A
   task's best candidate is its latest race's winner, and its speedup the median of
   every race that candidate ran in (one noisy race moves it only that far).
4. **One frozen recipe for the model** (``OUT/<model>.tuned.yaml``): the model's
   workload and, per task whose best candidate beat IREE's pipeline by ``WIN`` or more,
   its kernel schedule (or config) with the winning values, matched by the task's root op
   (on Vulkan: its kind) and loop bounds. The other tasks keep IREE's pipeline, each
   with its reason in the recipe's ``provenance``. A task whose root op and loop bounds
   also occur in another task is not swept at all: its kernel match would take the
   other task's dispatches too. A packed winner (:mod:`.templates`) is an
   ``mmt4d`` graph step for its layers.
5. **A packed alternative** (``OUT/<model>.packed.yaml``), where some task has a
   correct packed candidate the recipe did not take: every such task packed. The
   command races the two on the whole model and keeps the faster.

The model may have been rewritten before all this (:mod:`.races`: 1x1
convolutions as matmuls); its tasks are then the rewritten model's, and the graph steps
that rewrote it start every model recipe.

The budget is the total over every run into ``OUT`` (:mod:`.state`, saved after
each round): re-running a finished tune sweeps nothing, a larger budget spends only the
difference, and a tune stopped at any point loses only the round in flight, whose
candidates already recorded in the database are reused without compiling or timing them.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from tdsched.targets import Target
from tdsched.targets.workload import Workload
from tdsched.transform_lib.census import census_functions, read_census
from tdsched.transform_lib.constant_operands import ModelConstants
from tdsched.transform_lib.dispatch_config import ConfiguredDispatch

from ..errors import RecipeError, Where
from ..files import write_atomically
from ..measure.build_target import BuildTarget
from ..params import substitute_plain
from ..pipeline import census_output
from ..space import ParamValue
from ..sweep.database import Result, ResultsDB
from ..sweep.executor import make_executor
from ..sweep.runner import Sweep, SweepOptions
from ..yaml_writer import recipe_yaml
from .state import digest, load_state, save_state
from .task_match import Ambiguous, ModelOps, op_match
from .task_workloads import TaskSkipped, standalone_task
from .tasks import ModelTasks, Task, extract_tasks
from .templates import (
    PACKABLE,
    UKERNELS_OFF,
    NoTemplate,
    Template,
    anchor_position,
    conditions_hold,
    template_for,
)
from .templates_rows import is_row_reduction, row_reduction_template
from .templates_vulkan import vulkan_template

WIN = 1.02
"""A task's best candidate must be this much faster than IREE's pipeline to be kept."""
MIN_GAIN = 0.05
"""The relative gain a task's second round is assumed to find at least (the floor falls
with each round: a task whose rounds find nothing still gets time while it dominates)."""
NO_CORRECT_ROUNDS = 2
"""Rounds a task gets while none of its candidates is correct: the template does not fit
it (its candidates fail to build or give wrong results), and the budget goes elsewhere."""
NO_WIN = "no candidate beat IREE's pipeline"
UNREACHED = "the budget ran out before its first round (run again with a larger --budget)"
TOLERANCE = {"atol": 1.0e-4, "rtol": 1.0e-4}
"""The task recipes' and the model recipe's tolerance (f32 accumulation reordered)."""


@dataclass(frozen=True)
class TuneOptions:
    """How to tune (see ``tdsched tune --help`` for each)."""

    build: BuildTarget
    """What the tasks and the model recipe are built for (the target known) and run on."""
    budget_s: float
    min_share: float = 0.01
    round_size: int = 8
    jobs: int = 2
    seed: int = 0
    rounds: int = 3
    """Profiled runs of IREE default when weighing the tasks."""
    executor: str = "local"
    """Where the sweeps compile and time (:data:`~..sweep.executor.EXECUTORS`)."""
    ray_address: str | None = None
    """With the ``ray`` executor: the cluster (``None``: a local one, per round)."""


@dataclass
class TaskTuning:
    """What tuning did for one task."""

    task: Task
    recipe: Path | None = None
    reason: str | None = None
    """Why the task keeps IREE's pipeline (not tuned, or no candidate won)."""
    candidates: int = 0
    """Candidates evaluated (those reused from earlier runs included)."""
    failed: int = 0
    spent_s: float = 0.0
    best: Result | None = None
    last_gain: float = 1.0
    rounds: int = 0
    valid: int = 0
    """Valid candidates in its space."""
    exhausted: bool = False
    """Its last round found no candidate it had not evaluated (the search converged)."""
    best_packed: Result | None = None
    """Its best correct candidate in the packed layout, where its template has one: the
    model-level layout race may take it (see :func:`tune`)."""
    raced: dict[str, list[float]] = field(default_factory=dict)
    """Per candidate key, the median speedup each of its races measured, one per round
    whose race it ran in."""
    wrong_in_model: dict[str, str] = field(default_factory=dict)
    """Per candidate key, why the model recipe must not take it although it was right
    on the task: the whole model, checked against its reference, came out wrong with it
    (:mod:`.blame`)."""

    @property
    def speedup(self) -> float | None:
        """The best candidate's speedup over IREE's pipeline on the task: the median over
        the races it ran in (one race that lands on a noisy stretch of the machine moves
        it less than it moves that race), else its screening speedup."""
        if self.best is None:
            return None
        history = self.raced.get(self.best.key)
        if history:
            return statistics.median(history)
        return self.best.confirmed_speedup or self.best.speedup

    @property
    def won(self) -> bool:
        """Its best candidate beat IREE's pipeline by ``WIN`` and was not found wrong in
        the model."""
        if self.best is None or self.best.key in self.wrong_in_model:
            return False
        return self.speedup is not None and self.speedup >= WIN

    def chosen(self, packed: bool) -> Result | None:
        """The candidate a model recipe takes for it (``packed``: the packed layout's
        best where it has one); ``None``: IREE's pipeline."""
        packed_best = self.best_packed if packed else None
        if packed_best is not None and packed_best.key not in self.wrong_in_model:
            return packed_best
        return self.best if self.won else None

    @property
    def tunable(self) -> bool:
        untried = self.rounds == 0 or self.candidates < self.valid
        return self.recipe is not None and untried and not self.exhausted

    @property
    def kept_because(self) -> str | None:
        """Why the model recipe keeps IREE's pipeline for it (``None``: it won)."""
        if self.won:
            return None
        if self.best is not None and self.best.key in self.wrong_in_model:
            return self.wrong_in_model[self.best.key]
        if self.reason is None and self.recipe is not None and self.rounds == 0:
            return UNREACHED
        return self.reason or NO_WIN

    @property
    def outcome(self) -> str:
        """What the model recipe keeps for it, with the reason for IREE's pipeline."""
        return "schedule" if self.won else f"IREE's pipeline: {self.kept_because}"

    def expected_gain_ms(self) -> float:
        """The time per call its next round is expected to save (see the module)."""
        now = (self.task.time_ms or 0.0) / max(self.speedup or 1.0, 1.0)
        return now * max(self.last_gain, MIN_GAIN / max(self.rounds, 1))

    def state(self) -> dict[str, Any]:
        """What a later run resumes from (see :mod:`.state`)."""
        return {
            "root": self.task.root.describe(),
            "template": digest(self.recipe) if self.recipe else None,
            "rounds": self.rounds,
            "candidates": self.candidates,
            "failed": self.failed,
            "spent_s": round(self.spent_s, 3),
            "last_gain": self.last_gain,
            "valid": self.valid,
            "exhausted": self.exhausted,
            "best": self.best.as_dict() if self.best else None,
            "best_packed": self.best_packed.as_dict() if self.best_packed else None,
            "raced": self.raced,
            "wrong_in_model": self.wrong_in_model,
        }

    def resume(self, saved: Mapping[str, Any] | None) -> bool:
        """Take up ``saved`` (this task's state from an earlier run) when it is for the
        same task and template; return whether it was."""
        if self.recipe is None or not saved:
            return False
        if saved.get("root") != self.task.root.describe():
            return False
        if saved.get("template") != digest(self.recipe):
            return False
        # load_state checked every field; the last three are absent from older states
        best = Result(**saved["best"]) if saved["best"] else None
        packed = saved.get("best_packed")
        self.best, self.best_packed = best, Result(**packed) if packed else None
        self.rounds, self.candidates = saved["rounds"], saved["candidates"]
        self.failed, self.spent_s = saved["failed"], float(saved["spent_s"])
        self.last_gain, self.valid = float(saved["last_gain"]), saved["valid"]
        self.exhausted = saved["exhausted"]
        self.raced = {key: [float(x) for x in runs] for key, runs in saved.get("raced", {}).items()}
        self.wrong_in_model = dict(saved.get("wrong_in_model", {}))
        if best is None and self.rounds:
            self.reason = _no_correct(self.candidates)
        return True

    def as_dict(self) -> dict[str, Any]:
        best = self.best
        return {
            "task": self.task.name,
            "kind": self.task.kind,
            "root": self.task.root.describe(),
            "layers": self.task.layers,
            "share": self.task.share,
            "time_ms": self.task.time_ms,
            "recipe": str(self.recipe) if self.recipe else None,
            "candidates": self.candidates,
            "failed": self.failed,
            "spent_s": round(self.spent_s, 1),
            "speedup": self.speedup,
            "best": dict(best.params) if best else None,
            "kept": "schedule" if self.won else "iree",
            "reason": self.kept_because,
        }


@dataclass
class TuneOutcome:
    """What a tune did: per task, and the model recipe it wrote."""

    tasks: ModelTasks
    tunings: list[TaskTuning]
    recipe: Path
    spent_s: float
    """Of the budget, over every run into the folder (see :mod:`.state`)."""
    kernels: int
    this_run_s: float
    """Wall seconds this run took before the final check."""
    packed: tuple[Path, int] | None = None
    """The model recipe with every task that has a correct packed candidate packed, and
    its schedule count, where that differs from :attr:`recipe` (the layouts race on the
    whole model: a task's own timing misjudges what packing saves in the model)."""
    graph_speedup: float = 1.0
    """What the model rewrites gave IREE's own pipeline (1.0: none were kept)."""
    history: list[dict[str, Any]] = field(default_factory=list)
    """A line per round over every run into the folder (see :mod:`.state`)."""
    model: ModelSpec | None = None
    """What every model recipe of this tune starts with (:meth:`write_recipe`)."""
    options: TuneOptions | None = None
    packed_kept: bool = False
    """Whether :attr:`recipe` is the packed one (the layout race kept it)."""

    @property
    def estimated_speedup(self) -> float | None:
        return estimated_speedup(self.tasks, self.tunings, self.graph_speedup)

    def write_recipe(self, path: Path, only: Collection[str] | None = None) -> int:
        """Write the model recipe in the kept layout again, from the tasks' choices now
        (``only``: the tasks that keep their schedules); return its schedule count."""
        assert self.model is not None and self.options is not None
        return _write_model_recipe(
            path, self.model, self.tunings, self.options, self.packed_kept, only
        )

    def packable(self) -> list[TaskTuning]:
        """The tasks the packed alternative packs and the tasks' recipe does not."""
        return packable(self.tunings)

    def write_packed(self, path: Path, packing: Collection[str]) -> int:
        """Write the tasks' recipe with the tasks named in ``packing`` packed (their
        correct packed candidate, where they have one); return its schedule count."""
        assert self.model is not None and self.options is not None
        return _write_model_recipe(
            path, self.model, self.tunings, self.options, True, packing=packing
        )

    def rewrite_packed(self) -> None:
        """Write the packed alternative again from the tasks' choices now, or drop it
        (:attr:`packed` ``None``) where no task would be packed any more."""
        if self.packed is None:
            return
        path = self.packed[0]
        if not self.packable():
            self.packed = None
            return
        self.packed = (path, self.write_packed(path, [t.task.name for t in self.tunings]))


def estimated_speedup(
    tasks: ModelTasks, tunings: list[TaskTuning], graph_speedup: float = 1.0
) -> float | None:
    """The whole call's speedup over IREE default of the model as imported, if each task
    that won ran at its best speedup and the rest did not change (``None`` without a
    profile). ``graph_speedup``: what the model rewrites the tasks come from gave."""
    call = tasks.call_ms.median if tasks.call_ms else None
    if not call:
        return None
    saved = sum((t.task.time_ms or 0.0) * (1 - 1 / (t.speedup or 1.0)) for t in tunings if t.won)
    return graph_speedup * call / (call - saved)


Progress = Callable[[str], None]


def tune(
    workload: Workload,
    workload_spec: Mapping[str, Any],
    out: Path,
    options: TuneOptions,
    progress: Progress,
    graph: Sequence[Mapping[str, Any]] = (),
    graph_speedup: float = 1.0,
) -> TuneOutcome:
    """Tune ``workload`` (written into the model recipe as ``workload_spec``, paths
    relative to ``out``) into ``out``; see the module docstring. ``graph``: the steps
    that made ``workload`` from the model ``workload_spec`` names (they start every model
    recipe), ``graph_speedup`` what they gave IREE's own pipeline."""
    start = time.monotonic()
    target = options.build.compile_target
    threads = options.build.cpu_threads
    census = census_output(workload.mlir, target)
    tasks = extract_tasks(
        workload, target, threads, rounds=options.rounds, seed=options.seed, census=census
    )
    progress(_tasks_line(tasks, bool(graph)))
    identity = {"model": workload.name, "target": target.name, "threads": threads}
    if options.build.gpu is not None:  # absent otherwise, so earlier states still hold
        identity["gpu"] = options.build.gpu
    state, set_aside = load_state(out, identity)
    if set_aside:
        progress(f"tune: {set_aside}")
    sources = census_functions(census)
    weights = ModelConstants(workload.mlir)  # parsed only if a new task template needs it
    model_ops = ModelOps.of(read_census(census), tasks.tasks)
    tunings = [
        _prepare(t, model_ops, sources, weights, out / "tasks", options) for t in tasks.tasks
    ]
    for prepared in tunings:
        resumed = prepared.resume(state.tasks.get(prepared.task.name))
        progress(_prepared_line(prepared, resumed))
    before = state.spent_s

    def spent() -> float:
        return before + time.monotonic() - start

    if before:
        progress(f"tune: resumed, {_clock(before)} of the {_clock(options.budget_s)} budget spent")
    db = ResultsDB(out / "tune.db")
    try:
        while (tuning := _next(tunings)) is not None:
            if spent() >= options.budget_s:
                break
            _round(tuning, db, options)
            state.spent_s = spent()
            state.tasks = {t.task.name: t.state() for t in tunings if t.recipe is not None}
            estimate = estimated_speedup(tasks, tunings, graph_speedup)
            state.history.append(
                {
                    "spent_s": round(state.spent_s, 1),
                    "task": tuning.task.name,
                    "speedup": tuning.speedup,
                    "estimate": estimate,
                }
            )
            save_state(out, state)
            progress(_round_line(tuning, estimate, spent(), options))
    finally:
        db.close()
    name = f"{workload.name}_tuned"
    recipe = out / f"{workload.name}.tuned.yaml"
    model = ModelSpec(name, workload_spec, tuple(graph))
    kernels = _write_model_recipe(recipe, model, tunings, options)
    packed = None
    if packable(tunings):
        path = out / f"{workload.name}.packed.yaml"
        packed = (path, _write_model_recipe(path, model, tunings, options, packed=True))
    elapsed = time.monotonic() - start
    return TuneOutcome(
        tasks,
        tunings,
        recipe,
        spent(),
        kernels,
        elapsed,
        packed,
        graph_speedup,
        state.history,
        model,
        options,
    )


def _prepare(
    task: Task,
    model: ModelOps,
    sources: Mapping[str, str],
    weights: ModelConstants,
    folder: Path,
    o: TuneOptions,
) -> TaskTuning:
    """The task's workload and template recipe, or the reason it is not tuned. A task
    that may run packed (its root is a matmul) keeps the model's constant weights as
    constants (``weights``: the model's), so a pack of them leaves the timed call as it
    does in the model. A task that has a template from an earlier run into ``folder``
    is tuned whatever its share now: the profile is noisy, and a task near
    ``--min-share`` must not drop out of the model recipe on a re-run. Each kernel of
    the template matches its op alone in the model (:mod:`.task_match`). Where the main
    kernel's (IREE's root's) cannot, the task keeps IREE's pipeline (checked before
    compiling); a further kernel whose op cannot is left out, with the parameters only
    it used."""
    tuning = TaskTuning(task)
    recipe = folder / f"{task.name}.yaml"
    small = task.share is not None and task.share < o.min_share
    try:
        if small and not recipe.exists():
            tuning.reason = f"{_percent(task.share)} of the call, below --min-share"
            return tuning
        _match_at(task, anchor_position(task), model, by_kind=o.build.compile_target.is_gpu)
        if not recipe.exists():
            folder.mkdir(parents=True, exist_ok=True)
            constants = (
                weights.inputs(task.root.op, task.layers)
                if task.root.op in PACKABLE
                else frozenset()
            )
            made = standalone_task(
                task,
                [sources[d] for d in task.dispatches],
                folder / f"{task.name}.mlir",
                o.build.compile_target,
                constants,
            )
            template = _template(task, made.configured, o.build.compile_target)
            by_kind = template.match_by_kind
            matches = [_match_at(task, made.configured.root, model, by_kind)]
            kept = []
            for kernel in template.more_kernels:
                try:
                    matches.append(op_match(task, kernel.position, model, by_kind))
                    kept.append(kernel)
                except Ambiguous:
                    continue  # that op keeps the tile sizes IREE derives from the root's
            template = template.keeping(kept)
            write_atomically(recipe, _task_recipe(task, template, matches, o).encode())
    except (TaskSkipped, NoTemplate) as exc:
        tuning.reason = str(exc)
        return tuning
    tuning.recipe = recipe
    return tuning


def _template(task: Task, dispatch: ConfiguredDispatch, target: Target) -> Template:
    """The task's template on ``target``: Vulkan's config, or on x86 the row-reduction
    config where it fits, else the kernel schedule (:mod:`.templates`)."""
    if target.is_gpu:
        return vulkan_template(task, dispatch)
    if is_row_reduction(dispatch):
        return row_reduction_template(dispatch)
    return template_for(task, dispatch)


def _match_at(task: Task, position: int, model: ModelOps, by_kind: bool) -> dict[str, Any]:
    """The kernel match of ``task``'s op at ``position`` (``by_kind``: by its kind rather
    than its name); raises :class:`TaskSkipped` where none selects it alone."""
    try:
        return op_match(task, position, model, by_kind)
    except Ambiguous as exc:
        matched = "kind" if by_kind else "op"
        op = task.ops[position]
        raise TaskSkipped(
            f"the {matched} and loop bounds of its {op.describe()} also occur in task "
            f"{exc.other}, and neither its input count, the op using its result nor its body "
            "tells them apart: a kernel match would take both"
        ) from exc


def _task_recipe(
    task: Task, template: Template, matches: Sequence[Mapping[str, Any]], o: TuneOptions
) -> str:
    """The task's template recipe: ``matches`` holds the match of the template's main
    kernel (IREE's root), then one per kernel of ``template.more_kernels``."""
    root = task.root
    main = {
        "name": task.name,
        "match": dict(matches[0]),
        **({"when": template.kernel_when} if template.kernel_when else {}),
        **template.kernel_body(),
    }
    more = [
        {"name": f"{task.name}_{kernel.suffix}", "match": dict(match), "config": kernel.config}
        for kernel, match in zip(template.more_kernels, matches[1:], strict=True)
    ]
    document = {
        "name": f"task_{task.name}",
        "description": f"{task.kind} {root.describe()}: {', '.join(task.layers) or 'no layers'}",
        "workload": {"file": f"{task.name}.mlir"},
        "targets": [o.build.name],
        "parameters": template.parameters,
        "space": template.space,
        "constraints": template.constraints,
        "tolerance": TOLERANCE,
        **({"compile_flags": template.compile_flags} if template.compile_flags else {}),
        **({"graph": template.graph} if template.graph else {}),
        "kernels": [main, *more],
    }
    header = (
        f"# Written by tdsched tune: task {task.name} ({', '.join(task.epilogue) or 'no epilogue'}"
        " after its root). Edit it and tune again: an existing file is kept.\n"
    )
    return header + recipe_yaml(document)


def _next(tunings: list[TaskTuning]) -> TaskTuning | None:
    """The task to give the next round: an untried one (most time first), else the one
    with the largest expected gain."""
    open_ = [t for t in tunings if t.tunable]
    untried = [t for t in open_ if t.rounds == 0]
    if untried:
        return untried[0]
    return max(open_, key=TaskTuning.expected_gain_ms, default=None)


def _round(tuning: TaskTuning, db: ResultsDB, o: TuneOptions) -> None:
    """Sweep ``tuning``'s recipe with ``round_size`` more candidates."""
    assert tuning.recipe is not None
    before = tuning.speedup or 1.0
    sweep = Sweep(
        str(tuning.recipe),
        SweepOptions(
            build=o.build,
            strategy="adaptive",
            budget=tuning.candidates + o.round_size,
            seed=o.seed,
        ),
        db,
        make_executor(o.executor, o.jobs, ray_address=o.ray_address),
        o.jobs,
    )
    tuning.valid = len(sweep.enumeration.valid)
    started = time.monotonic()
    outcome = sweep.run()
    tuning.spent_s += time.monotonic() - started
    tuning.rounds += 1
    tuning.exhausted = len(outcome.results) <= tuning.candidates
    tuning.candidates = len(outcome.results)
    tuning.failed = len(outcome.failed)
    if outcome.raced and outcome.decision is not None:
        for standing in outcome.decision.race.standings:
            tuning.raced.setdefault(standing.key, []).append(round(standing.speedup.median, 4))
    ranked = outcome.ranked
    tuning.best = ranked[0] if ranked else None
    packed = [r for r in ranked if r.params.get("LAYOUT") == "packed"]
    tuning.best_packed = packed[0] if packed else None
    tuning.last_gain = (tuning.speedup or 1.0) / before - 1.0
    tuning.reason = None if tuning.best else _no_correct(tuning.candidates)
    if tuning.best is None:
        tuning.exhausted = tuning.rounds >= NO_CORRECT_ROUNDS


def _no_correct(candidates: int) -> str:
    return f"none of its {candidates} candidates built and checked"


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


def _write_model_recipe(
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


# -- progress lines -------------------------------------------------------------------


def _percent(share: float | None) -> str:
    return "-" if share is None else f"{share:.1%}"


def _tasks_line(tasks: ModelTasks, rewritten: bool) -> str:
    call = f"{tasks.call_ms.median:.3f} ms per call" if tasks.call_ms else "untimed"
    model = ", of the rewritten model" if rewritten else ""
    return f"tune: {len(tasks.tasks)} tasks (IREE default: {call}{model})"


def _prepared_line(t: TaskTuning, resumed: bool) -> str:
    what = f"{t.task.name} {t.task.kind} {t.task.root.describe()} ({_percent(t.task.share)})"
    if t.recipe is None:
        return f"tune: {what}: IREE's pipeline kept: {t.reason}"
    if resumed:
        best = f", best {t.speedup:.2f}x" if t.speedup else ""
        return f"tune: {what}: template {t.recipe}, resumed ({t.candidates} candidates{best})"
    return f"tune: {what}: template {t.recipe}"


def _round_line(t: TaskTuning, estimate: float | None, elapsed: float, o: TuneOptions) -> str:
    best = f"best {t.speedup:.2f}x" if t.speedup else "no correct candidate yet"
    est = f"; model estimate {estimate:.2f}x" if estimate else ""
    return (
        f"tune: [{_clock(elapsed)}/{_clock(o.budget_s)}] {t.task.name} "
        f"({_percent(t.task.share)}): {t.candidates}/{t.valid} candidates, {best}{est}"
    )


def _clock(seconds: float) -> str:
    return f"{int(seconds) // 60:02d}:{int(seconds) % 60:02d}"
