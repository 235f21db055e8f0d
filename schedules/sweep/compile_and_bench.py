"""Compiling and benchmarking candidates: the work a sweep's workers do, in whichever
process runs them (a :mod:`.local_worker` child or a Ray task/actor).

:func:`compile_candidate` builds one candidate with the same pipeline as ``tdsched
compile`` (every schedule step must apply), in a temporary folder or, with ``--keep-temps``,
in the build folder it keeps (:mod:`..build_folders`); :class:`Bench` checks a compiled candidate
against the reference on seeded random inputs and times it, and times IREE's default
build. Both turn failures into outcomes; only a crash or a hang escapes them, and the
executor running them isolates those.
"""

from __future__ import annotations

import functools
import tempfile
import time
from pathlib import Path

from tdsched.targets.racing import BASELINE, RaceResult, RaceSettings, run_race
from tdsched.targets.runtime import LoadedModule
from tdsched.targets.timing import RoundTimer, Timing, speedup, time_interleaved

from ..base.files import write_atomically
from ..compile.build_folders import (
    EXECUTABLES,
    build_folder,
    with_executable_dumps,
    write_compile_script,
)
from ..compile.pipeline import Plan, build, compile_baseline, compile_plan, scheduled_command
from ..dsl.recipe import Recipe
from ..dsl.space import ParamValue
from ..frontends.loading import load
from ..frontends.recipe_trust import Trust
from ..measure.evaluation import EVALUATION_ERRORS, Reference, prepare_device, status_of
from ..measure.status import Check, Outcome, Status
from .candidates import plan_point
from .faults import inject
from .messages import BenchJob, BenchOutcome, CompileJob, CompileOutcome, RaceJob, SweepContext


def plan_candidate(context: SweepContext, params: dict[str, ParamValue]) -> Plan:
    """The plan of one candidate (the recipe file is read once per process)."""
    request = context.request
    recipe = _load(request.recipe, Path(request.recipe).stat().st_mtime, request.trust)
    return plan_point(recipe, context, params)


@functools.lru_cache(maxsize=4)
def _load(path: str, mtime: float, trust: Trust) -> Recipe:
    return load(path, trust)


CANDIDATE = "candidate.vmfb"
"""The compiled candidate's name in its build folder."""


def compile_candidate(context: SweepContext, job: CompileJob) -> CompileOutcome:
    """Build ``job``'s candidate into ``job.artifact`` (in ``job.build_dir`` when it is
    to be kept, else in a temporary folder); failures become an outcome."""
    start = time.perf_counter()
    inject("compile", job.params)
    try:
        p = plan_candidate(context, job.params)
        kept = Path(job.build_dir) if job.build_dir else None
        with build_folder(kept, "tdsched-sweep-") as folder:
            built = _build(p, folder, keep=kept is not None)
            write_atomically(Path(job.artifact), built.read_bytes())
    except EVALUATION_ERRORS as exc:
        return CompileOutcome(job.key, status_of(exc), time.perf_counter() - start, str(exc))
    return CompileOutcome(job.key, Status.OK, time.perf_counter() - start)


def _build(p: Plan, folder: Path, keep: bool) -> Path:
    """Compile the candidate to ``folder/candidate.vmfb``. A folder to keep also gets
    IREE's per-dispatch files and ``compile.sh`` (written before compiling, so a build
    that fails has it too)."""
    if keep:
        p = with_executable_dumps(p, folder / EXECUTABLES)
    files = build(p, folder)
    output = folder / CANDIDATE
    if keep:
        write_compile_script(folder, scheduled_command(p, files, output))
    return Path(compile_plan(p, files, output).output)


def compile_default(context: SweepContext, key: str) -> CompileOutcome:
    """Build IREE's default of the workload (with the recipe's baseline flags) into
    ``context.baseline_artifact``."""
    start = time.perf_counter()
    try:
        p = plan_candidate(context, {})
        with tempfile.TemporaryDirectory(prefix="tdsched-sweep-") as tmp:
            built = Path(compile_baseline(p, Path(tmp)).output)
            write_atomically(Path(context.baseline_artifact), built.read_bytes())
    except EVALUATION_ERRORS as exc:
        return CompileOutcome(key, status_of(exc), time.perf_counter() - start, str(exc))
    return CompileOutcome(key, Status.OK, time.perf_counter() - start)


class Bench:
    """Checks and times candidates of one sweep in this process.

    Set up once per process: the workload's seeded inputs, the reference outputs
    (:meth:`~tdsched.schedules.measure.evaluation.Reference.make`) and the loaded IREE default
    build.
    """

    def __init__(self, context: SweepContext) -> None:
        self.context = context
        p = plan_candidate(context, {})
        self.function = p.workload.function
        self.driver = p.target.driver
        self.tolerance = p.recipe.tolerance
        prepare_device(p.target, context.request.build.run_threads)
        self.baseline = LoadedModule(Path(context.baseline_artifact), self.driver, self.function)
        with tempfile.TemporaryDirectory(prefix="tdsched-reference-") as tmp:
            self.reference = Reference.make(
                p, lambda: self.baseline, context.request.seed, Path(tmp)
            )
        self.inputs = self.reference.inputs

    def time_baseline(self) -> dict[str, float | int]:
        """IREE default's time per call."""
        runner = self.baseline.timing_runner(self.inputs)
        return time_interleaved({"baseline": runner}, repeats=self.context.repeats)[
            "baseline"
        ].as_dict()

    def run(self, job: BenchJob) -> BenchOutcome:
        """Check ``job``'s candidate; time it only when its results are right (screening):
        ``repeats`` rounds interleaved with IREE default, so each round's ratio holds
        however the machine's speed drifts during a sweep."""
        inject("run", job.params)
        try:
            module = LoadedModule(Path(job.artifact), self.driver, self.function)
            _, check = self.reference.check(module, self.tolerance)
            if check.status is not Status.OK:
                return BenchOutcome(job.key, Outcome(check))
            start = time.perf_counter()
            variants = {
                "candidate": module.timing_runner(self.inputs),
                BASELINE: self.baseline.timing_runner(self.inputs),
            }
            timer = RoundTimer(variants, min_sample_s=self.context.sample_s)
            timer.run(self.context.repeats)
            seconds = time.perf_counter() - start
        except EVALUATION_ERRORS as exc:
            return BenchOutcome(job.key, Outcome(Check(Status.RUN_FAILED, error=str(exc))))
        samples = timer.samples
        timed = Outcome(
            check,
            Timing.of(samples["candidate"]),
            Timing.of(samples[BASELINE]),
            speedup(samples, "candidate", BASELINE),
        )
        return BenchOutcome(job.key, timed, seconds)

    def race(self, job: RaceJob) -> RaceResult:
        """Race the candidates of ``job`` against each other and IREE default."""
        runners = {
            key: LoadedModule(Path(artifact), self.driver, self.function).timing_runner(self.inputs)
            for key, artifact in job.artifacts.items()
        }
        settings = RaceSettings(**job.settings)
        return run_race(runners, self.baseline.timing_runner(self.inputs), settings)
