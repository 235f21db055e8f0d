"""A dispatch as a function of its own: the workload a model's task is tuned on.

A census (``census``) prints each dispatch function as kernel configurations see it: it
reads its operands from HAL bindings (``iree_tensor_ext.dispatch.tensor.load``) and writes
its results into them (``...dispatch.tensor.store``). :func:`standalone_function` turns
one into a plain ``func.func`` on tensors: every load becomes an argument of the loaded
type, every stored value a result, and the binding ops go. A value stored into part of
its binding (IREE fused the zero pad of the next layer's convolution into the store, and
writes the value into the padded tensor's interior) is returned padded to the binding's
shape: from a ``tensor.pad`` after the computation IREE forms that dispatch again, storing
at the same offsets, where the bare value would let it collapse the loops (a 14x14
pixel loop nest becomes 196 rows, another kernel). IREE then forms the same
dispatch from it, which a caller should confirm with a census of the result (a dispatch
whose ops IREE's global passes rewrite again would be a different kernel).

Preconditions: static shapes (a push constant that feeds anything but a binding is
refused) and the ops at the function's top level, as IREE prints them at that stage.
"""

from __future__ import annotations

import re

from iree.compiler import ir
from iree.compiler.dialects import arith, func, linalg, tensor

from .errors import ScheduleError

_LOAD = "iree_tensor_ext.dispatch.tensor.load"
_STORE = "iree_tensor_ext.dispatch.tensor.store"
_BINDING_OPS = ("hal.interface.binding.subspan", "hal.interface.constant.load")
_BINDING_TENSOR = re.compile(r"<(?:readonly|writeonly|readwrite):(tensor<.*>)>$")
_SLICE_ATTRS = ("static_offsets", "static_sizes", "static_strides")
_PLUMBING = (
    *_BINDING_OPS,
    "arith.constant",
    "arith.index_cast",
    "arith.index_castui",
    "util.assume.int",
)
"""Ops that compute binding offsets; erased once nothing uses them."""
_CONFIG_ATTRS = ("lowering_config", "translation_info", "compilation_info")
"""Attributes kernel configuration may have set already; the standalone function is
configured afresh when it is compiled."""


def standalone_function(dispatch_text: str, name: str) -> str:
    """The dispatch function printed in ``dispatch_text`` as a public function ``name``
    taking the tensors it loads and returning the tensors it stores, in their order.

    Raises ``ScheduleError`` when the dispatch has dynamic shapes, nested bindings or
    stores nothing.
    """
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(dispatch_text)
        functions = [op for op in module.body.operations if op.operation.name == "func.func"]
        if len(functions) != 1:
            raise ScheduleError(f"expected one dispatch function, found {len(functions)}")
        function = functions[0].operation
        block = function.regions[0].blocks[0]
        results = _unbind(block)
        if not results:
            raise ScheduleError("the dispatch stores no result")
        arguments = [arg.type for arg in block.arguments]
        function.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get(arguments, [v.type for v in results])
        )
        function.attributes["sym_name"] = ir.StringAttr.get(name)
        for attr in _CONFIG_ATTRS:
            if attr in function.attributes:
                del function.attributes[attr]
        return str(module)


def as_softmax(function_text: str) -> str | None:
    """The standalone function ``function_text`` rebuilt as the ``linalg.softmax`` IREE
    decomposed into it, or ``None`` when it is not one.

    IREE forms a softmax's dispatch before decomposing it into a row max, a row sum of
    exponentials and a normalization. Given those three ``linalg.generic``s (and their
    inits) as a function of their own, IREE's dispatch formation splits them in two
    and collapses their rows, so a softmax task is tuned on the ``linalg.softmax``
    itself, over the dim the first op reduces. Recognized: one argument and one result
    of the same tensor type, and a first ``linalg.generic`` that reduces one loop and
    computes a maximum.
    """
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(function_text)
        function = module.body.operations[0].operation
        kind = ir.FunctionType(ir.TypeAttr(function.attributes["function_type"]).value)
        if len(kind.inputs) != 1 or list(kind.results) != list(kind.inputs):
            return None
        generics = [
            op.operation
            for op in function.regions[0].blocks[0].operations
            if op.operation.name == "linalg.generic"
        ]
        if not generics or not _row_max(generics[0]):
            return None
        iterators = [str(t) for t in ir.ArrayAttr(generics[0].attributes["iterator_types"])]
        tensor_type = kind.inputs[0]
        name = ir.StringAttr(function.attributes["sym_name"]).value
        rebuilt = ir.Module.create()
        with ir.InsertionPoint(rebuilt.body):
            softmax = func.FuncOp(name, ir.FunctionType.get([tensor_type], [tensor_type]))
        with ir.InsertionPoint(softmax.add_entry_block()):
            shape = ir.RankedTensorType(tensor_type)
            empty = tensor.EmptyOp(shape.shape, shape.element_type).result
            dim = next(i for i, t in enumerate(iterators) if "reduction" in t)
            x = softmax.arguments[0]
            func.ReturnOp([linalg.SoftmaxOp([tensor_type], x, empty, dim).result])
        return str(rebuilt)


