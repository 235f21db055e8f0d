"""fuse_ext on a whole payload module: plan, then transform steps and rewrites in turn.

Order of work, each step checked before the next:

1. tag the ``root`` and ``stop`` matches (transform script), number the function's ops
   and make the :class:`~.plan.FusionPlan`;
2. generalize named intermediates that must be yielded (the loop nest yields a
   ``linalg.generic`` producer's tile through a new ``shared_outs`` result);
3. tile the roots' *parallel* dims into one ``scf.forall`` (several roots: one forall
   each, merged);
4. fuse producers one at a time in reverse program order, with CSE after each (linear in
   the number of ops, where upstream ``transform.structured.fuse`` clones shared
   producers once per path); slices of a shared producer are first unioned, a fused
   ``tensor.pad``'s zero-slice guard is inlined, reshapes are passed by bubbling the
   slice above them;
5. tile the roots' *reduction* dims with ``scf.for`` inside the nest: only the root is
   in that loop, so an accumulator initializer (``linalg.fill``) is never re-run per
   reduction step;
6. ``loop: for`` turns the forall into an ``scf.for`` nest in ``interchange`` order;
   canonicalize + CSE drop the untiled originals.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

from iree.compiler import ir

from ..interpreter import apply_in_place
from ..match import OpCriteria
from ..payload import ops_under, strip_attributes
from ..script import LoopKind
from . import rewrites, scripts
from .plan import (
    FID,
    LOOP_ROLE,
    ROOT_TAG,
    STOP_TAG,
    FuseExtError,
    FusionPlan,
    Intermediates,
    Outside,
    PayloadOp,
    TileSplit,
    assign_fids,
    describe_fusion,
    encloses,
    fid_of,
    is_structured,
    make_plan,
    reduction_only_plan,
    resolve_tile_sizes,
    root_block,
    split_tile_sizes,
)

_TAGS = (FID, ROOT_TAG, STOP_TAG, scripts.LOOP_TAG)


NestPrimitive = Literal["fuse_ext", "tile_ext", "fuse_operands"]


@dataclass(frozen=True)
class FuseExtOptions:
    """What to tile and fuse: see ``docs/primitives/fuse_ext.md``.

    ``primitive`` is the step this runs for, which the report and errors name:
    ``fuse_ext``; ``tile_ext`` (the roots are tiled, nothing is fused: ``stop`` and
    ``intermediates`` do not apply); ``fuse_operands`` (``root`` is ``None``: the roots
    are the ops whose results the function returns).
    """

    root: OpCriteria | None
    tile_sizes: tuple[int, ...] | None = None
    """One per loop (trailing loops left out: not tiled); or give ``tile_nums``."""
    tile_nums: tuple[int, ...] | None = None
    interchange: tuple[int, ...] | None = None
    stop: OpCriteria | None = None
    intermediates: Intermediates = "yield"
    loop: LoopKind = "forall"
    primitive: NestPrimitive = "fuse_ext"


@dataclass
class FuseExtReport:
    """What fuse_ext did, for ``tdsched apply`` and tests."""

    primitive: NestPrimitive = "fuse_ext"
    plan: FusionPlan | None = None
    fused: list[PayloadOp] = field(default_factory=list)
    outside: list[Outside] = field(default_factory=list)
    also_outside: list[Outside] = field(default_factory=list)
    """Fused ops that the IR after the rewrite still computes in full outside the loop,
    and why."""
    whole_per_step: list[PayloadOp] = field(default_factory=list)
    """Ops fused into a reduction loop that compute their whole result in every step
    (no reduction loop slices them)."""
    scripts: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def lines(self) -> list[str]:
        if self.plan is None:
            return [f"{self.primitive}: nothing planned"]
        out = describe_fusion(
            self.plan,
            self.fused,
            self.outside,
            self.also_outside,
            self.primitive,
            self.whole_per_step,
        )
        out.append(f"  ({len(self.scripts)} transform steps, {self.seconds:.3f} s)")
        return out


class _Payload:
    """The payload module and the interpreter that runs fuse_ext's scripts on it."""

    def __init__(self, module: ir.Module, report: FuseExtReport) -> None:
        self.module = module
        self.report = report

    def run(self, script: str, what: str) -> None:
        self.report.scripts.append(script)
        try:
            apply_in_place(self.module, script, scripts.ENTRY)
        except (ir.MLIRError, ValueError) as exc:  # a silenceable failure is a ValueError
            raise FuseExtError(f"fuse_ext: {what} failed: {exc}") from exc

    def note(self, rewrite: str) -> None:
        """Record a rewrite tdsched made between the scripts, so ``tdsched show`` lists
        it where it happened."""
        self.report.scripts.append(
            f"// {self.report.primitive}: {rewrite} (rewritten by tdsched with the MLIR "
            "bindings: no transform op does this)"
        )


