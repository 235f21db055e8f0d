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

from collections import Counter
from dataclasses import dataclass
from math import prod

from iree.compiler import ir
from iree.compiler.dialects import linalg, tensor

from ..match import OpCriteria
from ..payload import ops_under
from .report import RewriteReport, describe_op, plan_each, selected

PRIMITIVE = "conv1x1_to_matmul"
_INHERENT = {"dilations", "strides", "linalg.memoized_indexing_maps", "operandSegmentSizes"}
"""Attributes of a convolution that belong to it, not to its layer (never copied)."""


@dataclass(frozen=True)
class Conv1x1ToMatmulOptions:
    """Which convolutions to rewrite (``None``: every one with a 1x1 filter)."""

    ops: OpCriteria | None = None


@dataclass(frozen=True)
class _Layout:
    """Where one named convolution keeps its dims, and how its matmul is formed.

    Positions index the 4-d input, filter and output shapes (the batch is dim 0 in all
    three); ``pixels_first`` says the pixels are the matmul's left-hand side (NHWC)
    rather than its right (NCHW); ``filter_fc`` that the filter collapses to ``F x C``
    (then transposed for NHWC).
    """

    channel: int
    spatial: tuple[int, int]
    filter_window: tuple[int, int]
    filter_fc: bool
    pixels_first: bool

    def input_groups(self) -> list[list[int]]:
        """Input (and output) dims collapsed to ``pixels x channels`` (or the reverse)."""
        return [[0, 1, 2], [3]] if self.pixels_first else [[0, 1], [2, 3]]

    def filter_groups(self) -> list[list[int]]:
        return [[0], [1, 2, 3]] if self.filter_fc else [[0, 1, 2], [3]]


_LAYOUTS = {
    "linalg.conv_2d_nhwc_hwcf": _Layout(3, (1, 2), (0, 1), filter_fc=False, pixels_first=True),
    "linalg.conv_2d_nhwc_fhwc": _Layout(3, (1, 2), (1, 2), filter_fc=True, pixels_first=True),
    "linalg.conv_2d_nchw_fchw": _Layout(1, (2, 3), (2, 3), filter_fc=True, pixels_first=False),
}


@dataclass(frozen=True)
class _Plan:
    """A convolution that can be rewritten: its layout, strides and operand shapes."""

    op: ir.Operation
    layout: _Layout
    strides: tuple[int, int]
    input_shape: list[int]
    output_shape: list[int]


def conv1x1_to_matmul(module: ir.Module, options: Conv1x1ToMatmulOptions) -> RewriteReport:
    """Rewrite every selected 1x1 convolution of ``module`` into a matmul, in place.

    When ``options.ops`` selects convolutions explicitly, one that cannot be rewritten
    (a larger filter, dynamic shapes, NCHW with a batch above 1) raises
    :class:`GraphRewriteError` before anything is rewritten; otherwise it is left as it
    is and the report's details say why.
    """
    plans, left = plan_each(
        _selected_convs(module, options.ops),
        _plan,
        options.ops is not None,
        refusal=f"{PRIMITIVE}: cannot rewrite",
        fix="narrow 'ops' to convolutions with a 1x1 filter",
        left="left as it is",
    )
    details = [_describe(plan) for plan in plans]
    names = [plan.op.name for plan in plans]
    for plan in plans:
        _rewrite(plan)
    return _report(names, tuple(details + left))


def _selected_convs(module: ir.Module, criteria: OpCriteria | None) -> list[ir.Operation]:
    return ops_under(module.operation, lambda op: op.name in _LAYOUTS and selected(op, criteria))


def _plan(op: ir.Operation) -> _Plan | str:
    """How to rewrite the convolution ``op``, or why it cannot be."""
    layout = _LAYOUTS[op.name]
    types = [v.type for v in (*op.operands, *op.results)]
    if not all(isinstance(t, ir.RankedTensorType) for t in types):
        return "it works on buffers; the rewrite needs tensors"
    shapes = [ir.RankedTensorType(t) for t in types]
    if not all(s.has_static_shape for s in shapes):
        return "its shapes are dynamic; make them static first"
    image, weights, output = (list(s.shape) for s in shapes[:3])
    window = [weights[d] for d in layout.filter_window]
    if window != [1, 1]:
        return f"its filter is {window[0]}x{window[1]}, not 1x1"
    if not layout.pixels_first and image[0] != 1:
        return (
            f"it is NCHW with batch {image[0]}: its images' pixels are not one "
            "matrix (batch 1, or an NHWC convolution, can be rewritten)"
        )
    strides = tuple(ir.DenseIntElementsAttr(op.attributes["strides"]))
    return _Plan(op, layout, (int(strides[0]), int(strides[1])), image, output)


