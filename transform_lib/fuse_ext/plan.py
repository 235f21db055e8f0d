"""Payload analysis for fuse_ext: which ops are tiled, fused, yielded or kept outside.

The plan is made on the untransformed function, before any transform runs, from the
use-def graph of its top-level block (linalg on tensors is a DAG there):

* **roots** are the ops the ``root`` match tagged; a root that feeds another root is
  demoted to an intermediate (it is fused and yielded instead of tiled twice);
* **producers** are the ops reached backwards from the roots through operands (inputs
  *and* inits) that can be tiled to a slice: structured linalg ops, ``tensor.pad`` and
  reshapes. The walk stops at block arguments, at ops in the ``stop`` set and at ops that
  cannot be tiled; those stay outside at full size;
* an intermediate whose result is used outside the fused region is **yielded** by the
  loop nest (``intermediates: yield``) or recomputed inside (``intermediates:
  recompute``); the report says which, and why when yielding is impossible.

Ops are identified by a ``tdsched.fid`` attribute (their index in the block), because
``ir.Operation`` hashes by content and transform scripts re-find ops by attribute.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

from iree.compiler import ir
from iree.compiler.passmanager import PassManager

from ..errors import ScheduleError
from ..generic_build import static_loop_ranges
from ..payload import ops_under
from ..script import LoopKind

FID = "tdsched.fid"
ROOT_TAG = "tdsched.fuse_root"
STOP_TAG = "tdsched.fuse_stop"
LOOP_ROLE = "tdsched.loop"
"""On a payload, every loop fuse_ext makes is labelled ``tdsched.loop = "parallel"`` or
``"reduction"`` (cf. ByteIR's ``tile_loop_hint``), for passes and readers after it."""

Intermediates = Literal["yield", "recompute"]

RESHAPES = ("tensor.expand_shape", "tensor.collapse_shape")
TILEABLE_TENSOR_OPS = ("tensor.pad", *RESHAPES)
# Ops that only provide storage or constants: never worth reporting as "kept outside".
_PLUMBING = ("tensor.empty", "arith.constant")


class FuseExtError(ScheduleError):
    """A fuse_ext precondition does not hold; the message names the op and the reason."""


@dataclass(frozen=True)
class PayloadOp:
    """One top-level op of the payload function, as the plan refers to it."""

    fid: int
    name: str
    location: str

    def describe(self) -> str:
        return f"{self.name} at {self.location}"


@dataclass(frozen=True)
class Outside:
    """An op that stays outside the loop nest, and why."""

    op: PayloadOp
    reason: str


@dataclass(frozen=True)
class FusionPlan:
    """What fuse_ext will do to one function; ``producers`` are in program order."""

    roots: tuple[PayloadOp, ...]
    iterators: tuple[str, ...]
    producers: tuple[PayloadOp, ...]
    yielded: tuple[PayloadOp, ...]
    generalized: tuple[PayloadOp, ...]
    outside: tuple[Outside, ...]
    recomputed: tuple[PayloadOp, ...] = ()
    """Producers used outside the region that stay there in full as well
    (``intermediates: recompute``), besides their tile in the loop nest."""
    ranges: tuple[int, ...] | None = None
    """The roots' static loop ranges (``None`` when one is dynamic or not read from an
    operand): what ``tile_nums`` divides."""

    def is_reshape(self, op: PayloadOp) -> bool:
        return op.name in RESHAPES


def describe_fusion(
    plan: FusionPlan,
    fused: Sequence[PayloadOp],
    outside: Sequence[Outside],
    also_outside: Sequence[Outside] = (),
    primitive: str = "fuse_ext",
    whole_per_step: Sequence[PayloadOp] = (),
) -> list[str]:
    """Report lines: the roots, each fused op (marked when yielded, when it is also
    computed in full outside the loop nest: ``also_outside``, each with why, or when a
    reduction loop computes it whole in every step: ``whole_per_step``; both found in
    the IR after the rewrite), each op kept outside."""
    roots = ", ".join(r.describe() for r in plan.roots)
    lines = [f"{primitive}: tiled {len(plan.roots)} root(s): {roots}"]
    yielded = {op.fid for op in plan.yielded}
    twice = {o.op.fid: o.reason for o in also_outside}
    whole = {op.fid for op in whole_per_step}
    for op in fused:
        notes = []
        if op.fid in whole:
            notes.append(
                " (recomputed whole in every step of the reduction loop, which does not "
                "slice it; put it in stop to compute it once before the loop)"
            )
        if op.fid in twice:
            notes.append(
                " (and also computed in full outside the loop nest, so this op runs "
                f"twice: {twice[op.fid]})"
            )
        elif op.fid in yielded:
            notes.append(" (yielded by the loop nest)")
        lines.append(f"  fused {op.describe()}{''.join(notes)}")
    lines.extend(f"  kept outside: {o.op.describe()}: {o.reason}" for o in outside)
    return lines


def is_structured(name: str) -> bool:
    """Whether ``name`` is a structured linalg op (tileable through TilingInterface)."""
    return name.startswith("linalg.") and name not in ("linalg.yield", "linalg.index")


def fid_of(op: ir.Operation) -> int | None:
    """The ``tdsched.fid`` of ``op``, or ``None`` when it has none."""
    if FID not in op.attributes:
        return None
    return int(ir.IntegerAttr(op.attributes[FID]).value)


def assign_fids(block: ir.Block) -> list[ir.Operation]:
    """Number the top-level ops of ``block`` in program order; returns them by fid."""
    ops = [op.operation for op in block.operations]
    i64 = ir.IntegerType.get_signless(64)
    for index, op in enumerate(ops):
        op.attributes[FID] = ir.IntegerAttr.get(i64, index)
    return ops


def _payload(op: ir.Operation) -> PayloadOp:
    fid = fid_of(op)
    assert fid is not None, "assign_fids must run before planning"
    return PayloadOp(fid, op.name, str(op.location))


def defining_op(value: ir.Value) -> ir.Operation | None:
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    return owner.operation if isinstance(owner, ir.OpView) else owner


def encloses(op: ir.Operation, inner: ir.Operation) -> bool:
    """Whether ``inner`` is ``op`` or nested in it."""
    current: ir.Operation | None = inner
    while current is not None:
        if current == op:
            return True
        current = current.parent
    return False


def _top_level_user(user: ir.Operation, block_ops: Sequence[ir.Operation]) -> int | None:
    """The fid of the top-level op that contains ``user`` (``None`` outside the block)."""
    op: ir.Operation | None = user
    while op is not None:
        fid = fid_of(op)
        if fid is not None and fid < len(block_ops) and block_ops[fid] == op:
            return fid
        parent = op.parent
        op = parent.operation if parent is not None else None
    return None


@dataclass(frozen=True)
class Loops:
    """A structured op's loops: their iterator types and static ranges."""

    iterators: tuple[str, ...]
    ranges: tuple[int, ...] | None
    """``None`` when a range is dynamic or not read from an operand."""


def loops_of(block_ops: Sequence[ir.Operation]) -> dict[int, Loops]:
    """The loops (``parallel``/``reduction``, static ranges) of every structured op, by fid.

    Named ops carry no iterator list, so they are read from a generalized copy of the
    enclosing function (generalization keeps the ``tdsched.fid`` attributes).
    """
    func = block_ops[0].parent
    assert func is not None
    copy = ir.Module.parse(str(func))
    PassManager.parse("builtin.module(func.func(linalg-generalize-named-ops))").run(copy.operation)
    found: dict[int, Loops] = {}

    def visit(op: ir.Operation) -> ir.WalkResult:
        fid = fid_of(op)
        if fid is not None and "iterator_types" in op.attributes:
            types = ir.ArrayAttr(op.attributes["iterator_types"])
            iterators = tuple(str(t).split("<")[-1].rstrip(">") for t in types)
            found[fid] = Loops(iterators, static_loop_ranges(op))
        return ir.WalkResult.ADVANCE

    copy.operation.walk(visit)
    return found


def root_block(module: ir.Module, primitive: str = "fuse_ext") -> ir.Block:
    """The function body holding the ops tagged as roots (all in one block).

    Raises :class:`FuseExtError` when no op is tagged or the roots are not directly in
    one function's body.
    """
    found = ops_under(module.operation, lambda op: ROOT_TAG in op.attributes)
    if not found:
        raise FuseExtError(f"{primitive}: the root match selected no op in the module")
    parent = found[0].parent
    if parent is None or parent.name != "func.func" or any(op.parent != parent for op in found):
        raise FuseExtError(
            f"{primitive}: the roots must sit directly in one function's body, found "
            + ", ".join(f"{op.name} at {op.location}" for op in found)
        )
    return parent.regions[0].blocks[0]


def make_plan(
    block_ops: Sequence[ir.Operation],
    intermediates: Intermediates = "yield",
    *,
    reshapes: bool = True,
    fuse: bool = True,
) -> FusionPlan:
    """Plan fuse_ext over a block numbered by :func:`assign_fids`, roots/stops tagged.

    ``reshapes``: whether fusion may pass reshapes (a payload-level rewrite; inside IREE
    kernels they stay outside). ``fuse``: whether producers are fused at all (tile_ext
    tiles the roots alone; then no root may feed another).
    """
    roots = [op for op in block_ops if ROOT_TAG in op.attributes]
    if not roots:
        raise FuseExtError("fuse_ext: the root match selected no op in the function")
    loops = loops_of(block_ops)
    iterators = {fid: info.iterators for fid, info in loops.items()}
    for root in roots:
        if _payload(root).fid not in iterators:
            raise FuseExtError(
                f"fuse_ext: root {_payload(root).describe()} is not a structured linalg op "
                "with loops; only such ops can be tiled as a root"
            )
    if fuse:
        producers, outside = producer_dag(block_ops, roots, reshapes)
    else:
        producers, outside = set(), []
        _refuse_chained_roots(roots)
    # A root that feeds another root is an intermediate of the fused region.
    roots = [r for r in roots if (fid_of(r) or 0) not in producers]
    root_iters = {iterators[fid_of(r) or 0] for r in roots}
    if len(root_iters) != 1:
        raise FuseExtError(
            "fuse_ext: the roots do not share one iteration space: "
            + "; ".join(
                f"{_payload(r).describe()}: {list(iterators[_payload(r).fid])}" for r in roots
            )
            + ". Tile roots with different loops in separate fuse_ext steps"
        )
    fused = set(producers) | {_payload(r).fid for r in roots}
    last_root = max(_payload(r).fid for r in roots)
    yielded: list[PayloadOp] = []
    generalized: list[PayloadOp] = []
    recomputed: list[PayloadOp] = []
    for fid in sorted(producers):
        op = block_ops[fid]
        users = sorted(_outside_users(op, block_ops, fused))
        if not users:
            continue
        described = ", ".join(_payload(block_ops[u]).describe() for u in users[:3])
        reason = _recompute_reason(op, users, last_root, intermediates)
        if reason is None:
            yielded.append(_payload(op))
            if op.name != "linalg.generic":
                generalized.append(_payload(op))
        else:
            outside.append(Outside(_payload(op), f"{reason}; used by {described}"))
            if intermediates == "recompute":
                recomputed.append(_payload(op))
    return FusionPlan(
        roots=tuple(_payload(r) for r in roots),
        iterators=next(iter(root_iters)),
        producers=tuple(_payload(block_ops[f]) for f in sorted(producers)),
        yielded=tuple(yielded),
        generalized=tuple(generalized),
        outside=tuple(outside),
        recomputed=tuple(recomputed),
        ranges=loops[_payload(roots[0]).fid].ranges,
    )


def _refuse_chained_roots(roots: Sequence[ir.Operation]) -> None:
    """Without fusion, roots tiled in one nest must not feed each other."""
    for root in roots:
        for operand in root.operands:
            producer = defining_op(operand)
            if producer is not None and any(producer == r for r in roots):
                raise FuseExtError(
                    f"fuse_ext: root {_payload(producer).describe()} feeds root "
                    f"{_payload(root).describe()}; roots tiled without fusion must not "
                    "feed each other: tile them in separate steps, or fuse one into the "
                    "other with fuse_ext"
                )


def _recompute_reason(
    op: ir.Operation, users: Iterable[int], last_root: int, intermediates: Intermediates
) -> str | None:
    """Why a producer used outside the region is recomputed rather than yielded."""
    if intermediates == "recompute":
        return "recomputed inside the loop and kept outside (intermediates: recompute)"
    if not is_structured(op.name):
        return f"also kept outside: a {op.name} result is not yielded by the loop nest"
    if any(u < last_root for u in users):
        return "also kept outside: a use before the loop nest cannot read a loop result"
    return None


def _outside_users(
    op: ir.Operation, block_ops: Sequence[ir.Operation], fused: set[int]
) -> set[int]:
    users: set[int] = set()
    for result in op.results:
        for use in result.uses:
            fid = _top_level_user(use.owner.operation, block_ops)
            if fid is not None and fid not in fused:
                users.add(fid)
    return users


def producer_dag(
    block_ops: Sequence[ir.Operation], roots: Sequence[ir.Operation], reshapes: bool = True
) -> tuple[set[int], list[Outside]]:
    """Fids of the tileable ops reached backwards from ``roots`` (through inputs and
    inits, stopping at ``stop``-tagged and untileable ops), and where the walk stopped."""
    producers: set[int] = set()
    outside: dict[int, Outside] = {}
    work = list(roots)
    while work:
        op = work.pop()
        for operand in op.operands:
            producer = defining_op(operand)
            fid = None if producer is None else fid_of(producer)
            if producer is None or fid is None or fid in producers or fid in outside:
                continue
            if block_ops[fid] != producer:
                continue
            if STOP_TAG in producer.attributes:
                outside[fid] = Outside(_payload(producer), "in the stop set")
            elif producer.name in RESHAPES and not reshapes:
                outside[fid] = Outside(_payload(producer), "reshapes are not fused in kernels")
            elif is_structured(producer.name) or producer.name in TILEABLE_TENSOR_OPS:
                producers.add(fid)
                work.append(producer)
            elif producer.name not in _PLUMBING:
                outside[fid] = Outside(_payload(producer), "cannot be tiled to a slice")
    return producers, list(outside.values())


def loop_order(plan: FusionPlan, interchange: Sequence[int] | None) -> list[int]:
    """The roots' loops outermost first: ``interchange``, else their own order.

    Raises :class:`FuseExtError` when ``interchange`` is no permutation of the loops.
    """
    n_loops = len(plan.iterators)
    order = list(interchange) if interchange else list(range(n_loops))
    if sorted(order) != list(range(n_loops)):
        raise FuseExtError(
            f"fuse_ext: interchange {order} is not a permutation of 0..{n_loops - 1}"
        )
    return order


def resolve_tile_sizes(
    plan: FusionPlan,
    tile_sizes: Sequence[int] | None,
    tile_nums: Sequence[int] | None = None,
    interchange: Sequence[int] | None = None,
) -> list[int]:
    """One tile size per loop of the roots (in the roots' loop order), from ``tile_sizes``
    (one per loop of the root; trailing loops left out are not tiled) or from
    ``tile_nums`` (tiles per loop, each size the loop's static range divided by its
    number, rounded up; 0 = not tiled), exactly one of the two.

    ``tile_nums`` follow the loop order ``interchange`` makes, as in ByteIR (its
    ``fuse_operands`` test ``tile_with_interchange``: ``tile_nums = [32, 16]`` with
    ``tile_interchange = [1, 0]`` runs the outer loop, over dim 1, 32 times): number
    ``k`` is for loop ``interchange[k]``, and the loops left out are the innermost.

    Raises :class:`FuseExtError` for both or neither, a list longer than the loops,
    negative entries, ``tile_nums`` over a loop with no static range, or an
    ``interchange`` that is no permutation.
    """
    iters = plan.iterators
    what = plan.roots[0].describe()
    option, given = ("tile_sizes", tile_sizes) if tile_nums is None else ("tile_nums", tile_nums)
    if given is None or (tile_sizes is not None and tile_nums is not None):
        raise FuseExtError("fuse_ext: give one of tile_sizes (per loop) and tile_nums")
    if len(given) > len(iters):
        raise FuseExtError(
            f"fuse_ext: {len(given)} {option} for root {what}, which has {len(iters)} loops "
            f"({', '.join(iters)}); give at most one per loop (0 = not tiled; loops left "
            "out at the end are not tiled)"
        )
    if any(s < 0 for s in given):
        raise FuseExtError(f"fuse_ext: {option} must be >= 0, got {list(given)}")
    padded = [*given, *[0] * (len(iters) - len(given))]
    if tile_nums is None or not any(padded):
        return padded
    if plan.ranges is None:
        raise FuseExtError(
            f"fuse_ext: tile_nums {list(given)} for root {what}, whose loop ranges are not "
            "all static; give tile_sizes instead"
        )
    nums = [0] * len(iters)
    for number, loop in zip(padded, loop_order(plan, interchange), strict=True):
        nums[loop] = number
    return [-(-size // n) if n else 0 for size, n in zip(plan.ranges, nums, strict=True)]


class TileSplit(NamedTuple):
    """A root's tile sizes split by loop kind, and the loop order to build."""

    parallel: list[int]
    """The parallel loops' sizes (0 elsewhere): the forall, or its ``scf.for`` nest."""
    reduction: list[int]
    """The reduction loops' sizes (0 elsewhere): ``scf.for`` loops around the root."""
    order: list[int]
    """Every loop of the root, outermost first."""
    reductions_outside: bool = False
    """Whether the tiled reduction loops enclose the parallel ones (``interchange``
    putting them first; payload level only)."""


def split_tile_sizes(
    plan: FusionPlan,
    tile_sizes: Sequence[int],
    interchange: Sequence[int] | None,
    *,
    payload: bool = False,
    loop: LoopKind = "forall",
) -> TileSplit:
    """Split ``tile_sizes`` (one per loop, as :func:`resolve_tile_sizes` returns) into the
    parallel and reduction loops, in ``interchange`` order.

    ``payload``: fuse_ext on a payload, where only reduction loops may be tiled
    (:func:`reduction_only_plan`) and the reduction loops may enclose the parallel ones;
    inside a kernel the parallel forall forms the workgroups, so it must be tiled and
    outermost. Raises :class:`FuseExtError` when nothing is tiled, no parallel loop is
    tiled where one must be, ``interchange`` is no permutation, mixes the two kinds of
    loop (reduction, parallel, reduction...), puts reductions outermost inside a kernel,
    or reorders the parallel loops of a ``forall`` (which has no order among them).
    """
    iters = plan.iterators
    sizes = list(tile_sizes)
    what = plan.roots[0].describe()
    parallel = [s if it == "parallel" else 0 for s, it in zip(sizes, iters, strict=True)]
    reduction = [s if it == "reduction" else 0 for s, it in zip(sizes, iters, strict=True)]
    if not any(sizes):
        raise FuseExtError(
            f"fuse_ext: no loop of root {what} is tiled (sizes {sizes}, loops {list(iters)})"
        )
    if not any(parallel) and not payload:
        raise FuseExtError(
            f"fuse_ext: no parallel loop of root {what} is tiled (sizes {sizes}, loops "
            f"{list(iters)}); in a kernel schedule fuse_ext's parallel loops form the "
            "workgroups: tile a parallel loop, and the reductions with a later 'tile' step"
        )
    order = loop_order(plan, interchange)
    tiled = [d for d in order if sizes[d]]
    kinds = [iters[d] for d in tiled]
    changes = sum(1 for a, b in itertools.pairwise(kinds) if a != b)
    outside = bool(kinds) and kinds[0] == "reduction" and changes == 1
    if changes > 1 or (outside and not payload):
        where = (
            "the tiled loops must be the parallel ones then the reduction ones"
            if not payload
            else "the tiled loops must be the parallel ones then the reduction ones, or "
            "the reduction ones then the parallel ones"
        )
        raise FuseExtError(
            f"fuse_ext: interchange {order} orders the tiled loops of root {what} as "
            f"{', '.join(f'{d} ({iters[d]})' for d in tiled)}; {where}"
            + (
                ""
                if payload
                else " (in a kernel the parallel forall forms the workgroups, so it is "
                "outermost; reductions outside it are possible in graph schedules)"
            )
        )
    tiled_parallel = [d for d in tiled if iters[d] == "parallel"]
    if loop == "forall" and tiled_parallel != sorted(tiled_parallel):
        raise FuseExtError(
            f"fuse_ext: interchange {order} reorders the parallel loops {tiled_parallel} "
            f"of root {what}, but an scf.forall has no order among its dims (loop: "
            "forall); use loop: for to get an scf.for nest in that order, or keep the "
            "parallel loops in ascending order"
        )
    return TileSplit(parallel, reduction, order, outside)


def _inputs(op: ir.Operation) -> list[ir.Value]:
    """A structured op's input operands (``ins``), its inits left out."""
    segments = ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])
    return list(op.operands)[: segments[0]]


def reduction_only_plan(
    plan: FusionPlan, block_ops: Sequence[ir.Operation], form: str = "tiling only reduction loops"
) -> FusionPlan:
    """The plan when the root's reduction loops are tiled first (payload level): alone,
    or enclosing the parallel loops (``form`` names which, for the error).

    The reduction loop (``scf.for``) carries the root's accumulator, so what produces
    the root's inits (a ``linalg.fill``) stays before it, as the loop's ``iter_args``
    value; producers of the root's inputs are fused into the loop, computed per
    reduction tile. The loop yields only the root: an intermediate also used after it
    is computed there in full as well (the driver reports it from the IR). Raises
    :class:`FuseExtError` for several roots.
    """
    if len(plan.roots) != 1:
        raise FuseExtError(
            f"fuse_ext: {form} takes one root, got " + ", ".join(r.describe() for r in plan.roots)
        )
    planned = {op.fid for op in plan.producers}
    into_loop: set[int] = set()
    work = _inputs(block_ops[plan.roots[0].fid])
    while work:
        producer = defining_op(work.pop())
        fid = None if producer is None else fid_of(producer)
        if producer is None or fid not in planned or fid in into_loop:
            continue
        assert fid is not None
        into_loop.add(fid)
        work.extend(producer.operands)
    outside = list(plan.outside)
    for op in plan.producers:
        if op.fid not in into_loop:
            outside.append(
                Outside(
                    op,
                    "the accumulator's initializer: it stays before the reduction loop, "
                    "which carries its value",
                )
            )
    return dataclasses.replace(
        plan,
        producers=tuple(op for op in plan.producers if op.fid in into_loop),
        yielded=(),
        generalized=(),
        recomputed=(),
        outside=tuple(outside),
    )
