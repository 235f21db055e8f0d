"""Graph rewrite hoist_pad: the producers of a padded tensor compute its border too.

A ``tensor.pad`` by a constant of a chain of pointwise producers, as in a ResNet
bottleneck::

    %r = relu(conv1x1(%x) + %b)                      : 1x56x56x64
    %p = tensor.pad %r low[0, 1, 1, 0] high[0, 1, 1, 0] (0.0)

becomes the same chain computed on the padded domain, from padded inputs, and a mask
that writes the pad value wherever the pad would have::

    %xp = tensor.pad %x low[0, 1, 1, 0] high[0, 1, 1, 0] (0.0)   {tdsched.hoisted_pad}
    %r  = relu(conv1x1(%xp) + %b)                    : 1x58x58x64
    %p  = linalg.generic {tdsched.pad_mask} ins(%r): select(1 <= h < 57 and 1 <= w < 57, r, 0.0)

Why: when a consumer with a halo (a 3x3 conv) is tiled and the pad's producers are
fused into its loop, the producers of a padded tensor get border tiles of dynamic size
(``max(0, min(...))`` rows), which IREE's CPU backend cannot allocate. Computed on the
padded domain, every tile of every producer has the static size of the consumer's halo
tile, so a whole bottleneck can be one dispatch. The price is the border: the
producers compute ``58 x 58`` pixels where ``56 x 56`` are kept (and the mask).

What is hoisted through, consumer first: a linalg op whose only result has one use,
whose padded dims are parallel loops that every operand reads pointwise (a plain loop
dim, or that dim plus loops of range 1, as in a 1x1 convolution with stride 1), and
whose body does not read loop indices. Named 2-d convolutions (``conv_2d_nhwc_hwcf``,
``conv_2d_nhwc_fhwc``, ``conv_2d_nchw_fchw``) and ``linalg.generic`` are read; other
named ops end the chain (generalize them first). A ``tensor.empty`` init is re-made at
the padded shape and a ``linalg.fill`` init re-filled. Where the chain ends (a function
argument, an op with other users, or one that reads the padded dims through a window),
the value is padded with zeros by a new ``tensor.pad`` marked ``tdsched.hoisted_pad``;
a recipe can keep those out of a dispatch region (``stop``). Values read without the
padded dims (a bias, a filter) are left as they are.

Preconditions: static padding and shapes, a constant pad value (or one defined outside
the pad), and a source produced by an op that can be hoisted through; otherwise the pad
is left as it is (or refused, when ``ops`` selects it explicitly).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from iree.compiler import ir
from iree.compiler.dialects import arith, linalg, tensor

from ..generic_build import Operand, create_generic, finish_body, iterator_kinds
from ..match import LAYER_ATTR, OpCriteria
from ..payload import ops_under
from .conv_matmul import LAYOUTS, conv_pair
from .pad_ops import PAD, empty_like, erase_dead, materialized, pad_value, static_padding
from .report import RewriteReport, describe_op, plan_each, selected

PRIMITIVE = "hoist_pad"
HOISTED_ATTR = "tdsched.hoisted_pad"
"""Marks the pads this rewrite puts on the inputs of a hoisted chain."""
MASK_ATTR = "tdsched.pad_mask"
"""Marks the generic that writes the pad value on the border."""

Pads = dict[int, tuple[int, int]]
"""Padding per dim that has any: ``{dim: (low, high)}``."""

EMPTY, FILL = "empty", "fill"
"""What :func:`_how` says of an init that is made again at the padded shape."""


@dataclass(frozen=True)
class HoistPadOptions:
    """Which ``tensor.pad`` ops to hoist (``None``: every one that can be)."""

    ops: OpCriteria | None = None


@dataclass(frozen=True)
class _Hoist:
    """An op the border is computed through, and the padding each operand gets."""

    op: ir.Operation
    operand_pads: tuple[Pads, ...]


@dataclass(frozen=True)
class _Plan:
    pad: ir.Operation
    value: ir.Value
    pads: Pads
    source: _Hoist


@dataclass
class _Rewrite:
    """What rewriting one pad did: the ops computed on the padded domain (producers
    first while rewriting, consumer first after; ``names`` keeps their names once they
    are erased) and the padded inputs, each with why the chain ends there."""

    hoisted: list[ir.Operation] = field(default_factory=list)
    leaves: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)


def hoist_pad(module: ir.Module, options: HoistPadOptions) -> RewriteReport:
    """Hoist every selected ``tensor.pad`` above its producers, in place.

    When ``options.ops`` names pads explicitly, a pad that cannot be hoisted raises
    :class:`GraphRewriteError` (before anything is rewritten); otherwise it is left as it
    is and the report's details say why.
    """
    pads = ops_under(
        module.operation,
        lambda op: (
            op.name == PAD and HOISTED_ATTR not in op.attributes and selected(op, options.ops)
        ),
    )
    plans, left = plan_each(
        pads,
        _plan,
        options.ops is not None,
        refusal=f"{PRIMITIVE}: cannot hoist",
        fix="narrow 'ops' to pads of pointwise producers",
        left="left as it is",
    )
    details: list[str] = []
    hoisted = 0
    for plan in plans:
        pad_name = describe_op(plan.pad)
        done = _rewrite(plan)
        hoisted += len(done.names)
        details.append(
            f"{pad_name}: its producers compute the border "
            f"({', '.join(done.names)}); "
            f"padded inputs: {'; '.join(done.leaves) or 'none'}"
        )
    if not plans:
        why = "no pad could be hoisted (see details)" if left else "no tensor.pad selected"
        return RewriteReport(PRIMITIVE, f"changed nothing: {why}", False, tuple(left))
    what = "1 pad" if len(plans) == 1 else f"{len(plans)} pads"
    summary = f"hoisted {what} above {hoisted} producer op(s), each masked back to its value"
    return RewriteReport(PRIMITIVE, summary, True, tuple(details + left))


def _plan(pad: ir.Operation) -> _Plan | str:
    padding = static_padding(pad)
    if isinstance(padding, str):
        return padding
    value = pad_value(pad)
    if value is None:
        return "the pad value is not a constant (the body computes it from the indices)"
    low, high = padding
    pads = {d: (lo, hi) for d, (lo, hi) in enumerate(zip(low, high, strict=True)) if lo or hi}
    if not pads:
        return "it pads nothing"
    how = _how(pad.operands[0], pads)
    if how in (EMPTY, FILL):
        return f"its source is a {'tensor.empty' if how == EMPTY else 'linalg.fill'}"
    if not isinstance(how, _Hoist):
        return f"its source cannot compute the border: {how}"
    return _Plan(pad, value, pads, how)


def _how(value: ir.Value, pads: Pads) -> _Hoist | str:
    """How ``value`` is extended by ``pads``: :data:`EMPTY` or :data:`FILL` (an init
    made again at the padded shape), a :class:`_Hoist`, or why the chain ends here (any
    other string; the value is then padded)."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return "a block argument"
    op = owner.operation
    if op.name == "tensor.empty" and ir.RankedTensorType(value.type).has_static_shape:
        return EMPTY
    if op.name == "linalg.fill":
        return FILL
    maps = _indexing_maps(op)
    if maps is None:
        return f"{describe_op(op)} is no linalg.generic or named 2-d convolution"
    if len(op.results) != 1 or len(list(value.uses)) != 1:
        return f"{describe_op(op)} has other uses"
    if _reads_indices(op):
        return f"{describe_op(op)} reads loop indices (linalg.index)"
    kinds = _iterators(op, maps)
    loop_pads: Pads = {}
    for dim, padding in pads.items():
        expr = maps[-1].results[dim]
        if not isinstance(expr, ir.AffineDimExpr) or kinds[expr.position] != "parallel":
            return f"{describe_op(op)} does not write dim {dim} from a parallel loop"
        loop_pads[expr.position] = padding
    ranges = _loop_ranges(op, maps)
    operand_pads: list[Pads] = []
    for i, affine_map in enumerate(maps):
        found = _operand_pads(affine_map, loop_pads, ranges)
        if isinstance(found, str):
            return f"{describe_op(op)} reads operand {i} {found}"
        operand_pads.append(found)
    return _Hoist(op, tuple(operand_pads))


