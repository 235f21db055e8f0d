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


def decompose(target: OpHandle) -> OpHandle:
    """Rewrite a 2-D convolution whose tile has a unit window row and output row (a
    ``linalg.conv_2d_nhwc_hwcf``, ``linalg.depthwise_conv_2d_nhwc_hwc``, ... tiled so
    that ``kh`` and ``oh`` are 1) as its 1-D form (``linalg.conv_1d_nwc_wcf``,
    ``linalg.depthwise_conv_1d_nwc_wc``), which ``vectorize`` lowers with the convolution
    vectorizer: the window's columns unrolled, each input vector loaded once for them.

    Precondition: a named convolution op (``specialize`` a generic first) with a unit
    window and output dim; on another op the transform fails, and so does the build
    (``transform.structured.decompose failed to apply``, at the step's recipe line).
    """
    value = structured.DecomposeOp(target.value).transformed
    return OpHandle(value, f"1-D form of {target.what}", None)


def interchange(target: OpHandle, permutation: Sequence[int]) -> OpHandle:
    """Permute the loops of a ``linalg.generic`` (generalize named ops first)."""
    check_permutation(target, permutation, "interchange")
    value = structured.InterchangeOp(
        target.value, iterator_interchange=list(permutation)
    ).transformed
    return target.rebound(value)