def fuse_ext(module_text: str, options: FuseExtOptions) -> tuple[str, FuseExtReport]:
    """Apply fuse_ext (or ``options.primitive``) to ``module_text``; returns the new
    module text and a report.

    Precondition: the roots live in the top-level block of one function with static
    shapes. Raises :class:`FuseExtError` naming the primitive, the op and the reason
    otherwise.
    """
    try:
        return _fuse_ext(module_text, options)
    except FuseExtError as exc:
        text = str(exc)
        if options.primitive == "fuse_ext" or not text.startswith("fuse_ext:"):
            raise
        raise FuseExtError(options.primitive + text.removeprefix("fuse_ext")) from exc


def _fuse_ext(module_text: str, options: FuseExtOptions) -> tuple[str, FuseExtReport]:
    start = time.perf_counter()
    report = FuseExtReport(options.primitive)
    with ir.Context(), ir.Location.unknown():
        try:
            module = ir.Module.parse(module_text)
        except ir.MLIRError as exc:
            raise FuseExtError(f"fuse_ext: the payload does not parse: {exc}") from exc
        payload = _Payload(module, report)
        payload.run(scripts.tag_script(options.root, options.stop), "matching root and stop")
        if options.root is None:
            _tag_returned(module)
        block = root_block(module, options.primitive)
        block_ops = assign_fids(block)
        plan = make_plan(block_ops, options.intermediates, fuse=options.primitive != "tile_ext")
        report.plan = plan
        report.outside.extend(plan.outside)
        sizes = resolve_tile_sizes(plan, options.tile_sizes, options.tile_nums, options.interchange)
        split = split_tile_sizes(plan, sizes, options.interchange, payload=True, loop=options.loop)
        root_fids = [r.fid for r in plan.roots]
        nest_block = block
        if not any(split.parallel):
            plan = _reduction_loop(payload, block, block_ops, plan, report, split)
        elif split.reductions_outside:
            plan = _reduction_loop(
                payload, block, block_ops, plan, report, split, "reduction loops outermost"
            )
            nest_block = _parallel_inside(payload, block, plan, report, split)
        else:
            _parallel_nest(payload, block, plan, report, split)
        if options.loop == "for" and any(split.parallel):
            loop = _tag_loop(nest_block, root_fids)
            tiled = [d for d, s in enumerate(split.parallel) if s]
            order = [d for d in split.order if d in tiled]
            rewrites.forall_to_for(loop, [tiled.index(d) for d in order])
            payload.note(f"loop: for: the scf.forall became an scf.for nest over loops {order}")
        payload.run(scripts.cleanup_script(), "cleanup")
        report.also_outside = _computed_twice(
            block, report, reduction_loop=not any(split.parallel) or split.reductions_outside
        )
        strip_attributes(module.operation, _TAGS)
        if not module.operation.verify():
            raise FuseExtError("fuse_ext: produced an invalid module (please report)")
        report.seconds = time.perf_counter() - start
        return str(module), report


def _computed_twice(
    block: ir.Block, report: FuseExtReport, *, reduction_loop: bool
) -> list[Outside]:
    """The fused ops that the IR still computes in full outside the loop nest, and why.

    From the IR, not the plan: a fused op still at full size in the function (a result
    the loop does not yield, or the operand of such a full-size op) runs twice. Ops
    already reported as kept outside (a use before the nest, ``intermediates:
    recompute``) are left to that line.
    """
    reported = {o.op.fid for o in report.outside}
    full = {p.fid: op for p in report.fused if (op := _top_level(block, p.fid)) is not None}
    twice = []
    for producer in report.fused:
        op = full.get(producer.fid)
        if op is None or producer.fid in reported:
            continue
        users = [use.owner.operation for result in op.results for use in result.uses]
        readers = [user for user in users if any(user == other for other in full.values())]
        if readers:
            why = (
                "the full-size "
                + ", ".join(f"{user.name} at {user.location}" for user in readers)
                + " outside reads it"
            )
        elif reduction_loop:
            why = (
                "its result is used after the reduction loop, which yields only the root; "
                "parallel loops outside it would yield it"
            )
        elif len(op.results) > 1:
            why = (
                "a result of it used after the loop is not yielded (the loop yields a "
                "multi-result op only through the results its consumers read)"
            )
        else:
            why = "its result is used after the loop, which does not yield it"
        twice.append(Outside(producer, why))
    return twice