def _row_max(op: ir.Operation) -> bool:
    """Whether the ``linalg.generic`` ``op`` reduces one loop by a maximum."""
    iterators = [str(t) for t in ir.ArrayAttr(op.attributes["iterator_types"])]
    body = [inner.operation.name for inner in op.regions[0].blocks[0].operations]
    maximum = {"arith.maxnumf", "arith.maximumf"} & set(body)
    return sum("reduction" in t for t in iterators) == 1 and bool(maximum)


def dataflow(function_text: str) -> tuple[tuple[object, ...], ...]:
    """What a kernel schedule planned on one standalone function relies on, so that two
    functions with the same dataflow take the same schedule: per op at the top level
    (constants left out), its name, its iterator types, and which earlier op produces
    each of its operands, with the operand's group (inputs, inits) and position in it
    and its indexing map. Every op but an elementwise ``linalg.generic`` (all loops
    parallel) also records the arguments it reads and its body's ops; elementwise
    generics may read further arguments (a residual, a bias) and compute differently:
    ``fuse_ext`` fuses them the same way.
    """
    with ir.Context():
        module = ir.Module.parse(function_text)
        function = next(op.operation for op in module.body.operations)
        body = [
            op.operation
            for op in function.regions[0].blocks[0].operations
            if op.operation.name not in ("arith.constant", "func.return")
        ]
        return tuple(_op_dataflow(op, body) for op in body)


def dispatch_dataflow(dispatch_text: str) -> tuple[tuple[object, ...], ...] | None:
    """The :func:`dataflow` of the dispatch function printed in ``dispatch_text``, as a
    standalone function; ``None`` for a dispatch :func:`standalone_function` refuses."""
    try:
        return dataflow(standalone_function(dispatch_text, "dispatch"))
    except ScheduleError:
        return None


def _op_dataflow(op: ir.Operation, body: list[ir.Operation]) -> tuple[object, ...]:
    iterators = str(op.attributes["iterator_types"]) if "iterator_types" in op.attributes else ""
    maps = list(op.attributes["indexing_maps"]) if "indexing_maps" in op.attributes else []
    elementwise = op.name == "linalg.generic" and "reduction" not in iterators
    operands: list[tuple[object, ...]] = []
    for index, (group, position) in enumerate(_operand_groups(op)):
        value = op.operands[index]
        owner = value.owner
        source: object = "arg"
        if not isinstance(owner, ir.Block):
            producer = owner.operation
            source = body.index(producer) if producer in body else "const"
        if source == "arg" and elementwise:
            continue
        map_text = str(maps[index]) if index < len(maps) else ""
        operands.append((group, position, source, map_text))
    inner = tuple(o.operation.name for r in op.regions for b in r.blocks for o in b.operations)
    return (op.name, iterators, tuple(operands), () if elementwise else inner)


def _operand_groups(op: ir.Operation) -> list[tuple[int, int]]:
    """(group, position in it) per operand: DPS ops' inputs then inits, others one group."""
    if "operandSegmentSizes" not in op.attributes:
        return [(0, i) for i in range(len(op.operands))]
    sizes = ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])
    return [(group, i) for group, size in enumerate(sizes) for i in range(size)]


def _unbind(block: ir.Block) -> list[ir.Value]:
    """Rewrite ``block`` (a dispatch function's body) in place: loads become block
    arguments, stores and binding ops go, ``return`` returns the stored values."""
    if not any(op.operation.name == _LOAD for op in block.operations):
        raise ScheduleError("the dispatch works on buffers, not tensors (a copy IREE made itself)")
    stored: list[ir.Value] = []
    doomed: list[ir.Operation] = []
    terminator = None
    for op in block.operations:
        op = op.operation
        if op.name == _LOAD:
            op.results[0].replace_all_uses_with(_argument_for(block, op))
            doomed.append(op)
        elif op.name == _STORE:
            stored.append(_stored_whole(op))
            doomed.append(op)
        elif op.name == "func.return":
            terminator = op
        else:
            _check_nested(op)
    assert terminator is not None
    with ir.InsertionPoint(terminator):
        func.ReturnOp(stored)
    doomed.append(terminator)
    for op in doomed:
        op.erase()
    _erase_bindings(block)
    return stored


