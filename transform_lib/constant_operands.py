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

import functools
from collections.abc import Collection, Iterable

import numpy as np
from iree.compiler import ir

from .graph.report import layer_of
from .payload import is_structured, ops_under

WEIGHT_SEED = 4321
"""The seed of the constants that stand for a model's weights in a task: uniform in
[-1, 1), as the inputs are, and the same in every candidate and in the reference build."""
_NUMPY = {"f32": np.float32, "f64": np.float64, "f16": np.float16}


class ModelConstants:
    """Which inputs of a model's layer ops are computed from constants alone. The model
    is parsed and walked once, on the first question (a tune asks once per task)."""

    def __init__(self, module_text: str) -> None:
        self._text = module_text

    def inputs(self, op_name: str, layers: Collection[str]) -> frozenset[int]:
        """Positions of the inputs of the ``op_name`` ops of ``layers`` (by their
        ``tdsched.layer``) that are computed from constants alone in every one of them;
        empty when a layer has no such op."""
        found = [self._by_layer.get((op_name, layer)) for layer in layers]
        if not found or any(f is None for f in found):
            return frozenset()
        return frozenset.intersection(*(f for f in found if f is not None))

    @functools.cached_property
    def _by_layer(self) -> dict[tuple[str, str], frozenset[int]]:
        """(op name, layer) -> the inputs constant in every such op of the layer."""
        table: dict[tuple[str, str], frozenset[int]] = {}
        with ir.Context() as context:
            context.allow_unregistered_dialects = True
            module = ir.Module.parse(self._text)
            seen: dict[ir.Value, bool] = {}
            for op in ops_under(module.operation, _tagged_structured):
                inputs = list(op.opview.inputs)
                constant = frozenset(i for i, v in enumerate(inputs) if _from_constants(v, seen))
                key = (op.name, str(layer_of(op)))
                table[key] = table[key] & constant if key in table else constant
        return table


def with_constant_operands(function_text: str, op_name: str, positions: Iterable[int]) -> str:
    """``function_text`` with each argument that the first ``op_name`` op reads at input
    ``positions`` (directly or through a slice) defined in the body as a constant of
    :data:`WEIGHT_SEED` instead; arguments of other element types than f16/f32/f64, or
    read by that op in another way, stay arguments."""
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(function_text)
        function = next(op for op in module.body.operations if op.operation.name == "func.func")
        block = function.operation.regions[0].blocks[0]
        ops = ops_under(function.operation, lambda o: o.name == op_name)
        if not ops:
            return function_text
        inputs = list(ops[0].opview.inputs)
        arguments = [_argument(inputs[i], block) for i in sorted(set(positions)) if i < len(inputs)]
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


def _tagged_structured(op: ir.Operation) -> bool:
    """A linalg structured op (``ins``/``outs`` segments) that carries its layer (a
    ``tensor.pad`` has operand segments too, and no ``ins``)."""
    tagged = layer_of(op) is not None
    return tagged and is_structured(op) and "operandSegmentSizes" in op.attributes


def _from_constants(value: ir.Value, seen: dict[ir.Value, bool]) -> bool:
    """Whether ``value`` is computed from constants alone (no function argument in its
    backward slice: a weight, or a transpose or reshape of one)."""
    if value in seen:
        return seen[value]
    owner = value.owner
    result = False
    if not isinstance(owner, ir.Block):
        result = all(_from_constants(v, seen) for v in _reads(owner.operation))
    seen[value] = result
    return result


def _reads(op: ir.Operation) -> list[ir.Value]:
    """The values ``op`` reads: its operands and those its regions use from outside."""
    inside = ops_under(op, lambda _: True)  # op itself among them
    values = list(op.operands)
    for inner in inside:
        if inner == op:
            continue
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
