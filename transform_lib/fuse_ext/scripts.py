"""The transform scripts fuse_ext runs between its payload analyses.

Each script is one small ``transform.named_sequence`` built with the bindings; ops are
selected by the ``tdsched.fid`` attribute the plan assigned, and the loop nest by the
``tdsched.fuse_loop`` attribute the driver puts on it before each step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from iree.compiler import ir
from iree.compiler.dialects import transform
from iree.compiler.dialects.transform import loop as loop_ext
from iree.compiler.dialects.transform import structured

from ..cleanup import apply_patterns
from ..match import OpCriteria, match_ops
from ..script import OpHandle, TransformScript, any_op
from .plan import FID, ROOT_TAG, STOP_TAG

ENTRY = "__fuse_ext"
LOOP_TAG = "tdsched.fuse_loop"


def _script(body: Callable[[OpHandle], None]) -> str:
    script = TransformScript()
    seq = script.named_sequence(ENTRY, arg_effect="consumed")
    with seq.building():
        body(OpHandle(seq.argument, "module"))
    seq.finish()
    return script.text()


def _by_attribute(scope: OpHandle, name: str, value: ir.Attribute, what: str) -> OpHandle:
    handle = structured.MatchOp(
        any_op(), scope.value, op_attrs=ir.DictAttr.get({name: value})
    ).result
    return OpHandle(handle, what)


def _op(scope: OpHandle, fid: int) -> OpHandle:
    value = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), fid)
    return _by_attribute(scope, FID, value, f"op #{fid}")


def _loop(scope: OpHandle) -> OpHandle:
    return _by_attribute(scope, LOOP_TAG, ir.UnitAttr.get(), "fused loop nest")


def _funcs(scope: OpHandle) -> OpHandle:
    return OpHandle(structured.MatchOp(any_op(), scope.value, ops=["func.func"]).result, "func")


def tag(root: OpCriteria, stop: OpCriteria | None) -> str:
    """Annotate the ops ``root`` matches (and ``stop`` matches) for the planner."""

    def body(module: OpHandle) -> None:
        transform.AnnotateOp(match_ops(module, root).value, ROOT_TAG)
        if stop is not None:
            transform.AnnotateOp(match_ops(module, stop).value, STOP_TAG)

    return _script(body)


def generalize(fids: Sequence[int]) -> str:
    """Generalize the named ops ``fids`` (so the loop nest can yield their results)."""

    def body(module: OpHandle) -> None:
        for fid in fids:
            structured.GeneralizeOp(_op(module, fid).value)

    return _script(body)


def tile_roots(fids: Sequence[int], sizes: Sequence[int]) -> str:
    """Tile each root into an ``scf.forall`` and merge the loops into one nest."""

    def body(module: OpHandle) -> None:
        loops = []
        for fid in fids:
            op = structured.TileUsingForallOp(
                any_op(), any_op(), _op(module, fid).value, tile_sizes=list(sizes)
            )
            loops.append(op.forall_op)
        merged = loops[0]
        for other in loops[1:]:
            merged = loop_ext.LoopFuseSiblingOp(any_op(), other, merged).fused_loop
        transform.AnnotateOp(merged, LOOP_TAG)

    return _script(body)


def fuse_producer(fid: int, reshape: bool) -> str:
    """Fuse producer ``fid`` into the loop nest (a reshape: bubble slices above it)."""

    def body(module: OpHandle) -> None:
        loop = _loop(module)
        if reshape:
            apply_patterns(loop, "transform.apply_patterns.tensor.bubble_up_extract_slice")
        else:
            structured.FuseIntoContainingOp(_op(module, fid).value, loop.value)
        transform.ApplyCommonSubexpressionEliminationOp(_funcs(module).value)

    return _script(body)


def tile_reductions(fids: Sequence[int], sizes: Sequence[int], order: Sequence[int]) -> str:
    """Tile the reduction dims of the (already fused) roots with ``scf.for`` loops."""
    n_loops = sum(1 for s in sizes if s)

    def body(module: OpHandle) -> None:
        for fid in fids:
            structured.TileUsingForOp(
                [any_op()] * n_loops,
                _op(_loop(module), fid).value,
                sizes=list(sizes),
                interchange=list(order),
            )

    return _script(body)


def cleanup() -> str:
    """Canonicalize and CSE every function (drops the now-dead untiled originals)."""

    def body(module: OpHandle) -> None:
        funcs = _funcs(module)
        apply_patterns(
            funcs,
            "transform.apply_patterns.canonicalization",
            "transform.apply_patterns.linalg.tiling_canonicalization",
        )
        transform.ApplyCommonSubexpressionEliminationOp(funcs.value)

    return _script(body)
