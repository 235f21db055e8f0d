"""Reading and building ``linalg.generic`` ops with the MLIR Python bindings.

Graph rewrites that replace generics by new ones (fusing them, collapsing their dims)
share these steps: read an op's operands with their indexing maps and its iterator
kinds, create a generic from operands, maps and iterators with an empty body, move the
body of an old generic into it (its block arguments rebound to new values), and
terminate the body. Bodies are moved, never cloned: the old op is erased afterwards.
The work, census and dispatch analyses read static loop ranges
(:func:`static_loop_ranges`) from here too.

Most rewrites here only handle *simple* indexing maps, whose results are each a loop
dim or the constant ``0`` (``(d0, d1) -> (d1)``, ``(d0, d1) -> (d0, 0)``). They are
written as tuples, one entry per map result: the loop dim, or ``None`` for ``0``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from iree.compiler import ir
from iree.compiler.dialects import linalg

SimpleMap = tuple[int | None, ...]
"""A simple indexing map's results: a loop dim each, or ``None`` for the constant 0."""


@dataclass(frozen=True)
class Operand:
    """One operand of a generic and the indexing map it is read or written through."""

    value: ir.Value
    map: ir.AffineMap


def simple_results(affine_map: ir.AffineMap) -> SimpleMap | None:
    """``affine_map``'s results as a :data:`SimpleMap`, or ``None`` if it is not simple."""
    results: list[int | None] = []
    for expr in affine_map.results:
        if isinstance(expr, ir.AffineDimExpr):
            results.append(expr.position)
        elif isinstance(expr, ir.AffineConstantExpr) and expr.value == 0:
            results.append(None)
        else:
            return None
    return tuple(results)


def simple_map(num_loops: int, results: SimpleMap) -> ir.AffineMap:
    """The affine map over ``num_loops`` loops with ``results`` (needs an active context)."""
    exprs = [
        ir.AffineConstantExpr.get(0) if r is None else ir.AffineDimExpr.get(r) for r in results
    ]
    return ir.AffineMap.get(num_loops, 0, exprs)


def compose(outer: SimpleMap, inner: SimpleMap) -> SimpleMap:
    """``outer`` after ``inner``: ``inner`` maps new loops to the loops ``outer`` reads."""
    return tuple(None if r is None else inner[r] for r in outer)


def is_permutation(results: SimpleMap | None, num_loops: int) -> bool:
    """Whether ``results`` reads each of ``num_loops`` loops exactly once, and nothing else."""
    return results is not None and sorted(results, key=lambda r: -1 if r is None else r) == list(
        range(num_loops)
    )


def operands(op: ir.Operation) -> tuple[list[Operand], list[Operand]]:
    """A structured linalg op's inputs and outputs (inits), each with its indexing map."""
    view = op.opview
    maps = [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(op.attributes["indexing_maps"])]
    values = [*view.inputs, *view.outputs]
    paired = [Operand(v, m) for v, m in zip(values, maps, strict=True)]
    num_inputs = len(view.inputs)
    return paired[:num_inputs], paired[num_inputs:]


def iterator_kinds(op: ir.Operation) -> tuple[str, ...]:
    """A generic's iterator kinds, ``"parallel"`` or ``"reduction"``, one per loop."""
    kinds = ir.ArrayAttr(op.attributes["iterator_types"])
    return tuple("reduction" if "reduction" in str(kind) else "parallel" for kind in kinds)


def element_type(value: ir.Value) -> ir.Type:
    """What a generic's body receives for ``value``: its element type, or the scalar."""
    if isinstance(value.type, ir.ShapedType):
        return value.type.element_type
    return value.type


def create_generic(
    inputs: Sequence[Operand],
    outputs: Sequence[Operand],
    iterators: Sequence[str],
    location: ir.Location,
) -> tuple[ir.Operation, ir.Block]:
    """Create a tensor generic at the current insertion point, with an empty body.

    The body block has one argument per input, then per output (their element types);
    fill it with :func:`move_body` and close it with :func:`finish_body`.
    """
    maps = ir.ArrayAttr.get([ir.AffineMapAttr.get(o.map) for o in [*inputs, *outputs]])
    generic = linalg.GenericOp(
        [o.value.type for o in outputs],
        [o.value for o in inputs],
        [o.value for o in outputs],
        maps,
        [linalg.IteratorType[kind] for kind in iterators],
        loc=location,
    )
    arg_types = [element_type(o.value) for o in [*inputs, *outputs]]
    block = generic.regions[0].blocks.append(*arg_types, arg_locs=[location] * len(arg_types))
    return generic.operation, block