def _tag_returned(module: ir.Module) -> None:
    """Tag as roots the ops whose results the payload function returns (fuse_operands).

    Raises :class:`FuseExtError` when several functions return values, or a returned
    value comes from an op that is not a structured linalg op.
    """
    returns = ops_under(module.operation, lambda op: op.name == "func.return")
    if len(returns) != 1:
        raise FuseExtError(
            f"fuse_ext: the payload has {len(returns)} function returns; the roots are the "
            "ops producing one function's returned values, so it needs exactly one function"
        )
    tagged = 0
    for k, value in enumerate(returns[0].operands):
        owner = value.owner
        if isinstance(owner, ir.Block):
            continue  # a returned argument: nothing computes it
        op = owner.operation
        if not is_structured(op.name):
            raise FuseExtError(
                f"fuse_ext: returned value #{k} comes from {op.name} at {op.location}, not "
                "from a linalg op, and only linalg ops can be the loop nest's roots; use "
                "fuse_ext with a root match of the linalg op(s) before it"
            )
        op.attributes[ROOT_TAG] = ir.UnitAttr.get()
        tagged += 1
    if not tagged:
        raise FuseExtError("fuse_ext: the function returns no value computed by a linalg op")


def _parallel_nest(
    payload: _Payload, block: ir.Block, plan: FusionPlan, report: FuseExtReport, split: TileSplit
) -> None:
    """Tile the roots' parallel dims into the forall, fuse the producers into it, then
    tile the reductions around the roots alone."""
    if plan.generalized:
        payload.run(scripts.generalize_script(plan.generalized), "generalize")
    payload.run(scripts.tile_roots_script(plan.roots, split.parallel), "tiling the roots")
    for producer in reversed(plan.producers):
        _fuse_one(payload, block, producer, plan, report)
    if any(split.reduction):
        payload.run(
            scripts.tile_reductions_script(plan.roots, split.reduction, split.order),
            "reduction tiling",
        )


def _reduction_loop(
    payload: _Payload,
    block: ir.Block,
    block_ops: list[ir.Operation],
    plan: FusionPlan,
    report: FuseExtReport,
    split: TileSplit,
    form: str = "tiling only reduction loops",
) -> FusionPlan:
    """Tile the root's reductions into an ``scf.for`` nest carrying its accumulator (the
    init producers stay before it) and fuse its inputs' producers into it; returns the
    plan of that form, which the report then follows."""
    plan = reduction_only_plan(plan, block_ops, form)
    report.plan = plan
    report.outside = list(plan.outside)
    payload.run(
        scripts.tile_reduction_loop_script(plan.roots[0], split.reduction, split.order),
        "reduction tiling",
    )
    for producer in reversed(plan.producers):
        whole = _result_types(_top_level(block, producer.fid))
        _fuse_one(payload, block, producer, plan, report)
        loop = _tag_loop(block, [r.fid for r in plan.roots])
        tile = _top_level(loop.regions[0].blocks[0], producer.fid)
        if producer in report.fused and whole and _result_types(tile) == whole:
            report.whole_per_step.append(producer)
    return plan


def _result_types(op: ir.Operation | None) -> list[str]:
    """``op``'s result types (none for ``None``): a tile's equal the full op's when no
    loop slices it."""
    return [] if op is None else [str(result.type) for result in op.results]


def _parallel_inside(
    payload: _Payload, block: ir.Block, plan: FusionPlan, report: FuseExtReport, split: TileSplit
) -> ir.Block:
    """Reductions outermost: tile the root's parallel dims inside the innermost reduction
    loop and fuse the producers already in that loop into the parallel nest. Returns the
    block holding the nest. A producer that stays in the reduction loop only is reported."""
    outer = _tag_loop(block, [r.fid for r in plan.roots])
    del outer.attributes[scripts.LOOP_TAG]
    inner = _enclosing_block(outer, plan.roots[0].fid)
    payload.run(scripts.tile_roots_script(plan.roots, split.parallel), "tiling the roots")
    nested = FuseExtReport(plan=plan)
    for producer in reversed(plan.producers):
        if _top_level(inner, producer.fid) is not None:
            _fuse_one(payload, inner, producer, plan, nested)
    report.outside.extend(
        Outside(
            o.op, f"fused into the reduction loop, not into the parallel loops in it: {o.reason}"
        )
        for o in nested.outside
    )
    return inner


def _enclosing_block(loop: ir.Operation, fid: int) -> ir.Block:
    """The block (in ``loop``, at any depth) that holds the op numbered ``fid``."""
    found: list[ir.Block] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if fid_of(op) == fid and op.parent is not None:
            found.append(op.parent.regions[0].blocks[0])
        return ir.WalkResult.ADVANCE

    loop.walk(visit)
    if len(found) != 1:
        raise FuseExtError("fuse_ext: lost track of the root in its reduction loop (please report)")
    return found[0]


