"""Runtime values: how MLIR element types are held in numpy, and conversions between them.

Every SSA value is a numpy array (tensors, and scalars inside a vectorised linalg body) or a
numpy scalar. Floating-point values of every width are held in float64, so that BEFORE and
AFTER differ only by what a schedule changes, not by rounding of reordered float32 sums;
explicit conversions (``arith.truncf`` and friends) still round to the narrower type.
Integers are held at their own width (``i1`` as bool, ``index`` as int64) and wrap like
the hardware does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np
from iree.compiler import ir

from .errors import OpFailure

Value: TypeAlias = "np.ndarray[Any, Any] | np.generic"

# Float types and the numpy type of their precision (bf16 has none: rounded bitwise).
_FLOAT_TYPES = {"f16": np.float16, "bf16": None, "f32": np.float32, "f64": np.float64}
_INT_TYPES: dict[str, type[np.generic]] = {
    "i1": np.bool_,
    "i8": np.int8,
    "i16": np.int16,
    "i32": np.int32,
    "i64": np.int64,
    "index": np.int64,
}
_UNSIGNED = {
    np.dtype(np.int8): np.uint8,
    np.dtype(np.int16): np.uint16,
    np.dtype(np.int32): np.uint32,
    np.dtype(np.int64): np.uint64,
}
_DYNAMIC = ir.ShapedType.get_dynamic_size()


def element_type(t: ir.Type) -> ir.Type:
    """The element type of a shaped type, or ``t`` itself for a scalar type."""
    return t.element_type if isinstance(t, ir.ShapedType) else t


def storage_dtype(t: ir.Type) -> np.dtype[Any]:
    """The numpy dtype holding values of MLIR type ``t`` (a scalar or a tensor type)."""
    name = str(element_type(t))
    if name in _FLOAT_TYPES:
        return np.dtype(np.float64)
    if name in _INT_TYPES:
        return np.dtype(_INT_TYPES[name])
    raise OpFailure(
        f"element type {name} is not supported (supported: "
        f"{', '.join([*_FLOAT_TYPES, *_INT_TYPES])})"
    )


def is_float(t: ir.Type) -> bool:
    """Whether ``t`` (or its element type) is a floating-point type."""
    return str(element_type(t)) in _FLOAT_TYPES


def round_to(x: Value, t: ir.Type) -> Value:
    """``x`` (float64) rounded to the precision of float type ``t``, still held in float64."""
    name = str(element_type(t))
    if name == "f64":
        return np.asarray(x, dtype=np.float64)[()]
    if name == "bf16":
        return _round_to_bf16(np.asarray(x, dtype=np.float32))
    narrow = _FLOAT_TYPES.get(name)
    if narrow is None:
        raise OpFailure(f"cannot round to {name}")
    return np.asarray(x).astype(narrow).astype(np.float64)[()]


def _round_to_bf16(x: np.ndarray[Any, Any]) -> Value:
    """Round float32 values to bfloat16 (nearest, ties to even), returned as float64."""
    bits = x.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    out = np.where(np.isnan(x), x, rounded.view(np.float32))
    return out.astype(np.float64)[()]


def float_bits(x: Value, t: ir.Type) -> Value:
    """The bit pattern of float ``x`` as type ``t`` stores it, as an unsigned integer."""
    name = str(element_type(t))
    if name == "bf16":
        as_f32 = np.asarray(round_to(x, t), dtype=np.float32)
        return (as_f32.view(np.uint32) >> 16).astype(np.uint16)[()]
    narrow = np.dtype(_FLOAT_TYPES[name])
    return np.asarray(x).astype(narrow).view(f"u{narrow.itemsize}")[()]


def float_from_bits(bits: Value, t: ir.Type) -> Value:
    """The float of type ``t`` whose bit pattern is the integer ``bits``, as float64."""
    name = str(element_type(t))
    if name == "bf16":
        wide = np.asarray(bits).astype(np.uint16).astype(np.uint32) << 16
        return wide.view(np.float32).astype(np.float64)[()]
    narrow = np.dtype(_FLOAT_TYPES[name])
    unsigned = np.asarray(bits).astype(f"u{narrow.itemsize}")
    return unsigned.view(narrow).astype(np.float64)[()]


def as_unsigned(x: Value) -> Value:
    """Integer ``x`` reinterpreted as unsigned (``i1`` true is 1)."""
    dtype = np.asarray(x).dtype
    if dtype == np.bool_:
        return np.asarray(x).astype(np.uint8)[()]
    return np.asarray(x).astype(_UNSIGNED[dtype])[()]


def as_signed(x: Value) -> Value:
    """Integer ``x`` as signed two's complement (``i1`` true is -1)."""
    if np.asarray(x).dtype == np.bool_:
        return np.where(x, -1, 0).astype(np.int8)[()]
    return x


