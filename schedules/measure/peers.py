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

Each peer's results are compared with the reference first, like the schedule's: a peer
that computes something else is reported ``wrong`` and not timed. A peer that does not
build is reported with the compiler's first error line, and the run goes on.

The IREE peers are timed interleaved with the schedule and IREE default. numpy is timed
in a block of its own right after them (``interleaved=False``): OpenBLAS's worker
threads spin for milliseconds after each call and IREE's workers take the cores between
calls, so with more than one thread, interleaving the two runtimes slowed each by up to
160x at small sizes, at random (measured on a 2-core VM).
"""

from __future__ import annotations

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


@dataclass(frozen=True)
class PeerBuild:
    """One peer, ready to time (``run`` set) or not (``check`` says why: a build
    failure, or its results against the reference)."""

    name: str
    check: Check
    run: Variant | None = None
    interleaved: bool = True
    """Timed interleaved with the IREE builds (else in a block of its own after them)."""


def peer_names(target: Target, has_numpy: bool) -> list[str]:
    """The peers ``tdsched run --peers`` times for ``target``."""
    names = [] if target.is_gpu else list(IREE_PEERS)
    return names + ([NUMPY] if has_numpy else [])


def build_peers(p: Plan, reference: Reference, work: Path, threads: int) -> list[PeerBuild]:
    """Build, load and check every peer of ``p``'s workload on the reference inputs.

    Preconditions: the device is set up (:func:`~.evaluation.prepare_device`), and this
    process is the run's own: numpy's BLAS stays limited to ``threads`` threads after.
    """
    builds = []
    for name in peer_names(p.target, p.workload.peer is not None):
        if name == NUMPY:
            builds.append(_numpy_peer(p, reference, threads))
        else:
            builds.append(_iree_peer(p, name, reference, work))
    return builds


def _iree_peer(p: Plan, name: str, reference: Reference, work: Path) -> PeerBuild:
    try:
        output = compile_unscheduled(p, work, name, IREE_PEERS[name]).output
    except CompileError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "iree-compile failed"
        return PeerBuild(name, Check(Status.COMPILE_FAILED, error=first))
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
