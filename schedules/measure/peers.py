"""Peers: what a user would pick instead of a tdsched schedule, built, checked and timed
in the same run (``tdsched run --peers``).

* ``iree-data-tiling``: IREE's default pipeline with ``--iree-opt-data-tiling`` and
  microkernels off (``--iree-llvmcpu-enable-ukernels=none``): IREE's own packing and
  codegen (CPU targets only).
* ``iree-data-tiling-ukernels``: the same with ``--iree-llvmcpu-enable-ukernels=all``:
  IREE's hand-written mmt4d microkernels (CPU targets only).
* ``numpy``: the workload's numpy equivalent at its own dtype (OpenBLAS for a matmul),
  where one exists (:attr:`~tdsched.targets.workload.Workload.peer`), limited to the
  run's thread count.
* ``onnxruntime``: the workload's ONNX model (:attr:`~tdsched.targets.workload.Workload.onnx`:
  an ONNX file, or a builder model exported) in an onnxruntime session on its CPU
  execution provider, all graph optimizations on, its intra-op thread pool of the run's
  thread count (CPU targets, where onnxruntime is installed: ``tdsched[onnx]``).

Each peer's results are compared with the reference first, like the schedule's: a peer
that computes something else is reported ``wrong`` and not timed. A peer that does not
build is reported with the compiler's first error line, and the run goes on.

The IREE peers are timed interleaved with the schedule and IREE default. numpy and
onnxruntime are each timed in a block of their own right after them
(``interleaved=False``): OpenBLAS's worker threads spin for milliseconds after each call
(as onnxruntime's do) and IREE's workers take the cores between calls, so with more than
one thread, interleaving the two runtimes slowed each by up to 160x at small sizes, at
random (measured on a 2-core VM).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tdsched.targets.compiler import CompileError
from tdsched.targets.runtime import LoadedModule
from tdsched.targets.target import Target
from tdsched.targets.timing import Variant
from threadpoolctl import threadpool_limits

from ..compile.pipeline import Plan, compile_unscheduled
from .evaluation import Reference, compare_outputs
from .status import Check, Status

IREE_PEERS: dict[str, tuple[str, ...]] = {
    "iree-data-tiling": ("--iree-opt-data-tiling", "--iree-llvmcpu-enable-ukernels=none"),
    "iree-data-tiling-ukernels": ("--iree-opt-data-tiling", "--iree-llvmcpu-enable-ukernels=all"),
}
"""CPU peers: name → iree-compile flags added to the target's flags."""
NUMPY = "numpy"
ONNXRUNTIME = "onnxruntime"


@dataclass(frozen=True)
class PeerBuild:
    """One peer, ready to time (``run`` set) or not (``check`` says why: a build
    failure, or its results against the reference)."""

    name: str
    check: Check
    run: Variant | None = None
    interleaved: bool = True
    """Timed interleaved with the IREE builds (else in a block of its own after them)."""


def peer_names(target: Target, has_numpy: bool, has_onnx: bool = False) -> list[str]:
    """The peers ``tdsched run --peers`` times for ``target`` (``has_numpy``: the
    workload has a numpy equivalent; ``has_onnx``: an ONNX model)."""
    names = [] if target.is_gpu else list(IREE_PEERS)
    names += [NUMPY] if has_numpy else []
    ort = has_onnx and not target.is_gpu and onnxruntime_available()
    return names + ([ONNXRUNTIME] if ort else [])


def build_peers(p: Plan, reference: Reference, work: Path, threads: int) -> list[PeerBuild]:
    """Build, load and check every peer of ``p``'s workload on the reference inputs.

    Preconditions: the device is set up (:func:`~.evaluation.prepare_device`), and this
    process is the run's own: numpy's BLAS stays limited to ``threads`` threads after.
    """
    builds = []
    workload = p.workload
    for name in peer_names(p.target, workload.peer is not None, workload.onnx is not None):
        if name == NUMPY:
            builds.append(_numpy_peer(p, reference, threads))
        elif name == ONNXRUNTIME:
            builds.append(_onnxruntime_peer(p, reference, threads))
        else:
            builds.append(_iree_peer(p, name, reference, work))
    return builds


def _iree_peer(p: Plan, name: str, reference: Reference, work: Path) -> PeerBuild:
    try:
        output = compile_unscheduled(p, work, name, IREE_PEERS[name]).output
    except CompileError as exc:
        return PeerBuild(name, Check(Status.COMPILE_FAILED, error=compile_error_line(exc)))
    module = LoadedModule(output, p.target.driver, p.workload.function)
    _, check = reference.check(module, p.recipe.tolerance)
    if check.status is not Status.OK:
        return PeerBuild(name, check)
    return PeerBuild(name, check, module.timing_runner(reference.inputs))


def _numpy_peer(p: Plan, reference: Reference, threads: int) -> PeerBuild:
    peer = p.workload.peer
    assert peer is not None
    inputs = [np.ascontiguousarray(x) for x in reference.inputs]
    threadpool_limits(limits=threads)  # for the rest of this (run's own) process
    check = compare_outputs(peer(inputs), reference.want, p.recipe.tolerance)
    if check.status is not Status.OK:
        return PeerBuild(NUMPY, check)

    def run() -> None:
        peer(inputs)

    return PeerBuild(NUMPY, check, run, interleaved=False)


def _onnxruntime_peer(p: Plan, reference: Reference, threads: int) -> PeerBuild:
    """The workload's ONNX model in an onnxruntime session (module docstring), fed the
    reference inputs by the model's input order."""
    model = p.workload.onnx
    assert model is not None
    try:
        call = onnxruntime_call(model(), reference.inputs, threads)
    except Exception as exc:  # onnxruntime raises its own types for models it refuses
        return PeerBuild(ONNXRUNTIME, Check(Status.COMPILE_FAILED, error=_first_line(exc)))
    try:
        got = call()
    except Exception as exc:
        return PeerBuild(ONNXRUNTIME, Check(Status.RUN_FAILED, error=_first_line(exc)))
    check = compare_outputs(got, reference.want, p.recipe.tolerance)
    if check.status is not Status.OK:
        return PeerBuild(ONNXRUNTIME, check)

    def run() -> None:
        call()

    return PeerBuild(ONNXRUNTIME, check, run, interleaved=False)


def onnxruntime_call(
    model: bytes, inputs: Sequence[np.ndarray], threads: int
) -> Callable[[], list[np.ndarray]]:
    """A call of ONNX ``model`` on ``inputs`` (in its inputs' order) in an onnxruntime
    session as the peer runs it (module docstring), returning its outputs. Raises
    onnxruntime's errors for a model it refuses; ImportError without onnxruntime."""
    import onnxruntime as ort  # an optional dependency: tdsched[onnx]

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3  # errors only: its warnings would end up in the report
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    feeds = {name: np.ascontiguousarray(x) for name, x in zip(names, inputs, strict=True)}

    def call() -> list[np.ndarray]:
        return list(session.run(None, feeds))

    return call


def onnxruntime_available() -> bool:
    """Whether onnxruntime is installed (``tdsched[onnx]``)."""
    return importlib.util.find_spec("onnxruntime") is not None


def compile_error_line(exc: CompileError) -> str:
    """A failed build in one line: the compiler's first."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else "iree-compile failed"


def _first_line(exc: Exception) -> str:
    """onnxruntime's error, its first line, named."""
    text = str(exc).strip()
    return f"onnxruntime: {text.splitlines()[0] if text else type(exc).__name__}"
