"""Build → check → time, written once: the evaluation that run, sweep and regress share.

* :class:`Status` is the one vocabulary for how an evaluation ended, in every command's
  output, the sweep database and regression measurements.
* :func:`prepare_device` sets up the runtime the same way everywhere (x86 worker threads).
* :func:`compile_scheduled` builds a plan (every schedule step must apply);
  :func:`compile_baseline` builds IREE's default of the same workload.
* :class:`Reference` holds the seeded inputs and the expected results (the workload's
  own, numpy or onnx's evaluator; for a workload without one, IREE's default build's
  results: on a GPU target its x86 build, independent of the GPU compiler and driver
  under test) and checks a build's results against them (:class:`Check`).
* :func:`status_of` names the status of a failure.

``tdsched run`` (:mod:`.run_report`), the sweep's benchmark workers
(:mod:`.sweep.compile_and_bench`) and ``tdsched regress`` (:mod:`.regress.measure`) are
built from these parts and differ only in how they time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tdsched.targets import Target, make_target
from tdsched.targets.compiler import CompileError, CompileResult
from tdsched.targets.ir_eval import EvalError, evaluate
from tdsched.targets.ir_eval.cost import EvalCost, evaluation_cost
from tdsched.targets.result_check import compare_results
from tdsched.targets.runtime import DeviceError, LoadedModule, configure_threads, keep_freed_memory
from tdsched.targets.workload import random_inputs

from ..base.errors import ScheduleNotApplied
from ..compile.pipeline import (
    BuildFiles,
    Plan,
    build,
    compile_baseline,
    compile_default_workload,
    compile_plan,
)
from ..dsl.recipe import Tolerance
from .status import Check, Status


def status_of(exc: BaseException) -> Status:
    """The status of an evaluation that raised ``exc``."""
    if isinstance(exc, ScheduleNotApplied):
        return Status.NOT_APPLIED
    if isinstance(exc, CompileError):
        return Status.COMPILE_FAILED
    if isinstance(exc, DeviceError | RuntimeError):
        return Status.RUN_FAILED
    return Status.ERROR


EVALUATION_ERRORS = (ValueError, CompileError, DeviceError, RuntimeError)
"""What an evaluation turns into a status instead of raising (RecipeError, ScheduleError
and workload errors are ValueErrors)."""


def compare_outputs(
    got: list[np.ndarray],
    want: list[np.ndarray],
    tolerance: Tolerance,
    undefined: list[np.ndarray] | None = None,
) -> Check:
    """Every result against the reference by tdsched's one rule
    (:func:`tdsched.targets.result_check.compare_result`: elementwise ``|got - want| <=
    atol + rtol * |want|``); a wrong count or shape, a NaN where the reference has a
    number, or a reference that is undefined (NaN, or marked in ``undefined``) is WRONG,
    with the first such result's reason (:func:`~tdsched.targets.result_check.compare_results`)."""
    worst, problem = compare_results(got, want, tolerance.atol, tolerance.rtol, undefined)
    if problem is not None:
        return Check(Status.WRONG, worst, problem)
    return Check(Status.OK, worst)


def prepare_device(target: Target, threads: int) -> None:
    """Runtime set-up before any module is loaded: ``threads`` task workers on x86 (the
    GPU ignores it; see :func:`~tdsched.targets.runtime.configure_threads`), and freed
    device memory kept for reuse between timed calls.

    Precondition: call before the first module of this process is loaded.
    """
    if not target.is_gpu:
        configure_threads(threads)
    keep_freed_memory()


def compile_scheduled(
    p: Plan, work: Path, stem: str = "scheduled"
) -> tuple[BuildFiles, CompileResult]:
    """Write the plan's files under ``work`` and compile ``work/<stem>.vmfb``; raises
    :class:`ScheduleNotApplied` when a schedule step matched nothing."""
    files = build(p, work)
    return files, compile_plan(p, files, work / f"{stem}.vmfb")


IR_EVALUATOR_REFERENCE = "numpy-ir-evaluator"
"""The reference kind of a workload without its own that the numpy IR evaluator
(:mod:`tdsched.targets.ir_eval`) runs within :data:`IR_EVALUATOR_LIMIT`: its results."""
IR_EVALUATOR_LIMIT = EvalCost(element_ops=500_000_000, steps=50_000)
"""The most work the reference evaluation may take (about 5 s on a 2-core Xeon VM,
which evaluates about 100 million generic body points a second): a 512x512x512 matmul
(1.3e8) is evaluated, a 1024^3 one (1.1e9) is not."""
IREE_DEFAULT_REFERENCE = "iree-default"
"""The reference kind of a workload without its own that the evaluator cannot run, on
x86: IREE default's results."""
IREE_X86_REFERENCE = "iree-x86"
"""The same on a GPU target: the results of IREE's default build of it for x86
(llvm-cpu), run on the CPU. IREE's default GPU build is not trusted as the reference: on
Vulkan (lavapipe) IREE 3.13's own build of a 512x49x4608 matmul returns zeros for most of
its outputs."""


