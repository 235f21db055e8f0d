"""``tdsched sweep``: evaluate a recipe's parameter space and record every candidate.

The sweep enumerates the space (pruning by constraints, reported), lets a strategy
propose batches, and for each proposed candidate plans it here (to get its content key),
reuses a recorded result when the database has one, else compiles it on the executor's
workers in parallel, then checks and times the compiled candidates one at a time with
no compile running (screening: a few rounds each, paired with IREE default). IREE's
default build is timed before the first candidate and again at the end (the drift
between the two says how much the machine changed), and the candidates that screening
cannot tell apart from the leader race each other (:mod:`.racing`) to decide the best.
Every outcome is recorded the moment it is known, so an interrupted sweep resumes where
it was.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import iree.compiler.version
from tdsched.targets.compiler import CompileError
from tdsched.targets.cpu_isa import cpu_description
from tdsched.targets.racing import Decision, RaceResult, RaceSettings, entrants
from tdsched.targets.timing import Interval
from tdsched.targets.workload import Workload, traffic_bytes
from tdsched.transform_lib.work import count_work_of_text

from ..base.errors import RecipeError, Where
from ..compile.build_target import RECIPE_DEFAULT, BuildTarget
from ..compile.pipeline import Plan, compile_unscheduled
from ..dsl.recipe import Recipe
from ..dsl.space import Enumeration, ParamValue, Point, SearchSpace
from ..frontends.loading import load
from ..frontends.recipe_trust import UNTRUSTED, Trust
from ..frontends.shipped import find_recipe
from ..measure.peers import IREE_PEERS, compile_error_line
from ..measure.request import Request
from ..measure.status import BUILD_FAILURES, Outcome
from .bundle import BundledBuild, read_results, write_bundle
from .candidates import baseline_key, content_key, plan_point, result_key
from .cost_model import Featurizer, LearnedModel, ModelGuided, learned_model_available
from .database import Result, ResultsDB, SweepWork, measured_by_others
from .database import drift as baseline_drift
from .distinct import distinct_builds
from .executor import Executor, WorkerError, WorkerFailure
from .incumbent import Incumbent, find_incumbent
from .messages import BenchJob, BenchOutcome, CompileJob, CompileOutcome, RaceJob, SweepContext
from .strategies import Evolutionary, Grid, RandomSample, Strategy
from .table import label

FIELD = 4
"""A race's field is up to this many times ``--race`` candidates (those screening cannot
separate from its leader); the race cuts it to ``--race`` after its first rounds."""


class SweepError(ValueError):
    """The sweep cannot go on (IREE default does not build or run here)."""


@dataclass(frozen=True)
class Imported:
    """A bench bundle's results file, read for the sweep ``id`` that wrote the bundle."""

    id: int
    data: dict[str, Any]


@dataclass(frozen=True)
class SweepOptions:
    """How to sweep (see ``tdsched sweep --help`` for each)."""

    build: BuildTarget = RECIPE_DEFAULT
    """What every candidate is built for (its target None: the recipe's first)."""
    fixed: dict[str, ParamValue] = field(default_factory=dict)
    strategy: str = "grid"
    cost_model: str = "auto"
    """adaptive: ``learned``, ``additive`` or ``auto`` (learned when scikit-learn is
    installed); :func:`resolve_cost_model` turns ``auto`` into one of the two."""
    samples: int = 20
    budget: float = 0.3
    """adaptive: candidates to evaluate, a count (>= 1) or a fraction of the valid ones."""
    seed: int = 0
    repeats: int = 5
    """Screening rounds per candidate (their samples last ``race.sample_s`` too)."""
    race: RaceSettings = field(default_factory=RaceSettings)
    """How the leaders race; ``race.keep`` go on after the first cut, and the field is up
    to ``FIELD * race.keep``."""
    rebench: bool = False
    resume: bool = False
    bench_during_compile: bool = False
    keep_temps: bool = False
    """Keep the build folder of every candidate the sweep compiles (``--keep-temps``;
    where: :meth:`Sweep._kept_folder`)."""
    trust: Trust = UNTRUSTED
    """What the command line granted the recipe file (:mod:`..recipe_trust`)."""
    deadline: float | None = None
    """A ``time.monotonic()`` instant past which no more candidates are compiled: they are
    compiled in waves of ``jobs``, a wave in flight finishes (and the first always runs),
    and what compiled is timed and raced (tune's rounds end with its budget). None: no
    deadline."""
    bundle: Path | None = None
    """Compile the candidates and write them as a bench bundle into this folder instead
    of timing them here (:mod:`.bundle`); the sweep stays open for ``imported``."""
    imported: Path | None = None
    """Record the results file of the bundle this sweep wrote (run elsewhere by its
    ``bench.py``), then finish the sweep as one timed here, without a race."""


