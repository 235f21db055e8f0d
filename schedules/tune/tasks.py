"""Task extraction: the distinct dispatches of a model, each with how often it runs and
its share of IREE default's time (``tdsched tasks``, the first step of tuning a model).

IREE forms dispatches from the linalg module; a *task* is a group of dispatch functions
that compute the same thing: the same structured ops, in the same order, with the same
op names, static loop bounds and element types (the root op's kind and shape, and the
fused epilogue), connected the same way (``standalone_dispatch.dataflow``: which op
feeds which operand, through which indexing map; elementwise epilogues may read further
tensors, a residual or a bias, and compute differently). Identical layers (a ResNet's
repeated blocks) are one task; each task lists the layers its root op comes from.

Read from a census compile of IREE's default build (``transform_lib.census``: every
dispatch as kernel configurations see it) and, unless timing is off, a HAL profile of
that build (``targets.dispatch_profile``): each task's time per call is the sum over its
dispatches of their median time, and its share is of the whole call. Dispatch functions
that IREE only evaluates at compile time (``jit_eval``) are not tasks.
"""

from __future__ import annotations

import tempfile
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tdsched.targets import Target
from tdsched.targets.compiler import CompileRequest, run_compile
from tdsched.targets.dispatch_profile import ModuleProfile, ProfiledModule, profile_modules
from tdsched.targets.timing import Timing
from tdsched.targets.workload import Workload, WorkloadError, random_inputs
from tdsched.transform_lib.census import StructuredOp, census_functions, read_census
from tdsched.transform_lib.standalone_dispatch import dispatch_dataflow

from ..compile.pipeline import census_output

ROOT_KINDS = ("convolution", "contraction", "pooling", "reduction", "elementwise")
"""Kinds of structured op, most compute first: a dispatch's root is its first op of the
first kind it holds (a conv's dispatch is a convolution task whatever its epilogue)."""


@dataclass(frozen=True)
class OpSignature:
    """One structured op of a dispatch, as a task is keyed."""

    op: str
    loop_ranges: tuple[int, ...] | None
    kind: str
    dtype: str | None

    def describe(self) -> str:
        shape = "x".join(map(str, self.loop_ranges)) if self.loop_ranges is not None else "?"
        return f"{self.op} {shape}"


@dataclass
class Task:
    """Dispatch functions that compute the same ops (see the module docstring)."""

    name: str
    ops: tuple[OpSignature, ...]
    dispatches: list[str] = field(default_factory=list)
    layers: list[str] = field(default_factory=list)
    """The layers its root op comes from (one per dispatch function, or fewer)."""
    fused_layers: list[str] = field(default_factory=list)
    """The layers of its other ops (fused producers and epilogues) not in ``layers``."""
    runs: int = 0
    """Dispatches of it per call of the model (with timing: as profiled; else one per
    dispatch function)."""
    time_ms: float | None = None
    """Its dispatches' median times per call, summed; ``None`` without timing."""
    share: float | None = None
    """Of IREE default's median call."""

    @property
    def root(self) -> OpSignature:
        """The op that makes the task what it is: the first of the most compute kind."""
        return min(self.ops, key=lambda op: ROOT_KINDS.index(op.kind))

    @property
    def kind(self) -> str:
        return self.root.kind

    @property
    def iree_root_position(self) -> int:
        """Where IREE's root is among the task's ops (the op a kernel schedule or a
        template's main kernel configures): the last op with a reduction loop, else the
        last op. It can differ from :attr:`root`, the first op of the most compute kind: a
        softmax's root is its row max, IREE's its row sum."""
        reducing = [i for i, op in enumerate(self.ops) if op.kind != "elementwise"]
        return reducing[-1] if reducing else len(self.ops) - 1

    @property
    def epilogue(self) -> tuple[str, ...]:
        """The other ops of the dispatch, in order (short names: ``fill``, ``generic``)."""
        root = self.root
        return tuple(op.op.removeprefix("linalg.") for op in self.ops if op is not root)

    def as_dict(self) -> dict[str, Any]:
        root = self.root
        return {
            "name": self.name,
            "kind": self.kind,
            "root": {"op": root.op, "loop_ranges": root.loop_ranges, "dtype": root.dtype},
            "epilogue": list(self.epilogue),
            "ops": [op.describe() for op in self.ops],
            "layers": self.layers,
            "fused_layers": self.fused_layers,
            "dispatches": self.dispatches,
            "runs": self.runs,
            "time_ms": self.time_ms,
            "share": self.share,
        }


@dataclass(frozen=True)
class ModelTasks:
    """The tasks of a workload's IREE default build on a target, most time first (in
    dispatch order without timing)."""

    workload: str
    target: str
    threads: int | None
    tasks: tuple[Task, ...]
    call_ms: Timing | None
    """IREE default's whole call (``None`` without timing)."""

    @property
    def dispatch_count(self) -> int:
        return sum(len(t.dispatches) for t in self.tasks)

    @property
    def in_dispatches(self) -> float | None:
        """The share of the call spent in dispatches (the rest is runtime overhead)."""
        if self.call_ms is None:
            return None
        return sum(t.time_ms or 0.0 for t in self.tasks) / self.call_ms.median

    def as_dict(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "target": self.target,
            "threads": self.threads,
            "call_ms": self.call_ms.as_dict() if self.call_ms else None,
            "dispatches": self.dispatch_count,
            "tasks": [t.as_dict() for t in self.tasks],
        }