def _argument_for(block: ir.Block, load: ir.Operation) -> ir.Value:
    """A new argument of ``block`` standing for the tensor ``load`` reads: the loaded
    type where it reads its whole binding, else the binding's whole tensor and, in place
    of ``load``, the slice it reads (a strided read stays strided: IREE would otherwise
    see a denser op, e.g. a strided 1x1 convolution as a matmul)."""
    loaded = load.results[0].type
    whole = _BINDING_TENSOR.search(str(load.operands[0].type))
    if whole is None:
        raise ScheduleError(f"cannot read the binding type {load.operands[0].type}")
    source = ir.Type.parse(whole.group(1))
    shape = ir.RankedTensorType(source).shape
    attrs = {n: list(ir.DenseI64ArrayAttr(load.attributes[n])) for n in _SLICE_ATTRS}
    if len(load.operands) > 1:
        raise ScheduleError("the dispatch reads a slice at a dynamic offset")
    if attrs["static_sizes"] == shape and set(attrs["static_strides"]) == {1}:
        return block.add_argument(loaded, load.location)
    argument = block.add_argument(source, load.location)
    with ir.InsertionPoint(load), load.location:
        return tensor.ExtractSliceOp(
            loaded, argument, [], [], [], *(attrs[n] for n in _SLICE_ATTRS)
        ).result


def _stored_whole(store: ir.Operation) -> ir.Value:
    """The value ``store`` writes, as the result that makes IREE store it so again: the
    value itself where it fills its binding, else the value padded (with zeros) to the
    binding's shape, the offsets before it and the rest after it (see the module
    docstring)."""
    value = store.operands[0]
    whole = _BINDING_TENSOR.search(str(store.operands[1].type))
    if whole is None:
        raise ScheduleError(f"cannot read the binding type {store.operands[1].type}")
    shape = ir.RankedTensorType(ir.Type.parse(whole.group(1))).shape
    offsets, sizes, strides = (
        list(ir.DenseI64ArrayAttr(store.attributes[n])) for n in _SLICE_ATTRS
    )
    if sizes == shape and set(strides) == {1}:
        return value
    if len(store.operands) > 2 or set(strides) != {1}:
        raise ScheduleError("the dispatch writes its result at a dynamic offset or with a stride")
    value_type = ir.RankedTensorType(value.type)
    if value_type.shape != sizes:
        raise ScheduleError(
            f"the dispatch writes a {value_type} into a {sizes} slice of its result "
            "(a rank-reducing store cannot stand alone)"
        )
    high = [
        whole_size - offset - size
        for whole_size, offset, size in zip(shape, offsets, sizes, strict=True)
    ]
    element = value_type.element_type
    padded = ir.RankedTensorType.get(shape, element)
    with ir.InsertionPoint(store), store.location:
        zero = arith.ConstantOp(element, _zero(element)).result
        pad = tensor.PadOp(padded, value, [], [], offsets, high)
        body = pad.region.blocks.append(*[ir.IndexType.get()] * len(shape))
        with ir.InsertionPoint(body):
            tensor.YieldOp(zero)
    return pad.result


def _zero(element: ir.Type) -> ir.Attribute:
    if isinstance(element, ir.FloatType):
        return ir.FloatAttr.get(element, 0.0)
    if isinstance(element, ir.IntegerType):
        return ir.IntegerAttr.get(element, 0)
    raise ScheduleError(
        f"the dispatch writes a slice of {element} elements, which cannot be padded"
    )


def _check_nested(op: ir.Operation) -> None:
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                if inner.operation.name in (_LOAD, _STORE, *_BINDING_OPS):
                    raise ScheduleError(
                        f"the dispatch reads or writes its bindings inside {op.name}; only "
                        "dispatches that load and store at their top level can stand alone"
                    )
                _check_nested(inner.operation)


def _erase_bindings(block: ir.Block) -> None:
    """Erase the binding plumbing left unused (subspans, then the push constants and
    offset arithmetic they used), until none is left; binding ops still in use mean the
    computation depends on them (a dynamic shape)."""
    while dead := [
        op.operation
        for op in block.operations
        if op.operation.name in _PLUMBING and not any(True for r in op.results for _ in r.uses)
    ]:
        for op in dead:
            op.erase()
    if any(op.operation.name in _BINDING_OPS for op in block.operations):
        raise ScheduleError(
            "the dispatch has dynamic shapes (a push constant feeds its computation); "
            "only static dispatches can stand alone"
        )
