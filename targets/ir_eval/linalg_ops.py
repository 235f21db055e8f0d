"""``linalg`` ops: ``generic`` (every named op is generalized to it before evaluation),
``index``, ``pack``/``unpack`` and ``softmax``.

``linalg.generic`` runs its body on numpy arrays: the parallel loop dims are vectorised
(each is a broadcasting axis of the arrays the body sees) and the reduction dims are
iterated in Python, in lexicographic order, with the accumulator carried in the output
operands. The cost is one body evaluation per point of the reduction space. Operands
whose indexing map results are plain dims or constants are read and written through numpy
views; other maps (``d1 + d4`` in a convolution, ``mod``...) gather with index arrays.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
from iree.compiler import ir

from .affine_ops import CompiledMap, compile_map
from .errors import OpFailure
from .interpreter import Env, Interpreter, OpTable, single_block
from .values import Value, check_indices, index, merge_static_dynamic, uninitialized

HANDLERS = OpTable()


class _Access:
    """How one operand of a ``linalg.generic`` is read (and, for outputs, written) at the
    current loop indices, as an array that broadcasts over the parallel loop dims."""

    def __init__(self, m: CompiledMap, parallel: Sequence[int], shape: Sequence[int]) -> None:
        self.map, self.shape = m, tuple(shape)
        self.parallel = frozenset(parallel)
        position = {d: k for k, d in enumerate(parallel)}
        plain = [d for d in m.result_dims if d in self.parallel]
        simple = all(
            d is not None or c is not None
            for d, c in zip(m.result_dims, m.result_constants, strict=True)
        )
        # Direct access: basic indexing (slices for parallel dims, ints for reduction dims
        # and constants) leaves the parallel axes in result order; they are permuted into
        # loop order, and the parallel dims the map lacks become unit axes.
        self.direct = simple and len(set(plain)) == len(plain)
        self.order = sorted(range(len(plain)), key=lambda axis: position[plain[axis]])
        self.missing = [k for k, d in enumerate(parallel) if d not in plain]
        self.covers_parallel = self.parallel <= m.used_dims
        constants = [c for c in m.result_constants if c is not None]
        if self.direct and constants:
            check_indices(
                [n for n, c in zip(shape, m.result_constants, strict=True) if c is not None],
                constants,
            )

    def _key(self, loop_indices: Sequence[Any]) -> tuple[Any, ...]:
        # The trailing Ellipsis keeps the result a view even when every index is an int.
        return (
            *(
                c if d is None else slice(None) if d in self.parallel else loop_indices[d]
                for d, c in zip(self.map.result_dims, self.map.result_constants, strict=True)
            ),
            Ellipsis,
        )

    def read(self, x: Any, loop_indices: Sequence[Any]) -> Any:
        """The operand's elements at the current loop indices."""
        if self.direct:
            return np.expand_dims(
                np.transpose(x[self._key(loop_indices)], self.order), self.missing
            )
        indices = self.map(loop_indices)
        check_indices(self.shape, indices)
        return x[tuple(indices)]

    def write(self, out: np.ndarray[Any, Any], value: Any, loop_indices: Sequence[Any]) -> None:
        """Store the body's yielded ``value`` into output ``out`` at the current indices."""
        if self.direct:
            self.read(out, loop_indices)[...] = value
            return
        indices = self.map(loop_indices)
        check_indices(self.shape, indices)
        *where, value = np.broadcast_arrays(*indices, value)
        out[tuple(where)] = value


def loop_extents(maps: Sequence[CompiledMap], shapes: Sequence[Sequence[int]]) -> list[int]:
    """Each loop dim's extent, from the operand dims indexed by that loop dim alone."""
    n_loops = maps[0].n_dims
    extents: list[int | None] = [None] * n_loops
    origin: list[str] = [""] * n_loops
    for operand, (m, shape) in enumerate(zip(maps, shapes, strict=True)):
        if len(m.results) != len(shape):
            raise OpFailure(f"operand #{operand} has rank {len(shape)}, its map {len(m.results)}")
        for axis, d in enumerate(m.result_dims):
            if d is None:
                continue
            if extents[d] is None:
                extents[d], origin[d] = shape[axis], f"dim {axis} of operand #{operand}"
            elif extents[d] != shape[axis]:
                raise OpFailure(
                    f"loop dim d{d} has extent {extents[d]} from {origin[d]} but "
                    f"{shape[axis]} from dim {axis} of operand #{operand}"
                )
    unknown = [d for d, e in enumerate(extents) if e is None]
    if unknown:
        raise OpFailure(f"cannot infer the extent of loop dims {unknown} from operand shapes")
    return [int(e) for e in extents if e is not None]