def wrap_int(x: Value, dtype: np.dtype[Any]) -> Value:
    """Integer ``x`` truncated to ``dtype`` (two's complement wrap; ``i1`` keeps bit 0)."""
    if dtype == np.bool_:
        return (np.asarray(x).astype(np.int64) & 1).astype(np.bool_)[()]
    return np.asarray(x).astype(dtype)[()]


def index(value: Any) -> Value:
    """An ``index`` value (or array of them, inside a vectorised linalg body)."""
    return np.asarray(value, dtype=np.int64)[()]


def constant(attr: ir.Attribute, t: ir.Type) -> Value:
    """The value of an ``arith.constant`` attribute of type ``t``."""
    dtype = storage_dtype(t)
    if isinstance(attr, ir.DenseElementsAttr):
        if attr.is_splat:
            splat = constant(attr.get_splat_value(), element_type(t))
            return np.full(tuple(t.shape), splat, dtype=dtype)
        try:
            return np.array(attr).astype(dtype)
        except (TypeError, ValueError, RuntimeError) as exc:
            raise OpFailure(f"cannot read the dense constant of type {t}: {exc}") from exc
    if isinstance(attr, ir.FloatAttr | ir.IntegerAttr | ir.BoolAttr):
        return np.asarray(attr.value).astype(dtype)[()]
    raise OpFailure(f"constant attribute {attr} is not supported (dense, float, integer, bool)")


def merge_static_dynamic(static: Sequence[int], dynamic: Sequence[Value]) -> list[int]:
    """Mixed static/dynamic integers: each dynamic marker in ``static`` takes the next
    ``dynamic`` value (the layout of ``static_offsets``/``offsets`` and similar pairs)."""
    values: Iterator[Value] = iter(dynamic)
    return [int(next(values)) if s == _DYNAMIC else int(s) for s in static]


def shape_matches(t: ir.Type, shape: Sequence[int]) -> bool:
    """Whether a value of ``shape`` fits type ``t`` (``?`` dims match any size; a scalar
    type takes shape ``()``)."""
    want = list(t.shape) if isinstance(t, ir.ShapedType) else []
    return len(want) == len(shape) and all(
        w in (_DYNAMIC, n) for w, n in zip(want, shape, strict=True)
    )


def tensor_shape(t: ir.Type, dynamic_sizes: Sequence[Value]) -> tuple[int, ...]:
    """The runtime shape of a ranked tensor type whose ``?`` dims are ``dynamic_sizes``."""
    return tuple(merge_static_dynamic(list(t.shape), dynamic_sizes))


@dataclass(frozen=True)
class Fill:
    """What the elements of an uninitialized tensor hold during one evaluation."""

    description: str
    floats: float
    integers: Callable[[np.iinfo[Any]], int]
    """The value for an integer type, from its range."""
    i1: bool


FILLS = (
    Fill("NaN, the most negative integers, true", math.nan, lambda info: int(info.min), True),
    Fill("+inf, the largest integers, false", math.inf, lambda info: int(info.max), False),
    Fill("-inf, -1, true", -math.inf, lambda info: -1, True),
)
"""The fills a module is evaluated under to find what depends on uninitialized data: each
op that absorbs one (``maxnumf`` takes the number over NaN, ``maxsi`` anything over the
most negative integer, ``andi`` anything with true) shows a read under another."""

_FILL: ContextVar[Fill] = ContextVar("tdsched_uninitialized_fill", default=FILLS[0])


@contextmanager
def uninitialized_fill(fill: Fill) -> Iterator[None]:
    """Within the block, :func:`uninitialized` fills with ``fill`` (default: the first
    of :data:`FILLS`)."""
    token = _FILL.set(fill)
    try:
        yield
    finally:
        _FILL.reset(token)


def uninitialized(shape: Sequence[int], dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """Contents for a tensor with undefined elements (``tensor.empty``, a pad's
    temporary), filled with the current :class:`Fill` so that reading them shows. A
    correct program never lets these reach a result."""
    fill = _FILL.get()
    if dtype.kind == "f":
        return np.full(shape, fill.floats, dtype=dtype)
    if dtype == np.bool_:
        return np.full(shape, fill.i1, dtype=dtype)
    return np.full(shape, fill.integers(np.iinfo(dtype)), dtype=dtype)


def check_indices(shape: Sequence[int], indices: Sequence[Any]) -> None:
    """Raise unless every index (an int or an int array) is within ``shape``; numpy would
    otherwise wrap negative indices silently."""
    if len(indices) != len(shape):
        raise OpFailure(f"{len(indices)} indices for a rank-{len(shape)} tensor")
    for dim, (extent, idx) in enumerate(zip(shape, indices, strict=True)):
        if np.size(idx) and (np.min(idx) < 0 or np.max(idx) >= extent):
            raise OpFailure(
                f"index {np.min(idx)}..{np.max(idx)} out of bounds for dim {dim} of size {extent}"
            )
