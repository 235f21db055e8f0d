"""Affine maps compiled to Python functions, and ``affine.apply`` / ``min`` / ``max``.

A compiled map takes its operands (dims, then symbols) as ints or int64 arrays and returns
one value per result, so the same code evaluates scalar index arithmetic and the vectorised
indexing maps of ``linalg.generic``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from iree.compiler import ir

from .errors import OpFailure
from .interpreter import Env, Interpreter, OpTable
from .values import Value, index

_Expr = Callable[[Sequence[Any]], Any]

_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ir.AffineAddExpr: lambda a, b: a + b,
    ir.AffineMulExpr: lambda a, b: a * b,
    # MLIR requires a positive right-hand side for mod/floordiv/ceildiv, where Python's
    # floor-rounding operators agree with MLIR's definitions.
    ir.AffineModExpr: lambda a, b: a % b,
    ir.AffineFloorDivExpr: lambda a, b: a // b,
    ir.AffineCeilDivExpr: lambda a, b: -((-a) // b),
}


@dataclass(frozen=True)
class CompiledMap:
    """An affine map as Python: call it with dims then symbols."""

    n_dims: int
    results: tuple[_Expr, ...]
    result_dims: tuple[int | None, ...]
    """For each result, the dim position when the result is a plain dim, else None."""
    result_constants: tuple[int | None, ...]
    """For each result, its value when the result is a constant, else None."""
    used_dims: frozenset[int]

    def __call__(self, operands: Sequence[Any]) -> list[Any]:
        return [result(operands) for result in self.results]


_COMPILED: dict[str, CompiledMap] = {}


def compile_map(affine_map: ir.AffineMap) -> CompiledMap:
    """``affine_map`` compiled (cached by its printed form, which is unique per map)."""
    key = str(affine_map)
    compiled = _COMPILED.get(key)
    if compiled is None:
        used: set[int] = set()
        exprs = list(affine_map.results)
        compiled = CompiledMap(
            affine_map.n_dims,
            tuple(_compile(e, affine_map.n_dims, used) for e in exprs),
            tuple(e.position if isinstance(e, ir.AffineDimExpr) else None for e in exprs),
            tuple(e.value if isinstance(e, ir.AffineConstantExpr) else None for e in exprs),
            frozenset(used),
        )
        _COMPILED[key] = compiled
    return compiled


def _compile(expr: ir.AffineExpr, n_dims: int, used: set[int]) -> _Expr:
    if isinstance(expr, ir.AffineDimExpr):
        dim: int = expr.position
        used.add(dim)
        return lambda v: v[dim]
    if isinstance(expr, ir.AffineSymbolExpr):
        symbol: int = n_dims + expr.position
        return lambda v: v[symbol]
    if isinstance(expr, ir.AffineConstantExpr):
        value: int = expr.value
        return lambda v: value
    fn = next((f for kind, f in _BINARY.items() if isinstance(expr, kind)), None)
    if fn is None:
        raise OpFailure(f"affine expression {expr} is not supported")
    lhs, rhs = _compile(expr.lhs, n_dims, used), _compile(expr.rhs, n_dims, used)
    return lambda v: fn(lhs(v), rhs(v))


def _map_of(op: Any) -> CompiledMap:
    return compile_map(ir.AffineMapAttr(op.attributes["map"]).value)


HANDLERS = OpTable()


@HANDLERS.register("affine.apply")
def _apply(interp: Interpreter, op: Any, env: Env) -> list[Value]:
    return [index(r) for r in _map_of(op)(env.operands(op))]


@HANDLERS.register("affine.min")
def _min(interp: Interpreter, op: Any, env: Env) -> list[Value]:
    return [index(functools.reduce(np.minimum, _map_of(op)(env.operands(op))))]


@HANDLERS.register("affine.max")
def _max(interp: Interpreter, op: Any, env: Env) -> list[Value]:
    return [index(functools.reduce(np.maximum, _map_of(op)(env.operands(op))))]
