"""A model's constant operands, carried into a task's standalone function.

A lowered model's weights are constants, and IREE evaluates work on constants once, at
compile time: a pack of a matmul's B (data tiling, or the ``mmt4d`` graph step) leaves the
timed call. A task's standalone function (:mod:`.standalone_dispatch`) reads every
operand as an argument, so a schedule that packs the weights would pay the pack on every
call there and never in the model. :func:`constant_operands` finds which inputs of a
layer's op are computed from constants alone in the model; :func:`with_constant_operands`
defines the matching arguments of the task's function as seeded random constants of the
same type, so the task is timed as the model runs it.

Preconditions: the model's ops carry their layer as ``tdsched.layer`` (lowered models
do); the function is one ``func.func`` whose op reads the argument directly or through a
``tensor.extract_slice`` of it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

import numpy as np
from iree.compiler import ir

from .match import LAYER_ATTR

WEIGHT_SEED = 4321
"""The seed of the constants that stand for a model's weights in a task: uniform in
[-1, 1), as the inputs are, and the same in every candidate and in the reference build."""
_NUMPY = {"f32": np.float32, "f64": np.float64, "f16": np.float16}


def constant_operands(module_text: str, op_name: str, layers: Collection[str]) -> frozenset[int]:
    """Positions of the inputs of every ``op_name`` op of ``layers`` (by its
    ``tdsched.layer``) that are computed from constants alone, in every such op; empty
    when no such op exists."""
    with ir.Context() as context:
        context.allow_unregistered_dialects = True
        module = ir.Module.parse(module_text)
        found: list[frozenset[int]] = []
        for op in _walk(module.operation):
            if op.name != op_name or _layer(op) not in layers:
                continue
            inputs = _inputs(op)
            found.append(frozenset(i for i, v in enumerate(inputs) if _from_constants(v, {})))
    return frozenset.intersection(*found) if found else frozenset()


def with_constant_operands(function_text: str, op_name: str, positions: Iterable[int]) -> str:
    """``function_text`` with each argument that the first ``op_name`` op reads at input
    ``positions`` (directly or through a slice) defined in the body as a constant of
    :data:`WEIGHT_SEED` instead; arguments of other element types than f16/f32/f64, or
    read by that op in another way, stay arguments."""
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(function_text)
        function = next(op for op in module.body.operations if op.operation.name == "func.func")
        block = function.operation.regions[0].blocks[0]
        op = next((o for o in _walk(function.operation) if o.name == op_name), None)
        if op is None:
            return function_text
        wanted = sorted(set(positions))
        inputs = _inputs(op)
        arguments = [_argument(inputs[i], block) for i in wanted if i < len(inputs)]
        rng = np.random.default_rng(WEIGHT_SEED)
        replaced = []
        for argument in arguments:
            if argument is None or argument.arg_number in replaced:
                continue
            attr = _random_constant(argument.type, rng)
            if attr is None:
                continue
            with ir.InsertionPoint.at_block_begin(block):
                value = ir.Operation.create("arith.constant", [argument.type], [], {"value": attr})
            argument.replace_all_uses_with(value.result)
            replaced.append(argument.arg_number)
        for number in sorted(replaced, reverse=True):
            block.erase_argument(number)
        kept = [a.type for a in block.arguments]
        results = ir.FunctionType(ir.TypeAttr(function.operation.attributes["function_type"]).value)
        function.operation.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get(kept, list(results.results))
        )
        return str(module)


def _walk(root: ir.Operation) -> Iterable[ir.Operation]:
    for region in root.regions:
        for block in region.blocks:
            for op in block.operations:
                yield op.operation
                yield from _walk(op.operation)


def _layer(op: ir.Operation) -> str | None:
    attr = op.attributes.get(LAYER_ATTR, None)
    return ir.StringAttr(attr).value if isinstance(attr, ir.StringAttr) else None


def _inputs(op: ir.Operation) -> list[ir.Value]:
    """A structured op's inputs (its operands before the outputs)."""
    if "operandSegmentSizes" in op.attributes:
        count = ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])[0]
        return list(op.operands)[:count]
    return list(op.operands)[:-1]


def _from_constants(value: ir.Value, seen: dict[ir.Value, bool]) -> bool:
    """Whether ``value`` is computed from constants alone (no function argument in its
    backward slice: a weight, or a transpose or reshape of one)."""
    if value in seen:
        return seen[value]
    owner = value.owner
    result = False
    if not isinstance(owner, ir.Block):
        operation = owner.operation
        result = all(_from_constants(v, seen) for v in _reads(operation))
    seen[value] = result
    return result


def _reads(op: ir.Operation) -> list[ir.Value]:
    """The values ``op`` reads: its operands and those its regions use from outside."""
    inside = [op, *_walk(op)]
    values = list(op.operands)
    for inner in inside[1:]:
        for value in inner.operands:
            owner = value.owner
            parent = owner.owner if isinstance(owner, ir.Block) else owner.operation
            if not any(parent == local for local in inside):
                values.append(value)
    return values


def _argument(value: ir.Value, block: ir.Block) -> ir.BlockArgument | None:
    """The argument of ``block`` that ``value`` is, or is a slice of."""
    owner = value.owner
    if not isinstance(owner, ir.Block) and owner.operation.name == "tensor.extract_slice":
        value = owner.operation.operands[0]
        owner = value.owner
    if isinstance(owner, ir.Block) and owner == block:
        return ir.BlockArgument(value)
    return None


def _random_constant(tensor_type: ir.Type, rng: np.random.Generator) -> ir.Attribute | None:
    try:
        shaped = ir.RankedTensorType(tensor_type)
    except ValueError:
        return None
    dtype = _NUMPY.get(str(shaped.element_type))
    if dtype is None or not shaped.has_static_shape:
        return None
    array = rng.uniform(-1.0, 1.0, size=tuple(shaped.shape)).astype(dtype)
    return ir.DenseElementsAttr.get(array, type=tensor_type)
