"""What the rewrites of ``tensor.pad`` share: its static padding, its constant value, and
the ``tensor.empty``/``linalg.fill`` chains they create and leave behind.

Used by :mod:`.fuse_pad` (the producer writes into the padded buffer) and
:mod:`.hoist_pad` (the producers compute the border themselves).
"""

from __future__ import annotations

from iree.compiler import ir
from iree.compiler.dialects import tensor

PAD = "tensor.pad"
_DYNAMIC = ir.ShapedType.get_dynamic_size()


def static_padding(pad: ir.Operation) -> tuple[list[int], list[int]] | str:
    """``pad``'s low and high padding, or why they are not static (nor its shapes)."""
    low = list(ir.DenseI64ArrayAttr(pad.attributes["static_low"]))
    high = list(ir.DenseI64ArrayAttr(pad.attributes["static_high"]))
    types = [ir.RankedTensorType(v.type) for v in (pad.operands[0], pad.result)]
    if _DYNAMIC in low + high or not all(t.has_static_shape for t in types):
        return "dynamic padding: its low/high padding and shapes must be static"
    return low, high


def pad_value(pad: ir.Operation) -> ir.Value | None:
    """The value ``pad``'s body yields, when it is an ``arith.constant`` or defined outside
    (``None``: the body computes it from the indices)."""
    body = pad.regions[0].blocks[0]
    value: ir.Value = body.operations[len(body.operations) - 1].operands[0]
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None if owner == body else value
    inside = owner.operation.parent == pad
    return None if inside and owner.operation.name != "arith.constant" else value


def materialized(value: ir.Value) -> ir.Value:
    """``value`` (from :func:`pad_value`), cloned to the insertion point when it is a
    constant in the pad's body."""
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.operation.parent.name != PAD:
        return value
    clone: ir.Value = owner.operation.clone().result
    return clone


def empty_like(value: ir.Value) -> ir.Value:
    """A ``tensor.empty`` of ``value``'s static tensor type, at the insertion point."""
    t = ir.RankedTensorType(value.type)
    return tensor.EmptyOp(t.shape, t.element_type).result


def erase_dead(value: ir.Value) -> None:
    """Erase the ``linalg.fill``/``tensor.empty`` chain that made ``value`` if it is unused."""
    owner = value.owner
    if isinstance(owner, ir.Block) or list(value.uses):
        return
    op = owner.operation
    if op.name not in ("linalg.fill", "tensor.empty"):
        return
    operands = list(op.operands)
    op.erase()
    for operand in operands:
        erase_dead(operand)
