"""Graph rewrite: group a producer DAG into one ``flow.dispatch.region`` (cross-layer).

IREE honours a ``flow.dispatch.region`` that is already in its input: every op inside
ends up in one executable. Grouping, say, a whole ResNet bottleneck lets one kernel
strategy tile the last op and fuse every layer into that loop nest (fuse_ext), as
ByteIR does. IREE's own CPU codegen cannot compile such a dispatch ("large vector
sizes"), so a region needs a kernel schedule. There is no transform op for this in
IREE 3.13, so the region is built with the MLIR Python bindings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from iree.compiler import ir

from .fuse_ext import scripts
from .fuse_ext.plan import (
    FID,
    ROOT_TAG,
    STOP_TAG,
    FuseExtError,
    assign_fids,
    defining_op,
    encloses,
    fid_of,
    producer_dag,
    root_block,
)
from .interpreter import apply_in_place
from .match import OpCriteria
from .payload import strip_attributes


@dataclass(frozen=True)
class RegionReport:
    """What was grouped: per region, its op descriptions in program order and how many
    results it has."""

    regions: tuple[tuple[tuple[str, ...], int], ...]

    def lines(self) -> list[str]:
        lines = []
        for ops, results in self.regions:
            head = f"dispatch_region: grouped {len(ops)} ops into one dispatch region"
            lines += [f"{head} ({results} result(s))", *(f"  {op}" for op in ops)]
        return lines


def form_dispatch_region(
    module_text: str, root: OpCriteria, stop: OpCriteria | None = None
) -> tuple[str, RegionReport]:
    """Wrap ``root`` and the tileable ops it depends on (up to ``stop``) in regions.

    The grouped ops form one region per connected part: where ``stop`` separates them
    (say the reduce of a ResNet bottleneck from its 3x3 conv and expand, at the pad
    between them), each part becomes a region of its own. Results of grouped ops that
    are used outside their region (the root's, and e.g. a returned intermediate) become
    the region's results. Raises :class:`FuseExtError` (a ``ScheduleError``) when the
    ops cannot be grouped, saying which op prevents it.
    """
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(module_text)
        apply_in_place(module, scripts.tag_script(root, stop), scripts.ENTRY)
        block = root_block(module, "dispatch_region")
        block_ops = assign_fids(block)
        roots = [op for op in block_ops if ROOT_TAG in op.attributes]
        producers, _ = producer_dag(block_ops, roots)
        parts = connected_parts(block_ops, producers | {block_ops.index(r) for r in roots})
        regions = []
        for part in parts:
            ops = [block_ops[m] for m in part]
            described = tuple(f"{op.name} at {op.location}" for op in ops)
            regions.append((described, group_ops(ops)))
        strip_attributes(module.operation, (ROOT_TAG, STOP_TAG, FID))
        if not module.operation.verify():
            raise FuseExtError("dispatch_region: produced an invalid module (please report)")
        return str(module), RegionReport(tuple(regions))


def connected_parts(block_ops: Sequence[ir.Operation], members: set[int]) -> list[list[int]]:
    """``members`` (indices into ``block_ops``) split where no member uses another's
    result: each part sorted, the parts in the order of their first op."""
    part_of = {m: m for m in members}

    def find(m: int) -> int:
        while part_of[m] != m:
            m = part_of[m]
        return m

    for m in members:
        for operand in block_ops[m].operands:
            defining = defining_op(operand)
            producer = None if defining is None else fid_of(defining)
            if producer is not None and producer in members:
                part_of[find(producer)] = find(m)
    parts: dict[int, list[int]] = {}
    for m in sorted(members):
        parts.setdefault(find(m), []).append(m)
    return sorted(parts.values())


def group_ops(members: Sequence[ir.Operation]) -> int:
    """Move ``members``, ops directly in one block, into one new ``flow.dispatch.region``
    placed where the last of them was; returns how many results it has.

    Results of members used by ops after the group become the region's results. Raises
    :class:`FuseExtError` when an op between two members uses a member's result.
    """
    block_ops = [op.operation for op in members[0].operation.block.operations]
    return _group(block_ops, sorted(block_ops.index(op.operation) for op in members))


def _group(block_ops: list[ir.Operation], members: list[int]) -> int:
    escaping = _escaping_results(block_ops, set(members))
    _build_region(block_ops, members, escaping)
    return len(escaping)


def _escaping_results(
    block_ops: list[ir.Operation], members: set[int]
) -> list[tuple[ir.Value, list[ir.OpOperand]]]:
    """Member results used outside the group, with those uses; they must follow it."""
    last = max(members)
    escaping = []
    for m in sorted(members):
        for result in block_ops[m].results:
            outside = []
            for use in result.uses:
                user = use.owner.operation
                index = next(i for i, op in enumerate(block_ops) if encloses(op, user))
                if index in members:
                    continue
                if index < last:
                    raise FuseExtError(
                        f"dispatch_region: {block_ops[index].name} at "
                        f"{block_ops[index].location} uses {block_ops[m].name} but comes "
                        "before the end of the group; add it to 'stop' or group less"
                    )
                outside.append(use)
            if outside:
                escaping.append((result, outside))
    return escaping


def _build_region(
    block_ops: list[ir.Operation],
    members: list[int],
    escaping: list[tuple[ir.Value, list[ir.OpOperand]]],
) -> None:
    after_last = block_ops[max(members) + 1]
    where = block_ops[max(members)].location  # the region is where its last op was
    segments = ir.DenseI32ArrayAttr.get([0, 0], context=where.context)
    region = ir.Operation.create(
        "flow.dispatch.region",
        results=[value.type for value, _ in escaping],
        attributes={"operandSegmentSizes": segments},
        regions=2,
        loc=where,
        ip=ir.InsertionPoint(after_last),
    )
    body = region.regions[0].blocks.append()
    with ir.InsertionPoint(body):
        terminator = ir.Operation.create(
            "flow.return", operands=[value for value, _ in escaping], loc=where
        )
    for m in members:
        block_ops[m].move_before(terminator)
    for (_, uses), result in zip(escaping, region.results, strict=True):
        for use in uses:
            use.owner.operation.operands[use.operand_number] = result
