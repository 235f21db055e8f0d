"""The transform ops fuse_ext emits, shared by both levels.

Builders insert ops at the current insertion point, selecting payload ops by the
``tdsched.fid`` attribute the plan assigned:

* on a payload module (:mod:`.driver`), each step is its own small script so the driver
  can analyse and rewrite the payload between steps; the loop nest is re-found through
  the ``tdsched.fuse_loop`` attribute the driver puts on it before each step;
* inside an IREE kernel strategy (:mod:`.strategy`), the same builders run back to back
  in one sequence, threading the loop handle.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from iree.compiler import ir
from iree.compiler.dialects import transform
from iree.compiler.dialects.transform import loop as loop_ext
from iree.compiler.dialects.transform import structured

from ..cleanup import apply_patterns
from ..codegen_tail import distribute_to_workgroups
from ..match import OpCriteria, build_kernel_matcher, match_ops
from ..script import OpHandle, TransformScript, any_op
from ..tiling import mapping_attribute
from .plan import (
    FID,
    LOOP_ROLE,
    ROOT_TAG,
    STOP_TAG,
    FusionPlan,
    PayloadOp,
    resolve_tile_sizes,
    split_tile_sizes,
)

ENTRY = "__fuse_ext"
LOOP_TAG = "tdsched.fuse_loop"


def label_loop(loop: ir.Value, role: str) -> None:
    """Label the loops ``loop`` holds with :data:`LOOP_ROLE` ``role``."""
    value = transform.ParamConstantOp(transform.AnyParamType.get(), ir.StringAttr.get(role))
    transform.AnnotateOp(loop, LOOP_ROLE, param=value.param)


# --- builders (insert at the current insertion point) ---------------------------------


def select(scope: ir.Value, fid: int) -> ir.Value:
    """The ops under ``scope`` carrying ``tdsched.fid = fid``."""
    value = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), fid)
    attrs = ir.DictAttr.get({FID: value})
    return structured.MatchOp(any_op(), scope, op_attrs=attrs).result


def functions(scope: ir.Value) -> ir.Value:
    return structured.MatchOp(any_op(), scope, ops=["func.func"]).result


Handles = Callable[[PayloadOp], ir.Value]
"""How a builder gets the handle of a planned op: by fid on a payload, by navigation
from the dispatch root inside a kernel strategy."""


def generalize_ops(handles: Handles, ops: Sequence[PayloadOp]) -> dict[int, ir.Value]:
    """Generalize named intermediates (the loop nest yields only generic producers)."""
    return {op.fid: structured.GeneralizeOp(handles(op)).transformed for op in ops}


def tile_roots(
    handles: Handles, roots: Sequence[PayloadOp], sizes: Sequence[int], *, workgroups: bool
) -> tuple[ir.Value, list[ir.Value]]:
    """Tile each root's parallel dims into an ``scf.forall``; merge them into one nest.

    Returns the loop nest and the tiled roots.
    """
    mapping = mapping_attribute("workgroup", sum(1 for s in sizes if s)) if workgroups else None
    tiled = [
        structured.TileUsingForallOp(
            any_op(), any_op(), handles(r), tile_sizes=list(sizes), mapping=mapping
        )
        for r in roots
    ]
    merged = tiled[0].forall_op
    for other in tiled[1:]:
        merged = loop_ext.LoopFuseSiblingOp(any_op(), other.forall_op, merged).fused_loop
    return merged, [t.tiled_op for t in tiled]


def fuse_producer(scope: ir.Value, loop: ir.Value, producer: ir.Value, op: PayloadOp) -> ir.Value:
    """Fuse ``producer`` (planned as ``op``) into ``loop``, CSE ``scope``'s functions.

    Returns the (new) loop handle. A fused ``tensor.pad``'s zero-slice guard (``scf.if``)
    is replaced by its else branch, which is correct for every tile and exposes the pad's
    source slice to the next fusion.
    """
    fused = structured.FuseIntoContainingOp(producer, loop)
    loop = fused.new_containing_op
    if op.name == "tensor.pad":
        guard = transform.GetParentOp(
            any_op(), fused.fused_op, op_name="scf.if", allow_empty_results=True
        ).parent
        loop_ext.TakeAssumedBranchOp(guard, take_else_branch=True)
    transform.ApplyCommonSubexpressionEliminationOp(functions(scope))
    return loop


def tile_reductions(
    roots: Sequence[ir.Value], sizes: Sequence[int], order: Sequence[int]
) -> list[ir.Value]:
    """Tile the roots' reduction dims with ``scf.for`` (only the root is in those loops)."""
    return [_tile_for(root, sizes, order).tiled_linalg_op for root in roots]


