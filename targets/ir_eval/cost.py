"""What evaluating a module in numpy would cost, found before running it: whether every
op is one the evaluator runs, and how much work its ``linalg.generic`` ops are (named ops
are generalized first, as :func:`.evaluator.evaluate` does).

The evaluator vectorizes a generic's parallel loops and iterates its reduction loops in
Python (:mod:`.linalg_ops`): a generic costs one numpy body evaluation over the parallel
space per point of its reduction space. ``element_ops`` counts the points of all
iteration spaces, ``steps`` the Python-level iterations; :func:`evaluation_cost` raises
:class:`~.errors.EvalError` where the module cannot be evaluated at all (an op the
evaluator lacks, a dynamic shape).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from iree.compiler import ir

from .affine_ops import compile_map
from .errors import EvalError, OpFailure
from .evaluator import HANDLERS, entry_function, parse_module
from .linalg_ops import loop_extents

_TERMINATORS = {"linalg.yield", "scf.yield", "tensor.yield", "func.return", "scf.reduce"}


@dataclass(frozen=True)
class EvalCost:
    """The work of one evaluation (module docstring)."""

    element_ops: int
    steps: int

    def within(self, limit: EvalCost) -> bool:
        return self.element_ops <= limit.element_ops and self.steps <= limit.steps

    def describe(self) -> str:
        return f"{self.element_ops:.2g} element operations in {self.steps:.2g} numpy steps"


def evaluation_cost(module_text: str, function: str | None, source: str = "<input>") -> EvalCost:
    """The cost of evaluating ``function`` of the module once. Raises EvalError naming
    the first op the evaluator does not run, or a generic whose loop bounds are not
    static."""
    with ir.Context():
        module = parse_module(module_text, source)
        fn = entry_function(module, function, source)
        element_ops = steps = 0
        for op in _ops_under(fn):
            name = op.name
            if name not in HANDLERS and name not in _TERMINATORS:
                raise EvalError(f"{source}: the numpy IR evaluator does not run '{name}'")
            if name == "linalg.generic":
                extents, reductions = _generic_space(op, source)
                element_ops += math.prod(extents)
                steps += math.prod(extents[d] for d in reductions)
        return EvalCost(element_ops, max(steps, 1))


def _ops_under(fn: Any) -> list[Any]:
    """Every op nested in ``fn``'s body (bodies of generics and loops included)."""
    found: list[Any] = []

    def visit(op: Any) -> None:
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    found.append(inner.operation)
                    visit(inner.operation)

    visit(fn.operation)
    return found


def _generic_space(op: Any, source: str) -> tuple[list[int], list[int]]:
    """A generic's loop extents (from its operands' static shapes) and reduction dims."""
    shapes: list[list[int]] = []
    for operand in op.operands:
        shaped = operand.type
        if not isinstance(shaped, ir.ShapedType):
            shapes.append([])  # a scalar operand
            continue
        if not shaped.has_static_shape:
            raise EvalError(f"{source}: a linalg.generic has an operand of type {operand.type}")
        shapes.append(list(shaped.shape))
    maps = [compile_map(ir.AffineMapAttr(a).value) for a in op.attributes["indexing_maps"]]
    try:
        extents = loop_extents(maps, shapes)
    except OpFailure as exc:
        raise EvalError(f"{source}: {exc}") from None
    iterators = list(op.attributes["iterator_types"])
    reductions = [d for d, t in enumerate(iterators) if "reduction" in str(t)]
    return extents, reductions
