"""Graph rewrite conv1x1_to_matmul: a convolution with a 1x1 filter becomes a matmul.

A 1x1 filter multiplies each output pixel's input channels by one ``C x F`` matrix, so the
convolution is a matmul over the pixels. Strides only choose which input pixels are read:
a strided ``tensor.extract_slice`` picks them first. For ``linalg.conv_2d_nhwc_hwcf``
(any batch ``N``)::

    %x1 = tensor.extract_slice %x[0, 0, 0, 0] [N, OH, OW, C] [1, SH, SW, 1]  (strided only)
    %a  = tensor.collapse_shape %x1 [[0, 1, 2], [3]]       -> N*OH*OW x C
    %b  = tensor.collapse_shape %w [[0, 1, 2], [3]]        -> C x F
    %c  = tensor.collapse_shape %init [[0, 1, 2], [3]]     -> N*OH*OW x F
    %m  = linalg.matmul ins(%a, %b) outs(%c)
    %r  = tensor.expand_shape %m [[0, 1, 2], [3]]          -> N x OH x OW x F

``linalg.conv_2d_nhwc_fhwc`` is the same with the ``F x C`` filter transposed by a
``linalg.transpose`` (IREE folds it at compile time when the filter is a constant).
``linalg.conv_2d_nchw_fchw`` (batch 1) computes ``F x C`` times ``C x OH*OW``: the filter
is the left-hand side, the pixels the right. Dilations do not matter to a 1x1 filter.

Why: IREE 3.13 turns unstrided 1x1 convolutions into contractions itself, but leaves the
strided ones (a ResNet's downsampling projections) as convolutions with a strided input
map, which it compiles to about 1 GFLOP/s; and only a named ``linalg.matmul`` can be
packed by the :mod:`.mmt4d` rewrite that follows. The matmul keeps the convolution's
location and discardable attributes (its layer), so kernel matches by layer still select
it.
"""

from __future__ import annotations

from dataclasses import dataclass

from iree.compiler import ir
from iree.compiler.dialects import tensor

from ..match import OpCriteria
from .conv_matmul import ConvPlan, ConvRewrite, collapsed, replace_by_matmul, rewrite_convs
from .report import RewriteReport

PRIMITIVE = "conv1x1_to_matmul"


@dataclass(frozen=True)
class Conv1x1ToMatmulOptions:
    """Which convolutions to rewrite (``None``: every one with a 1x1 filter)."""

    ops: OpCriteria | None = None


def conv1x1_to_matmul(module: ir.Module, options: Conv1x1ToMatmulOptions) -> RewriteReport:
    """Rewrite every selected 1x1 convolution of ``module`` into a matmul, in place.

    When ``options.ops`` selects convolutions explicitly, one that cannot be rewritten
    (a larger filter, dynamic shapes, NCHW with a batch above 1) raises
    :class:`GraphRewriteError` before anything is rewritten; otherwise it is left as it
    is and the report's details say why.
    """
    return rewrite_convs(module, options.ops, REWRITE)


def _refuse(plan: ConvPlan, explicit: bool) -> str | None:
    window = plan.shapes.window(plan.layout)
    return None if window == (1, 1) else f"its filter is {window[0]}x{window[1]}, not 1x1"


def _rewrite(plan: ConvPlan) -> None:
    """Replace the convolution by slice + collapses + ``linalg.matmul`` + expand."""
    pixels = collapsed(_strided(plan.op.operands[0], plan), plan.layout.output_groups())
    replace_by_matmul(plan, pixels)


def _strided(image: ir.Value, plan: ConvPlan) -> ir.Value:
    """The input pixels the convolution reads: every stride-th, up to the output's size."""
    layout, shapes = plan.layout, plan.shapes
    sizes = list(shapes.image)
    for dim in layout.spatial:
        sizes[dim] = shapes.output[dim]
    if shapes.strides == (1, 1) and shapes.image == sizes:
        return image
    steps = [1, 1, 1, 1]
    for dim, stride in zip(layout.spatial, shapes.strides, strict=True):
        steps[dim] = stride
    source = ir.RankedTensorType(image.type)
    result = ir.RankedTensorType.get(sizes, source.element_type)
    return tensor.ExtractSliceOp(result, image, [], [], [], [0] * 4, sizes, steps).result


REWRITE = ConvRewrite(
    PRIMITIVE,
    _refuse,
    _rewrite,
    fix="narrow 'ops' to convolutions with a 1x1 filter",
    into="linalg.matmul",
    none_taken="no 1x1 convolution (see details)",
)
"""This rewrite, as :func:`.conv_matmul.rewrite_convs` and ``convs_taken`` take it."""
