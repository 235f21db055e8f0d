"""fuse_ext inside IREE kernels: plan on the dispatch sources before codegen runs.

A kernel strategy runs inside iree-compile, where nothing can call back into Python, so
the analysis happens first, on the executable sources (``--compile-to=executable-sources``):

1. the kernel library's ``@__kernel_config`` is applied in-process to every dispatch
   function, which tags each kernel's root exactly as IREE will (same matchers);
2. for every kernel with a fuse_ext step, the dispatch function is planned like a payload
   function, and the planned ops get a ``tdsched.fid`` *role* (roots first, then producers
   in program order), so one strategy serves every dispatch the kernel matches;
3. the annotations of step 1 are removed (IREE re-runs ``@__kernel_config``) and the
   tagged sources are compiled with ``--compile-from=executable-sources``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from iree.compiler import ir

from ..interpreter import apply_in_place
from ..kernel_library import KERNEL_ATTR
from ..match import OpCriteria
from . import scripts
from .plan import (
    FID,
    ROOT_TAG,
    STOP_TAG,
    FuseExtError,
    FusionPlan,
    Intermediates,
    PayloadOp,
    assign_fids,
    make_plan,
)

_ACTION_ATTRS = ("translation_info", "compilation_info", KERNEL_ATTR, ROOT_TAG, STOP_TAG)


@dataclass(frozen=True)
class KernelFusionRequest:
    """A kernel schedule's fuse_ext step, as far as planning needs it.

    ``root`` ``None`` means the op the kernel matched (its dispatch root).
    """

    kernel: str
    root: OpCriteria | None
    stop: OpCriteria | None
    intermediates: Intermediates


def plan_dispatches(
    sources: str, kernel_library: str, requests: Sequence[KernelFusionRequest]
) -> tuple[str, dict[str, FusionPlan]]:
    """Plan each request on the dispatches its kernel matches; return tagged sources.

    A kernel that matched no dispatch gets no plan (compiling then reports the kernel as
    unmatched). Raises :class:`FuseExtError` when dispatches matched by one kernel need
    different plans.
    """
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(sources)
        functions = _functions(module)
        for func in functions:
            apply_in_place(func, kernel_library, "__kernel_config")
        roots = _kernel_roots(functions)
        plans: dict[str, FusionPlan] = {}
        for request in requests:
            found = [
                _plan_function(func, root, request) for func, root in roots.get(request.kernel, [])
            ]
            if found:
                plans[request.kernel] = _same_plan(request.kernel, found)
        for func in functions:
            _clear(func)
        return str(module), plans


def _functions(module: ir.Module) -> list[ir.Operation]:
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "func.func":
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


def _kernel_roots(
    functions: Sequence[ir.Operation],
) -> dict[str, list[tuple[ir.Operation, ir.Operation]]]:
    """Kernel name → (dispatch function, root op) pairs, as ``@__kernel_config`` tagged."""
    roots: dict[str, list[tuple[ir.Operation, ir.Operation]]] = {}
    for func in functions:

        def visit(op: ir.Operation, func: ir.Operation = func) -> ir.WalkResult:
            if KERNEL_ATTR in op.attributes and op != func:
                name = ir.StringAttr(op.attributes[KERNEL_ATTR]).value
                roots.setdefault(name, []).append((func, op))
            return ir.WalkResult.ADVANCE

        func.walk(visit)
    return roots


def _plan_function(
    func: ir.Operation, root: ir.Operation, request: KernelFusionRequest
) -> FusionPlan:
    if request.root is None:
        root.attributes[ROOT_TAG] = ir.UnitAttr.get()
    if request.root is not None or request.stop is not None:
        apply_in_place(func, scripts.tag_script(request.root, request.stop), scripts.ENTRY)
    block_ops = assign_fids(func.regions[0].blocks[0])
    plan = make_plan(block_ops, request.intermediates)
    return _relabel(block_ops, plan)


def _relabel(block_ops: Sequence[ir.Operation], plan: FusionPlan) -> FusionPlan:
    """Give planned ops role ids (roots, then producers) and drop the other fids."""
    roles = {op.fid: i for i, op in enumerate((*plan.roots, *plan.producers))}
    i64 = ir.IntegerType.get_signless(64)
    for fid, op in enumerate(block_ops):
        del op.attributes[FID]
        if fid in roles:
            op.attributes[FID] = ir.IntegerAttr.get(i64, roles[fid])

    def role(ops: Sequence[PayloadOp]) -> tuple[PayloadOp, ...]:
        return tuple(replace(op, fid=roles[op.fid]) for op in ops)

    return replace(
        plan,
        roots=role(plan.roots),
        producers=role(plan.producers),
        yielded=role(plan.yielded),
        generalized=role(plan.generalized),
    )


def _signature(plan: FusionPlan) -> tuple[object, ...]:
    def names(ops: Sequence[PayloadOp]) -> tuple[tuple[int, str], ...]:
        return tuple((op.fid, op.name) for op in ops)

    return (
        names(plan.roots),
        names(plan.producers),
        names(plan.yielded),
        names(plan.generalized),
        plan.iterators,
    )


def _same_plan(kernel: str, plans: Sequence[FusionPlan]) -> FusionPlan:
    if any(_signature(p) != _signature(plans[0]) for p in plans[1:]):
        raise FuseExtError(
            f"fuse_ext: kernel '{kernel}' matches {len(plans)} dispatches whose producer "
            "graphs differ, and one strategy cannot fuse both; narrow the kernel's match "
            "(e.g. by shape) or add a kernel schedule per dispatch"
        )
    return plans[0]


def _clear(func: ir.Operation) -> None:
    """Remove what the in-process ``@__kernel_config`` and the tag scripts added."""

    def visit(op: ir.Operation) -> ir.WalkResult:
        for name in _ACTION_ATTRS:
            if name in op.attributes:
                del op.attributes[name]
        return ir.WalkResult.ADVANCE

    func.walk(visit)
