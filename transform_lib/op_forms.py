"""The form of a linalg op: named or generic (generalize, specialize) and its loop order
(interchange), as transform ops."""

from __future__ import annotations

from collections.abc import Sequence

from iree.compiler.dialects.transform import structured

from .script import OpHandle, any_op
from .tiling import check_permutation


def generalize(target: OpHandle) -> OpHandle:
    """Rewrite named linalg ops (``linalg.matmul``, convolutions, ...) as ``linalg.generic``."""
    value = structured.GeneralizeOp(target.value).transformed
    return OpHandle(value, f"linalg.generic (from {target.what})", target.num_loops)


def specialize(target: OpHandle) -> OpHandle:
    """Rewrite ``linalg.generic`` ops that are a named op (matmul, fill, copy, ...) as it.

    Generics that are no named op are left as they are (the handle still holds them).
    """
    value = structured.SpecializeOp(any_op(), target.value).transformed
    return OpHandle(value, f"specialized {target.what}", target.num_loops)


def interchange(target: OpHandle, permutation: Sequence[int]) -> OpHandle:
    """Permute the loops of a ``linalg.generic`` (generalize named ops first)."""
    check_permutation(target, permutation, "interchange")
    value = structured.InterchangeOp(
        target.value, iterator_interchange=list(permutation)
    ).transformed
    return target.rebound(value)