@dataclass
class SweepOutcome:
    """What a sweep did and found."""

    sweep_id: int
    recipe: Recipe
    target: str
    enumeration: Enumeration
    results: list[Result]
    reused: int = 0
    compiled: int = 0
    timed: int = 0
    baseline_ms: dict[str, float] = field(default_factory=dict)
    elapsed_s: float = 0.0
    decision: Decision | None = None
    """The race that picked the best (None when no candidate was timed)."""
    raced: bool = False
    """Whether this run raced (else :attr:`decision` is the one an earlier run recorded)."""
    threads: int | None = None
    """x86 runtime threads the candidates were timed with (GPU targets ignore them)."""
    build_files: Path | None = None
    """With ``keep_temps``: the folder holding the build folder of each candidate compiled."""
    strategy: str = "grid"
    cost_model: str = "-"
    """The cost model of an adaptive sweep (``learned`` or ``additive``), else ``-``."""
    cut: bool = False
    """Whether the deadline stopped the sweep before its strategy had proposed all it
    would (the rest is left for a later sweep, never recorded as failed)."""
    incumbent: Incumbent | None = None
    """What the recipe runs at this shape without the sweep (None: not known, as for a
    sweep read back from the database)."""
    incumbent_key: str | None = None
    """The result key of the incumbent's candidate, once planned."""
    bundle: dict[str, Any] | None = None
    """With ``--bundle``: the bundle written (:func:`.bundle.write_bundle`'s record)."""
    device: dict[str, str] | None = None
    """With ``--import``: the machine and device the results were measured on."""
    peers: dict[str, Outcome] = field(default_factory=dict)
    """With ``--import``: IREE's other builds of the workload as the device measured them
    (their speedup over IREE default)."""

    def incumbent_line(self) -> str | None:
        """Where the recipe's own values ranked (:meth:`.Incumbent.line`)."""
        if self.incumbent is None:
            return None
        kept = self.decision is not None and self.decision.kept is not None
        return self.incumbent.line(self.ranked, self.incumbent_key, kept)

    @property
    def reused_from(self) -> dict[int, int]:
        """How many of the results each other sweep measured (this sweep reused them)."""
        return measured_by_others(self.results, self.sweep_id)

    @property
    def ranked(self) -> list[Result]:
        """Correct candidates, fastest first: those that raced (by their place), then the
        others by their screening speedup."""
        return rank(self.results, self.decision)

    @property
    def failed(self) -> list[Result]:
        return [r for r in self.results if not r.ok]

    @property
    def drift(self) -> float | None:
        """Relative change of IREE default's time from the start to the end."""
        return baseline_drift(self.baseline_ms)


def rank(results: list[Result], decision: Decision | None) -> list[Result]:
    """Correct candidates, best first: the race's standings (winner first; the recipe's
    own values first where the decision kept them), then the candidates that did not race
    by their screening speedup."""
    ok = [r for r in results if r.ok and r.speedup is not None]
    places = {s.key: s.place for s in decision.race.standings} if decision else {}
    if decision is not None and decision.kept is not None:
        places[decision.kept] = 0
    return sorted(ok, key=lambda r: (places.get(r.key, len(places) + 1), -(r.speedup or 0.0)))


Progress = Callable[[str, "SweepState"], None]
"""Called with an event (``reused``, ``compiled``, ``timed``, ``failed``, ``note``)."""


@dataclass
class SweepState:
    """Live counters for progress display."""

    planned: int
    done: int = 0
    failed: int = 0
    best: Result | None = None
    started: float = field(default_factory=time.monotonic)
    message: str = ""
    describe: Callable[[Result], str] = lambda result: result.key
    """A candidate by the swept parameters its build reads (set by the sweep)."""

    def eta_s(self) -> float | None:
        if not self.done:
            return None
        rate = (time.monotonic() - self.started) / self.done
        return rate * max(0, self.planned - self.done)


COST_MODELS = ("auto", "learned", "additive")


