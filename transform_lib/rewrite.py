"""Structural rewrites of linalg ops: generalize, interchange."""

from __future__ import annotations

from collections.abc import Sequence

from iree.compiler.dialects.transform import structured

from .script import OpHandle
from .tiling import check_permutation


def generalize(target: OpHandle) -> OpHandle:
    """Rewrite named linalg ops (``linalg.matmul``, convolutions, ...) as ``linalg.generic``."""
    value = structured.GeneralizeOp(target.value).transformed
    return OpHandle(value, f"linalg.generic (from {target.what})", target.num_loops)


def interchange(target: OpHandle, permutation: Sequence[int]) -> OpHandle:
    """Permute the loops of a ``linalg.generic`` (generalize named ops first)."""
    check_permutation(target, permutation, "interchange")
    value = structured.InterchangeOp(
        target.value, iterator_interchange=list(permutation)
    ).transformed
    return target.rebound(value)