def _tile_for(
    op: ir.Value, sizes: Sequence[int], order: Sequence[int]
) -> structured.TileUsingForOp:
    """Tile ``op`` by ``sizes`` (0: not tiled) with ``scf.for`` loops in ``order``."""
    n_loops = sum(1 for s in sizes if s)
    return structured.TileUsingForOp(
        [any_op()] * n_loops, op, sizes=list(sizes), interchange=list(order)
    )


def fuse_in_strategy(
    func: ir.Value,
    plan: FusionPlan,
    handles: dict[int, ir.Value],
    tile_sizes: Sequence[int] | None,
    interchange: Sequence[int] | None,
    tile_nums: Sequence[int] | None = None,
) -> ir.Value:
    """The whole fuse_ext inside a kernel strategy; returns a handle to the tiled roots.
    ``tile_sizes`` or ``tile_nums``: see :func:`~.plan.resolve_tile_sizes`.

    ``handles`` maps each planned op's fid to a handle (see :mod:`.probe`). The roots'
    parallel dims become the workgroup ``scf.forall`` (IREE's workgroup count follows it),
    producers are fused one by one in reverse program order, and reduction dims are tiled
    last, around the roots alone.
    """
    sizes = resolve_tile_sizes(plan, tile_sizes, tile_nums, interchange)
    parallel, reduction, order, _ = split_tile_sizes(plan, sizes, interchange)
    handles.update(generalize_ops(lambda op: handles[op.fid], plan.generalized))
    loop, roots = tile_roots(lambda op: handles[op.fid], plan.roots, parallel, workgroups=True)
    for op in reversed(plan.producers):
        loop = fuse_producer(func, loop, handles[op.fid], op)
    distribute_to_workgroups(loop)
    if any(reduction):
        roots = tile_reductions(roots, reduction, order)
    return roots[0] if len(roots) == 1 else transform.MergeHandlesOp(roots).result


# --- whole scripts for the payload-level driver ---------------------------------------


def _script(body: Callable[[ir.Value], None], script: TransformScript | None = None) -> str:
    """One ``@__fuse_ext`` sequence, in ``script`` (where ``body`` adds named sequences
    of its own) or a new one; built in the caller's active MLIR context if any."""
    script = script or TransformScript(ir.Context.current)
    seq = script.named_sequence(ENTRY, arg_effect="consumed")
    with seq.building():
        body(seq.argument)
    seq.finish()
    return script.text()


def _tagged_loop(scope: ir.Value) -> ir.Value:
    attrs = ir.DictAttr.get({LOOP_TAG: ir.UnitAttr.get()})
    return structured.MatchOp(any_op(), scope, op_attrs=attrs).result


def tag_script(root: OpCriteria | None, stop: OpCriteria | None) -> str:
    """Annotate the ops ``root`` (and ``stop``) match, for the planner. Criteria that
    use kernel keys (kind, loop bounds, inputs, users) are matched as a kernel match
    matches, each op in turn; the others by op name, attributes and layer."""
    script = TransformScript(ir.Context.current)

    def body(scope: ir.Value) -> None:
        for criteria, tag in ((root, ROOT_TAG), (stop, STOP_TAG)):
            if criteria is not None:
                scope = _annotate_matched(script, scope, criteria, tag)

    return _script(body, script)