_LOOPS = ("scf.forall", "scf.for")


def _tag_loop(block: ir.Block, root_fids: list[int]) -> ir.Operation:
    """Find the loop nest holding the roots and put the loop tag on it (only on it).

    A tagged top-level loop is the loop. Upstream fusion that adds a result to the forall
    rebuilds it without its attributes; then walking loops for the roots finds it, and it
    gets its tag and its ``parallel`` label back.
    """
    tagged = [
        op.operation
        for op in block.operations
        if op.operation.name in _LOOPS and scripts.LOOP_TAG in op.operation.attributes
    ]
    if len(tagged) == 1:
        return tagged[0]
    loop = _find_loop(block, root_fids)
    loop.attributes[scripts.LOOP_TAG] = ir.UnitAttr.get()
    if loop.name == "scf.forall" and LOOP_ROLE not in loop.attributes:
        loop.attributes[LOOP_ROLE] = ir.StringAttr.get("parallel")
    return loop


def _find_loop(block: ir.Block, root_fids: list[int]) -> ir.Operation:
    """The top-level loop of ``block`` holding the roots; drops stale loop tags on the way."""
    loop = None
    for op in block.operations:
        op = op.operation
        if scripts.LOOP_TAG in op.attributes:
            del op.attributes[scripts.LOOP_TAG]
        if op.name in _LOOPS and _contains(op, set(root_fids)):
            loop = op
    if loop is None:
        raise FuseExtError("fuse_ext: lost track of the loop nest (please report)")
    return loop


def _contains(op: ir.Operation, fids: set[int]) -> bool:
    hits: list[int] = []

    def visit(inner: ir.Operation) -> ir.WalkResult:
        fid = fid_of(inner)
        if fid in fids and inner != op:
            hits.append(fid)
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    return bool(hits)


def _top_level(block: ir.Block, fid: int) -> ir.Operation | None:
    """The top-level op of ``block`` numbered ``fid``, if it still exists."""
    return next((op.operation for op in block.operations if fid_of(op.operation) == fid), None)


def _uses_inside(op: ir.Operation, loop: ir.Operation) -> bool:
    """Whether ``loop`` reads ``op``: in its body, or as the init of a ``shared_outs``."""
    return any(encloses(loop, use.owner.operation) for r in op.results for use in r.uses)


def _fuse_one(
    payload: _Payload, block: ir.Block, producer: PayloadOp, plan: FusionPlan, report: FuseExtReport
) -> None:
    root_fids = [r.fid for r in plan.roots]
    loop = _tag_loop(block, root_fids)
    original = _top_level(block, producer.fid)
    if original is None or not _uses_inside(original, loop):
        report.outside.append(
            Outside(
                producer,
                "no slice of it is read inside the loop nest (an op between it "
                "and the roots was kept outside)",
            )
        )
        return
    if plan.is_reshape(producer):
        why = rewrites.bubble_slices_through_reshape(loop, original)
        if why is not None:
            report.outside.append(Outside(producer, f"the loop's slice of it {why}"))
            return
        payload.note(f"the loop's slices of {producer.describe()} became slices of its source")
        report.fused.append(producer)
        return
    if producer in plan.recomputed:
        rewrites.keep_full_copy_after(loop, original)
        payload.note(f"{producer.describe()} keeps a full-size copy for its uses after the loop")
    if rewrites.union_slices(loop, original):
        payload.note(f"the loop's slices of {producer.describe()} became parts of their union")
    payload.run(scripts.fuse_producer_script(producer), f"fusing {producer.describe()}")
    loop = _tag_loop(block, root_fids)
    # The step may have erased the original (CSE): look it up again, never reuse it.
    original = _top_level(block, producer.fid)
    if original is not None and _uses_inside(original, loop):
        report.outside.append(Outside(producer, "fusion left it outside the loop nest"))
        return
    if original is not None and len(original.results) > 1:
        _yield_other_results(payload, loop, original, producer)
    report.fused.append(producer)


def _yield_other_results(
    payload: _Payload, loop: ir.Operation, original: ir.Operation, producer: PayloadOp
) -> None:
    """A fused multi-result producer: the forall also yields its results used after the
    loop (upstream yields only the one its consumers read), and the full-size original
    goes when nothing reads it any more."""
    tiled = _top_level(loop.regions[0].blocks[0], producer.fid)
    if loop.name != "scf.forall" or tiled is None:
        return
    if rewrites.yield_results_used_after(loop, original, tiled):
        payload.note(f"the loop also yields the results of {producer.describe()} used after it")
    if all(not list(result.uses) for result in original.results):
        original.erase()
