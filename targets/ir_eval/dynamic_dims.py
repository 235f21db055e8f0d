"""Extents for the dynamic dims of an entry function's arguments, one per dim.

One size for every dynamic dim would pass a module that reads one dim where it means
another (``tensor.dim %x, 0`` for dim 1 of a square input). So each dim gets its own,
except where the function's own ops say two are the same extent: a linalg op's indexing
maps (a matmul's K in both operands, an elementwise op's operands and output), its output
and result, and a ``tensor.empty`` sized by ``tensor.dim``. A dim tied to a static one
takes its size.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Any

from iree.compiler import ir

_DYNAMIC = ir.ShapedType.get_dynamic_size()


class _Classes:
    """Union-find over dims (``(value, dim)``), loop dims and index values."""

    def __init__(self) -> None:
        self._parent: dict[Hashable, Hashable] = {}

    def find(self, key: Hashable) -> Hashable:
        root = key
        while self._parent.get(root, root) != root:
            root = self._parent[root]
        while key != root:
            self._parent[key], key = root, self._parent.get(key, key)
        return root

    def union(self, a: Hashable, b: Hashable) -> None:
        self._parent[self.find(a)] = self.find(b)


def argument_shapes(fn: Any, first: int) -> list[tuple[int, ...]]:
    """Shapes for the ranked tensor arguments of ``fn`` (a ``func.func``; named linalg ops
    generalized): static dims as typed; dynamic ones ``first``, ``first + 1``, ... one per
    class of dims that ``fn``'s ops tie together, skipping the static sizes of the
    arguments so that no dynamic dim equals a static one; a class tied to a static dim
    takes that size."""
    classes = _Classes()
    for op in _ops(fn.regions[0]):
        _tie(op, classes)
    extent: dict[Hashable, int] = {}  # per class: a static size tied to it, else its own
    for key, size in _static_dims(fn):
        extent.setdefault(classes.find(key), size)
    arguments = list(fn.regions[0].blocks[0].arguments)
    typed = [(arg, _shape(arg.type)) for arg in arguments]
    taken = {size for _, shape in typed for size in shape if size != _DYNAMIC}
    fresh = (n for n in _count(first) if n not in taken)
    shapes = []
    for arg, typed_shape in typed:
        shape = []
        for dim, size in enumerate(typed_shape):
            if size == _DYNAMIC:
                root = classes.find((arg, dim))
                if root not in extent:
                    extent[root] = next(fresh)
                size = extent[root]
            shape.append(size)
        shapes.append(tuple(shape))
    return shapes


def _shape(t: Any) -> list[int]:
    """A ranked tensor type's dims (a scalar argument: none; the caller refuses it)."""
    return list(t.shape) if isinstance(t, ir.RankedTensorType) else []


def _count(start: int) -> Iterator[int]:
    while True:
        yield start
        start += 1


def _ops(region: Any) -> Iterator[Any]:
    """Every op in ``region``, nested ones included."""
    for block in region.blocks:
        for op in block.operations:
            yield op
            for inner in op.regions:
                yield from _ops(inner)


def _tie(op: Any, classes: _Classes) -> None:
    """Join the dims that ``op`` says are the same extent."""
    name = op.operation.name
    if name == "tensor.dim":
        index = _constant(op.operands[1])
        if index is not None:
            classes.union(op.results[0], (op.operands[0], index))
    elif name == "tensor.empty":
        sizes = iter(op.operands)
        for dim, size in enumerate(op.results[0].type.shape):
            if size == _DYNAMIC:
                classes.union((op.results[0], dim), next(sizes))
    elif "indexing_maps" in op.attributes:  # a linalg structured op
        maps = [ir.AffineMapAttr(m).value for m in op.attributes["indexing_maps"]]
        loops = [object() for _ in range(maps[0].n_dims)] if maps else []
        for value, indexing in zip(op.operands, maps, strict=True):
            if isinstance(value.type, ir.RankedTensorType):
                for dim, expr in enumerate(indexing.results):
                    if isinstance(expr, ir.AffineDimExpr):
                        classes.union((value, dim), loops[expr.position])
        inits = list(op.operands)[len(op.operands) - len(op.results) :]
        for result, init in zip(op.results, inits, strict=True):
            for dim in range(result.type.rank):
                classes.union((result, dim), (init, dim))


def _static_dims(fn: Any) -> Iterator[tuple[Hashable, int]]:
    """``(dim, size)`` for every static dim of a tensor that an op of ``fn`` uses."""
    for op in _ops(fn.regions[0]):
        for value in (*op.operands, *op.results):
            if isinstance(value.type, ir.RankedTensorType):
                for dim, size in enumerate(value.type.shape):
                    if size != _DYNAMIC:
                        yield (value, dim), size


def _constant(value: Any) -> int | None:
    """The value of an ``arith.constant`` index, or None."""
    if not isinstance(value, ir.OpResult) or value.owner.operation.name != "arith.constant":
        return None
    return int(ir.IntegerAttr(value.owner.attributes["value"]).value)
