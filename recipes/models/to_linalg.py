"""Lowering of a :class:`Model` to linalg on tensors, built with the MLIR Python bindings.

Each layer lowers the way a hand-written dialect conversion would (conv -> zero pad + fill +
``linalg.conv_2d_*`` + bias generic, max pool -> -inf pad + -inf fill + ``pooling_*_max``, avg
pool -> sum pool + divide, linear -> matmul reading the ``[out, in]`` weight transposed + bias,
flatten -> ``tensor.collapse_shape``, layer_norm -> three generics: the row sum, the row
sum of squared deviations, the normalization; gelu -> a generic with ``math.erf``; softmax
-> ``linalg.softmax``; attention -> the heads split and transposed, a batch matmul with K
transposed, the scaling, ``linalg.softmax``, a batch matmul with V, the heads joined
again). Every op a layer emits, weight constants excepted,
carries ``tdsched.layer``, ``tdsched.layer_type`` and the user's attributes; all of them,
weights included, are located at ``loc("<layer name>")``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np
from iree.compiler import ir
from iree.compiler.dialects import arith, func, linalg, tensor
from iree.compiler.dialects import math as math_dialect

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
    """Weight and bias, for conv2d, linear and layer_norm (gamma, beta); a conv's weight
    in the filter order of the op :func:`_conv2d` emits (:func:`_conv_filter`)."""
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


def _generic(
    inputs: list[ir.Value],
    init: ir.Value,
    dims: list[Sequence[int]],
    reduced: Sequence[int],
    body: Callable[..., ir.Value],
) -> ir.Value:
    """A ``linalg.generic`` over the loops of the first input (every one of its dims a
    loop), writing ``init``: ``dims[i]`` lists the loops input ``i`` is indexed by (a
    broadcast or a reduced value when shorter), the last entry those of ``init``; the
    loops in ``reduced`` are reductions. ``body`` maps the input scalars and the init's
    (the accumulator) to the value yielded."""
    rank = len(_shape(inputs[0]))
    iterators = [
        linalg.IteratorType.reduction if d in reduced else linalg.IteratorType.parallel
        for d in range(rank)
    ]
    maps = [_projection(rank, d) for d in dims]
    generic = linalg.GenericOp_(inputs, [init], maps, iterators)
    block = generic.regions[0].blocks[0]
    with ir.InsertionPoint(block):
        linalg.YieldOp([body(*block.arguments)])
    return generic.result


def _elementwise(
    inputs: list[ir.Value], dims: list[Sequence[int]], body: Callable[..., ir.Value]
) -> ir.Value:
    """A parallel ``linalg.generic`` over the first input's shape writing a fresh tensor.

    ``dims[i]`` lists the loop dims input ``i`` is indexed by (a broadcast when shorter);
    ``body`` maps the input scalars to the output scalar.
    """
    shape = _shape(inputs[0])
    out = tensor.empty(shape, ir.F32Type.get())
    return _generic(inputs, out, [*dims, range(len(shape))], (), lambda *a: body(*a[: len(inputs)]))


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


def _layer_norm(
    layer: Layer, args: list[ir.Value], weights: list[ir.Value], layout: Layout
) -> ir.Value:
    """Three generics over ``[N, D]``, as the ``row_norm`` generator's layernorm: the row
    sums, the rows' sums of squared deviations from their means, and the normalization
    (means and variances computed inside it from the sums) with gamma and beta."""
    x = args[0]
    n, d = _shape(x)
    count, epsilon = _scalar(float(d)), _scalar(layer.epsilon)
    rows = _filled([n], _scalar(0.0))
    whole, row, col = (0, 1), (0,), (1,)
    sums = _generic([x], rows, [whole, row], (1,), lambda a, acc: arith.addf(a, acc))

    def squared_deviation(a: ir.Value, total: ir.Value, acc: ir.Value) -> ir.Value:
        deviation = arith.subf(a, arith.divf(total, count))
        return arith.addf(arith.mulf(deviation, deviation), acc)

    squares = _generic([x, sums], rows, [whole, row, row], (1,), squared_deviation)

    def normalize(
        a: ir.Value, total: ir.Value, sq: ir.Value, g: ir.Value, b: ir.Value, _: ir.Value
    ) -> ir.Value:
        deviation = arith.subf(a, arith.divf(total, count))
        spread = math_dialect.sqrt(arith.addf(arith.divf(sq, count), epsilon))
        return arith.addf(arith.mulf(arith.divf(deviation, spread), g), b)

    inputs = [x, sums, squares, *weights]
    out = tensor.empty([n, d], ir.F32Type.get())
    return _generic(inputs, out, [whole, row, row, col, col, whole], (), normalize)


def _gelu(layer: Layer, args: list[ir.Value], weights: list[ir.Value], layout: Layout) -> ir.Value:
    """``0.5 x (1 + erf(x / sqrt 2))`` in one generic."""

    def body(x: ir.Value) -> ir.Value:
        erf = math_dialect.erf(arith.mulf(x, _scalar(1.0 / math.sqrt(2.0))))
        return arith.mulf(arith.mulf(x, _scalar(0.5)), arith.addf(erf, _scalar(1.0)))

    return _elementwise([args[0]], [range(len(layer.output_shape))], body)


def _softmax_of(x: ir.Value) -> ir.Value:
    """``linalg.softmax`` over the last dimension of ``x``."""
    shape = _shape(x)
    out = tensor.empty(shape, ir.F32Type.get())
    return linalg.SoftmaxOp([_tensor_type(shape)], x, out, len(shape) - 1).results[0]


def _softmax(
    layer: Layer, args: list[ir.Value], weights: list[ir.Value], layout: Layout
) -> ir.Value:
    return _softmax_of(args[0])


def _heads_first(x: ir.Value, heads: int) -> ir.Value:
    """``[T, D]`` as ``[heads, T, D / heads]``: an expand_shape, then a linalg.transpose."""
    t, d = _shape(x)
    split = [t, heads, d // heads]
    expanded = tensor.expand_shape(_tensor_type(split), x, [[0], [1, 2]], [], split)
    out = tensor.empty([heads, t, d // heads], ir.F32Type.get())
    return linalg.transpose(expanded, outs=[out], permutation=[1, 0, 2]).results[0]


def _attention(
    layer: Layer, args: list[ir.Value], weights: list[ir.Value], layout: Layout
) -> ir.Value:
    """Each head's ``softmax(Q Kᵀ / sqrt(d)) V`` as a frontend lowers it: the heads split
    and moved first, a batch matmul reading K transposed (indexing maps), the scaling,
    ``linalg.softmax`` over the keys, a batch matmul with V, the heads joined again."""
    heads = layer.heads
    q, k, v = (_heads_first(a, heads) for a in args)
    _, s, dh = _shape(q)
    t = _shape(k)[1]
    zero = _scalar(0.0)
    scores = linalg.batch_matmul(
        q,
        k,
        outs=[_filled([heads, s, t], zero)],
        indexing_maps=[
            _projection(4, [0, 1, 3]),
            _projection(4, [0, 2, 3]),
            _projection(4, [0, 1, 2]),
        ],
    )
    scale = _scalar(1.0 / math.sqrt(dh))
    scaled = _elementwise([scores], [range(3)], lambda a: arith.mulf(a, scale))
    context = linalg.batch_matmul(_softmax_of(scaled), v, outs=[_filled([heads, s, dh], zero)])
    tokens_first = linalg.transpose(
        context, outs=[tensor.empty([s, heads, dh], ir.F32Type.get())], permutation=[1, 0, 2]
    ).results[0]
    joined = _tensor_type(layer.output_shape)
    return tensor.CollapseShapeOp(joined, tokens_first, [[0], [1, 2]]).result


_LOWERINGS: dict[str, Lowering] = {
    "conv2d": _conv2d,
    "relu": _relu,
    "add": _add,
    "max_pool": _max_pool,
    "avg_pool": _avg_pool,
    "adaptive_avg_pool": _avg_pool,
    "flatten": _flatten,
    "linear": _linear,
    "layer_norm": _layer_norm,
    "gelu": _gelu,
    "softmax": _softmax,
    "attention": _attention,
}
