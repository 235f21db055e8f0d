"""Cleanup between schedule steps: canonicalization, CSE and loop-invariant code motion."""

from __future__ import annotations

from iree.compiler import ir
from iree.compiler.dialects import transform
from iree.compiler.dialects.transform import structured

from .script import OpHandle, any_op


def apply_patterns(target: OpHandle, *pattern_ops: str, cse: bool = False) -> None:
    """One ``transform.apply_patterns`` region holding the named pattern-set ops.

    Keep pattern sets small per region: stacking many in one region was seen to make
    iree-compile run for minutes.
    """
    op = transform.ApplyPatternsOp(target.value, apply_cse=cse)
    with ir.InsertionPoint(op.patterns):
        for name in pattern_ops:
            ir.Operation.create(name)


def cleanup(
    func: OpHandle,
    *,
    canonicalize: bool = True,
    cse: bool = True,
    licm: bool = True,
    unit_dims: bool = False,
) -> None:
    """Canonicalize (with tiling canonicalizations), CSE and hoist loop invariants in ``func``.

    ``unit_dims`` first folds unit-extent loops of linalg ops (into rank-reducing slices).
    """
    if unit_dims:
        apply_patterns(func, "transform.apply_patterns.linalg.fold_unit_extent_dims_via_slices")
    if canonicalize:
        apply_patterns(
            func,
            "transform.apply_patterns.canonicalization",
            "transform.apply_patterns.linalg.tiling_canonicalization",
        )
    if cse:
        transform.ApplyCommonSubexpressionEliminationOp(func.value)
    if licm:
        loops = structured.MatchOp(any_op(), func.value, ops=["scf.for"]).result
        transform.ApplyLoopInvariantCodeMotionOp(loops)