def resolve_cost_model(options: SweepOptions) -> SweepOptions:
    """``options`` with the cost model it will use: ``learned`` for ``--strategy model``,
    ``auto`` made ``learned`` or ``additive`` by whether scikit-learn imports; ``-`` for
    strategies without one."""
    if options.strategy == "model":
        return replace(options, cost_model="learned")
    if options.strategy != "adaptive":
        return replace(options, cost_model="-")
    if options.cost_model != "auto":
        return options
    return replace(options, cost_model="learned" if learned_model_available() else "additive")


def make_strategy(
    options: SweepOptions,
    enumeration: Enumeration,
    space: SearchSpace,
    jobs: int,
    defaults: dict[str, ParamValue],
    prior: list[tuple[dict[str, Any], float | None]],
    first: Sequence[Point] = (),
) -> Strategy:
    """The strategy ``options.strategy`` names, over the valid candidates (``defaults``:
    every parameter's value unless swept; ``prior``: recorded results of this recipe on
    this target, for the learned cost model; ``first``: what a sampling strategy
    evaluates before any other). ``options.cost_model`` is resolved."""
    points = enumeration.valid
    if options.strategy == "grid":
        return Grid(points)
    if options.strategy == "random":
        return RandomSample(points, options.samples, options.seed, first)
    budget = options.budget
    count = int(budget) if budget >= 1 else max(1, round(budget * len(points)))
    batch = max(2, 2 * jobs)
    features = Featurizer(enumeration.names, defaults)
    if options.strategy == "adaptive":
        axes = [a.values for a in space.axes if a.name in enumeration.names]
        model = LearnedModel(features, prior) if options.cost_model == "learned" else None
        return Evolutionary(
            points, axes, count, options.seed, batch=batch, model=model, first=first
        )
    if options.strategy == "model":
        return ModelGuided(points, features, count, options.seed, batch, prior, first)
    raise ValueError(f"unknown strategy {options.strategy!r}; use grid, random, adaptive or model")


