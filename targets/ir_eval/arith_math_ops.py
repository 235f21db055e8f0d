"""``arith`` and ``math`` ops on numpy scalars and arrays (elementwise, broadcasting).

Floats are float64 (see :mod:`.values`); integer ops compute on the signed or unsigned
reading of their operands, as the op says, and wrap to the operand width.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from iree.compiler import ir
from iree.compiler.dialects import arith

from .interpreter import Env, Interpreter, OpTable, pure
from .values import (
    Value,
    as_signed,
    as_unsigned,
    constant,
    float_bits,
    float_from_bits,
    is_float,
    round_to,
    storage_dtype,
    wrap_int,
)

HANDLERS = OpTable()


@HANDLERS.register("arith.constant")
def _constant(interp: Interpreter, op: Any, env: Env) -> list[Value]:
    return [constant(op.attributes["value"], op.results[0].type)]


# Floating point: float64 in, float64 out.
_FLOAT_BINARY: dict[str, Callable[..., Any]] = {
    "arith.addf": np.add,
    "arith.subf": np.subtract,
    "arith.mulf": np.multiply,
    "arith.divf": np.divide,
    "arith.remf": np.fmod,
    "arith.maximumf": np.maximum,  # NaN-propagating
    "arith.minimumf": np.minimum,
    "arith.maxnumf": np.fmax,  # NaN-ignoring
    "arith.minnumf": np.fmin,
    "math.powf": np.power,
    "math.atan2": np.arctan2,
    "math.copysign": np.copysign,
}

_ERF = np.frompyfunc(math.erf, 1, 1)


def _round_half_away(x: Any) -> Any:
    return np.copysign(np.floor(np.abs(x) + 0.5), x)


_FLOAT_UNARY: dict[str, Callable[..., Any]] = {
    "arith.negf": np.negative,
    "math.absf": np.abs,
    "math.exp": np.exp,
    "math.exp2": np.exp2,
    "math.expm1": np.expm1,
    "math.log": np.log,
    "math.log2": np.log2,
    "math.log10": np.log10,
    "math.log1p": np.log1p,
    "math.sqrt": np.sqrt,
    "math.rsqrt": lambda x: 1.0 / np.sqrt(x),
    "math.tanh": np.tanh,
    "math.sin": np.sin,
    "math.cos": np.cos,
    "math.tan": np.tan,
    "math.atan": np.arctan,
    "math.erf": lambda x: np.asarray(_ERF(x), dtype=np.float64)[()],
    "math.floor": np.floor,
    "math.ceil": np.ceil,
    "math.trunc": np.trunc,
    "math.round": _round_half_away,
    "math.roundeven": np.rint,
}

for _name, _fn in (*_FLOAT_BINARY.items(), *_FLOAT_UNARY.items()):
    HANDLERS[_name] = pure(_fn)
HANDLERS["math.fma"] = pure(lambda a, b, c: a * b + c)


def _trunc_div(a: Any, b: Any) -> Any:
    """Integer division rounding toward zero (C semantics)."""
    return (a - np.fmod(a, b)) // b


# Integers: (function, reads operands as unsigned).
_INT_BINARY: dict[str, tuple[Callable[[Any, Any], Any], bool]] = {
    "arith.addi": (np.add, False),
    "arith.subi": (np.subtract, False),
    "arith.muli": (np.multiply, False),
    "arith.divsi": (_trunc_div, False),
    "arith.divui": (np.floor_divide, True),
    "arith.remsi": (np.fmod, False),
    "arith.remui": (np.remainder, True),
    "arith.floordivsi": (np.floor_divide, False),
    "arith.ceildivsi": (lambda a, b: -((-a) // b), False),
    "arith.maxsi": (np.maximum, False),
    "arith.minsi": (np.minimum, False),
    "arith.maxui": (np.maximum, True),
    "arith.minui": (np.minimum, True),
    "arith.andi": (np.bitwise_and, False),
    "arith.ori": (np.bitwise_or, False),
    "arith.xori": (np.bitwise_xor, False),
    "arith.shli": (np.left_shift, False),
    "arith.shrsi": (np.right_shift, False),
    "arith.shrui": (np.right_shift, True),
}


def _int_binary(fn: Callable[[Any, Any], Any], unsigned: bool) -> Callable[[Any, Any], Any]:
    read = as_unsigned if unsigned else as_signed

    def apply(a: Any, b: Any) -> Any:
        return wrap_int(fn(read(a), read(b)), np.asarray(a).dtype)

    return apply


for _name, (_fn2, _unsigned) in _INT_BINARY.items():
    HANDLERS[_name] = pure(_int_binary(_fn2, _unsigned))
HANDLERS["math.absi"] = pure(lambda x: wrap_int(np.abs(as_signed(x)), np.asarray(x).dtype))


@HANDLERS.register("arith.select")
def _select(interp: Interpreter, op: Any, env: Env) -> list[Value]:
    condition, if_true, if_false = env.operands(op)
    return [np.asarray(np.where(condition, if_true, if_false))[()]]


def _ordered(a: Any, b: Any) -> Any:
    return ~(np.isnan(a) | np.isnan(b))


_P = arith.CmpFPredicate
_CMPF: dict[int, Callable[[Any, Any], Any]] = {
    _P.AlwaysFalse: lambda a, b: np.zeros(np.broadcast(a, b).shape, dtype=bool)[()],
    _P.OEQ: np.equal,
    _P.OGT: np.greater,
    _P.OGE: np.greater_equal,
    _P.OLT: np.less,
    _P.OLE: np.less_equal,
    _P.ONE: lambda a, b: _ordered(a, b) & (a != b),
    _P.ORD: _ordered,
    _P.UEQ: lambda a, b: ~_ordered(a, b) | (a == b),
    _P.UGT: lambda a, b: ~(a <= b),
    _P.UGE: lambda a, b: ~(a < b),
    _P.ULT: lambda a, b: ~(a >= b),
    _P.ULE: lambda a, b: ~(a > b),
    _P.UNE: np.not_equal,
    _P.UNO: lambda a, b: ~_ordered(a, b),
    _P.AlwaysTrue: lambda a, b: np.ones(np.broadcast(a, b).shape, dtype=bool)[()],
}

_I = arith.CmpIPredicate
_CMPI: dict[int, tuple[Callable[[Any, Any], Any], bool]] = {
    _I.eq: (np.equal, False),
    _I.ne: (np.not_equal, False),
    _I.slt: (np.less, False),
    _I.sle: (np.less_equal, False),
    _I.sgt: (np.greater, False),
    _I.sge: (np.greater_equal, False),
    _I.ult: (np.less, True),
    _I.ule: (np.less_equal, True),
    _I.ugt: (np.greater, True),
    _I.uge: (np.greater_equal, True),
}


def _predicate(op: Any) -> int:
    return int(ir.IntegerAttr(op.attributes["predicate"]).value)


@HANDLERS.register("arith.cmpf")
def _cmpf(interp: Interpreter, op: Any, env: Env) -> list[Value]:
    a, b = env.operands(op)
    return [np.asarray(_CMPF[_predicate(op)](a, b))[()]]


@HANDLERS.register("arith.cmpi")
def _cmpi(interp: Interpreter, op: Any, env: Env) -> list[Value]:
    a, b = env.operands(op)
    fn, unsigned = _CMPI[_predicate(op)]
    read = as_unsigned if unsigned else as_signed
    return [np.asarray(fn(read(a), read(b)))[()]]


# Casts: fn(value, source type, result type).
_Cast = Callable[[Any, ir.Type, ir.Type], Any]


def _sign_cast(x: Any, src: ir.Type, dst: ir.Type) -> Any:
    return wrap_int(as_signed(x), storage_dtype(dst))


def _zero_cast(x: Any, src: ir.Type, dst: ir.Type) -> Any:
    return wrap_int(as_unsigned(x), storage_dtype(dst))


def _bitcast(x: Any, src: ir.Type, dst: ir.Type) -> Any:
    bits = float_bits(x, src) if is_float(src) else x
    if is_float(dst):
        return float_from_bits(bits, dst)
    return wrap_int(bits, storage_dtype(dst))


_CASTS: dict[str, _Cast] = {
    "arith.extf": lambda x, src, dst: x,  # float64 already holds every narrower value
    "arith.truncf": lambda x, src, dst: round_to(x, dst),
    "arith.sitofp": lambda x, src, dst: round_to(as_signed(x).astype(np.float64), dst),
    "arith.uitofp": lambda x, src, dst: round_to(as_unsigned(x).astype(np.float64), dst),
    "arith.fptosi": lambda x, src, dst: wrap_int(np.trunc(x).astype(np.int64), storage_dtype(dst)),
    "arith.fptoui": lambda x, src, dst: wrap_int(np.trunc(x).astype(np.uint64), storage_dtype(dst)),
    "arith.extsi": _sign_cast,
    "arith.trunci": _sign_cast,
    "arith.index_cast": _sign_cast,
    "arith.extui": _zero_cast,
    "arith.index_castui": _zero_cast,
    "arith.bitcast": _bitcast,
}


def _cast_handler(fn: _Cast) -> Callable[[Interpreter, Any, Env], list[Value]]:
    def handler(interp: Interpreter, op: Any, env: Env) -> list[Value]:
        source = op.operands[0]
        return [fn(env[source], source.type, op.results[0].type)]

    return handler


for _name, _cast in _CASTS.items():
    HANDLERS[_name] = _cast_handler(_cast)