@HANDLERS.register("linalg.generic")
def _generic(interp: Interpreter, op: Any, env: Env) -> Sequence[Value]:
    inputs = env.values_of(op.inputs)
    outputs = [np.array(o) for o in env.values_of(op.outputs)]
    maps = [compile_map(ir.AffineMapAttr(a).value) for a in op.indexing_maps]
    reductions = [d for d, t in enumerate(op.iterator_types) if "reduction" in str(t)]
    shapes = [np.shape(x) for x in (*inputs, *outputs)]
    extents = loop_extents(maps, shapes)
    parallel = [d for d in range(len(extents)) if d not in reductions]
    loop_indices: list[Any] = [index(0)] * len(extents)
    for k, d in enumerate(parallel):
        axes = [1] * len(parallel)
        axes[k] = extents[d]
        loop_indices[d] = np.arange(extents[d], dtype=np.int64).reshape(axes)
    accesses = [_Access(m, parallel, s) for m, s in zip(maps, shapes, strict=True)]
    in_access, out_access = accesses[: len(inputs)], accesses[len(inputs) :]
    if not all(a.covers_parallel for a in out_access):
        raise OpFailure("an output indexing map must use every parallel loop dim")
    body = single_block(op.region)
    saved, env.loop_indices = env.loop_indices, loop_indices
    try:
        for point in itertools.product(*(range(extents[d]) for d in reductions)):
            for d, i in zip(reductions, point, strict=True):
                loop_indices[d] = index(i)
            args = [a.read(x, loop_indices) for a, x in zip(in_access, inputs, strict=True)]
            args += [a.read(x, loop_indices) for a, x in zip(out_access, outputs, strict=True)]
            values = _detach(interp.yielded(body, env, args), outputs)
            for a, out, value in zip(out_access, outputs, values, strict=True):
                a.write(out, value, loop_indices)
    finally:
        env.loop_indices = saved
    return outputs


def _detach(values: list[Value], outputs: Sequence[np.ndarray[Any, Any]]) -> list[Value]:
    """``values`` with copies of those that view an output: the body may yield an output
    argument (its old value) as another result, which writing the first output would
    otherwise change before it is stored."""
    if len(outputs) < 2:
        return values
    return [
        np.array(v) if any(np.may_share_memory(v, out) for out in outputs) else v for v in values
    ]


@HANDLERS.register("linalg.index")
def _index(interp: Interpreter, op: Any, env: Env) -> list[Value]:
    if env.loop_indices is None:
        raise OpFailure("linalg.index outside a linalg.generic body")
    return [env.loop_indices[ir.IntegerAttr(op.attributes["dim"]).value]]


def _tiling(op: Any, env: Env) -> tuple[list[int], list[int], list[int]]:
    """``inner_dims_pos``, inner tile sizes and ``outer_dims_perm`` (empty when absent:
    the identity) of a pack/unpack op."""
    positions = list(op.inner_dims_pos)
    tiles = merge_static_dynamic(list(op.static_inner_tiles), env.values_of(op.inner_tiles))
    perm = list(op.outer_dims_perm) if op.outer_dims_perm is not None else []
    return positions, tiles, perm


@HANDLERS.register("linalg.pack")
def _pack(interp: Interpreter, op: Any, env: Env) -> list[Value]:
    source = np.asarray(env[op.source])
    positions, tiles, perm = _tiling(op, env)
    tile_of = dict(zip(positions, tiles, strict=True))
    padded_shape = [
        -(-n // tile_of[d]) * tile_of[d] if d in tile_of else n for d, n in enumerate(source.shape)
    ]
    if op.padding_value is not None:
        padded = np.full(padded_shape, env[op.padding_value], dtype=source.dtype)
    else:
        padded = uninitialized(padded_shape, source.dtype)
    padded[tuple(slice(0, n) for n in source.shape)] = source
    split: list[int] = []
    outer_axis, inner_axis = {}, {}
    for d, n in enumerate(padded_shape):
        outer_axis[d] = len(split)
        if d in tile_of:
            split += [n // tile_of[d], tile_of[d]]
            inner_axis[d] = len(split) - 1
        else:
            split.append(n)
    order = [outer_axis[d] for d in (perm or range(source.ndim))]
    order += [inner_axis[d] for d in positions]
    return [np.transpose(padded.reshape(split), order).copy()]


@HANDLERS.register("linalg.unpack")
def _unpack(interp: Interpreter, op: Any, env: Env) -> list[Value]:
    source = np.asarray(env[op.source])
    dest_shape = np.shape(env[op.dest])
    positions, tiles, perm = _tiling(op, env)
    rank = len(dest_shape)
    outer = perm or list(range(rank))
    order: list[int] = []
    shape: list[int] = []
    for d in range(rank):
        order.append(outer.index(d))
        shape.append(source.shape[outer.index(d)])
        if d in positions:
            order.append(rank + positions.index(d))
            shape[-1] *= tiles[positions.index(d)]
    unpacked = np.transpose(source, order).reshape(shape)
    return [unpacked[tuple(slice(0, n) for n in dest_shape)].copy()]


@HANDLERS.register("linalg.softmax")
def _softmax(interp: Interpreter, op: Any, env: Env) -> list[Value]:
    x = np.asarray(env[op.input])
    axis = ir.IntegerAttr(op.dimension).value
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return [e / np.sum(e, axis=axis, keepdims=True)]