def _operand_pads(affine_map: ir.AffineMap, loop_pads: Pads, ranges: dict[int, int]) -> Pads | str:
    """The padding of an operand read through ``affine_map`` when the loops in
    ``loop_pads`` are padded, or why it cannot be read pointwise."""
    found: Pads = {}
    for dim, expr in enumerate(affine_map.results):
        terms = list(_terms(expr))
        padded = [(loop, scale) for loop, scale in terms if loop in loop_pads]
        if not padded:
            continue
        rest = [loop for loop, _ in terms if loop not in loop_pads]
        unit = all(loop is not None and ranges.get(loop) == 1 for loop in rest)
        (loop, scale), *others = padded
        if others or scale != 1 or not unit or loop is None:
            return f"through {expr}: not pointwise in a padded dim (a window or stride)"
        found[dim] = loop_pads[loop]
    return found


def _terms(expr: ir.AffineExpr) -> Iterator[tuple[int | None, int]]:
    """``expr`` as a sum of ``(loop, scale)`` terms (``loop`` ``None``: a constant, or a
    product this reading does not split)."""
    if isinstance(expr, ir.AffineAddExpr):
        yield from _terms(expr.lhs)
        yield from _terms(expr.rhs)
    elif isinstance(expr, ir.AffineDimExpr):
        yield expr.position, 1
    elif isinstance(expr, ir.AffineMulExpr) and isinstance(expr.lhs, ir.AffineDimExpr):
        scale = expr.rhs
        yield expr.lhs.position, scale.value if isinstance(scale, ir.AffineConstantExpr) else 0
    elif isinstance(expr, ir.AffineConstantExpr) and expr.value == 0:
        return
    else:
        yield None, 0