@dataclass(frozen=True)
class Reference:
    """Seeded inputs of a workload and the results a build must reproduce."""

    inputs: list[np.ndarray]
    want: list[np.ndarray]
    kind: str
    """The workload's own reference (its ``reference_kind``: ``numpy``, or
    ``onnx-reference`` for an ONNX file); for workloads without one (``.mlir`` files),
    :data:`IR_EVALUATOR_REFERENCE` where the evaluator runs it, else
    :data:`IREE_X86_REFERENCE` on a GPU target and :data:`IREE_DEFAULT_REFERENCE` on x86."""
    note: str | None = None
    """Why a workload without its own reference is not checked against the numpy IR
    evaluator (``None`` where it is, or has a reference of its own)."""

    @staticmethod
    def make(p: Plan, baseline: Callable[[], LoadedModule], seed: int, work: Path) -> Reference:
        """The reference of ``p``'s workload on seeded inputs: its own; else the numpy
        IR evaluator's results of its module, where the evaluator runs every op of it
        within :data:`IR_EVALUATOR_LIMIT`; else, on a GPU target, IREE's x86 build of it
        (compiled under ``work``); else the results of IREE default's build, which
        ``baseline`` loads (only then: a bench bundle computes the reference of a GPU
        target on a machine that may have no GPU)."""
        workload = p.workload
        inputs = random_inputs(workload, seed)
        if workload.reference is not None:
            return Reference(inputs, workload.reference(inputs), workload.reference_kind)
        try:
            cost = evaluation_cost(workload.mlir, workload.function, workload.name)
            if cost.within(IR_EVALUATOR_LIMIT):
                want = evaluate(workload.mlir, workload.function, inputs, workload.name)
                return Reference(inputs, want, IR_EVALUATOR_REFERENCE)
            note = (
                f"too much work for the numpy IR evaluator ({cost.describe()}; its limit "
                f"is {IR_EVALUATOR_LIMIT.describe()})"
            )
        except EvalError as exc:
            note = str(exc)
        if p.target.is_gpu:
            vmfb = compile_default_workload(workload, make_target("x86"), work)
            on_cpu = LoadedModule(vmfb, "local-sync", workload.function)
            return Reference(inputs, on_cpu.invoke(inputs), IREE_X86_REFERENCE, note)
        return Reference(inputs, baseline().invoke(inputs), IREE_DEFAULT_REFERENCE, note)

    @property
    def is_own(self) -> bool:
        """Whether the expected results are not those of the baseline build itself (so
        that build is checked against them too)."""
        return self.kind != IREE_DEFAULT_REFERENCE

    def check(self, module: LoadedModule, tolerance: Tolerance) -> tuple[list[np.ndarray], Check]:
        """Run ``module`` on the inputs; its results and how they compare."""
        got = module.invoke(self.inputs)
        return got, compare_outputs(got, self.want, tolerance)


@dataclass(frozen=True)
class CheckedBuild:
    """A scheduled build and IREE default's build, loaded, with the scheduled results
    checked against the reference."""

    scheduled: LoadedModule
    baseline: LoadedModule
    reference: Reference
    got: list[np.ndarray]
    check: Check
    files: BuildFiles
    """What the scheduled build was compiled from (input module, kernel library)."""
    baseline_vmfb: Path
    baseline_check: Check | None
    """IREE default's results against the workload's own reference (``None`` when IREE
    default is the reference): wrong here too means the lowering or IREE, not the
    schedule."""

    def runners(self) -> dict[str, Any]:
        """The two builds as timing variants (``scheduled``, ``baseline``), each in its
        timing placements (:meth:`~tdsched.targets.runtime.LoadedModule.timing_runner`)."""
        return {
            "scheduled": self.scheduled.timing_runner(self.reference.inputs),
            "baseline": self.baseline.timing_runner(self.reference.inputs),
        }


def build_and_check(
    p: Plan, work: Path, seed: int, tolerance: Tolerance | None = None
) -> tuple[CompileResult, CheckedBuild]:
    """Compile the plan and IREE default under ``work``, load both and check the
    scheduled results within ``tolerance`` (default: the recipe's), and IREE default's
    too where the workload has its own reference.

    Precondition: :func:`prepare_device` was called.
    """
    files, result = compile_scheduled(p, work)
    baseline_vmfb = Path(compile_baseline(p, work).output)
    function, driver = p.workload.function, p.target.driver
    scheduled = LoadedModule(result.output, driver, function)
    baseline = LoadedModule(baseline_vmfb, driver, function)
    tolerance = tolerance or p.recipe.tolerance
    reference = Reference.make(p, lambda: baseline, seed, work)
    got, check = reference.check(scheduled, tolerance)
    baseline_check = reference.check(baseline, tolerance)[1] if reference.is_own else None
    return result, CheckedBuild(
        scheduled, baseline, reference, got, check, files, baseline_vmfb, baseline_check
    )
