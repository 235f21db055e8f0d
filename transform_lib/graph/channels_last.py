"""``channels_last``: run an NCHW network in NHWC, its layout converted once at each
input and once at each output instead of around every layer.

ONNX and PyTorch models arrive NCHW. IREE 3.13 compiles ``linalg.conv_2d_nchw_fchw``
with the channels outermost, which its CPU pipeline does not vectorize well, and the
convolution rewrites and kernels of tdsched work best with the channels innermost
(a 1x1 convolution is then a plain ``pixels x C`` times ``C x F`` matmul). The rewrite
has two steps:

1. **Convert.** Every selected ``linalg.conv_2d_nchw_fchw`` becomes
   ``linalg.conv_2d_nhwc_hwcf``, every ``linalg.depthwise_conv_2d_nchw_chw``
   ``linalg.depthwise_conv_2d_nhwc_hwc`` and every ``linalg.pooling_nchw_max`` / ``_sum`` its
   ``pooling_nhwc`` form, between a transpose of its input to NHWC and a transpose of its
   result back to NCHW. The filter is transposed to ``HWCF`` (``HWC``): a constant
   filter's elements here (a new constant), any other filter by a ``linalg.transpose``.
   An init that is a ``tensor.empty``, a ``linalg.fill`` or a ``linalg.broadcast`` of a
   per-channel bias is rebuilt in NHWC, any other init transposed.
2. **Propagate.** Each transpose back to NCHW is pushed towards the function's results
   through the ops whose result does not depend on the layout: an elementwise
   ``linalg.generic`` (all loops parallel, rank 4, simple indexing maps, no
   ``linalg.index``) is rebuilt over NHWC loops, its other operands (a BN scale
   ``1xCx1x1``, a residual) read through permuted maps; a ``tensor.pad`` pads the
   permuted dims; a ``tensor.concat`` of channels concatenates the last dim. A transpose
   to NHWC of a transpose back to NCHW cancels. What is left: a transpose of each input
   where it first meets a converted op, one back where a result leaves the network, and
   one before any op the propagation does not know (a ``tensor.collapse_shape``
   flattening the features, a matmul).

Batch normalization and activations stay elementwise ops, which IREE fuses into the
convolution's dispatch as its epilogue. Everything else is left as it is. The report
says how many ops were converted and how many transposes are left.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from iree.compiler import ir
from iree.compiler.dialects import arith, linalg, tensor

from ..generic_build import (
    Operand,
    SimpleMap,
    create_generic,
    finish_body,
    iterator_kinds,
    move_body,
    operands,
    simple_map,
    simple_results,
)
from ..match import OpCriteria
from ..payload import ops_under
from .report import RewriteReport, keep_layer_attributes, plan_each, selected

PRIMITIVE = "channels_last"
FORWARD = (0, 2, 3, 1)
"""``linalg.transpose`` permutation from NCHW to NHWC (result dim ``j`` is input dim
``FORWARD[j]``)."""
BACKWARD = (0, 3, 1, 2)
"""The permutation from NHWC back to NCHW."""
_NAMED: dict[str, tuple[Callable[..., ir.Value], tuple[int, ...] | None]] = {
    "linalg.conv_2d_nchw_fchw": (linalg.conv_2d_nhwc_hwcf, (2, 3, 1, 0)),
    "linalg.depthwise_conv_2d_nchw_chw": (linalg.depthwise_conv_2d_nhwc_hwc, (1, 2, 0)),
    "linalg.pooling_nchw_max": (linalg.pooling_nhwc_max, None),
    "linalg.pooling_nchw_sum": (linalg.pooling_nhwc_sum, None),
}
"""The NCHW ops converted: the builder of each one's NHWC form, and the permutation of
its filter (``FCHW`` to ``HWCF``, ``CHW`` to ``HWC``; a pooling's window is kept)."""
_GROUPED = "linalg.conv_2d_ngchw_gfchw"
"""A grouped conv: converted when it is a depthwise conv as the model builder writes one
(:func:`_grouped_refusal`), to ``linalg.depthwise_conv_2d_nhwc_hwc``."""
_GENERIC_INHERENT = {
    "indexing_maps",
    "iterator_types",
    "operandSegmentSizes",
    "doc",
    "library_call",
}
_IDENTITY: SimpleMap = (0, 1, 2, 3)
_NEW_LOOP: SimpleMap = tuple(FORWARD.index(i) for i in range(4))
"""Where each NCHW loop of an elementwise generic goes among its NHWC loops."""


@dataclass(frozen=True)
class ChannelsLastOptions:
    """Which NCHW convolutions and poolings to convert (``None``: every one with static
    shapes); the propagation then runs over the whole module."""

    ops: OpCriteria | None = None


def channels_last(module: ir.Module, options: ChannelsLastOptions) -> RewriteReport:
    """Convert the selected NCHW ops of ``module`` to NHWC and propagate the layout
    (see the module docstring), in place."""
    kinds = (*_NAMED, _GROUPED)
    named = ops_under(module.operation, lambda op: op.name in kinds and selected(op, options.ops))
    taken, left = plan_each(
        named,
        lambda op: _refusal(op) or op,
        options.ops is not None,
        refusal=f"{PRIMITIVE}: cannot convert",
        fix="leave it out of 'ops'",
        left="left as it is",
    )
    if not taken:
        why = "no NCHW convolution or pooling with static shapes" if not left else left[0]
        return RewriteReport(PRIMITIVE, f"changed nothing: {why}", False, tuple(left))
    for op in taken:
        with ir.InsertionPoint(op), op.location:
            if op.name == _GROUPED:
                _convert_grouped_depthwise(op)
            else:
                _convert(op)
    moved = _propagate(module)
    remaining = len(ops_under(module.operation, lambda op: _permutation(op) in (FORWARD, BACKWARD)))
    summary = (
        f"converted {len(taken)} NCHW ops to NHWC; moved the layout through {moved} ops; "
        f"{remaining} transposes left"
    )
    return RewriteReport(PRIMITIVE, summary, True, tuple(left))


def _refusal(op: ir.Operation) -> str | None:
    types = [v.type for v in (*op.operands, *op.results)]
    if not all(isinstance(t, ir.RankedTensorType) for t in types):
        return "it works on buffers; the rewrite needs tensors"
    if not all(ir.RankedTensorType(t).has_static_shape for t in types):
        return "its shapes are dynamic; make them static first"
    if op.name == _GROUPED:
        return _grouped_refusal(op)
    if op.name == "linalg.depthwise_conv_2d_nchw_chw" and _spatial(op.results[0]) == [1, 1]:
        return _ONE_BY_ONE
    return None


_ONE_BY_ONE = (
    "its output is 1x1, and IREE 3.13 fails to compile such an NHWC depthwise conv "
    "(its unit-dim folding infers a wrong filter shape)"
)


def _spatial(value: ir.Value) -> list[int]:
    """An NCHW (or grouped ``N x G x F x H x W``) tensor's height and width."""
    return list(ir.RankedTensorType(value.type).shape[-2:])


def _grouped_refusal(op: ir.Operation) -> str | None:
    """Why a ``linalg.conv_2d_ngchw_gfchw`` is not a depthwise conv written as the model
    builder writes one (an NCHW input expanded to ``N x G x 1 x H x W``, one filter per
    group, the result read only by a collapse back to ``N x G x OH x OW``, a fill or an
    empty as its init), or ``None``."""
    image, weights = (ir.RankedTensorType(v.type).shape for v in op.operands[:2])
    if image[2] != 1 or weights[1] != 1:
        return "a grouped conv with more than one channel or filter per group stays NCHW"
    source = op.operands[0].owner if isinstance(op.operands[0], ir.OpResult) else None
    users = [use.owner for use in op.results[0].uses]
    if source is None or source.name != "tensor.expand_shape" or len(users) != 1:
        return "its input is not an NCHW tensor expanded to groups, or its result is read twice"
    init = op.operands[2]
    filled = isinstance(init, ir.OpResult) and init.owner.name in ("linalg.fill", "tensor.empty")
    if users[0].name != "tensor.collapse_shape" or not filled:
        return "its result is not collapsed back to NCHW, or its init is not a fill"
    if _spatial(op.results[0]) == [1, 1]:
        return _ONE_BY_ONE
    return None


def _convert_grouped_depthwise(op: ir.Operation) -> None:
    """Replace a depthwise conv written as a grouped one (see :func:`_grouped_refusal`),
    with the expand before it and the collapse after it, by
    ``linalg.depthwise_conv_2d_nhwc_hwc`` between transposes."""
    image = op.operands[0].owner.operands[0]
    weights, init = op.operands[1], op.operands[2]
    kind = ir.RankedTensorType(weights.type)
    groups, _, _, kh, kw = kind.shape
    collapse = next(iter(op.results[0].uses)).owner
    filt = _constant_transposed(weights, (1, 2, 0), shape=(groups, kh, kw))
    if filt is None:
        flat_type = ir.RankedTensorType.get([groups, kh, kw], kind.element_type)
        flat = tensor.CollapseShapeOp(flat_type, weights, [[0, 1, 2], [3], [4]]).result
        filt = transposed(flat, (1, 2, 0))
    out = ir.RankedTensorType(collapse.results[0].type)
    empty = tensor.EmptyOp([out.shape[p] for p in FORWARD], out.element_type).result
    fill = init.owner
    acc = linalg.fill(fill.operands[0], outs=[empty]) if fill.name == "linalg.fill" else empty
    result = linalg.depthwise_conv_2d_nhwc_hwc(
        transposed(image, FORWARD), filt, outs=[acc], **_windowing(op)
    )
    keep_layer_attributes(op, result.owner)
    collapse.results[0].replace_all_uses_with(transposed(result, BACKWARD))
    collapse.erase()
    op.erase()


def _windowing(op: ir.Operation) -> dict[str, ir.Attribute]:
    """A conv's or pooling's strides and dilations, as it carries them."""
    return {name: op.attributes[name] for name in ("strides", "dilations") if name in op.attributes}


def _convert(op: ir.Operation) -> None:
    """Replace one NCHW conv or pooling by its NHWC form between transposes."""
    image, second, init = op.operands
    build, to_nhwc = _NAMED[op.name]
    if to_nhwc is not None:
        second = _constant_transposed(second, to_nhwc) or transposed(second, to_nhwc)
    result = build(transposed(image, FORWARD), second, outs=[_init_nhwc(init)], **_windowing(op))
    keep_layer_attributes(op, result.owner)
    op.results[0].replace_all_uses_with(transposed(result, BACKWARD))
    op.erase()


def transposed(value: ir.Value, permutation: Sequence[int]) -> ir.Value:
    """``value`` transposed by ``permutation``, a transpose of a transpose folded."""
    source = _permutation(value.owner) if isinstance(value, ir.OpResult) else None
    if source is not None and [source[p] for p in permutation] == list(range(len(permutation))):
        inner: ir.Value = value.owner.operands[0]
        return inner
    kind = ir.RankedTensorType(value.type)
    empty = tensor.EmptyOp([kind.shape[p] for p in permutation], kind.element_type).result
    result: ir.Value = linalg.transpose(value, outs=[empty], permutation=list(permutation)).results[
        0
    ]
    return result


def _constant_transposed(
    value: ir.Value, permutation: Sequence[int], shape: Sequence[int] | None = None
) -> ir.Value | None:
    """A new ``arith.constant`` holding ``value``'s elements (reshaped to ``shape`` first,
    when given) transposed, when ``value`` is an ``arith.constant`` of dense elements
    (``None`` otherwise).

    IREE 3.13 raises a matmul whose constant operand goes through a ``linalg.transpose``
    into a transposed-operand contraction before it evaluates constants at compile time,
    and runs that at a few GFLOP/s; transposing the weights here leaves no transpose."""
    producer = value.owner if isinstance(value, ir.OpResult) else None
    if producer is None or producer.name != "arith.constant":
        return None
    try:
        dense = ir.DenseElementsAttr(producer.attributes["value"])
    except ValueError:
        return None
    kind = ir.RankedTensorType(value.type)
    source = list(kind.shape) if shape is None else list(shape)
    new_type = ir.RankedTensorType.get([source[p] for p in permutation], kind.element_type)
    if dense.is_splat:
        attr = ir.DenseElementsAttr.get_splat(new_type, dense.get_splat_value())
    else:
        data = np.ascontiguousarray(np.array(dense).reshape(source).transpose(permutation))
        attr = ir.DenseElementsAttr.get(data, type=kind.element_type)
    result: ir.Value = arith.ConstantOp(new_type, attr).result
    return result


def _permutation(op: ir.Operation | ir.OpView) -> tuple[int, ...] | None:
    """A ``linalg.transpose``'s permutation (``None`` for any other op)."""
    if op.name != "linalg.transpose":
        return None
    return tuple(ir.DenseI64ArrayAttr(op.attributes["permutation"]))


def _init_nhwc(init: ir.Value) -> ir.Value:
    """An NCHW init rebuilt in NHWC: an empty, a fill or a broadcast the same way;
    anything else transposed."""
    kind = ir.RankedTensorType(init.type)
    shape = [kind.shape[p] for p in FORWARD]
    if not isinstance(init, ir.OpResult):
        return transposed(init, FORWARD)
    producer = init.owner
    name = producer.name
    if name == "tensor.empty":
        return tensor.EmptyOp(shape, kind.element_type).result
    if name == "linalg.fill":
        empty = tensor.EmptyOp(shape, kind.element_type).result
        filled: ir.Value = linalg.fill(producer.operands[0], outs=[empty])
        return filled
    if name == "linalg.broadcast":
        added = list(ir.DenseI64ArrayAttr(producer.attributes["dimensions"]))
        kept = [d for d in range(4) if d not in added]
        moved = [FORWARD.index(d) for d in kept]
        if moved == sorted(moved):
            empty = tensor.EmptyOp(shape, kind.element_type).result
            dims = sorted(FORWARD.index(d) for d in added)
            spread = linalg.broadcast(producer.operands[0], outs=[empty], dimensions=dims)
            result: ir.Value = spread.results[0]
            return result
    return transposed(init, FORWARD)


def _propagate(module: ir.Module) -> int:
    """Push transposes back to NCHW through the ops that allow it, until none moves;
    erase what became dead. Returns how many ops were rebuilt in NHWC."""
    moved = 0
    while _sink_one(module):
        moved += 1
    _erase_dead(module)
    return moved


def _sink_one(module: ir.Module) -> bool:
    """Rebuild one op that reads a transpose back to NCHW in NHWC; ``False`` when no op
    can be (the walk restarts after each rebuild: the rebuild erases ops)."""
    for back in ops_under(module.operation, lambda op: _permutation(op) == BACKWARD):
        for use in back.results[0].uses:
            if _sink(use.owner.operation, back):
                return True
    return False


def _sink(user: ir.Operation, back: ir.Operation) -> bool:
    """Rebuild ``user``, which reads the NCHW result of transpose ``back``, in NHWC (a
    transpose to NHWC cancels); ``False`` when ``user`` is an op the layout cannot move
    through."""
    source = back.operands[0]
    if _permutation(user) == FORWARD:
        user.results[0].replace_all_uses_with(source)
        user.erase()
        return True
    rebuild = {
        "linalg.generic": _sink_generic,
        "tensor.pad": _sink_pad,
        "tensor.concat": _sink_concat,
    }.get(user.name)
    if rebuild is None:
        return False
    with ir.InsertionPoint(user), user.location:
        rebuilt = rebuild(user)
        if rebuilt is None:
            return False
        results, nhwc = rebuilt
        for old, new in zip(user.results, results, strict=True):
            old.replace_all_uses_with(transposed(new, BACKWARD) if nhwc else new)
    user.erase()
    return True


def _sink_generic(op: ir.Operation) -> tuple[list[ir.Value], bool] | None:
    """``op`` reading the NHWC sources of its transposed inputs: over NHWC loops (results
    in NHWC) when none of its other activations is read in NCHW order, else over its own
    loops (results as they were). ``None`` when ``op`` is not elementwise (see the
    module docstring)."""
    inputs, outputs = operands(op)
    if iterator_kinds(op) != ("parallel",) * 4 or _indexes(op):
        return None
    if any(simple_results(o.map) is None for o in inputs) or any(
        simple_results(o.map) != _IDENTITY for o in outputs
    ):
        return None
    read: list[tuple[ir.Value, SimpleMap]] = []
    for operand in inputs:
        results = simple_results(operand.map)
        assert results is not None
        value = operand.value
        if isinstance(value, ir.OpResult) and _permutation(value.owner) == BACKWARD:
            value = value.owner.operands[0]
            results = tuple(results[BACKWARD.index(k)] for k in range(4))
        read.append((value, results))
    nhwc = not any(results == _IDENTITY for _, results in read)
    if nhwc:
        read = [(v, tuple(None if r is None else _NEW_LOOP[r] for r in m)) for v, m in read]
        new_outputs = [Operand(_init_nhwc(o.value), simple_map(4, _IDENTITY)) for o in outputs]
    else:
        new_outputs = list(outputs)
    new_inputs = [Operand(value, simple_map(4, results)) for value, results in read]
    generic, block = create_generic(new_inputs, new_outputs, iterator_kinds(op), op.location)
    for name in op.attributes:
        if name not in _GENERIC_INHERENT:
            generic.attributes[name] = op.attributes[name]
    body = op.regions[0].blocks[0]
    yielded = move_body(op, block, list(block.arguments)[: len(body.arguments)])
    finish_body(block, yielded)
    return list(generic.results), nhwc


def _indexes(op: ir.Operation) -> bool:
    return any(inner.name == "linalg.index" for inner in op.regions[0].blocks[0].operations)


def _sink_pad(op: ir.Operation) -> tuple[list[ir.Value], bool] | None:
    """The pad of the NHWC source: the same padding, of the permuted dims."""
    view = op.opview
    if list(view.low) or list(view.high) or len(ir.RankedTensorType(op.results[0].type).shape) != 4:
        return None
    low = list(ir.DenseI64ArrayAttr(op.attributes["static_low"]))
    high = list(ir.DenseI64ArrayAttr(op.attributes["static_high"]))
    clone = op.clone()
    source = op.operands[0].owner.operands[0]
    clone.operands[0] = source
    clone.attributes["static_low"] = ir.DenseI64ArrayAttr.get([low[p] for p in FORWARD])
    clone.attributes["static_high"] = ir.DenseI64ArrayAttr.get([high[p] for p in FORWARD])
    kind = ir.RankedTensorType(op.results[0].type)
    clone.results[0].set_type(
        ir.RankedTensorType.get([kind.shape[p] for p in FORWARD], kind.element_type)
    )
    return [clone.results[0]], True


def _sink_concat(op: ir.Operation) -> tuple[list[ir.Value], bool] | None:
    """A concatenation of channels (dim 1) as one of NHWC's last dim."""
    kind = ir.RankedTensorType(op.results[0].type)
    if len(kind.shape) != 4 or ir.IntegerAttr(op.attributes["dim"]).value != 1:
        return None
    pieces = [transposed(value, FORWARD) for value in op.operands]
    shape = [kind.shape[p] for p in FORWARD]
    joined = tensor.ConcatOp(ir.RankedTensorType.get(shape, kind.element_type), 3, pieces)
    for name in op.attributes:
        if name != "dim":
            joined.operation.attributes[name] = op.attributes[name]
    return [joined.result], True


def _erase_dead(module: ir.Module) -> None:
    """Erase the transposes, empties, fills, broadcasts and constants left without users."""
    dead_kinds = {
        "tensor.expand_shape",
        "linalg.transpose",
        "tensor.empty",
        "linalg.fill",
        "linalg.broadcast",
        "arith.constant",
    }
    progress = True
    while progress:
        progress = False
        for op in ops_under(module.operation, lambda op: op.name in dead_kinds):
            if all(not list(result.uses) for result in op.results):
                op.erase()
                progress = True
