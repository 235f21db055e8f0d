"""Tiling and producer fusion primitives.

Preconditions are checked against what the handle knows about its payload: tile sizes
must have one entry per loop of the op, be non-negative, and an interchange must be a
permutation of the loops. Violations raise :class:`ScheduleError` naming the op.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from iree.compiler import ir
from iree.compiler.dialects.transform import structured

from .errors import ScheduleError
from .script import LoopHandle, OpHandle, any_op

ForallMapping = Literal["workgroup", "thread", "none"]
"""What an ``scf.forall`` from tiling is mapped to (``none``: not mapped)."""
_GPU_DIMS = ("x", "y", "z")


def check_tile_sizes(target: OpHandle, sizes: Sequence[int], primitive: str) -> None:
    """Raise unless ``sizes`` fits the loops of ``target``'s payload op."""
    if any(s < 0 for s in sizes):
        raise ScheduleError(
            f"{primitive}: tile sizes must be >= 0 (0 = do not tile), got {list(sizes)}"
        )
    if target.num_loops is not None and len(sizes) != target.num_loops:
        raise ScheduleError(
            f"{primitive}: {len(sizes)} tile sizes given for {target.what}, which has "
            f"{target.num_loops} loops (counted on the op as the workload writes it; 'tdsched "
            "apply' shows it in its dispatch); give one size per loop (0 leaves a loop untiled)"
        )
    if not any(sizes):
        raise ScheduleError(f"{primitive}: all tile sizes are 0, so nothing would be tiled")


def tile_using_for(
    target: OpHandle, sizes: Sequence[int], interchange: Sequence[int] | None = None
) -> tuple[OpHandle, list[LoopHandle]]:
    """Tile ``target`` with one ``scf.for`` per non-zero size, loops in ``interchange`` order."""
    check_tile_sizes(target, sizes, "tile")
    if interchange is not None:
        check_permutation(target, interchange, "tile")
    n_loops = sum(1 for s in sizes if s)
    op = structured.TileUsingForOp(
        [any_op()] * n_loops, target.value, sizes=list(sizes), interchange=interchange or None
    )
    loops = [LoopHandle(v, "for", f"scf.for tiling {target.what}") for v in op.loops]
    return target.rebound(op.tiled_linalg_op), loops


def mapping_attribute(mapping: ForallMapping, rank: int) -> ir.ArrayAttr | None:
    """The forall mapping for ``rank`` tiled dims: outermost dim gets the highest id.

    ``workgroup`` maps to ``#gpu.block`` (IREE distributes it to workgroups on both
    backends), ``thread`` to ``#gpu.thread`` (GPU backends), ``none`` leaves it unmapped.
    """
    if mapping == "none":
        return None
    if rank > 3:
        raise ScheduleError(f"tile: at most 3 dims can be mapped to {mapping}s, got {rank}")
    dims = list(reversed(_GPU_DIMS[:rank]))
    if mapping == "workgroup":
        attrs = [f"#gpu.block<{d}>" for d in dims]
    else:
        attrs = [f"#gpu.thread<{d}>" for d in dims]
    return ir.ArrayAttr.get([ir.Attribute.parse(a) for a in attrs])


def tile_using_forall(
    target: OpHandle, sizes: Sequence[int], mapping: ForallMapping
) -> tuple[OpHandle, LoopHandle]:
    """Tile ``target`` into one ``scf.forall`` over its non-zero sizes, mapped as asked."""
    check_tile_sizes(target, sizes, "tile")
    op = structured.TileUsingForallOp(
        any_op(),
        any_op(),
        target.value,
        tile_sizes=list(sizes),
        mapping=mapping_attribute(mapping, sum(1 for s in sizes if s)),
    )
    loop = LoopHandle(op.forall_op, "forall", f"scf.forall tiling {target.what}")
    return target.rebound(op.tiled_op), loop


def fuse_into(producer: OpHandle, loop: LoopHandle) -> tuple[OpHandle, LoopHandle]:
    """Fuse ``producer`` into ``loop`` (tile it to the slices the loop body uses).

    The caller chooses what to fuse: fusing an accumulator initializer into a loop over
    a reduction dim re-initializes the accumulator every step (wrong results), so tile
    reductions only after producers were fused over parallel loops.
    """
    op = structured.FuseIntoContainingOp(producer.value, loop.value)
    return producer.rebound(op.fused_op), LoopHandle(op.new_containing_op, loop.kind, loop.what)


def check_permutation(target: OpHandle, perm: Sequence[int], primitive: str) -> None:
    """Raise unless ``perm`` is a permutation of ``target``'s loops."""
    n = target.num_loops if target.num_loops is not None else len(perm)
    if sorted(perm) != list(range(n)):
        raise ScheduleError(
            f"{primitive}: interchange {list(perm)} is not a permutation of the "
            f"{n} loops of {target.what} (expected each of 0..{n - 1} once)"
        )
