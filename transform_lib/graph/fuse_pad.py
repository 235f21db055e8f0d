"""Graph rewrite fuse_pad: a linalg producer writes straight into the padded tensor.

``tensor.pad`` of a linalg op's result by a constant becomes::

    %padded   = linalg.fill ins(%value) outs(tensor.empty() : <padded shape>)
    %interior = tensor.extract_slice %padded[low][source shape][1]
    %r        = <the producer> ... outs(%interior)
    %result   = tensor.insert_slice %r into %padded[low][source shape][1]

so bufferization gives one allocation and no copy. A producer that reads its init (a
matmul or conv accumulating into a ``linalg.fill``, or an op using its out block argument)
gets that init in the interior first: a fill's value is filled into the interior slice;
any other init is inserted into ``%padded`` before the slice is taken. Upstream has no
transform op for this (``decompose_pad`` gives only fill + insert_slice), so it is written
over the MLIR Python bindings.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Literal

from iree.compiler import ir
from iree.compiler.dialects import linalg, tensor

from ..match import OpCriteria
from ..payload import ops_under
from .pad_ops import PAD, empty_like, erase_dead, materialized, pad_value, static_padding
from .report import RewriteReport, describe_op, plan_each, selected

PRIMITIVE = "fuse_pad"


@dataclass(frozen=True)
class FusePadOptions:
    """Which ``tensor.pad`` ops to fuse (``None``: every one that can be)."""

    ops: OpCriteria | None = None


InitRoute = Literal["none", "fill", "copy"]
"""How a producer's init reaches the interior: not read, refilled, or copied."""

_HOW: dict[str, str] = {
    "none": "writes the interior of the padded tensor",
    "fill": "interior first filled with its init's value",
    "copy": "its init first copied into the interior",
}


@dataclass(frozen=True)
class _Plan:
    """A pad that can be fused: its producer, pad value, low padding and init route."""

    pad: ir.Operation
    producer: ir.Operation
    value: ir.Value
    low: list[int]
    init: InitRoute


def fuse_pad(module: ir.Module, options: FusePadOptions) -> RewriteReport:
    """Fuse every selected ``tensor.pad`` into its linalg producer, in place.

    When ``options.ops`` names pads explicitly, a pad that cannot be fused raises
    :class:`GraphRewriteError` (before anything is rewritten); otherwise it is skipped
    and the report's details say why.
    """
    plans, skipped = plan_each(
        _selected_pads(module, options.ops),
        _plan,
        options.ops is not None,
        refusal=f"{PRIMITIVE}: cannot fuse",
        fix="narrow 'ops' to pads that can be fused",
        left="skipped",
    )
    details = [
        f"{describe_op(p.pad)}: fused into {describe_op(p.producer)} ({_HOW[p.init]})"
        for p in plans
    ]
    producers = [p.producer.name for p in plans]
    for plan in plans:
        _fuse(plan)
    return _report(producers, tuple(details + skipped))


def _selected_pads(module: ir.Module, criteria: OpCriteria | None) -> list[ir.Operation]:
    return ops_under(module.operation, lambda op: op.name == PAD and selected(op, criteria))


def _plan(pad: ir.Operation) -> _Plan | str:
    """How to fuse ``pad``, or why it cannot be fused."""
    padding = static_padding(pad)
    if isinstance(padding, str):
        return padding
    low = padding[0]
    value = pad_value(pad)
    if value is None:
        return "the pad value is not a constant (the body computes it from the indices)"
    producer = _producer(pad)
    if isinstance(producer, str):
        return producer
    return _Plan(pad, producer, value, low, _init_route(producer))


def _producer(pad: ir.Operation) -> ir.Operation | str:
    """The linalg op whose only result is padded only by ``pad``, or why there is none."""
    source = pad.operands[0]
    owner = source.owner
    if isinstance(owner, ir.Block):
        return "its source is a block argument, not the result of a linalg op"
    op = owner.operation
    name = describe_op(op)
    if not op.name.startswith("linalg.") or not _has_payload(op):
        return f"its source comes from {name}, not a structured linalg op"
    if len(op.results) != 1:
        return f"its producer {name} has {len(op.results)} results"
    if len(list(source.uses)) != 1:
        return f"its producer {name} has other uses"
    if op.block != pad.block:
        return f"its producer {name} is in another block"
    return op


def _has_payload(op: ir.Operation) -> bool:
    """Whether ``op`` is a structured linalg op: a body with one argument per operand."""
    if len(op.regions) != 1 or len(op.regions[0].blocks) != 1:
        return False
    return len(op.regions[0].blocks[0].arguments) == len(op.operands)


def _init_route(producer: ir.Operation) -> InitRoute:
    """Whether the producer's body reads its init (the last operand's block argument),
    and if so whether that init is a ``linalg.fill`` (refilled) or not (copied)."""
    if not list(producer.regions[0].blocks[0].arguments[-1].uses):
        return "none"
    return "copy" if _fill_value(producer.operands[-1]) is None else "fill"


def _fill_value(init: ir.Value) -> ir.Value | None:
    """The scalar a ``linalg.fill`` init is filled with, else ``None``."""
    owner = init.owner
    if isinstance(owner, ir.Block) or owner.operation.name != "linalg.fill":
        return None
    value: ir.Value = owner.operation.operands[0]
    return value


def _fuse(plan: _Plan) -> None:
    """Rewrite one pad (see the module docstring); the producer moves next to the pad."""
    pad, producer = plan.pad, plan.producer
    producer.move_before(pad)
    init = producer.operands[-1]
    shape = ir.RankedTensorType(init.type).shape
    with ir.InsertionPoint(producer), pad.location:
        padded = linalg.fill(materialized(plan.value), outs=[empty_like(pad.result)])
        if plan.init == "copy":
            padded = _insert(init, padded, plan.low, shape)
        interior = tensor.ExtractSliceOp(
            init.type, padded, [], [], [], plan.low, shape, [1] * len(shape)
        ).result
        fill = _fill_value(init)
        if plan.init == "fill" and fill is not None:
            interior = linalg.fill(fill, outs=[interior])
    producer.operands[len(producer.operands) - 1] = interior
    with ir.InsertionPoint(pad), pad.location:
        pad.result.replace_all_uses_with(_insert(producer.result, padded, plan.low, shape))
    pad.erase()
    erase_dead(init)


def _insert(source: ir.Value, dest: ir.Value, offsets: list[int], shape: list[int]) -> ir.Value:
    return tensor.InsertSliceOp(source, dest, [], [], [], offsets, shape, [1] * len(shape)).result


def _report(producers: list[str], details: tuple[str, ...]) -> RewriteReport:
    if not producers:
        why = "no pad could be fused (see details)" if details else "no tensor.pad selected"
        return RewriteReport(PRIMITIVE, f"changed nothing: {why}", False, details)
    kinds = ", ".join(f"{n} {name}" for name, n in Counter(producers).items())
    pads = (
        "1 pad into its producer"
        if len(producers) == 1
        else f"{len(producers)} pads into their producers"
    )
    return RewriteReport(PRIMITIVE, f"fused {pads} ({kinds})", True, details)
