"""Graph rewrite decompose_softmax: ``linalg.softmax`` as four ops that compute ``exp``
once per element.

For a softmax of ``x`` along dim ``d``::

    %max = row max of x along d                      (fill -inf, reduction generic)
    %e   = exp(x - max)                              (parallel generic, materialized)
    %sum = row sum of e along d                      (fill 0, reduction generic)
    %out = e * (1 / sum)                             (parallel generic, into the softmax's init)

Why: IREE 3.13 turns ``linalg.softmax`` into one dispatch that computes ``exp(x - max)``
twice per element, once for the sum and again for the normalization, and divides. The
division happens once per element. This form computes ``exp`` once and keeps ``e`` in
memory between two dispatches (IREE forms one for the max and the exponentials, one for
the sum and the normalization). It costs a write and a read of ``e``. It pays where
``exp`` dominates: rows that do not fit the L1 cache, or inputs that fit the caches as a
whole. Where the data streams from memory (6144x512 on a 2-core Zen 4), IREE's
one-dispatch form with tuned tiles beats it; see ``softmax_x86``'s shape table. IREE
does not raise this form back into a softmax.

The new ops keep the softmax's location and its ``tdsched.layer``, so kernel matches by
layer select them. The max propagates NaN (``arith.maximumf``), as numpy's does.
Preconditions: static shapes and a float element type; a softmax without them is left as
it is (or refused, when ``ops`` selects it explicitly).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from iree.compiler import ir
from iree.compiler.dialects import arith, linalg, tensor
from iree.compiler.dialects import math as math_dialect

from ..generic_build import Operand, create_generic, finish_body
from ..match import LAYER_ATTR, OpCriteria
from .report import RewriteReport, plan_each, selected

PRIMITIVE = "decompose_softmax"


@dataclass(frozen=True)
class DecomposeSoftmaxOptions:
    """Which softmax ops to rewrite (``None``: every one)."""

    ops: OpCriteria | None = None


@dataclass(frozen=True)
class _Plan:
    op: ir.Operation
    dim: int
    shape: tuple[int, ...]
    element: ir.Type


def decompose_softmax(module: ir.Module, options: DecomposeSoftmaxOptions) -> RewriteReport:
    """Rewrite every selected ``linalg.softmax`` of ``module`` in place.

    When ``options.ops`` selects ops explicitly, a softmax that cannot be rewritten
    raises :class:`GraphRewriteError` before anything is rewritten; otherwise it is left
    as it is and the report's details say why.
    """
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "linalg.softmax" and selected(op, options.ops):
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    plans, left = plan_each(
        found,
        _plan,
        options.ops is not None,
        refusal="decompose_softmax: cannot rewrite",
        fix="narrow 'ops' to softmax ops with static shapes",
        left="left as it is",
    )
    for plan in plans:
        with ir.InsertionPoint(plan.op), plan.op.location:
            _rewrite(plan)
    if not plans:
        why = "no softmax could be rewritten" if left else "no linalg.softmax selected"
        return RewriteReport(PRIMITIVE, f"changed nothing: {why}", False, tuple(left))
    summary = f"decomposed {len(plans)} linalg.softmax into max, exp, sum, scale (exp once)"
    return RewriteReport(PRIMITIVE, summary, True, tuple(left))


def _plan(op: ir.Operation) -> _Plan | str:
    source = op.operands[0]
    tensor_type = ir.RankedTensorType(source.type)
    if not tensor_type.has_static_shape:
        return "its shape is dynamic"
    element = tensor_type.element_type
    if not isinstance(element, ir.FloatType):
        return f"its element type {element} is not a float"
    dim = int(ir.IntegerAttr(op.attributes["dimension"]).value)
    return _Plan(op, dim, tuple(tensor_type.shape), element)


def _rewrite(plan: _Plan) -> None:
    x, init = plan.op.operands[0], plan.op.operands[1]
    rank, dim, element = len(plan.shape), plan.dim, plan.element
    identity = ir.AffineMap.get_identity(rank)
    rows = ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(i) for i in range(rank) if i != dim])
    reduce = ["reduction" if i == dim else "parallel" for i in range(rank)]
    parallel = ["parallel"] * rank
    row_shape = [s for i, s in enumerate(plan.shape) if i != dim]
    row_empty = tensor.EmptyOp(row_shape, element).result
    location = plan.op.location
    layer = plan.op.attributes.get(LAYER_ATTR, None)
    created: list[ir.Operation] = []

    def filled(value: float) -> ir.Value:
        constant = arith.ConstantOp(element, ir.FloatAttr.get(element, value)).result
        value_filled: ir.Value = linalg.fill(constant, outs=[row_empty])
        created.append(value_filled.owner)
        return value_filled

    def generic(inputs: list[Operand], output: Operand, kinds: list[str]) -> ir.Block:
        op, block = create_generic(inputs, [output], kinds, location)
        created.append(op)
        return block

    def result() -> ir.Value:
        return created[-1].results[0]

    block = generic([Operand(x, identity)], Operand(filled(-math.inf), rows), reduce)
    with ir.InsertionPoint(block):
        finish_body(block, [arith.MaximumFOp(*block.arguments).result])
    row_max = result()

    block = generic(
        [Operand(x, identity), Operand(row_max, rows)], Operand(init, identity), parallel
    )
    with ir.InsertionPoint(block):
        shifted = arith.SubFOp(block.arguments[0], block.arguments[1]).result
        finish_body(block, [math_dialect.ExpOp(shifted).result])
    exponentials = result()

    block = generic([Operand(exponentials, identity)], Operand(filled(0.0), rows), reduce)
    with ir.InsertionPoint(block):
        finish_body(block, [arith.AddFOp(*block.arguments).result])
    row_sum = result()

    inputs = [Operand(exponentials, identity), Operand(row_sum, rows)]
    block = generic(inputs, Operand(init, identity), parallel)
    with ir.InsertionPoint(block):
        one = arith.ConstantOp(element, ir.FloatAttr.get(element, 1.0)).result
        inverse = arith.DivFOp(one, block.arguments[1]).result
        finish_body(block, [arith.MulFOp(block.arguments[0], inverse).result])
    if layer is not None:
        for op in created:
            op.attributes[LAYER_ATTR] = layer
    plan.op.results[0].replace_all_uses_with(result())
    plan.op.erase()
