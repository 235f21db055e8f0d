"""Matching payload ops: inside a sequence, and as IREE kernel-config matchers.

Two kinds of matching exist because IREE's kernel library (``@__kernel_config``) runs
``transform.foreach_match`` whose matchers may only contain match ops
(``transform.match.*``, ``transform.iree.match.*``); inside a strategy or a whole-module
script, ``transform.structured.match`` selects ops under a scope.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from iree.compiler import ir
from iree.compiler.dialects import preprocessing_transform as iree_match
from iree.compiler.dialects import transform
from iree.compiler.dialects.transform import structured

from .errors import ScheduleError
from .op_body import body_module, wrapped_generic
from .script import OpHandle, TransformScript, any_op, param_type

OpKind = Literal["contraction", "convolution"]
OP_KINDS: tuple[str, ...] = ("contraction", "convolution")
LAYER_ATTR = "tdsched.layer"
"""The attribute naming the model layer an op belongs to (set by the model builder and
by the ONNX / TOSA lowerings from op locations)."""

AttrValue = str | bool | int | float
"""A value an attribute must have: a string, a boolean, an integer or a float."""


def attribute(value: AttrValue) -> ir.Attribute:
    """The MLIR attribute for ``value`` (string, bool, i64 or f64), as the builder sets it."""
    if isinstance(value, bool):
        return ir.BoolAttr.get(value)
    if isinstance(value, int):
        return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)
    if isinstance(value, float):
        return ir.FloatAttr.get(ir.F64Type.get(), value)
    return ir.StringAttr.get(value)


Dim = TypeVar("Dim")
"""What a loop bound in :attr:`Criteria.shape` is: an integer once parameters are
substituted (:data:`OpCriteria`); a recipe's selection may still hold a parameter
reference (``tdsched.schedules.dsl.values.MatchSpec``)."""


@dataclass(frozen=True)
class Criteria(Generic[Dim]):
    """What a matcher requires of a payload op (:data:`OpCriteria`: with integer loop
    bounds).

    ``op`` is an operation name (``linalg.matmul``); ``kind`` a structural kind that
    survives generalization (on Vulkan a matmul is already a ``linalg.generic`` when
    kernel configs run, so match contractions by kind there); ``shape`` the static loop
    bounds (for a contraction: ``[M, N, K]``, or ``[B, M, N, K]`` with a batch dim);
    ``dtype`` the element type of inputs and output (needed by kind matchers);
    ``attributes`` attributes the op must carry, each with the value it must have
    (``None``: a unit attribute); ``layers`` exact layer names, of which the op's
    ``tdsched.layer`` must be one; ``inputs`` the number of input operands (``ins``),
    which tells apart ops of one dispatch that share their name and loop bounds (a
    softmax's max, sum and normalization); ``used_by`` the name of the one op that uses
    its first result (a matmul feeding an epilogue ``linalg.generic`` against one whose
    result is stored: ``iree_tensor_ext.dispatch.tensor.store``). Attributes and layers
    select ops in whole-module scripts and graph rewrites; kernel matchers need them
    resolved to structure first.
    """

    op: str | None = None
    kind: OpKind | None = None
    shape: tuple[Dim, ...] | None = None
    dtype: str = "f32"
    attributes: tuple[tuple[str, AttrValue | None], ...] = ()
    layers: tuple[str, ...] = ()
    inputs: int | None = None
    used_by: str | None = None
    used_by_inputs: int | None = None
    """The input count the ``used_by`` op must have (``None``: any)."""
    body: str | None = None
    """The body a ``linalg.generic`` must have, as MLIR text (:mod:`.op_body`): tells a
    row max from a row sum."""

    @property
    def uses_kernel_keys(self) -> bool:
        """Whether it selects by a key only a kernel matcher tests (kind, shape,
        inputs, used_by, body)."""
        keys = (self.kind, self.shape, self.inputs, self.used_by, self.body)
        return any(value is not None for value in keys)

    def attribute_dict(self) -> dict[str, ir.Attribute]:
        """The required attributes as MLIR attributes (call inside a context)."""
        return {
            name: ir.UnitAttr.get() if value is None else attribute(value)
            for name, value in self.attributes
        }

    def describe(self) -> str:
        parts = []
        if self.op:
            parts.append(f"op={self.op}")
        if self.kind:
            parts.append(f"kind={self.kind}")
        if self.shape is not None:
            parts.append(f"shape={list(self.shape)}")
        if self.attributes:
            shown = [name if v is None else f"{name}={v!r}" for name, v in self.attributes]
            parts.append(f"attributes={shown}")
        if self.layers:
            parts.append(f"layer={list(self.layers)}")
        if self.inputs is not None:
            parts.append(f"inputs={self.inputs}")
        if self.used_by is not None:
            count = self.used_by_inputs
            with_inputs = f" with {count} inputs" if count is not None else ""
            parts.append(f"used_by={self.used_by}{with_inputs}")
        if self.body is not None:
            parts.append(f"body={' '.join(self.body.split())!r}")
        return ", ".join(parts) or "any op"


OpCriteria = Criteria[int]
"""Criteria whose loop bounds are integers: what the matchers take."""


def match_ops(scope: OpHandle, criteria: OpCriteria, num_loops: int | None = None) -> OpHandle:
    """Select the ops under ``scope`` that have the op name / attributes in ``criteria``.

    Kinds and shapes are kernel-matcher features; here they are refused with a clear
    error rather than silently ignored.
    """
    if criteria.uses_kernel_keys:
        raise ScheduleError(
            "match: 'kind', 'shape', 'inputs', 'used_by' and 'body' select kernels (the "
            "'match' of a kernel schedule); inside a schedule, match by 'op' name and "
            f"'attributes' (got {criteria.describe()})"
        )
    if criteria.op is None and not criteria.attributes and not criteria.layers:
        raise ScheduleError("match: give an 'op' name, 'attributes' or a 'layer' to select ops")
    required = criteria.attribute_dict()
    selections = [
        {**required, LAYER_ATTR: ir.StringAttr.get(layer)} for layer in criteria.layers
    ] or [required]
    handles = [
        structured.MatchOp(
            any_op(),
            scope.value,
            ops=[criteria.op] if criteria.op else None,
            op_attrs=ir.DictAttr.get(attrs) if attrs else None,
        ).result
        for attrs in selections
    ]
    handle = handles[0] if len(handles) == 1 else transform.MergeHandlesOp(handles).result
    return OpHandle(handle, criteria.op or criteria.describe(), num_loops)


def producer_of(consumer: OpHandle, operand: int, num_loops: int | None = None) -> OpHandle:
    """The op producing operand ``operand`` of ``consumer``.

    IREE fails the strategy if that operand is a block argument (it has no producer).
    """
    if operand < 0:
        raise ScheduleError(f"producer: operand must be >= 0, got {operand}")
    value = transform.GetProducerOfOperand(any_op(), consumer.value, operand).producer
    return OpHandle(value, f"producer of operand {operand} of {consumer.what}", num_loops)


def enclosing_function(handle: OpHandle) -> OpHandle:
    """The ``func.func`` that contains the payload op of ``handle``."""
    value = transform.GetParentOp(any_op(), handle.value, op_name="func.func").result
    return OpHandle(value, "func.func")


def _element_type(dtype: str) -> ir.Type:
    try:
        return ir.Type.parse(dtype)
    except ValueError as exc:  # MLIRError derives from ValueError? keep message plain
        raise ScheduleError(f"match: unknown dtype {dtype!r} (use f32, f16, i8, ...)") from exc


def build_kernel_matcher(script: TransformScript, name: str, criteria: OpCriteria) -> str:
    """Add a kernel-config matcher sequence ``@name`` and return its symbol name.

    The matcher takes an op inside a dispatch function and yields it if it satisfies
    ``criteria``; otherwise a match op fails silenceably and ``foreach_match`` moves on.
    """
    if criteria.attributes or criteria.layers:
        raise ScheduleError(
            "kernel match: 'attributes' and 'layer' cannot be matched inside IREE kernel "
            "configs (only match ops are allowed there); tdsched resolves them to the op and "
            "loop bounds of the layer's dispatch first"
        )
    if criteria.op is None and criteria.kind is None:
        raise ScheduleError(
            "kernel match: give an 'op' name or a 'kind' (contraction, convolution)"
        )
    seq = script.named_sequence(name, arg_effect="readonly", num_results=1)
    with seq.building():
        op = seq.argument
        if criteria.op is not None:
            transform.MatchOperationNameOp(op, [criteria.op])
        if criteria.kind is not None:
            _match_kind(op, criteria)
        elif criteria.shape is not None:
            _match_loop_bounds(op, criteria.shape)
        if criteria.inputs is not None:
            _match_input_count(op, criteria.inputs)
        if criteria.used_by is not None:
            _match_single_user(op, criteria.used_by, criteria.used_by_inputs)
        if criteria.body is not None:
            _match_body(op, criteria.body)
    seq.finish([seq.argument])
    return seq.name


def _match_kind(op: ir.Value, criteria: OpCriteria) -> None:
    elem = _element_type(criteria.dtype)
    if criteria.kind == "contraction":
        batch, m, n, k = iree_match.MatchContractionOp(op, elem, elem, elem)
        if criteria.shape is not None:
            dims = list(criteria.shape)
            if len(dims) not in (3, 4):
                raise ScheduleError(
                    f"kernel match: a contraction shape is [M, N, K] or [B, M, N, K], got {dims}"
                )
            groups: Sequence[tuple[ir.Value, list[int]]] = [
                (m, [dims[-3]]),
                (n, [dims[-2]]),
                (k, [dims[-1]]),
            ]
            if len(dims) == 4:
                groups = [(batch, [dims[0]]), *groups]
            for param, expected in groups:
                iree_match.MatchDimsEqualOp(param, expected)
    elif criteria.kind == "convolution":
        iree_match.MatchConvolutionOp(op, elem, elem, elem)
        if criteria.shape is not None:
            _match_loop_bounds(op, criteria.shape)
    else:
        raise ScheduleError(f"kernel match: unknown kind {criteria.kind!r}; use one of {OP_KINDS}")


def _match_loop_bounds(op: ir.Value, shape: Sequence[int]) -> None:
    """Require the structured op's static loop bounds to equal ``shape``."""
    with _structured_match(op) as structured_op:
        dims = ir.Operation.create(
            "transform.match.structured.dim",
            results=[param_type()],
            operands=[structured_op],
            attributes={
                "raw_dim_list": ir.DenseI64ArrayAttr.get([]),
                "is_all": ir.UnitAttr.get(),
            },
        ).result
        iree_match.MatchDimsEqualOp(dims, list(shape))


def _i64(value: int) -> ir.Attribute:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)