def _annotate_matched(
    script: TransformScript, scope: ir.Value, criteria: OpCriteria, tag: str
) -> ir.Value:
    """Annotate with ``tag`` the ops under ``scope`` that ``criteria`` selects; returns
    the handle to go on with (``scope``, or what ``foreach_match`` gives back for it)."""
    if not criteria.uses_kernel_keys:
        transform.AnnotateOp(match_ops(OpHandle(scope, "module"), criteria).value, tag)
        return scope
    matcher = build_kernel_matcher(script, f"__match_{tag}", criteria)
    action = script.named_sequence(f"__annotate_{tag}", arg_effect="readonly")
    with action.building():
        transform.AnnotateOp(action.argument, tag)
    action.finish()
    matchers, actions = (
        ir.ArrayAttr.get([ir.FlatSymbolRefAttr.get(name)]) for name in (matcher, action.name)
    )
    updated: ir.Value = transform.ForeachMatchOp(any_op(), [], scope, [], matchers, actions).updated
    return updated


def _by_fid(scope: ir.Value) -> Handles:
    return lambda op: select(scope, op.fid)


def generalize_script(ops: Sequence[PayloadOp]) -> str:
    def body(scope: ir.Value) -> None:
        generalize_ops(_by_fid(scope), ops)

    return _script(body)


def _canonicalize(loop: ir.Value) -> None:
    """Fold the loop body's index arithmetic, so the driver's rewrites see constants."""
    apply_patterns(OpHandle(loop, "loop"), "transform.apply_patterns.canonicalization")


def tile_roots_script(roots: Sequence[PayloadOp], sizes: Sequence[int]) -> str:
    def body(scope: ir.Value) -> None:
        loop, _ = tile_roots(_by_fid(scope), roots, sizes, workgroups=False)
        transform.AnnotateOp(loop, LOOP_TAG)
        label_loop(loop, "parallel")
        _canonicalize(loop)

    return _script(body)


def fuse_producer_script(op: PayloadOp) -> str:
    """Fuse ``op`` into the tagged loop, picking it in the op that holds the loop: with
    the reductions outermost, the function may also hold a full-size copy of it (for a
    use after the reduction loop, numbered alike), which no slice in the loop reads."""

    def body(scope: ir.Value) -> None:
        loop = _tagged_loop(scope)
        around = transform.GetParentOp(any_op(), loop).parent
        loop = fuse_producer(scope, loop, select(around, op.fid), op)
        _canonicalize(loop)

    return _script(body)


def tile_reduction_loop_script(root: PayloadOp, sizes: Sequence[int], order: Sequence[int]) -> str:
    """Tile ``root``'s reduction dims with ``scf.for`` and tag the outermost loop: the
    nest producers are then fused into (reduction-only tiling)."""

    def body(scope: ir.Value) -> None:
        tiled = _tile_for(select(scope, root.fid), sizes, order)
        for loop in tiled.loops:
            label_loop(loop, "reduction")
        transform.AnnotateOp(tiled.loops[0], LOOP_TAG)
        _canonicalize(tiled.loops[0])

    return _script(body)


def tile_reductions_script(
    roots: Sequence[PayloadOp], sizes: Sequence[int], order: Sequence[int]
) -> str:
    def body(scope: ir.Value) -> None:
        for root in roots:
            for loop in _tile_for(select(scope, root.fid), sizes, order).loops:
                label_loop(loop, "reduction")

    return _script(body)


def cleanup_script() -> str:
    """Canonicalize and CSE every function (drops the now-dead untiled originals)."""

    def body(scope: ir.Value) -> None:
        funcs = OpHandle(functions(scope), "func")
        apply_patterns(
            funcs,
            "transform.apply_patterns.canonicalization",
            "transform.apply_patterns.linalg.tiling_canonicalization",
        )
        transform.ApplyCommonSubexpressionEliminationOp(funcs.value)

    return _script(body)
