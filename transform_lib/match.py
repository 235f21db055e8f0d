"""Matching payload ops: inside a sequence, and as IREE kernel-config matchers.

Two kinds of matching exist because IREE's kernel library (``@__kernel_config``) runs
``transform.foreach_match`` whose matchers may only contain match ops
(``transform.match.*``, ``transform.iree.match.*``); inside a strategy or a whole-module
script, ``transform.structured.match`` selects ops under a scope.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from iree.compiler import ir
from iree.compiler.dialects import preprocessing_transform as iree_match
from iree.compiler.dialects import transform
from iree.compiler.dialects.transform import structured

from .errors import ScheduleError
from .script import OpHandle, TransformScript, any_op, param_type

OpKind = Literal["contraction", "convolution"]
OP_KINDS: tuple[str, ...] = ("contraction", "convolution")


@dataclass(frozen=True)
class OpCriteria:
    """What a matcher requires of a payload op.

    ``op`` is an operation name (``linalg.matmul``); ``kind`` a structural kind that
    survives generalization (on Vulkan a matmul is already a ``linalg.generic`` when
    kernel configs run, so match contractions by kind there); ``shape`` the static loop
    bounds (for a contraction: ``[M, N, K]``, or ``[B, M, N, K]`` with a batch dim);
    ``dtype`` the element type of inputs and output (needed by kind matchers);
    ``attributes`` names of attributes the op must carry (whole-module scripts only).
    """

    op: str | None = None
    kind: OpKind | None = None
    shape: tuple[int, ...] | None = None
    dtype: str = "f32"
    attributes: tuple[str, ...] = ()

    def describe(self) -> str:
        parts = []
        if self.op:
            parts.append(f"op={self.op}")
        if self.kind:
            parts.append(f"kind={self.kind}")
        if self.shape is not None:
            parts.append(f"shape={list(self.shape)}")
        if self.attributes:
            parts.append(f"attributes={list(self.attributes)}")
        return ", ".join(parts) or "any op"


def match_ops(scope: OpHandle, criteria: OpCriteria, num_loops: int | None = None) -> OpHandle:
    """Select the ops under ``scope`` that have the op name / attributes in ``criteria``.

    Kinds and shapes are kernel-matcher features; here they are refused with a clear
    error rather than silently ignored.
    """
    if criteria.kind is not None or criteria.shape is not None:
        raise ScheduleError(
            f"match: 'kind' and 'shape' select kernels (the 'match' of a kernel schedule); "
            f"inside a schedule, match by 'op' name and 'attributes' (got {criteria.describe()})"
        )
    if criteria.op is None and not criteria.attributes:
        raise ScheduleError("match: give an 'op' name or 'attributes' to select ops")
    op_attrs = {name: ir.UnitAttr.get() for name in criteria.attributes}
    handle = structured.MatchOp(
        any_op(),
        scope.value,
        ops=[criteria.op] if criteria.op else None,
        op_attrs=ir.DictAttr.get(op_attrs) if op_attrs else None,
    ).result
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
    if criteria.attributes:
        raise ScheduleError(
            "kernel match: 'attributes' cannot be matched inside IREE kernel configs (only "
            "match ops are allowed there); match kernels by 'op', 'kind' and 'shape'"
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
    structured_match = ir.Operation.create(
        "transform.match.structured",
        results=[],
        operands=[op],
        regions=1,
    )
    block = structured_match.regions[0].blocks.append(any_op())
    with ir.InsertionPoint(block):
        dims = ir.Operation.create(
            "transform.match.structured.dim",
            results=[param_type()],
            operands=[block.arguments[0]],
            attributes={
                "raw_dim_list": ir.DenseI64ArrayAttr.get([]),
                "is_all": ir.UnitAttr.get(),
            },
        ).result
        iree_match.MatchDimsEqualOp(dims, list(shape))
        ir.Operation.create("transform.match.structured.yield", operands=[])
