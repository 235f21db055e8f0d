"""``tensor`` dialect ops: creation, slicing, padding, reshaping, element access.

Tensors are immutable values: an op that "updates" a tensor copies it first, so SSA
values shared between ops (or loop iterations) never change under another op's feet.
Slices are bounds-checked, so a schedule that reads or writes past a tensor's end is
reported instead of silently clipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from iree.compiler import ir

from .errors import OpFailure
from .interpreter import Env, Interpreter, OpTable, single_block
from .values import (
    Value,
    check_indices,
    index,
    merge_static_dynamic,
    shape_matches,
    storage_dtype,
    tensor_shape,
    uninitialized,
)

HANDLERS = OpTable()


def _slice_region(op: Any, env: Env, shape: Sequence[int]) -> tuple[tuple[slice, ...], list[int]]:
    """The numpy slices and the sizes addressed by a slice op's offsets, sizes and strides
    (extract_slice, insert_slice, parallel_insert_slice) into a tensor of ``shape``."""
    offsets = merge_static_dynamic(list(op.static_offsets), env.values_of(op.offsets))
    sizes = merge_static_dynamic(list(op.static_sizes), env.values_of(op.sizes))
    strides = merge_static_dynamic(list(op.static_strides), env.values_of(op.strides))
    slices = []
    for dim, (extent, offset, size, stride) in enumerate(
        zip(shape, offsets, sizes, strides, strict=True)
    ):
        last = offset + (size - 1) * stride
        if size < 0 or stride < 1 or offset < 0 or (size > 0 and last >= extent):
            raise OpFailure(
                f"slice offset {offset} size {size} stride {stride} is out of bounds "
                f"for dim {dim} of size {extent}"
            )
        slices.append(slice(offset, last + 1 if size > 0 else offset, stride))
    return tuple(slices), sizes


def _rank_reduced_shape(static_sizes: Sequence[int], sizes: Sequence[int], t: ir.Type) -> list[int]:
    """The runtime shape of an extract_slice result of type ``t``: ``sizes`` less the unit
    dims that the result type drops (matched greedily, as MLIR infers them)."""
    kept: list[int] = []
    want = list(t.shape)
    for static, size in zip(static_sizes, sizes, strict=True):
        if len(kept) < len(want) and static == want[len(kept)]:
            kept.append(size)
        elif static != 1:
            raise OpFailure(f"cannot match slice sizes {list(sizes)} to result type {t}")
    if len(kept) != len(want):
        raise OpFailure(f"cannot match slice sizes {list(sizes)} to result type {t}")
    return kept


@HANDLERS.register("tensor.empty")
def _empty(interp: Interpreter, op: Any, env: Env) -> list[Value]:
    t = op.results[0].type
    return [uninitialized(tensor_shape(t, env.operands(op)), storage_dtype(t))]


@HANDLERS.register("tensor.dim")
def _tensor_dim(interp: Interpreter, op: Any, env: Env) -> list[Value]:
    source, dim = env.operands(op)
    shape = np.shape(source)
    if not 0 <= int(dim) < len(shape):
        raise OpFailure(f"dim {int(dim)} of a rank-{len(shape)} tensor")
    return [index(shape[int(dim)])]


@HANDLERS.register("tensor.splat")
def _splat(interp: Interpreter, op: Any, env: Env) -> list[Value]:
    t = op.results[0].type
    shape = tensor_shape(t, env.values_of(op.dynamicSizes))
    return [np.full(shape, env[op.input], dtype=storage_dtype(t))]


@HANDLERS.register("tensor.extract_slice")
def _extract_slice(interp: Interpreter, op: Any, env: Env) -> list[Value]:
    source = np.asarray(env[op.source])
    slices, sizes = _slice_region(op, env, source.shape)
    shape = _rank_reduced_shape(list(op.static_sizes), sizes, op.results[0].type)
    return [source[slices].reshape(shape)]


def insert_slice_into(dest: np.ndarray[Any, Any], op: Any, env: Env) -> tuple[slice, ...]:
    """Write a (parallel_)insert_slice op's source into ``dest`` in place; returns the
    slices written."""
    slices, sizes = _slice_region(op, env, dest.shape)
    dest[slices] = np.reshape(env[op.source], sizes)
    return slices


@HANDLERS.register("tensor.insert_slice")
def _insert_slice(interp: Interpreter, op: Any, env: Env) -> list[Value]:
    dest = np.array(env[op.dest])
    insert_slice_into(dest, op, env)
    return [dest]


def _fill_region(
    interp: Interpreter, region: ir.Region, env: Env, shape: Sequence[int], dtype: np.dtype[Any]
) -> np.ndarray[Any, Any]:
    """A tensor of ``shape`` whose element at each index is what ``region`` yields for it
    (its block arguments are the indices). The block runs once, on index arrays."""
    grids = [index(g) for g in np.indices(shape, sparse=True)]
    (value,) = interp.yielded(single_block(region), env, grids)
    return np.broadcast_to(np.asarray(value, dtype=dtype), shape).copy()


@HANDLERS.register("tensor.generate")
def _generate(interp: Interpreter, op: Any, env: Env) -> list[Value]:
    t = op.results[0].type
    shape = tensor_shape(t, env.operands(op))
    return [_fill_region(interp, op.body, env, shape, storage_dtype(t))]


@HANDLERS.register("tensor.pad")
def _pad(interp: Interpreter, op: Any, env: Env) -> list[Value]:
    source = np.asarray(env[op.source])
    low = merge_static_dynamic(list(op.static_low), env.values_of(op.low))
    high = merge_static_dynamic(list(op.static_high), env.values_of(op.high))
    if min(low + high, default=0) < 0:
        raise OpFailure(f"negative padding low {low} high {high} is not supported")
    shape = [lo + n + hi for lo, n, hi in zip(low, source.shape, high, strict=True)]
    result = _fill_region(interp, op.region, env, shape, source.dtype)
    result[tuple(slice(lo, lo + n) for lo, n in zip(low, source.shape, strict=True))] = source
    return [result]


def _reassociation(op: Any) -> list[list[int]]:
    return [[ir.IntegerAttr(d).value for d in group] for group in op.reassociation]


@HANDLERS.register("tensor.expand_shape")
def _expand_shape(interp: Interpreter, op: Any, env: Env) -> list[Value]:
    shape = merge_static_dynamic(list(op.static_output_shape), env.values_of(op.output_shape))
    return [np.reshape(env[op.src], shape)]


@HANDLERS.register("tensor.collapse_shape")
def _collapse_shape(interp: Interpreter, op: Any, env: Env) -> list[Value]:
    source = np.asarray(env[op.src])
    shape = [int(np.prod([source.shape[d] for d in group])) for group in _reassociation(op)]
    return [source.reshape(shape)]


@HANDLERS.register("tensor.reshape")
def _reshape(interp: Interpreter, op: Any, env: Env) -> list[Value]:
    return [np.reshape(env[op.source], [int(n) for n in np.asarray(env[op.shape])])]


@HANDLERS.register("tensor.cast")
def _cast(interp: Interpreter, op: Any, env: Env) -> list[Value]:
    source = np.asarray(env[op.source])
    if not shape_matches(op.results[0].type, source.shape):
        raise OpFailure(f"a tensor of shape {list(source.shape)} cast to {op.results[0].type}")
    return [source]


@HANDLERS.register("tensor.dim")
def _dim(interp: Interpreter, op: Any, env: Env) -> list[Value]:
    return [index(np.shape(env[op.source])[int(env[op.index])])]


@HANDLERS.register("tensor.extract")
def _extract(interp: Interpreter, op: Any, env: Env) -> list[Value]:
    tensor = np.asarray(env[op.tensor])
    indices: list[Any] = env.values_of(op.indices)
    check_indices(tensor.shape, indices)
    return [tensor[tuple(indices)]]


@HANDLERS.register("tensor.insert")
def _insert(interp: Interpreter, op: Any, env: Env) -> list[Value]:
    dest = np.array(env[op.dest])
    indices: list[Any] = env.values_of(op.indices)
    check_indices(dest.shape, indices)
    dest[tuple(indices)] = env[op.scalar]
    return [dest]


@HANDLERS.register("tensor.from_elements")
def _from_elements(interp: Interpreter, op: Any, env: Env) -> list[Value]:
    t = op.results[0].type
    return [np.array(env.operands(op), dtype=storage_dtype(t)).reshape(list(t.shape))]


@HANDLERS.register("tensor.concat")
def _concat(interp: Interpreter, op: Any, env: Env) -> list[Value]:
    return [np.concatenate(env.operands(op), axis=ir.IntegerAttr(op.dim).value)]