def _rewrite(plan: _Plan) -> None:
    """Replace the convolution by slice + collapses + ``linalg.matmul`` + expand."""
    op, layout = plan.op, plan.layout
    image, weights, init = op.operands
    with ir.InsertionPoint(op), op.location:
        pixels = _collapsed(_strided(image, plan), layout.input_groups())
        matrix = _collapsed(weights, layout.filter_groups())
        if layout.filter_fc and layout.pixels_first:
            matrix = _transposed(matrix)
        acc = _collapsed(init, layout.input_groups())
        lhs, rhs = (pixels, matrix) if layout.pixels_first else (matrix, pixels)
        product = linalg.matmul(lhs, rhs, outs=[acc])
        matmul = product.owner
        for name in op.attributes:
            if name not in _INHERENT:
                matmul.attributes[name] = op.attributes[name]
        result = tensor.ExpandShapeOp(
            op.results[0].type, product, layout.input_groups(), [], plan.output_shape
        ).result
    op.results[0].replace_all_uses_with(result)
    op.erase()


def _strided(image: ir.Value, plan: _Plan) -> ir.Value:
    """The input pixels the convolution reads: every stride-th, up to the output's size."""
    layout = plan.layout
    if plan.strides == (1, 1) and plan.input_shape == _read_shape(plan):
        return image
    sizes = _read_shape(plan)
    steps = [1, 1, 1, 1]
    for dim, stride in zip(layout.spatial, plan.strides, strict=True):
        steps[dim] = stride
    source = ir.RankedTensorType(image.type)
    result = ir.RankedTensorType.get(sizes, source.element_type)
    return tensor.ExtractSliceOp(result, image, [], [], [], [0] * 4, sizes, steps).result


def _read_shape(plan: _Plan) -> list[int]:
    """The input's shape with its spatial dims cut to the output's."""
    shape = list(plan.input_shape)
    for dim in plan.layout.spatial:
        shape[dim] = plan.output_shape[dim]
    return shape


def _collapsed(value: ir.Value, groups: list[list[int]]) -> ir.Value:
    source = ir.RankedTensorType(value.type)
    shape = [prod(source.shape[d] for d in group) for group in groups]
    target = ir.RankedTensorType.get(shape, source.element_type)
    return tensor.CollapseShapeOp(target, value, groups).result


def _transposed(matrix: ir.Value) -> ir.Value:
    source = ir.RankedTensorType(matrix.type)
    rows, cols = source.shape
    empty = tensor.EmptyOp([cols, rows], source.element_type).result
    result: ir.Value = linalg.transpose(matrix, outs=[empty], permutation=[1, 0])
    return result


def _describe(plan: _Plan) -> str:
    """``linalg.conv_2d_nchw_fchw at loc: 1x256x56x56 stride 2x2 -> linalg.matmul 512x784x256``."""
    m, n, k = _matmul_sizes(plan)
    stride = "" if plan.strides == (1, 1) else f", stride {plan.strides[0]}x{plan.strides[1]}"
    return (
        f"{describe_op(plan.op)}: input {_dims(plan.input_shape)}{stride} -> "
        f"linalg.matmul {m}x{n}x{k}"
    )


def _matmul_sizes(plan: _Plan) -> tuple[int, int, int]:
    """The matmul's ``M, N, K``."""
    layout, out = plan.layout, plan.output_shape
    pixels = prod(out[d] for d in (0, *layout.spatial))
    channels = plan.input_shape[layout.channel]
    filters = out[layout.channel]  # the output keeps its channels where the input does
    return (pixels, filters, channels) if layout.pixels_first else (filters, pixels, channels)


def _dims(sizes: list[int]) -> str:
    return "x".join(str(s) for s in sizes)


def _report(names: list[str], details: tuple[str, ...]) -> RewriteReport:
    if not names:
        why = "no 1x1 convolution (see details)" if details else "no convolution selected"
        return RewriteReport(PRIMITIVE, f"changed nothing: {why}", False, details)
    kinds = ", ".join(f"{n} {name}" for name, n in Counter(names).items())
    return RewriteReport(PRIMITIVE, f"rewrote {kinds} into linalg.matmul", True, details)
