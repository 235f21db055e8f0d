"""Graph rewrite im2col: a convolution becomes a gather of its input windows (im2col)
and a ``linalg.matmul``.

Each output pixel of a ``KH x KW`` convolution reads one window of ``KH x KW x C`` input
values; gathering every pixel's window into a row of a matrix turns the convolution into
a matmul with the filter collapsed to ``KH*KW*C x F``. For ``linalg.conv_2d_nhwc_hwcf``
(any batch ``N``, strides ``SH, SW``, dilations ``DH, DW``)::

    %g = linalg.generic  ins(%x) outs(tensor.empty N x OH x OW x KH x KW x C)
         %x read at (n, oh*SH + kh*DH, ow*SW + kw*DW, c)          (a copy: the gather)
    %a = tensor.collapse_shape %g [[0, 1, 2], [3, 4, 5]]  -> N*OH*OW x KH*KW*C
    %b = tensor.collapse_shape %w [[0, 1, 2], [3]]        -> KH*KW*C x F
    %c = tensor.collapse_shape %init [[0, 1, 2], [3]]     -> N*OH*OW x F
    %m = linalg.matmul ins(%a, %b) outs(%c)
    %r = tensor.expand_shape %m [[0, 1, 2], [3]]          -> N x OH x OW x F

``linalg.conv_2d_nhwc_fhwc`` transposes its ``F x KH*KW*C`` filter (folded by IREE when
the filter is a constant). ``linalg.conv_2d_nchw_fchw`` (batch 1) gathers ``C x KH x KW x
OH x OW`` and computes ``F x C*KH*KW`` times ``C*KH*KW x OH*OW``.

Why: IREE 3.13 compiles a convolution as loops over its window; a matmul reaches IREE's
(or the ``mmt4d`` rewrite's) packed matmul kernels. The gather costs ``KH*KW`` times the
input's size in memory traffic, so it pays where the window loops are the bottleneck (a
stem convolution with 3 input channels: 4.4x on ResNet-50's) and loses where IREE's
direct kernel is already good (measure: ``tdsched run --peers``, or let ``tdsched
tune`` race it per layer). 1x1 convolutions need no gather: use ``conv1x1_to_matmul``.
The matmul keeps the convolution's location and layer.
"""

from __future__ import annotations

from dataclasses import dataclass

from iree.compiler import ir
from iree.compiler.dialects import tensor

from ..generic_build import Operand, create_generic, finish_body
from ..match import OpCriteria
from .conv_matmul import ConvPlan, ConvRewrite, collapsed, replace_by_matmul, rewrite_convs
from .report import RewriteReport

PRIMITIVE = "im2col"


@dataclass(frozen=True)
class Im2colOptions:
    """Which convolutions to rewrite (``None``: every one with a filter larger than 1x1)."""

    ops: OpCriteria | None = None


def im2col(module: ir.Module, options: Im2colOptions) -> RewriteReport:
    """Rewrite every selected convolution of ``module`` into a gather and a matmul, in place.

    Without ``options.ops``, 1x1 convolutions are left to ``conv1x1_to_matmul`` (noted in
    the details); an explicit selection rewrites them too (a gather of one pixel each).
    When ``options.ops`` selects convolutions explicitly, one that cannot be rewritten
    (dynamic shapes, buffers, NCHW with a batch above 1) raises :class:`GraphRewriteError`
    before anything is rewritten; otherwise it is left as it is and the report's details
    say why.
    """
    return rewrite_convs(module, options.ops, REWRITE)


def _refuse(plan: ConvPlan, explicit: bool) -> str | None:
    if plan.shapes.window(plan.layout) == (1, 1) and not explicit:
        return "its filter is 1x1: conv1x1_to_matmul rewrites it without a gather"
    return None


def _rewrite(plan: ConvPlan) -> None:
    """Replace the convolution by gather + collapses + ``linalg.matmul`` + expand."""
    gathered = _gather(plan.op.operands[0], plan)
    groups = [[0, 1, 2], [3, 4, 5]] if plan.layout.pixels_first else [[0, 1, 2], [3, 4]]
    replace_by_matmul(plan, collapsed(gathered, groups))


def _gather(image: ir.Value, plan: ConvPlan) -> ir.Value:
    """The im2col tensor: ``N x OH x OW x KH x KW x C`` (NHWC) or ``C x KH x KW x OH x
    OW`` (NCHW, batch 1), each element copied from the input pixel the convolution
    multiplies there."""
    layout, shapes = plan.layout, plan.shapes
    kh, kw = shapes.window(layout)
    oh, ow = (shapes.output[d] for d in layout.spatial)
    channels = shapes.image[layout.channel]
    # Loop positions of the gather's dims: batch, output rows/cols, window rows/cols, channel.
    if layout.pixels_first:
        batch, out, window, channel = 0, (1, 2), (3, 4), 5
        shape = [shapes.image[0], oh, ow, kh, kw, channels]
    else:
        batch, out, window, channel = -1, (3, 4), (1, 2), 0
        shape = [channels, kh, kw, oh, ow]
    d = ir.AffineDimExpr.get
    read: list[ir.AffineExpr] = [ir.AffineConstantExpr.get(0)] * 4
    if batch >= 0:
        read[0] = d(batch)
    read[layout.channel] = d(channel)
    for i, dim in enumerate(layout.spatial):
        stride, dilation = shapes.strides[i], shapes.dilations[i]
        read[dim] = d(out[i]) * stride + d(window[i]) * dilation
    loops = len(shape)
    element = ir.RankedTensorType(image.type).element_type
    empty = tensor.EmptyOp(shape, element).result
    generic, block = create_generic(
        [Operand(image, ir.AffineMap.get(loops, 0, read))],
        [Operand(empty, ir.AffineMap.get_identity(loops))],
        ["parallel"] * loops,
        ir.Location.current,
    )
    finish_body(block, [block.arguments[0]])
    result: ir.Value = generic.results[0]
    return result


REWRITE = ConvRewrite(
    PRIMITIVE,
    _refuse,
    _rewrite,
    fix="narrow 'ops' to the convolutions it can rewrite (see docs/primitives/im2col.md)",
    into="a gather and linalg.matmul",
    none_taken="no convolution it rewrites (see details)",
)
"""This rewrite, as :func:`.conv_matmul.rewrite_convs` and ``convs_taken`` take it."""