def _match_body(op: ir.Value, body: str) -> None:
    """Require the op's body to be ``body`` (:mod:`.op_body`), by IREE's structural
    comparison of regions."""
    module = body_module(body)
    generic = wrapped_generic(module)
    match = iree_match.MatchRegionsOp(op)
    block = match.regions[0].blocks.append(*[value.type for value in generic.operands])
    for position, argument in enumerate(block.arguments):
        generic.operands[position] = argument
    generic.detach_from_parent()
    ir.InsertionPoint(block).insert(generic)
    with ir.InsertionPoint(block):
        transform.YieldOp([])  # the region's implicit terminator


def _match_input_count(op: ir.Value, count: int) -> None:
    """Require the structured op to have ``count`` input operands."""
    with _structured_match(op) as structured_op:
        found = ir.Operation.create(
            "transform.match.structured.num_inputs",
            results=[param_type()],
            operands=[structured_op],
        ).result
        expected = transform.ParamConstantOp(param_type(), _i64(count)).param
        ir.Operation.create(
            "transform.match.param.cmpi",
            operands=[found, expected],
            attributes={"predicate": ir.Attribute.parse("0 : i32")},  # eq
        )


def _match_single_user(op: ir.Value, name: str, inputs: int | None) -> None:
    """Require the structured op's first result to have one use, by an op called ``name``
    (with ``inputs`` input operands, unless ``None``)."""
    structured_match = ir.Operation.create(
        "transform.match.structured", results=[any_op()], operands=[op], regions=1
    )
    block = structured_match.regions[0].blocks.append(any_op())
    with ir.InsertionPoint(block):
        user = ir.Operation.create(
            "transform.match.structured.result",
            results=[any_op()],
            operands=[block.arguments[0]],
            attributes={
                "position": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 0),
                "single": ir.UnitAttr.get(),
            },
        ).result
        ir.Operation.create("transform.match.structured.yield", operands=[user])
    transform.MatchOperationNameOp(structured_match.result, [name])
    if inputs is not None:
        _match_input_count(structured_match.result, inputs)


@contextlib.contextmanager
def _structured_match(op: ir.Value) -> Iterator[ir.Value]:
    """Build a ``transform.match.structured`` region on ``op``: the body built inside the
    ``with`` block sees the op as the yielded value; the region's terminator follows."""
    structured_match = ir.Operation.create(
        "transform.match.structured", results=[], operands=[op], regions=1
    )
    block = structured_match.regions[0].blocks.append(any_op())
    with ir.InsertionPoint(block):
        yield block.arguments[0]
        ir.Operation.create("transform.match.structured.yield", operands=[])


@functools.lru_cache(maxsize=256)
def is_registered_op(name: str) -> bool:
    """Whether an operation called ``name`` exists (in IREE's MLIR: every upstream and
    IREE dialect); a typo such as ``linalg.fil`` does not."""
    return bool(_registry_context().is_registered_operation(name))


@functools.lru_cache(maxsize=1)
def _registry_context() -> ir.Context:
    return ir.Context()