class Sweep:
    """One sweep of one recipe on one target (see the module docstring)."""

    def __init__(
        self,
        recipe_spec: str,
        options: SweepOptions,
        db: ResultsDB,
        executor: Executor,
        jobs: int,
        progress: Progress | None = None,
    ) -> None:
        self.path = find_recipe(recipe_spec)
        self.recipe = load(str(self.path), options.trust)
        self.db = db
        self.executor = executor
        self.progress = progress or (lambda event, state: None)
        self.options = options = resolve_cost_model(options)
        if (options.bundle or options.imported) and options.strategy not in ("grid", "random"):
            raise SweepError(
                f"--bundle and --import take --strategy grid or random, not {options.strategy}: "
                "the other strategies choose each batch from the times of the batch before"
            )
        self.build = options.build.resolved(self.recipe.targets[0])
        """What the candidates are built for, the target known."""
        self.target = self.build.name
        self.space = _narrowed(self.recipe, options.fixed)
        built_for = self.build.machine
        defaults = {**self.recipe.parameter_dict, **options.fixed}
        on_cpu = self.build.cpu_threads
        self.enumeration = distinct_builds(
            self.recipe,
            self.space.enumerate(defaults, self.build.build_values()),
            options.fixed,
            self.target,
            on_cpu,
            built_for,
        )
        if not self.enumeration.valid:
            raise RecipeError(
                Where(self.recipe.source, None, "constraints"),
                "every candidate was pruned:\n" + "\n".join(self.enumeration.pruning_lines()),
            )
        self.context = SweepContext(
            Request(
                recipe=str(self.path.resolve()),
                build=self.build,
                params=dict(options.fixed),
                seed=options.seed,
                trust=options.trust,
            ),
            repeats=options.repeats,
            sample_s=options.race.sample_s,
        )
        prior = [
            (r.params, r.speedup if r.ok else None)
            for r in (db.results() if options.cost_model == "learned" else ())
            if r.recipe == self.recipe.name and r.target == self.target
        ]
        self.prior = len(prior)
        """Recorded results of this recipe and target the learned cost model starts from."""
        self.incumbent = find_incumbent(
            self.recipe, self.enumeration, options.fixed, self.target, on_cpu, built_for
        )
        """What the recipe runs at this shape without the sweep (evaluated first)."""
        first = [] if self.incumbent.point is None else [self.incumbent.point]
        self.strategy = make_strategy(
            options, self.enumeration, self.space, jobs, defaults, prior, first
        )
        names, ignored = self.enumeration.names, self.enumeration.ignored
        self.state = SweepState(self.strategy.planned, describe=lambda r: label(r, names, ignored))
        self._keys: dict[Point, str] = {}
        self._workload: Workload | None = None
        self._compile_s: dict[str, float] = {}
        self.jobs = jobs
        self.chunk = max(8, 2 * jobs)
        """Candidates compiled before the timing of that group: large enough to keep every
        compile worker busy, small enough that results (and best-so-far) come steadily."""
        self._artifacts: dict[str, Path] = {}
        """result key → the compiled candidate (shared by keys that differ in threads)."""
        self._bundled: list[BenchJob] = []
        """With ``--bundle``: the compiled candidates that go into it."""

    # -- planning -------------------------------------------------------------------

    def _key(self, point: Point) -> str:
        if point not in self._keys:
            p = plan_point(self.recipe, self.context, self.enumeration.as_params(point))
            if self._workload is None:
                self._workload = p.workload
                artifact = self.db.artifacts / f"baseline-{baseline_key(p)}.vmfb"
                self.context = replace(self.context, baseline_artifact=str(artifact))
            elif p.workload.mlir != self._workload.mlir:
                raise RecipeError(
                    Where(self.recipe.source, None, "space"),
                    "a swept parameter changes the workload; a sweep compares schedules of "
                    "one workload. Fix workload parameters with --param NAME=VALUE",
                )
            build = content_key(p)
            threads = None if p.target.is_gpu else self.build.threads
            self._keys[point] = result_key(build, threads)
            self._artifacts[self._keys[point]] = self.db.artifacts / f"{build}.vmfb"
        return self._keys[point]

    @property
    def cost_model_line(self) -> str | None:
        """What orders the candidates, for strategies with a cost model."""
        o = self.options
        if o.cost_model == "learned":
            return (
                f"{o.strategy}: the learned cost model orders the candidates; it starts from "
                f"{self.prior} recorded results of {self.recipe.name} on {self.target}"
            )
        if o.cost_model == "additive":
            line = "adaptive: the additive cost model ranks its proposals"
            if not learned_model_available():
                line += "; pip install 'tdsched[model]' for the learned one, which also "
                line += "learns from the database"
            return line
        return None

    def signature(self) -> str:
        """What identifies this sweep for --resume: recipe, target, strategy, space."""
        o = self.options
        material = {
            "recipe": str(self.path.resolve()),
            "text": hashlib.sha256(self.path.read_bytes()).hexdigest(),
            "target": self.target,
            "fixed": o.fixed,
            "strategy": [o.strategy, o.samples, o.budget, o.seed]
            + ([o.cost_model] if o.strategy == "adaptive" else []),
            "valid": len(self.enumeration.valid),
        }
        return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:24]

    # -- running --------------------------------------------------------------------

    def run(self) -> SweepOutcome:
        start = time.monotonic()
        imported = self._read_import() if self.options.imported else None
        sweep_id = imported.id if imported else self._open()
        o = self.options
        outcome = SweepOutcome(
            sweep_id,
            self.recipe,
            self.target,
            self.enumeration,
            [],
            threads=self.build.threads,
            strategy=o.strategy,
            cost_model=o.cost_model,
        )
        outcome.build_files = self._kept_folder(sweep_id)
        outcome.incumbent = self.incumbent
        history: dict[Point, float | None] = {}
        self._key(self.enumeration.valid[0])  # fixes the workload and the baseline's path
        if self.incumbent.point is not None:
            outcome.incumbent_key = self._key(self.incumbent.point)
        if self.db.sweep(sweep_id).work is None:
            assert self._workload is not None
            self.db.record_work(sweep_id, _work(self._workload))
        if imported:
            self._record_import(imported.data, outcome)
        else:
            self._compile_and_time(sweep_id, history, outcome)
        if self.options.bundle is None:
            self.db.finish_sweep(sweep_id)
        outcome.results = self.db.results(sweep_id)
        outcome.baseline_ms = self.db.baselines(sweep_id) or outcome.baseline_ms
        recorded = self.db.sweep(sweep_id).decision
        outcome.decision = Decision.from_dict(recorded) if recorded else None
        outcome.elapsed_s = time.monotonic() - start
        return outcome

    def _compile_and_time(
        self, sweep_id: int, history: dict[Point, float | None], outcome: SweepOutcome
    ) -> None:
        """Propose, compile and time (or, with ``--bundle``, write the bundle) batch by
        batch, then race the leaders."""
        self.executor.start(self.context)
        try:
            while not outcome.cut and (batch := self.strategy.propose(history)):
                for start_at in range(0, len(batch), self.chunk):
                    chunk = batch[start_at : start_at + self.chunk]
                    self._evaluate(chunk, sweep_id, history, outcome)
                    if self._past_deadline():
                        outcome.cut = True
                        break
            if self.options.bundle is not None:
                self._write_bundle(sweep_id, outcome)
            elif outcome.timed or self.db.sweep(sweep_id).decision is None:
                # A resumed sweep may have been stopped in its race, after every candidate
                # was recorded: finish it, never report a best that did not race.
                outcome.raced = self._finish_timing(sweep_id, outcome.incumbent_key)
        finally:
            self.executor.close()

    def _write_bundle(self, sweep_id: int, outcome: SweepOutcome) -> None:
        """The compiled candidates, IREE default's build and the reference as a bench
        bundle in ``options.bundle``, recorded with the sweep (which stays open)."""
        assert self.options.bundle is not None
        if not self._bundled:
            raise SweepError("no candidate compiled, so there is nothing to bundle")
        self._default_built()
        ignored = {key: self.enumeration.ignored.get(p, ()) for p, key in self._keys.items()}
        builds = [
            BundledBuild(
                j.key,
                j.params,
                Path(j.artifact),
                self._compile_s.get(j.key),
                {k: v for k, v in j.params.items() if k not in ignored.get(j.key, ())},
            )
            for j in self._bundled
        ]
        origin = {
            "recipe": self.recipe.name,
            "target": self.target,
            "sweep": sweep_id,
            "database": str(self.db.path.resolve()),
        }
        plan = plan_point(self.recipe, self.context, {})
        baseline = Path(self.context.baseline_artifact)
        peers = self._peer_builds(plan)
        bundled = {b.key for b in builds}
        race = {
            **dataclasses.asdict(self.options.race),
            "field": FIELD * self.options.race.keep,
            "incumbent": outcome.incumbent_key if outcome.incumbent_key in bundled else None,
        }
        record = write_bundle(
            self.options.bundle, builds, baseline, plan, self.context, origin, race, peers
        )
        self.db.record_bundle(sweep_id, record)
        outcome.bundle = record

    def _peer_builds(self, plan: Plan) -> dict[str, Path]:
        """IREE's other builds of the workload for a bundle (x86: data tiling, with and
        without microkernels), beside the sweep's artifacts; one that does not build is
        left out, with a note."""
        if plan.target.is_gpu:
            return {}
        peers = {}
        for name, flags in IREE_PEERS.items():
            try:
                built = compile_unscheduled(plan, self.db.artifacts, name, flags)
            except CompileError as exc:
                self._note(
                    f"bundle: IREE's {name} build failed, left out: {compile_error_line(exc)}"
                )
                continue
            peers[name] = Path(built.output)
        return peers

    def _read_import(self) -> Imported:
        """The results file ``options.imported``, checked against the sweep it names: one
        this database holds, still open, with this command's recipe and options, and the
        bundle that sweep wrote."""
        assert self.options.imported is not None
        data = read_results(self.options.imported, self.db)
        sweep = self.db.sweep(data["origin"]["sweep"])
        if sweep.signature != self.signature():
            raise SweepError(
                f"--import {self.options.imported}: these are results of sweep {sweep.id} "
                f"({sweep.recipe} on {sweep.target}, {sweep.strategy}), which this command "
                "does not describe: give --import the recipe and options of the --bundle "
                "command"
            )
        if sweep.status == "done":
            raise SweepError(
                f"--import {self.options.imported}: sweep {sweep.id} is finished (its results "
                "were imported already); 'tdsched report' shows it"
            )
        return Imported(sweep.id, data)

    def _record_import(self, data: dict[str, Any], outcome: SweepOutcome) -> None:
        """Record each build's outcome from the results ``data`` and IREE default's
        times, as a sweep records what it timed, and the device they were measured on."""
        sweep_id = outcome.sweep_id
        recorded = self.db.bundle(sweep_id)
        assert recorded is not None
        builds = recorded["builds"]
        for entry in data["results"]:
            key, build = entry["key"], builds[entry["key"]]
            self._compile_s[key] = build["compile_s"]
            job = BenchJob(key, build["params"], build["artifact"])
            measured = BenchOutcome(key, Outcome.from_dict(entry["outcome"]), entry["timing_s"])
            result = self._bench_result(job, measured)
            self.db.record(result, sweep_id)
            outcome.timed += 1
            self._done("timed" if result.ok else "failed", result)
        for phase, timing in data["baseline"].items():
            self.db.record_baseline(sweep_id, phase, timing)
        raced = data.get("race")
        if raced is not None:
            race = RaceResult.from_dict(raced["result"])
            self._record_race(sweep_id, race, raced["left_out"], recorded.get("incumbent"))
            outcome.raced = True
        outcome.device = data["device"]
        outcome.peers = {
            name: Outcome.from_dict(found) for name, found in data.get("peers", {}).items()
        }
        peers = data.get("peers", {})
        self.db.record_bundle(sweep_id, {**recorded, "device": data["device"], "peers": peers})
        work = self.db.sweep(sweep_id).work
        if work is not None and data["device"]["driver"] in ("local-task", "local-sync"):
            # the CPU the candidates ran on bounds them (report's roofline), not this one
            self.db.record_work(sweep_id, replace(work, machine=data["device"]["cpu"]))

    def _past_deadline(self) -> bool:
        deadline = self.options.deadline
        return deadline is not None and time.monotonic() >= deadline

    def _compiled(self, jobs: list[CompileJob]) -> Iterator[CompileOutcome]:
        """``jobs`` compiled by the executor: all at once, or with a deadline in waves of
        ``jobs`` workers, none started once it has passed but the first (the run loop
        stops after this chunk: a sweep that started compiles at least one wave)."""
        if self.options.deadline is None:
            yield from self.executor.compile(jobs)
            return
        for start_at in range(0, len(jobs), self.jobs):
            if start_at and self._past_deadline():
                return
            yield from self.executor.compile(jobs[start_at : start_at + self.jobs])

    def _kept_folder(self, sweep_id: int) -> Path | None:
        """With ``keep_temps``, where the candidates' build folders go: beside the
        compiled artifacts, ``DB.artifacts/builds/sweep<ID>`` (absolute: workers on this
        machine write there whatever their folder)."""
        if not self.options.keep_temps:
            return None
        return self.db.artifacts.resolve() / "builds" / f"sweep{sweep_id}"

    def _open(self) -> int:
        signature = self.signature()
        if self.options.resume:
            previous = self.db.unfinished_sweep(signature)
            if previous is not None:
                self._note(f"resuming sweep {previous.id}")
                return previous.id
            self._note("no interrupted sweep of this recipe and space to resume; starting one")
        return self.db.start_sweep(
            recipe=self.recipe.name,
            source=str(self.path),
            target=self.target,
            strategy=self.strategy.name,
            signature=signature,
            options={
                **recorded_options(self.options),
                "iree_version": iree.compiler.version.VERSION,
            },
            space={
                "names": list(self.enumeration.names),
                "total": self.enumeration.total,
                "valid": len(self.enumeration.valid),
                "pruned": [list(p) for p in self.enumeration.pruned],
                "ignored": [
                    {"point": list(point), "names": list(names)}
                    for point, names in self.enumeration.ignored.items()
                ],
            },
        )

    def _evaluate(
        self,
        batch: list[Point],
        sweep_id: int,
        history: dict[Point, float | None],
        outcome: SweepOutcome,
    ) -> None:
        """Reuse, compile (in parallel) and then time (one by one) a batch.

        Points that build the same module (parameters a ``when`` left unused) share one
        key: the first is compiled and timed, the others reuse its result."""
        jobs: list[CompileJob] = []
        ready: list[BenchJob] = []
        points: dict[str, Point] = {}
        same_build: list[Point] = []
        for point in batch:
            params = self.enumeration.as_params(point)
            key = self._key(point)
            if key in points:
                same_build.append(point)
                continue
            points[key] = point
            recorded = self.db.result(key)
            if recorded is not None and self._reusable(recorded):
                self.db.link(sweep_id, key)
                history[point] = recorded.speedup if recorded.ok else None
                outcome.reused += 1
                self._done("reused", recorded)
                continue
            artifact = self._artifacts[key]
            if artifact.is_file():
                ready.append(BenchJob(key, params, str(artifact)))
            else:
                kept = outcome.build_files
                folder = str(kept / build_folder_name(params)) if kept else None
                jobs.append(CompileJob(key, params, str(artifact), folder))
        self.db.artifacts.mkdir(parents=True, exist_ok=True)
        for compiled in self._compiled(jobs):
            outcome.compiled += 1
            self._compile_s[compiled.key] = compiled.seconds
            job = next(j for j in jobs if j.key == compiled.key)
            if compiled.status != "ok":
                result = self._failed_compile(job, compiled)
                self.db.record(result, sweep_id)
                history[points[job.key]] = None
                self._done("failed", result)
            elif self.options.bench_during_compile and self.options.bundle is None:
                self._time(
                    BenchJob(job.key, job.params, job.artifact), sweep_id, history, points, outcome
                )
            else:
                ready.append(BenchJob(job.key, job.params, job.artifact))
        for bench in ready:
            if self.options.bundle is not None:
                self._bundled.append(bench)  # timed on the device, from the bundle
                history[points[bench.key]] = None
            else:
                self._time(bench, sweep_id, history, points, outcome)
        for point in same_build:
            key = self._keys[point]
            history[point] = history[points[key]]
            outcome.reused += 1
            recorded = self.db.result(key)
            if recorded is not None:
                self._done("reused", recorded)

    def _reusable(self, recorded: Result) -> bool:
        """Whether a recorded result stands: always, unless --rebench asks to time again or
        the candidates go into a bundle, to be timed on another device (a candidate that
        failed to compile stays failed: compiles are deterministic)."""
        again = self.options.rebench or self.options.bundle is not None
        return not again or recorded.status in BUILD_FAILURES

    def _time(
        self,
        job: BenchJob,
        sweep_id: int,
        history: dict[Point, float | None],
        points: dict[str, Point],
        outcome: SweepOutcome,
    ) -> None:
        self._default_built()
        measured = self.executor.bench(job)
        base = measured.outcome.baseline
        if base is not None and "start" not in outcome.baseline_ms:
            if "start" not in self.db.baselines(sweep_id):  # a resumed sweep keeps its own
                self.db.record_baseline(sweep_id, "start", base.as_dict())
            outcome.baseline_ms = self.db.baselines(sweep_id)
        result = self._bench_result(job, measured)
        self.db.record(result, sweep_id)
        outcome.timed += 1
        history[points[job.key]] = result.speedup if result.ok else None
        self._done("timed" if result.ok else "failed", result)

    def _default_built(self) -> None:
        """Compile IREE's default build before the first candidate is timed."""
        if not Path(self.context.baseline_artifact).is_file():
            built = self.executor.compile_default()
            if built.status != "ok":
                raise SweepError(f"IREE's default build of the workload failed: {built.error}")

    def _time_default(self) -> dict[str, Any]:
        """IREE default's timing; a sweep cannot go on without it."""
        try:
            return self.executor.time_baseline()
        except (WorkerError, WorkerFailure) as exc:
            raise SweepError(
                f"IREE's default build could not be run on {self.target}: {exc}"
            ) from exc

    def _finish_timing(self, sweep_id: int, incumbent: str | None) -> bool:
        """IREE default again (drift), then the race of the candidates screening could not
        tell apart from the leader, and of the ``incumbent`` (the result key of the
        recipe's own values, when correct), which the decision keeps where nothing raced
        was shown faster; False when no candidate could race."""
        results = self.db.results(sweep_id)
        screened = [
            (r.key, screening_interval(r))
            for r in results
            if r.ok and r.speedup and r.artifact and Path(r.artifact).is_file()
        ]
        if not screened:
            return False
        self._default_built()
        self.db.record_baseline(sweep_id, "end", self._time_default())
        settings = self.options.race
        racing, left_out = entrants(screened, FIELD * settings.keep, incumbent)
        artifacts = {r.key: str(r.artifact) for r in results if r.key in racing}
        self._note(
            f"racing {len(racing)} candidates against each other and IREE default (the best "
            f"{min(len(racing), settings.keep)} go on after {settings.min_rounds} rounds)"
        )
        race = self.executor.race(RaceJob(artifacts, dataclasses.asdict(settings)))
        self._record_race(sweep_id, race, left_out, incumbent)
        return True

    def _record_race(
        self, sweep_id: int, race: RaceResult, left_out: list[str], incumbent: str | None
    ) -> None:
        """The race's standings and the decision it gives (keeping the ``incumbent`` where
        nothing raced was shown faster)."""
        for standing in race.standings:
            self.db.record_raced(sweep_id, standing.key, standing.speedup.median)
        screening_s = sum(r.timing_s or 0.0 for r in self.db.results(sweep_id))
        kept = Decision.keeping(race, incumbent)
        decision = Decision(race, tuple(left_out), screening_s, kept)
        self.db.record_decision(sweep_id, decision.as_dict())

    # -- records --------------------------------------------------------------------

    def _failed_compile(self, job: CompileJob, compiled: CompileOutcome) -> Result:
        return Result(
            key=job.key,
            recipe=self.recipe.name,
            target=self.target,
            params={**self.options.fixed, **job.params},
            status=compiled.status,
            error=compiled.error,
            compile_s=compiled.seconds,
            iree_version=iree.compiler.version.VERSION,
        )

    def _bench_result(self, job: BenchJob, measured: BenchOutcome) -> Result:
        found = measured.outcome
        timing, base, speedup = found.timing, found.baseline, found.speedup
        return Result(
            key=job.key,
            recipe=self.recipe.name,
            target=self.target,
            params={**self.options.fixed, **job.params},
            status=found.status,
            time_ms=timing.median if timing else None,
            timing=timing.as_dict() if timing else None,
            baseline_ms=base.median if base else None,
            speedup=speedup.median if speedup else None,
            speedup_low=speedup.low if speedup else None,
            speedup_high=speedup.high if speedup else None,
            timing_s=measured.timing_s,
            max_abs_error=found.check.max_abs_error,
            error=found.check.error,
            compile_s=self._compile_s.get(job.key),
            artifact=job.artifact,
            iree_version=iree.compiler.version.VERSION,
        )

    def _done(self, event: str, result: Result) -> None:
        state = self.state
        state.done += 1
        if not result.ok:
            state.failed += 1
        elif result.speedup and (state.best is None or result.speedup > (state.best.speedup or 0)):
            state.best = result
        self.progress(event, state)

    def _note(self, message: str) -> None:
        self.state.message = message
        self.progress("note", self.state)


