"""Compiling and benchmarking candidates: the work a sweep's workers do, in whichever
process runs them (a :mod:`.local_worker` child or a Ray task/actor).

:func:`compile_candidate` builds one candidate with the same pipeline as ``tdsched
compile`` (every schedule step must apply); :class:`Bench` checks a compiled candidate
against the reference on seeded random inputs and times it, and times IREE's default
build. Both turn failures into outcomes; only a crash or a hang escapes them, and the
executor running them isolates those.
"""

from __future__ import annotations

import functools
import tempfile
import time
from pathlib import Path

from tdsched.targets.compiler import CompileError
from tdsched.targets.runtime import (
    DeviceError,
    LoadedModule,
    configure_threads,
    keep_freed_memory,
)
from tdsched.targets.timing import time_interleaved
from tdsched.targets.workload import random_inputs
from tdsched.transform_lib.errors import ScheduleError

from ..errors import RecipeError
from ..files import write_atomically
from ..loading import load
from ..pipeline import (
    Plan,
    build,
    compare_outputs,
    compile_baseline,
    compile_plan,
    describe_mismatch,
)
from ..recipe import Recipe
from ..space import ParamValue
from .candidates import plan_point
from .faults import inject
from .messages import BenchJob, BenchOutcome, CompileJob, CompileOutcome, ConfirmJob, SweepContext


def plan_candidate(context: SweepContext, params: dict[str, ParamValue]) -> Plan:
    """The plan of one candidate (the recipe file is read once per process)."""
    return plan_point(_load(context.recipe, Path(context.recipe).stat().st_mtime), context, params)


@functools.lru_cache(maxsize=4)
def _load(path: str, mtime: float) -> Recipe:
    return load(path)


def compile_candidate(context: SweepContext, job: CompileJob) -> CompileOutcome:
    """Build ``job``'s candidate into ``job.artifact``; failures become an outcome."""
    start = time.perf_counter()
    inject("compile", job.params)
    try:
        p = plan_candidate(context, job.params)
        with tempfile.TemporaryDirectory(prefix="tdsched-sweep-") as tmp:
            files = build(p, Path(tmp))
            partial = Path(tmp) / "candidate.vmfb"
            compile_plan(p, files, partial)
            write_atomically(Path(job.artifact), partial.read_bytes())
    except (RecipeError, ScheduleError, CompileError, ValueError) as exc:
        return CompileOutcome(job.key, "compile_failed", time.perf_counter() - start, str(exc))
    return CompileOutcome(job.key, "ok", time.perf_counter() - start)


def compile_default(context: SweepContext, key: str) -> CompileOutcome:
    """Build IREE's default of the workload (with the recipe's baseline flags) into
    ``context.baseline_artifact``."""
    start = time.perf_counter()
    try:
        p = plan_candidate(context, {})
        with tempfile.TemporaryDirectory(prefix="tdsched-sweep-") as tmp:
            built = Path(compile_baseline(p, Path(tmp)).output)
            write_atomically(Path(context.baseline_artifact), built.read_bytes())
    except (RecipeError, CompileError, ValueError) as exc:
        return CompileOutcome(key, "compile_failed", time.perf_counter() - start, str(exc))
    return CompileOutcome(key, "ok", time.perf_counter() - start)


class Bench:
    """Checks and times candidates of one sweep in this process.

    Set up once per process: the workload's seeded inputs, the reference outputs (numpy
    when the workload has a reference, else IREE default's results) and the loaded
    IREE default build.
    """

    def __init__(self, context: SweepContext) -> None:
        self.context = context
        p = plan_candidate(context, {})
        self.function = p.workload.function
        self.driver = p.target.driver
        self.tolerance = p.recipe.tolerance
        if not p.target.is_gpu:
            configure_threads(context.threads)
        keep_freed_memory()
        self.inputs = random_inputs(p.workload, context.seed)
        self.baseline = LoadedModule(Path(context.baseline_artifact), self.driver, self.function)
        reference = p.workload.reference
        self.want = reference(self.inputs) if reference else self.baseline.invoke(self.inputs)

    def time_baseline(self) -> dict[str, float | int]:
        """IREE default's time per call."""
        runner = self.baseline.runner(self.inputs)
        return time_interleaved({"baseline": runner}, repeats=self.context.repeats)[
            "baseline"
        ].as_dict()

    def run(self, job: BenchJob) -> BenchOutcome:
        """Check ``job``'s candidate; time it only when its results are right, round by
        round interleaved with IREE default, so their ratio holds however the machine's
        speed drifts during a sweep."""
        inject("run", job.params)
        try:
            module = LoadedModule(Path(job.artifact), self.driver, self.function)
            got = module.invoke(self.inputs)
            check = compare_outputs(got, self.want, self.tolerance.atol, self.tolerance.rtol)
            if check["status"] != "ok":
                error = describe_mismatch(check, self.tolerance)
                return BenchOutcome(job.key, "mismatch", None, check.get("max_abs_error"), error)
            variants = {
                "candidate": module.runner(self.inputs),
                "baseline": self.baseline.runner(self.inputs),
            }
            times = time_interleaved(variants, repeats=self.context.repeats)
        except (DeviceError, RuntimeError, ValueError) as exc:
            return BenchOutcome(job.key, "run_failed", error=str(exc))
        return BenchOutcome(
            job.key,
            "ok",
            times["candidate"].as_dict(),
            check["max_abs_error"],
            baseline_timing=times["baseline"].as_dict(),
        )

    def confirm(self, job: ConfirmJob) -> dict[str, float]:
        """Speedup of each candidate over IREE default, all timed interleaved."""
        variants = {"baseline": self.baseline.runner(self.inputs)}
        for key, artifact in job.artifacts.items():
            module = LoadedModule(Path(artifact), self.driver, self.function)
            variants[key] = module.runner(self.inputs)
        times = time_interleaved(variants, repeats=job.repeats)
        base = times["baseline"].median
        return {key: base / times[key].median for key in job.artifacts}