def group_tasks(
    census: Sequence[StructuredOp],
    function: str,
    flows: Mapping[str, Hashable] | None = None,
) -> list[Task]:
    """The tasks of ``census`` (one compile's structured ops), in dispatch order: runtime
    dispatch functions of ``function`` grouped by their ops' signatures and, where
    ``flows`` gives each dispatch's dataflow (``transform_lib.standalone_dispatch``), by
    how their ops connect: one kernel schedule is planned on one dataflow."""
    per_dispatch: dict[str, list[StructuredOp]] = {}
    for op in census:
        if op.function.startswith(f"{function}_dispatch_"):
            per_dispatch.setdefault(op.function, []).append(op)
    tasks: dict[tuple[tuple[OpSignature, ...], Hashable], Task] = {}
    for dispatch, ops in per_dispatch.items():
        key = tuple(OpSignature(o.op, o.loop_ranges, o.kind, o.dtype) for o in ops)
        flow = flows.get(dispatch) if flows is not None else None
        task = tasks.setdefault((key, flow), Task(f"t{len(tasks)}", key))
        task.dispatches.append(dispatch)
        task.runs += 1
        root = ops[key.index(task.root)]
        for op in ops:
            found = task.layers if op is root else task.fused_layers
            if op.layer is not None and op.layer not in found:
                found.append(op.layer)
    for task in tasks.values():
        task.fused_layers = [x for x in task.fused_layers if x not in task.layers]
    return list(tasks.values())


def weigh(tasks: Sequence[Task], profile: ModuleProfile) -> list[Task]:
    """``tasks`` with runs, time and share from ``profile``, most time first."""
    times = {d.function: d for d in profile.dispatches}
    call = profile.call_ms.median
    for task in tasks:
        timed = [times[d] for d in task.dispatches if d in times]
        task.runs = sum(t.per_call for t in timed)
        task.time_ms = sum(t.median_ms for t in timed)
        task.share = task.time_ms / call
    return sorted(tasks, key=lambda t: -(t.time_ms or 0.0))


def extract_tasks(
    workload: Workload,
    target: Target,
    threads: int | None,
    *,
    flags: tuple[str, ...] = (),
    rounds: int = 3,
    seed: int = 0,
    time_it: bool = True,
    census: str | None = None,
) -> ModelTasks:
    """The tasks of ``workload`` built by IREE's default pipeline (plus ``flags``) for
    ``target``; with ``time_it``, weighed by a profile of ``rounds`` runs on seeded
    random inputs with ``threads`` CPU workers (``None`` on GPU targets). ``census``:
    what the workload's census compile printed, where the caller has it already (else
    compiled here).

    Raises ``CompileError`` when IREE cannot build the workload, ``WorkloadError`` when
    its build has no task, and ``ProfileError`` when it cannot be profiled.
    Precondition: static shapes.
    """
    if census is None:
        census = census_output(workload.mlir, target, flags)
    flows = {name: dispatch_dataflow(text) for name, text in census_functions(census).items()}
    ops = read_census(census)
    tasks = group_tasks(ops, workload.function, flows)
    if not tasks:
        raise WorkloadError(_no_tasks(workload, ops))
    if not time_it:
        return ModelTasks(workload.name, target.name, threads, tuple(tasks), None)
    with tempfile.TemporaryDirectory(prefix="tdsched-tasks-") as tmp:
        profile = _profile_default(workload, target, threads, flags, rounds, seed, Path(tmp))
    return ModelTasks(
        workload.name, target.name, threads, tuple(weigh(tasks, profile)), profile.call_ms
    )


def _no_tasks(workload: Workload, census: Sequence[StructuredOp]) -> str:
    """Why ``workload``'s build, whose census is ``census``, has no task."""
    if not census:
        return (
            f"{workload.name}: IREE's build of it has no dispatch that computes (no linalg "
            "op: the model only passes or reshapes its inputs); there are no tasks"
        )
    found = ", ".join(sorted({op.function for op in census})[:3])
    return (
        f"{workload.name}: IREE named its dispatches {found}, not after the entry function "
        f"@{workload.function}, so none is a task: give the function a plain name (letters, "
        "digits and _)"
    )


def _profile_default(
    workload: Workload,
    target: Target,
    threads: int | None,
    flags: tuple[str, ...],
    rounds: int,
    seed: int,
    folder: Path,
) -> ModuleProfile:
    source, vmfb = folder / "input.mlir", folder / "default.vmfb"
    source.write_text(workload.mlir)
    run_compile(CompileRequest(source, target, vmfb, None, flags))
    inputs = []
    for index, array in enumerate(random_inputs(workload, seed)):
        path = folder / f"input{index}.npy"
        np.save(path, array)
        inputs.append(path)
    modules: Mapping[str, ProfiledModule] = {
        "default": ProfiledModule(vmfb, workload.function, tuple(inputs))
    }
    return profile_modules(modules, target, threads, rounds, folder / "runs")["default"]