def _indexing_maps(op: ir.Operation) -> list[ir.AffineMap] | None:
    """The indexing maps of a generic or a named 2-d convolution, else ``None``."""
    if op.name == "linalg.generic":
        return [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(op.attributes["indexing_maps"])]
    if op.name not in LAYOUTS or len(op.operands) != 3:
        return None
    strides, dilations = conv_pair(op, "strides"), conv_pair(op, "dilations")
    d = [ir.AffineDimExpr.get(i) for i in range(7)]
    if op.name == "linalg.conv_2d_nchw_fchw":  # loops n, f, oh, ow, c, kh, kw
        window = [d[2] * strides[0] + d[5] * dilations[0], d[3] * strides[1] + d[6] * dilations[1]]
        results = [[d[0], d[4], *window], [d[1], d[4], d[5], d[6]], [d[0], d[1], d[2], d[3]]]
    else:  # loops n, oh, ow, f, kh, kw, c
        window = [d[1] * strides[0] + d[4] * dilations[0], d[2] * strides[1] + d[5] * dilations[1]]
        filters = (
            [d[4], d[5], d[6], d[3]]
            if op.name == "linalg.conv_2d_nhwc_hwcf"
            else [d[3], d[4], d[5], d[6]]
        )
        results = [[d[0], *window, d[6]], filters, [d[0], d[1], d[2], d[3]]]
    return [ir.AffineMap.get(7, 0, r) for r in results]


def _iterators(op: ir.Operation, maps: list[ir.AffineMap]) -> tuple[str, ...]:
    """Loop kinds: a generic's own; a convolution's output loops are the parallel ones."""
    if op.name == "linalg.generic":
        return iterator_kinds(op)
    out = {e.position for e in maps[-1].results if isinstance(e, ir.AffineDimExpr)}
    return tuple("parallel" if i in out else "reduction" for i in range(maps[-1].n_dims))


def _loop_ranges(op: ir.Operation, maps: list[ir.AffineMap]) -> dict[int, int]:
    """The static ranges of the loops some operand indexes by a plain dim."""
    ranges: dict[int, int] = {}
    for operand, affine_map in zip(op.operands, maps, strict=True):
        if not isinstance(operand.type, ir.RankedTensorType):
            continue
        for size, expr in zip(operand.type.shape, affine_map.results, strict=True):
            if isinstance(expr, ir.AffineDimExpr) and size != ir.ShapedType.get_dynamic_size():
                ranges[expr.position] = size
    return ranges


def _reads_indices(op: ir.Operation) -> bool:
    return bool(ops_under(op, lambda inner: inner.name == "linalg.index"))


def _rewrite(plan: _Plan) -> _Rewrite:
    """Compute ``plan.pad``'s source on the padded domain and mask it (see the module
    docstring); the old chain is erased."""
    pad = plan.pad
    done = _Rewrite()
    with ir.InsertionPoint(pad), pad.location:
        extended = _hoisted(plan.source, done)
        masked = _mask(extended, pad, plan.value, plan.pads)
    pad.result.replace_all_uses_with(masked)
    pad.erase()
    done.hoisted.reverse()
    done.names = [op.name for op in done.hoisted]
    for op in done.hoisted:
        if not list(op.results[0].uses):
            operands = list(op.operands)
            op.erase()
            for operand in operands:
                erase_dead(operand)
    return done