def move_body(
    source: ir.Operation, block: ir.Block, args: Sequence[ir.Value | None]
) -> list[ir.Value]:
    """Move ``source``'s body ops (not its terminator) to the end of ``block``.

    ``args[i]`` replaces ``source``'s body argument ``i`` (``None``: the argument must
    be unused). Returns the values ``source`` yielded. ``source`` is left with only its
    terminator: erase it once its results are replaced.
    """
    body = source.regions[0].blocks[0]
    for arg, new in zip(body.arguments, args, strict=True):
        if new is not None:
            arg.replace_all_uses_with(new)
        elif list(arg.uses):
            raise ValueError(f"body argument {arg.arg_number} of {source.name} is used")
    ops = [op.operation for op in body.operations]
    at_end = ir.InsertionPoint(block)
    for op in ops[:-1]:
        at_end.insert(op.detach_from_parent())
    return list(ops[-1].operands)


def finish_body(block: ir.Block, values: Sequence[ir.Value]) -> None:
    """Terminate a generic's body with ``linalg.yield values``."""
    with ir.InsertionPoint(block):
        linalg.YieldOp(list(values))


Extent = int | tuple[str, ir.Value] | tuple[str, ir.Value, int]
"""What a loop's range is known to equal: a static size, ``("dim", value, i)`` (dim
``i`` of ``value``) or ``("ssa", size)`` (an index value)."""


def loop_extents(op: ir.Operation) -> tuple[frozenset[Extent], ...] | None:
    """For each loop of a generic, everything its range is known to equal, read from its
    operands: static sizes, the dims of the operands that a plain loop dim indexes, and
    the sizes a ``tensor.empty`` output was made with (``tensor.dim`` of a value counts
    as that value's dim). ``None`` when some loop is indexed only through compound
    expressions. Two generics have provably equal loops when, loop by loop, their sets
    meet (:func:`same_extents`); this holds for dynamic shapes too.
    """
    found: list[set[Extent]] = [set() for _ in iterator_kinds(op)]
    inputs, outputs = operands(op)
    for operand in [*inputs, *outputs]:
        results = simple_results(operand.map)
        if results is None or not isinstance(operand.value.type, ir.ShapedType):
            continue
        sizes = _empty_sizes(operand.value)
        for i, (size, loop) in enumerate(zip(operand.value.type.shape, results, strict=True)):
            if loop is None:
                continue
            if size != ir.ShapedType.get_dynamic_size():
                found[loop].add(size)
                continue
            found[loop].add(("dim", operand.value, i))
            if sizes is not None:
                found[loop].add(_index_extent(sizes[i]))
    if any(not keys for keys in found):
        return None
    return tuple(frozenset(keys) for keys in found)


def same_extents(a: tuple[frozenset[Extent], ...], b: tuple[frozenset[Extent], ...]) -> int | None:
    """``None`` when every loop of ``a`` provably has the range of the same loop of ``b``
    (see :func:`loop_extents`), else the first loop that cannot be shown equal."""
    if len(a) != len(b):
        return 0
    return next((d for d, (x, y) in enumerate(zip(a, b, strict=True)) if not x & y), None)


def _empty_sizes(value: ir.Value) -> list[ir.Value | None] | None:
    """The dynamic sizes of a ``tensor.empty`` that made ``value``, one per dim (``None``
    for static dims), or ``None`` when ``value`` is not one."""
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.operation.name != "tensor.empty":
        return None
    dynamic = iter(owner.operation.operands)
    shape = ir.RankedTensorType(value.type).shape
    return [next(dynamic) if d == ir.ShapedType.get_dynamic_size() else None for d in shape]


def _index_extent(size: ir.Value | None) -> Extent:
    """An index value as an extent: ``tensor.dim`` of a value with a constant dim is that
    value's dim, anything else the value itself."""
    assert size is not None
    owner = size.owner
    if not isinstance(owner, ir.Block) and owner.operation.name == "tensor.dim":
        source, index = owner.operation.operands
        const = index.owner
        if not isinstance(const, ir.Block) and const.operation.name == "arith.constant":
            return ("dim", source, int(ir.IntegerAttr(const.operation.attributes["value"]).value))
    return ("ssa", size)


def static_loop_ranges(op: ir.Operation) -> tuple[int, ...] | None:
    """The static loop ranges of a generic, read from operands indexed by plain dims
    (``None`` when some loop is indexed only through compound expressions or is dynamic)."""
    ranges: list[int | None] = [None] * len(iterator_kinds(op))
    inputs, outputs = operands(op)
    for operand in [*inputs, *outputs]:
        results = simple_results(operand.map)
        if results is None or not isinstance(operand.value.type, ir.ShapedType):
            continue
        shape = operand.value.type.shape
        for size, loop in zip(shape, results, strict=True):
            if loop is not None and size != ir.ShapedType.get_dynamic_size():
                ranges[loop] = size
    if any(r is None for r in ranges):
        return None
    return tuple(r for r in ranges if r is not None)
