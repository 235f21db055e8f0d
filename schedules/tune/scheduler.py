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
   stopped improving yields to the others). The budget is wall time of the whole
   command (:mod:`.budget`): the sweeps get what the steps before them took and the
   steps after them are estimated to take leave. Each untried task's first round gets
   an equal share of that (at least one wave of compiles), a later round never starts
   once it is spent, and a round compiles no candidate past its share (compiles in
   flight finish; what compiled is timed and raced). A
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
each round and when the command ends): re-running a finished tune sweeps nothing, a
larger budget spends only the difference, and a tune stopped at any point loses only
the round in flight, whose candidates already recorded in the database are reused
without compiling or timing them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tdsched.targets.workload import Workload
from tdsched.transform_lib.census import census_functions, read_census
from tdsched.transform_lib.constant_operands import ModelConstants

from ..base.errors import RecipeError
from ..compile.pipeline import census_output
from ..sweep.database import ResultsDB
from ..sweep.executors import make_executor
from ..sweep.runner import Sweep, SweepOptions
from .budget import Budget
from .model_recipe import ModelSpec, packable, write_model_recipe
from .outcome import TuneOutcome, estimated_speedup
from .prepare import prepare
from .progress import clock, prepared_line, round_line, tasks_line
from .state import load_state, save_state
from .task_match import ModelOps
from .tasks import extract_tasks
from .tuning import NO_CORRECT_ROUNDS, TaskTuning, TuneOptions, no_correct

Progress = Callable[[str], None]


def tune(
    workload: Workload,
    workload_spec: Mapping[str, Any],
    out: Path,
    options: TuneOptions,
    progress: Progress,
    budget: Budget,
    graph: Sequence[Mapping[str, Any]] = (),
    graph_speedup: float = 1.0,
) -> TuneOutcome:
    """Tune ``workload`` (written into the model recipe as ``workload_spec``, paths
    relative to ``out``) into ``out``; see the module docstring. ``budget``: started
    with the command (its ``total_s`` is ``options.budget_s``); ``graph``: the steps
    that made ``workload`` from the model ``workload_spec`` names (they start every model
    recipe), ``graph_speedup`` what they gave IREE's own pipeline."""
    target = options.build.compile_target
    threads = options.build.cpu_threads
    census = census_output(workload.mlir, target)
    profile_started = time.monotonic()
    tasks = extract_tasks(
        workload, target, threads, rounds=options.rounds, seed=options.seed, census=census
    )
    profile_s = time.monotonic() - profile_started
    progress(tasks_line(tasks, bool(graph)))
    identity = {"model": workload.name, "target": target.name, "threads": threads}
    # absent where not asked for, so earlier states still hold
    if options.build.gpu is not None:
        identity["gpu"] = options.build.gpu
    if not target.is_gpu and (options.build.cpu, options.build.cpu_features) != ("host", None):
        identity["cpu"] = options.build.cpu
        identity["cpu_features"] = options.build.cpu_features
    state, set_aside = load_state(out, identity)
    if set_aside:
        progress(f"tune: {set_aside}")
    sources = census_functions(census)
    weights = ModelConstants(workload.mlir)  # parsed only if a new task template needs it
    model_ops = ModelOps.of(read_census(census), tasks.tasks)
    tunings = [prepare(t, model_ops, sources, weights, out / "tasks", options) for t in tasks.tasks]
    for prepared in tunings:
        resumed = prepared.resume(state.tasks.get(prepared.task.name))
        progress(prepared_line(prepared, resumed))
    budget.before_s = state.spent_s
    budget.plan(profile_s, state.after_per_profile())
    if budget.before_s:
        progress(
            f"tune: resumed, {clock(budget.before_s)} of the {clock(options.budget_s)} budget spent"
        )
    progress(budget.plan_line(sum(t.tunable for t in tunings), options.jobs))
    db = ResultsDB(out / "tune.db")
    try:
        while (tuning := _next(tunings)) is not None:
            untried = sum(t.tunable and t.rounds == 0 for t in tunings)
            # a task's first round is owed only by a run given budget of its own: a re-run
            # with the budget spent sweeps nothing, a task templated since included
            if budget.over() and (not untried or budget.before_s >= budget.total_s):
                break
            _round(tuning, db, options, budget.round_end(untried))
            state.spent_s = budget.spent()
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
            progress(round_line(tuning, estimate, budget.spent(), options))
    finally:
        db.close()
    state.spent_s = budget.spent()
    save_state(out, state)
    name = f"{workload.name}_tuned"
    recipe = out / f"{workload.name}.tuned.yaml"
    model = ModelSpec(name, workload_spec, tuple(graph))
    kernels = write_model_recipe(recipe, model, tunings, options)
    packed = None
    if packable(tunings):
        path = out / f"{workload.name}.packed.yaml"
        packed = (path, write_model_recipe(path, model, tunings, options, packed=True))
    return TuneOutcome(
        tasks,
        tunings,
        recipe,
        budget.spent(),
        kernels,
        budget.elapsed(),
        packed,
        graph_speedup,
        state.history,
        model,
        options,
    )


def _next(tunings: list[TaskTuning]) -> TaskTuning | None:
    """The task to give the next round: an untried one (most time first), else the one
    with the largest expected gain."""
    open_ = [t for t in tunings if t.tunable]
    untried = [t for t in open_ if t.rounds == 0]
    if untried:
        return untried[0]
    return max(open_, key=TaskTuning.expected_gain_ms, default=None)


def _round(tuning: TaskTuning, db: ResultsDB, o: TuneOptions, deadline: float | None) -> None:
    """Sweep ``tuning``'s recipe with ``round_size`` more candidates, compiling none past
    ``deadline`` (a ``time.monotonic()`` instant: the end of the budget; None: none)."""
    assert tuning.recipe is not None
    before = tuning.speedup or 1.0
    try:
        sweep = Sweep(
            str(tuning.recipe),
            SweepOptions(
                build=o.build,
                strategy="adaptive",
                budget=tuning.candidates + o.round_size,
                seed=o.seed,
                deadline=deadline,
            ),
            db,
            make_executor(o.executor, o.jobs, ray_address=o.ray_address),
            o.jobs,
        )
    except RecipeError as exc:
        # A template (written by tune or edited by the user) with nothing to sweep, e.g.
        # constraints that prune every point: that task keeps IREE's pipeline and says
        # why; the other tasks are tuned all the same.
        tuning.exhausted = True
        tuning.reason = f"its template has no candidate to sweep ({str(exc).splitlines()[0]})"
        return
    tuning.valid = len(sweep.enumeration.valid)
    started = time.monotonic()
    outcome = sweep.run()
    tuning.spent_s += time.monotonic() - started
    tuning.rounds += 1
    # a round the budget cut short says nothing of what is left to try
    tuning.exhausted = not outcome.cut and len(outcome.results) <= tuning.candidates
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
    tuning.reason = None if tuning.best else no_correct(tuning.candidates)
    if tuning.best is None:
        tuning.exhausted = tuning.rounds >= NO_CORRECT_ROUNDS