def _extended(value: ir.Value, pads: Pads, done: _Rewrite) -> ir.Value:
    """``value`` on its padded domain, at the insertion point."""
    if not pads:
        return value
    how = _how(value, pads)
    if isinstance(how, _Hoist):
        return _hoisted(how, done)
    shape = _padded_shape(value, pads)
    element = ir.RankedTensorType(value.type).element_type
    if how == EMPTY:
        return tensor.EmptyOp(shape, element).result
    if how == FILL:
        fill = value.owner.operation
        filled: ir.Value = linalg.fill(
            fill.operands[0], outs=[_extended(fill.operands[1], pads, done)]
        )
        return filled
    done.leaves.append(f"{_name(value)} ({how})")
    return _zero_pad(value, pads, shape)


def _hoisted(how: _Hoist, done: _Rewrite) -> ir.Value:
    """A clone of ``how.op`` on the padded domain, its operands extended first."""
    operands = [
        _extended(v, pads, done) for v, pads in zip(how.op.operands, how.operand_pads, strict=True)
    ]
    clone = how.op.clone()
    for i, operand in enumerate(operands):
        clone.operands[i] = operand
    clone.results[0].set_type(operands[-1].type)
    done.hoisted.append(how.op)
    return clone.results[0]


def _zero_pad(value: ir.Value, pads: Pads, shape: list[int]) -> ir.Value:
    """``value`` padded with zeros by ``pads``, marked :data:`HOISTED_ATTR`."""
    rank = len(shape)
    low = [pads.get(d, (0, 0))[0] for d in range(rank)]
    high = [pads.get(d, (0, 0))[1] for d in range(rank)]
    element = ir.RankedTensorType(value.type).element_type
    zero = arith.ConstantOp(element, _zero(element)).result
    result_type = ir.RankedTensorType.get(shape, element)
    pad = tensor.PadOp(result_type, value, [], [], low, high)
    block = pad.region.blocks.append(*[ir.IndexType.get()] * rank)
    with ir.InsertionPoint(block):
        tensor.YieldOp(zero)
    pad.operation.attributes[HOISTED_ATTR] = ir.UnitAttr.get()
    padded: ir.Value = pad.result
    return padded


def _zero(element: ir.Type) -> ir.Attribute:
    if isinstance(element, ir.FloatType):
        return ir.FloatAttr.get(element, 0.0)
    return ir.IntegerAttr.get(element, 0)


def _mask(value: ir.Value, pad: ir.Operation, fill: ir.Value, pads: Pads) -> ir.Value:
    """A generic that keeps ``value`` inside the pad's source and writes ``fill`` on the
    border: the pad's result, computed."""
    rank = len(ir.RankedTensorType(value.type).shape)
    source_shape = ir.RankedTensorType(pad.operands[0].type).shape
    identity = ir.AffineMap.get_identity(rank)
    output = Operand(empty_like(pad.result), identity)
    op, block = create_generic(
        [Operand(value, identity)], [output], ["parallel"] * rank, pad.location
    )
    with ir.InsertionPoint(block):
        constants: dict[int, ir.Value] = {}
        inside: ir.Value | None = None
        for dim, (low, _) in sorted(pads.items()):
            index = linalg.IndexOp(dim).result
            bounds = [(arith.CmpIPredicate.ult, low + source_shape[dim])]
            if low:
                bounds.append((arith.CmpIPredicate.uge, low))
            for predicate, bound in bounds:
                if bound not in constants:
                    constants[bound] = arith.ConstantOp(ir.IndexType.get(), bound).result
                check = arith.CmpIOp(predicate, index, constants[bound]).result
                inside = check if inside is None else arith.AndIOp(inside, check).result
        assert inside is not None
        finish_body(block, [arith.SelectOp(inside, block.arguments[0], materialized(fill)).result])
    op.attributes[MASK_ATTR] = ir.UnitAttr.get()
    if LAYER_ATTR in pad.attributes:
        op.attributes[LAYER_ATTR] = pad.attributes[LAYER_ATTR]
    masked: ir.Value = op.results[0]
    return masked


def _padded_shape(value: ir.Value, pads: Pads) -> list[int]:
    shape = ir.RankedTensorType(value.type).shape
    return [s + sum(pads.get(d, (0, 0))) for d, s in enumerate(shape)]


def _name(value: ir.Value) -> str:
    owner = value.owner
    if isinstance(owner, ir.Block):
        return f"argument {ir.BlockArgument(value).arg_number}"
    return describe_op(owner.operation)