def _work(workload: Workload) -> SweepWork:
    """What ``workload`` does, for GFLOP/s and the roofline of ``tdsched report``."""
    work = count_work_of_text(workload.mlir)
    return SweepWork(work.ops, list(work.uncounted), traffic_bytes(workload), cpu_description())


def screening_interval(result: Result) -> Interval:
    """A result's screening speedup and interval (a point for results recorded before
    intervals were)."""
    speedup = result.speedup or 0.0
    low = result.speedup_low if result.speedup_low is not None else speedup
    high = result.speedup_high if result.speedup_high is not None else speedup
    return Interval(speedup, low, high)


def build_folder_name(params: dict[str, Any]) -> str:
    """A candidate's kept build folder, named by its swept parameters as the ranked table
    shows them: ``TM=32,TN=128`` (characters a file name should not hold become ``_``)."""
    name = ",".join(f"{name}={value}" for name, value in params.items())
    return re.sub(r"[^A-Za-z0-9._=,+-]", "_", name) or "candidate"


def _narrowed(recipe: Recipe, fixed: dict[str, ParamValue]) -> SearchSpace:
    """The recipe's space without the axes that --param fixes; an error when none is left."""
    if not recipe.space.axes:
        raise RecipeError(
            Where(recipe.source, None, "space"),
            "this recipe declares no 'space' to sweep; add one, e.g. "
            "space: {TM: [32, 64, 128], TN: {pow2: [32, 256]}} (see docs/commands/sweep.md)",
        )
    axes = tuple(a for a in recipe.space.axes if a.name not in fixed)
    if not axes:
        raise RecipeError(
            Where(recipe.source, None, "space"),
            "--param fixes every swept parameter; leave at least one to sweep",
        )
    return SearchSpace(axes, recipe.space.constraints)


def recorded_options(options: SweepOptions) -> dict[str, Any]:
    """The options as the database records them: the build's settings (target, cpu,
    cpu_features, gpu, threads) at the top level, as every sweep has recorded them (the
    deadline, an instant of this process's clock, is not recorded, nor the bundle's
    folder and results file: the database records the bundle itself)."""
    data = dataclasses.asdict(options)
    for local in ("deadline", "bundle", "imported"):
        data.pop(local)
    return {**data.pop("build"), **data}
