"""Lowering of a :class:`Model` to linalg on tensors, built with the MLIR Python bindings.

Each layer lowers the way a hand-written dialect conversion would (conv -> zero pad + fill +
``linalg.conv_2d_*`` + bias generic, max pool -> -inf pad + -inf fill + ``pooling_*_max``, avg
pool -> sum pool + divide, linear -> matmul reading the ``[out, in]`` weight transposed + bias,
flatten -> ``tensor.collapse_shape``). Every op a layer emits, weight constants excepted,
carries ``tdsched.layer``, ``tdsched.layer_type`` and the user's attributes; all of them,
weights included, are located at ``loc("<layer name>")``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np
from iree.compiler import ir
from iree.compiler.dialects import arith, func, linalg, tensor

from .graph import AttrValue, Layer, Layout, ModelGraph, Tensor, channel_axis, spatial_axes

Lowering = Callable[[Layer, list[ir.Value], list[ir.Value], Layout], ir.Value]


def lower_model(model: ModelGraph) -> str:
    """The module text (with locations) of ``func.func @<model name>(input) -> outputs``."""
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            entry = func.FuncOp(
                model.name,
                ([_tensor_type(model.input.shape)], [_tensor_type(t.shape) for t in model.outputs]),
            )
        block = entry.add_entry_block()
        values: dict[Tensor, ir.Value] = {model.input: block.arguments[0]}
        for layer in model.layers:
            args = [values[t] for t in layer.inputs]
            values[layer.output] = _lower_layer(layer, args, model.layout, block)
        with ir.InsertionPoint(block):
            func.ReturnOp([values[t] for t in model.outputs])
        module.operation.verify()
        return str(module.operation.get_asm(enable_debug_info=True))


def _lower_layer(layer: Layer, args: list[ir.Value], layout: Layout, block: ir.Block) -> ir.Value:
    """Emit ``layer`` at the end of ``block``: its weight constants, then its tagged ops."""
    with ir.Location.name(layer.name), ir.InsertionPoint(block):
        weights = [_constant(array) for array in _weight_arrays(layer, layout)]
        first = len(block.operations)
        result = _LOWERINGS[layer.type](layer, args, weights, layout)
        for op in list(block.operations)[first:]:
            _tag(op, layer)
    return result


def _weight_arrays(layer: Layer, layout: Layout) -> list[np.ndarray]:
    """Weight and bias, for conv2d and linear; a conv's weight in the filter order of the
    op :func:`_conv2d` emits (:func:`_conv_filter`)."""
    if layer.weight is None:
        return []
    weight, bias = layer.weights()
    if layer.type == "conv2d":
        weight = np.ascontiguousarray(_conv_filter(weight, layer.groups, layout))
    return [weight] if bias is None else [weight, bias]


def _conv_filter(weight: np.ndarray, groups: int, layout: Layout) -> np.ndarray:
    """A ``[F, C / G, KH, KW]`` conv weight in its op's order: FCHW or HWCF (one group),
    HWC (depthwise in NHWC: ``groups`` = C = F), GFCHW or GFHWC (``G`` groups of ``F / G``
    filters over ``C / G`` channels)."""
    f, cg, kh, kw = weight.shape
    if groups == 1:
        return weight if layout == "NCHW" else weight.transpose(2, 3, 1, 0)
    if _depthwise_op(layout, f, cg, groups):
        return weight[:, 0].transpose(1, 2, 0)
    grouped = weight.reshape(groups, f // groups, cg, kh, kw)
    return grouped if layout == "NCHW" else grouped.transpose(0, 1, 3, 4, 2)


def _depthwise_op(layout: Layout, filters: int, channels_per_group: int, groups: int) -> bool:
    """Whether the conv lowers to ``linalg.depthwise_conv_2d_nhwc_hwc``: one filter per
    channel, in NHWC. An NCHW depthwise conv takes the grouped op instead: IREE 3.13
    builds ``depthwise_conv_2d_nchw_chw`` wrong for Vulkan (seen on lavapipe: max abs
    error 2.6 on a 3x3 conv of 8 channels), and the grouped op right on both targets."""
    return layout == "NHWC" and channels_per_group == 1 and filters == groups


def _tag(op: ir.OpView, layer: Layer) -> None:
    attributes = op.attributes
    attributes["tdsched.layer"] = ir.StringAttr.get(layer.name)
    attributes["tdsched.layer_type"] = ir.StringAttr.get(layer.type)
    for key, value in layer.attrs.items():
        attributes[key] = _attribute(value)


def _attribute(value: AttrValue) -> ir.Attribute:
    """str -> StringAttr, bool -> BoolAttr, int -> i64 IntegerAttr, float -> f64 FloatAttr."""
    if isinstance(value, bool):
        return ir.BoolAttr.get(value)
    if isinstance(value, int):
        return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)
    if isinstance(value, float):
        return ir.FloatAttr.get_f64(value)
    return ir.StringAttr.get(value)


# -- small builders -----------------------------------------------------------------------


def _tensor_type(shape: Sequence[int]) -> ir.RankedTensorType:
    return ir.RankedTensorType.get(list(shape), ir.F32Type.get())


def _constant(array: np.ndarray) -> ir.Value:
    attr = ir.DenseElementsAttr.get(np.ascontiguousarray(array, dtype=np.float32))
    return arith.constant(_tensor_type(array.shape), attr)


def _scalar(value: float) -> ir.Value:
    return arith.constant(ir.F32Type.get(), value)


def _shape(value: ir.Value) -> list[int]:
    return list(ir.RankedTensorType(value.type).shape)


def _filled(shape: Sequence[int], value: ir.Value) -> ir.Value:
    """``linalg.fill`` of a fresh ``tensor.empty``."""
    return linalg.fill(value, outs=[tensor.empty(list(shape), ir.F32Type.get())])


def _pad(
    x: ir.Value, padding: tuple[int, int, int, int], layout: Layout, value: ir.Value
) -> ir.Value:
    """``tensor.pad`` of H, W by (top, left, bottom, right) with ``value``; ``x`` if no padding."""
    if not any(padding):
        return x
    h, w = spatial_axes(layout)
    low, high = [0] * 4, [0] * 4
    low[h], low[w], high[h], high[w] = padding
    shape = [size + lo + hi for size, lo, hi in zip(_shape(x), low, high, strict=True)]
    pad = tensor.PadOp(_tensor_type(shape), x, [], [], low, high)
    body = pad.region.blocks.append(*[ir.IndexType.get()] * 4)
    with ir.InsertionPoint(body):
        tensor.YieldOp(value)
    return pad.result


def _projection(rank: int, dims: Sequence[int]) -> ir.AffineMap:
    """``(d0, ..., d<rank-1>) -> (d<dims[0]>, ...)``."""
    return ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(d) for d in dims])


def _elementwise(
    inputs: list[ir.Value], dims: list[Sequence[int]], body: Callable[..., ir.Value]
) -> ir.Value:
    """A parallel ``linalg.generic`` over the first input's shape writing a fresh tensor.

    ``dims[i]`` lists the loop dims input ``i`` is indexed by (a broadcast when shorter);
    ``body`` maps the input scalars to the output scalar.
    """
    shape = _shape(inputs[0])
    rank = len(shape)
    maps = [_projection(rank, d) for d in dims] + [ir.AffineMap.get_identity(rank)]
    generic = linalg.GenericOp_(
        inputs,
        [tensor.empty(shape, ir.F32Type.get())],
        maps,
        [linalg.IteratorType.parallel] * rank,
    )
    block = generic.regions[0].blocks[0]
    with ir.InsertionPoint(block):
        linalg.YieldOp([body(*list(block.arguments)[: len(inputs)])])
    return generic.result


def _with_bias(x: ir.Value, bias: list[ir.Value], axis: int) -> ir.Value:
    """``x + bias`` broadcast along ``axis`` (a generic), or ``x`` when there is no bias."""
    if not bias:
        return x
    identity = range(len(_shape(x)))
    return _elementwise([x, bias[0]], [identity, [axis]], arith.addf)


# -- layers -------------------------------------------------------------------------------


def _conv2d(
    layer: Layer, args: list[ir.Value], weights: list[ir.Value], layout: Layout
) -> ir.Value:
    """A convolution: ``linalg.conv_2d_*`` (one group), ``linalg.depthwise_conv_2d_nhwc_hwc``
    (a filter per channel, NHWC), or with G groups ``linalg.conv_2d_ngchw_gfchw`` /
    ``conv_2d_nhwgc_gfhwc`` between a ``tensor.expand_shape`` that splits the channels
    into groups and a ``tensor.collapse_shape`` that joins the outputs' again."""
    window = layer.sliding_window()
    zero = _scalar(0.0)
    x = _pad(args[0], window.padding, layout, zero)
    axis = channel_axis(layout)
    groups, out_shape = layer.groups, list(layer.output_shape)
    filters = out_shape[axis]
    windowing = {"strides": list(window.stride), "dilations": list(window.dilation)}
    if groups == 1:
        conv = linalg.conv_2d_nchw_fchw if layout == "NCHW" else linalg.conv_2d_nhwc_hwcf
        out = conv(x, weights[0], outs=[_filled(out_shape, zero)], **windowing)
    elif _depthwise_op(layout, filters, _shape(x)[axis] // groups, groups):
        out = linalg.depthwise_conv_2d_nhwc_hwc(
            x, weights[0], outs=[_filled(out_shape, zero)], **windowing
        )
    else:
        grouped = linalg.conv_2d_ngchw_gfchw if layout == "NCHW" else linalg.conv_2d_nhwgc_gfhwc
        split = _split_channels(out_shape, axis, groups)
        out = grouped(_split(x, axis, groups), weights[0], outs=[_filled(split, zero)], **windowing)
        out = tensor.CollapseShapeOp(_tensor_type(out_shape), out, _joined(axis)).result
    return _with_bias(out, weights[1:], axis)


def _split_channels(shape: Sequence[int], axis: int, groups: int) -> list[int]:
    """``shape`` with its channel axis ``C`` made two, ``groups`` and ``C / groups``."""
    return [*shape[:axis], groups, shape[axis] // groups, *shape[axis + 1 :]]


def _joined(axis: int) -> list[list[int]]:
    """The reassociation that joins axes ``axis`` and ``axis + 1`` of a rank-5 tensor."""
    return [[d] for d in range(axis)] + [[axis, axis + 1]] + [[d + 1] for d in range(axis + 1, 4)]


def _split(x: ir.Value, axis: int, groups: int) -> ir.Value:
    """``x`` (rank 4) with its channels split into ``groups`` (``tensor.expand_shape``)."""
    shape = _split_channels(_shape(x), axis, groups)
    return tensor.expand_shape(_tensor_type(shape), x, _joined(axis), [], shape)


_POOLS = {
    ("max", "NCHW"): linalg.pooling_nchw_max,
    ("max", "NHWC"): linalg.pooling_nhwc_max,
    ("sum", "NCHW"): linalg.pooling_nchw_sum,
    ("sum", "NHWC"): linalg.pooling_nhwc_sum,
}
_POOL_IDENTITY = {"max": float("-inf"), "sum": 0.0}


def _pool(layer: Layer, x: ir.Value, kind: Literal["max", "sum"], layout: Layout) -> ir.Value:
    """Max or sum pooling; padding and the init fill use the reduction's identity."""
    window = layer.sliding_window()
    identity = _scalar(_POOL_IDENTITY[kind])
    return _POOLS[kind, layout](
        _pad(x, window.padding, layout, identity),
        tensor.empty(list(window.kernel), ir.F32Type.get()),
        outs=[_filled(layer.output_shape, identity)],
        strides=list(window.stride),
        dilations=list(window.dilation),
    )


def _max_pool(
    layer: Layer, args: list[ir.Value], weights: list[ir.Value], layout: Layout
) -> ir.Value:
    return _pool(layer, args[0], "max", layout)


def _avg_pool(
    layer: Layer, args: list[ir.Value], weights: list[ir.Value], layout: Layout
) -> ir.Value:
    """Sum pool, then divide by the window size or, excluding padding, by a count per position."""
    window = layer.sliding_window()
    total = _pool(layer, args[0], "sum", layout)
    identity = range(4)
    if layer.count_include_pad or not window.padded:
        size = float(window.kernel[0] * window.kernel[1])
        return _elementwise([total], [identity], lambda s: arith.divf(s, _scalar(size)))
    h_axis, w_axis = spatial_axes(layout)
    in_shape = layer.inputs[0].shape
    counts = _constant(window.valid_counts(in_shape[h_axis], in_shape[w_axis]))
    return _elementwise([total, counts], [identity, [h_axis, w_axis]], arith.divf)


def _flatten(
    layer: Layer, args: list[ir.Value], weights: list[ir.Value], layout: Layout
) -> ir.Value:
    return tensor.CollapseShapeOp(
        _tensor_type(layer.output_shape), args[0], [[0], [1, 2, 3]]
    ).result


def _linear(
    layer: Layer, args: list[ir.Value], weights: list[ir.Value], layout: Layout
) -> ir.Value:
    """``matmul(x, W)`` with indexing maps reading ``W [out, in]`` transposed, plus the bias."""
    transposed_b = [_projection(3, [0, 2]), _projection(3, [1, 2]), _projection(3, [0, 1])]
    out = linalg.matmul(
        args[0],
        weights[0],
        outs=[_filled(layer.output_shape, _scalar(0.0))],
        indexing_maps=transposed_b,
    )
    return _with_bias(out, weights[1:], 1)


def _relu(layer: Layer, args: list[ir.Value], weights: list[ir.Value], layout: Layout) -> ir.Value:
    identity = range(len(layer.output_shape))
    return _elementwise([args[0]], [identity], lambda x: arith.maximumf(x, _scalar(0.0)))


def _add(layer: Layer, args: list[ir.Value], weights: list[ir.Value], layout: Layout) -> ir.Value:
    identity = range(len(layer.output_shape))
    return _elementwise(args, [identity, identity], arith.addf)


_LOWERINGS: dict[str, Lowering] = {
    "conv2d": _conv2d,
    "relu": _relu,
    "add": _add,
    "max_pool": _max_pool,
    "avg_pool": _avg_pool,
    "adaptive_avg_pool": _avg_pool,
    "flatten": _flatten,
    "linear": _linear,
}
