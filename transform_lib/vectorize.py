"""Vectorization primitives."""

from __future__ import annotations

from collections.abc import Sequence

from iree.compiler.dialects.transform import structured

from .errors import ScheduleError
from .script import OpHandle


def vectorize_all(func: OpHandle) -> OpHandle:
    """Vectorize every static-shaped linalg op under ``func`` and fold transfers.

    Tile first: the vector shapes equal the (tiled) op shapes, and huge vectors compile
    slowly and spill.
    """
    value = structured.VectorizeChildrenAndApplyPatternsOp(func.value).transformed
    return func.rebound(value)


def vectorize_op(target: OpHandle, vector_sizes: Sequence[int]) -> None:
    """Vectorize one op with explicit (masked) vector sizes, one per loop."""
    if target.num_loops is not None and len(vector_sizes) != target.num_loops:
        raise ScheduleError(
            f"vectorize: {len(vector_sizes)} vector sizes for {target.what}, which has "
            f"{target.num_loops} loops (counted on the op as the workload writes it); give one "
            "size per loop"
        )
    if any(s <= 0 for s in vector_sizes):
        raise ScheduleError(f"vectorize: vector sizes must be > 0, got {list(vector_sizes)}")
    structured.VectorizeOp(target.value, vector_sizes=list(vector_sizes))
