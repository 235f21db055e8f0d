"""fuse_ext inside IREE kernels: plan on the dispatch exactly as the strategy sees it.

A kernel strategy runs inside iree-compile, where nothing can call back into Python, and
IREE's codegen re-creates some ops between the executable sources and the strategy (e.g.
it restores unit dims of convolutions), so the plan is made on the IR the strategy gets:

1. a *probe* compile, whose strategies print their dispatch function at the fuse_ext
   step (titles from :func:`probe_title`);
2. each printed function is planned like a payload function (the default root is the
   op IREE's kernel matcher tagged ``tdsched.kernel``);
3. every planned op is then picked in the final strategy by op name and position among
   the ops of that name, read from the probe (no attribute has to survive IREE's passes).

Every dispatch a kernel matches must give the same plan and navigation (one strategy).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from iree.compiler import ir
from iree.compiler.dialects import transform
from iree.compiler.dialects.transform import structured

from ..interpreter import apply_in_place
from ..kernel_library import KERNEL_ATTR
from ..match import OpCriteria
from ..remarks import printed_sections
from ..script import any_op
from . import scripts
from .plan import (
    ROOT_TAG,
    FuseExtError,
    FusionPlan,
    Intermediates,
    assign_fids,
    make_plan,
)

_PROBE = "tdsched-probe: fuse_ext in kernel "


def probe_title(kernel: str) -> str:
    """The ``transform.print`` title under which the probe prints ``kernel``'s dispatch."""
    return f"{_PROBE}'{kernel}'"


def emit_probe(func: ir.Value, kernel: str) -> None:
    """Print the dispatch function, then fail on purpose so iree-compile stops here
    (left unscheduled, some dispatches take IREE minutes to reject)."""
    transform.PrintOp(target=func, name=probe_title(kernel))
    transform.GetParentOp(any_op(), func, op_name="tdsched.probe_stops_here")


@dataclass(frozen=True)
class KernelFusionRequest:
    """A kernel schedule's fuse_ext step, as far as planning needs it.

    ``root`` ``None`` means the op the kernel matched (the strategy's root handle).
    """

    kernel: str
    root: OpCriteria | None
    stop: OpCriteria | None
    intermediates: Intermediates


@dataclass(frozen=True)
class Pick:
    """Planned op ``fid`` is occurrence ``index`` of the ``count`` ops named ``name``."""

    fid: int
    name: str
    index: int
    count: int


@dataclass(frozen=True)
class KernelPlan:
    """A kernel's fuse_ext plan and where each planned op sits in the dispatch."""

    plan: FusionPlan
    picks: tuple[Pick, ...]

    def handles(self, func: ir.Value) -> dict[int, ir.Value]:
        """Emit one handle per planned op: match its op name, split, pick by position.

        The positions were read from the probe, i.e. from the very IR the strategy holds
        at this point, so no attribute has to survive IREE's earlier passes.
        """
        values: dict[int, ir.Value] = {}
        split: dict[str, list[ir.Value]] = {}
        for pick in self.picks:
            if pick.name not in split:
                matched = structured.MatchOp(any_op(), func, ops=[pick.name]).result
                split[pick.name] = list(
                    transform.SplitHandleOp([any_op()] * pick.count, matched).results
                )
            values[pick.fid] = split[pick.name][pick.index]
        return values


def plan_kernels(
    probe_output: str, requests: Sequence[KernelFusionRequest]
) -> dict[str, KernelPlan]:
    """Plan each request on the dispatch functions the probe printed for its kernel.

    A kernel whose probe printed nothing matched no dispatch and gets no plan.
    """
    printed: dict[str, list[str]] = {}
    for title, body in printed_sections(probe_output):
        if title.startswith(_PROBE) and body.strip():
            printed.setdefault(title, []).append(body)
    plans: dict[str, KernelPlan] = {}
    for request in requests:
        bodies = printed.get(probe_title(request.kernel), [])
        found = [_plan_printed(body, request) for body in bodies]
        if found:
            plans[request.kernel] = _same_plan(request.kernel, found)
    return plans


def _plan_printed(function_text: str, request: KernelFusionRequest) -> KernelPlan:
    with ir.Context(), ir.Location.unknown():
        try:
            module = ir.Module.parse(function_text)
        except ir.MLIRError as exc:
            raise FuseExtError(
                f"fuse_ext: cannot read kernel '{request.kernel}''s dispatch: {exc}"
            ) from exc
        func = next(op.operation for op in module.body.operations)
        block = func.regions[0].blocks[0]
        if request.root is None:
            tagged = [op.operation for op in block.operations if KERNEL_ATTR in op.attributes]
            if len(tagged) != 1:
                raise FuseExtError(
                    f"fuse_ext: kernel '{request.kernel}': IREE re-created the op the kernel "
                    "matched before the strategy ran, so 'the dispatch root' is unknown; "
                    "give fuse_ext a 'root' match (e.g. root: {op: linalg.generic})"
                )
            tagged[0].attributes[ROOT_TAG] = ir.UnitAttr.get()
        if request.root is not None or request.stop is not None:
            apply_in_place(module, scripts.tag_script(request.root, request.stop), scripts.ENTRY)
        block_ops = assign_fids(block)
        plan = make_plan(block_ops, request.intermediates, reshapes=False)
        return KernelPlan(plan, _picks(block_ops, plan))


def _picks(block_ops: Sequence[ir.Operation], plan: FusionPlan) -> tuple[Pick, ...]:
    picks = []
    for op in (*plan.roots, *plan.producers):
        same = [i for i, o in enumerate(block_ops) if o.name == op.name]
        picks.append(Pick(op.fid, op.name, same.index(op.fid), len(same)))
    return tuple(sorted(picks, key=lambda p: p.fid))


def _same_plan(kernel: str, plans: Sequence[KernelPlan]) -> KernelPlan:
    def signature(k: KernelPlan) -> tuple[object, ...]:
        # Ops are compared by where the strategy picks them (name, position among the
        # ops of that name), not by fid: a dispatch that loads one more operand (a
        # residual) numbers its ops differently but is fused the same way.
        p = k.plan
        where = {pick.fid: (pick.name, pick.index, pick.count) for pick in k.picks}
        names = [  # yielded and generalized ops are producers: all of them are picked
            tuple(where[op.fid] for op in ops)
            for ops in (p.roots, p.producers, p.yielded, p.generalized)
        ]
        return (*names, p.iterators)

    if any(signature(p) != signature(plans[0]) for p in plans[1:]):
        raise FuseExtError(
            f"fuse_ext: kernel '{kernel}' matches {len(plans)} dispatches whose producer "
            "graphs differ, and one strategy cannot fuse both; narrow the kernel's match "
            "(e.g. by shape) or add a kernel schedule per dispatch"
        )
    return plans[0]
