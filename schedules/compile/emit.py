"""Recipe → transform-dialect scripts.

A resolved :class:`Recipe` (no ``${...}`` left) becomes at most two scripts:

* the **graph script**, ``@__transform_main`` over the whole module, applied before IREE
  forms dispatches (graph rewrites only: tiling there would leave host loops that IREE
  cannot compile);
* the **kernel library**, ``@__kernel_config`` plus one strategy or lowering config per
  kernel schedule, passed to iree-compile for the chosen target.

Every step failure becomes a :class:`RecipeError` naming the step's file, line and field.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

from tdsched.targets import Target
from tdsched.transform_lib.cleanup import cleanup
from tdsched.transform_lib.codegen_tail import cpu_tail, distribute_to_workgroups, gpu_tail
from tdsched.transform_lib.errors import ScheduleError
from tdsched.transform_lib.fuse_ext import FuseExtOptions
from tdsched.transform_lib.fuse_ext.driver import NestPrimitive
from tdsched.transform_lib.fuse_ext.probe import KernelFusionRequest, KernelPlan, emit_probe
from tdsched.transform_lib.fuse_ext.scripts import fuse_in_strategy
from tdsched.transform_lib.kernel_library import KernelLibrary
from tdsched.transform_lib.lowering_config import (
    Codegen,
    compilation_info,
    op_lowering_config,
)
from tdsched.transform_lib.match import OpCriteria, match_ops, producer_of
from tdsched.transform_lib.op_forms import decompose, generalize, interchange, specialize
from tdsched.transform_lib.remarks import (
    emit_remark,
    kernel_after_schedule,
    kernel_applied,
    print_ir,
    step_matched,
    step_produced,
    step_snapshot,
)
from tdsched.transform_lib.script import LoopHandle, OpHandle, TransformScript, located
from tdsched.transform_lib.tiling import fuse_into, tile_using_for, tile_using_forall
from tdsched.transform_lib.vectorize import vectorize_all, vectorize_op

from ..base.errors import RecipeError, Where
from ..dsl.recipe import KernelSchedule, LoweringConfig, Recipe
from ..dsl.resolved import as_int, as_ints, criteria_of, payload_criteria, region_criteria
from ..dsl.steps import (
    CleanupStep,
    DecomposeStep,
    DispatchRegionStep,
    FuseExtStep,
    FuseIntoStep,
    FuseOperandsStep,
    FusingNestStep,
    GeneralizeStep,
    InterchangeStep,
    MatchStep,
    NestStep,
    ProducerStep,
    SpecializeStep,
    Step,
    TileExtStep,
    TileStep,
    VectorizeStep,
)
from ..dsl.values import ROOT, IntOrParam, MatchSpec
from .graph_rewrites import REWRITES, RewriteStage, rewrite_stage

GRAPH_ENTRY = "__transform_main"
GRAPH_SCOPE = "graph"
"""The scope of the graph schedule's markers and snapshots (kernels: ``kernel 'NAME'``)."""


def kernel_scope(kernel: str) -> str:
    """The scope of kernel schedule ``kernel``'s markers and snapshots."""
    return f"kernel '{kernel}'"


@dataclass(frozen=True)
class Marker:
    """A marker a script must print for its step to count as applied.

    ``where`` is the recipe step that prints it; ``missing`` what went wrong if it is absent.
    """

    text: str
    where: Where
    missing: str


@dataclass(frozen=True)
class ScriptStage:
    """A graph-schedule stage run as one transform script, and its markers.

    ``label`` names its steps and where they are, for the report of what it changed.
    """

    script: str
    markers: tuple[Marker, ...]
    label: str = "graph script"
    steps: int = 1
    """How many of the schedule's steps the script runs."""


@dataclass(frozen=True)
class FuseExtStage:
    """A graph-schedule fuse_ext step: planned on the payload, run by its own driver."""

    options: FuseExtOptions
    where: Where


@dataclass(frozen=True)
class DispatchRegionStage:
    """A graph-schedule dispatch_region step (a rewrite run by tdsched, not a script)."""

    root: OpCriteria
    stop: OpCriteria | None
    where: Where


GraphStage = ScriptStage | FuseExtStage | DispatchRegionStage | RewriteStage


@dataclass(frozen=True)
class Scripts:
    """The scripts for one recipe and target, and the markers that prove they applied.

    ``graph`` holds the graph schedule's stages in order: consecutive transform steps form
    one :class:`ScriptStage`; each ``fuse_ext`` step is a :class:`FuseExtStage`.
    """

    graph: tuple[GraphStage, ...]
    kernel_library: str | None
    kernel_markers: tuple[Marker, ...] = ()
    kernel_fusions: tuple[KernelFusionRequest, ...] = ()
    """Kernel-level fuse_ext steps. While they are listed, :attr:`kernel_library` is the
    *probe* library (it prints each such dispatch at its fuse_ext step and stops there);
    the final library is emitted with the plans made on what it printed
    (:func:`tdsched.transform_lib.fuse_ext.probe.plan_kernels`)."""

    @property
    def has_host_loops(self) -> FuseExtStage | None:
        """The first graph stage that leaves host-level loops (IREE cannot compile them)."""
        return next((s for s in self.graph if isinstance(s, FuseExtStage)), None)


def emit(
    recipe: Recipe,
    target: Target,
    loop_counts: dict[str, set[int]],
    *,
    print_after_schedule: bool = False,
    trace_steps: bool = False,
    fusion_plans: Mapping[str, KernelPlan] | None = None,
) -> Scripts:
    """Emit the scripts of a resolved ``recipe`` for ``target``.

    ``loop_counts`` (from :func:`tdsched.transform_lib.payload.loop_counts`) lets steps
    check tile-size ranks against the workload's ops. ``print_after_schedule`` makes each
    strategy print its dispatch function after the user's steps (for ``tdsched apply``);
    ``trace_steps`` makes every schedule print its payload before its first step and
    after each step (:func:`~tdsched.transform_lib.remarks.step_snapshot`: graph scripts
    the module, strategies their dispatch function).

    ``fusion_plans`` (kernel name → plan) completes kernel-level fuse_ext steps; without
    it they are listed in :attr:`Scripts.kernel_fusions` and the library is a probe.
    """
    graph = _emit_graph(recipe, loop_counts, target, trace_steps)
    fusion = _Fusion(fusion_plans)
    printing = _Printing(print_after_schedule, trace_steps)
    library, kernel_markers = (
        _emit_kernels(recipe, target, loop_counts, printing, fusion)
        if recipe.kernels
        else (None, [])
    )
    return Scripts(graph, library, tuple(kernel_markers), tuple(fusion.requests))


@dataclass(frozen=True)
class _Printing:
    """What strategies print besides their markers: the dispatch after the user's steps,
    and the payload before and after each step."""

    after_schedule: bool
    steps: bool


class _ProbeDone(Exception):
    """A probe strategy printed its dispatch at the fuse_ext step; emit nothing more."""


@dataclass
class _Fusion:
    """Kernel-level fuse_ext: the plans made on the dispatch sources, or the requests."""

    plans: Mapping[str, KernelPlan] | None
    requests: list[KernelFusionRequest] = field(default_factory=list)


def _known_loops(counts: dict[str, set[int]], spec: MatchSpec) -> int | None:
    """The loop count of the ops ``spec`` selects, when the payload makes it unique."""
    if spec.shape is not None:
        return len(spec.shape)
    if spec.op is not None:
        names = [spec.op]
    elif spec.kind is not None:
        names = [n for n in counts if _is_kind(n, spec.kind)]
    else:
        return None
    found = set().union(*(counts.get(n, set()) for n in names))
    return next(iter(found)) if len(found) == 1 else None


def _is_kind(op_name: str, kind: str) -> bool:
    """Whether a named linalg op is of ``kind`` (generics are decided by IREE's matcher)."""
    short = op_name.removeprefix("linalg.")
    if kind == "contraction":
        return short in _CONTRACTIONS
    return short.startswith(("conv_", "depthwise_conv_"))


_CONTRACTIONS = frozenset(
    {
        "matmul",
        "batch_matmul",
        "matvec",
        "vecmat",
        "batch_matvec",
        "batch_vecmat",
        "dot",
        "contract",
        "batch_reduce_matmul",
        "mmt4d",
        "batch_mmt4d",
    }
)


class _Emitter:
    """Walks steps, keeping the handle environment of one schedule."""

    def __init__(
        self,
        scope: str,
        func: OpHandle,
        counts: dict[str, set[int]],
        kernel_level: bool,
        *,
        trace: bool = False,
        first: int = 0,
    ) -> None:
        self.scope = scope
        self.trace = trace
        self.first = first
        """The position in its schedule of the first step this emitter runs (a graph
        script stage may start mid-schedule): steps are named by their position."""
        self.func = func
        self.counts = counts
        self.kernel_level = kernel_level
        self.handles: dict[str, OpHandle | LoopHandle] = {}
        self.invalidated: dict[str, str] = {}
        self.markers: list[Marker] = []
        self.produced: dict[str, tuple[str, Step]] = {}
        """handle name → the marker text for it and the step whose result bound it last
        (a later step that uses it prints the marker and requires it)."""
        self.required: set[str] = set()
        self.root_unchecked = kernel_level
        """``root`` is still the op the kernel's matcher tagged, and no step has required
        it yet (see :meth:`_require_root`)."""
        self.kernel = ""
        self.fusion = _Fusion(None)
        self.index = 0
        """The step being emitted (its position in the schedule): names its markers."""

    def op(self, name: str, where: Where) -> OpHandle:
        handle = self._get(name, where)
        if not isinstance(handle, OpHandle):
            raise RecipeError(where, f"handle {name!r} names loops, but an op is needed here")
        return handle

    def loop(self, name: str, where: Where) -> LoopHandle:
        handle = self._get(name, where)
        if not isinstance(handle, LoopHandle):
            raise RecipeError(where, f"handle {name!r} names an op, but loops are needed here")
        return handle

    def _get(self, name: str, where: Where) -> OpHandle | LoopHandle:
        handle = self._lookup(name, where)
        self._require_produced(name, where)
        return handle

    def _lookup(self, name: str, where: Where) -> OpHandle | LoopHandle:
        if name in self.invalidated:
            raise RecipeError(
                where,
                f"handle {name!r} was invalidated by {self.invalidated[name]}; reorder the steps",
            )
        if name not in self.handles:
            known = ", ".join(sorted(self.handles)) or "none"
            hint = (
                ""
                if self.kernel_level
                else " (graph schedules have no root: bind handles with 'match')"
            )
            raise RecipeError(where, f"unknown handle {name!r}; bound so far: {known}{hint}")
        return self.handles[name]

    def run(self, steps: Sequence[Step]) -> None:
        for offset, step in enumerate(steps):
            self.index = self.first + offset
            try:
                with located(step.primitive, step.where.file, step.where.line):
                    self._step(step)
            except ScheduleError as exc:
                raise RecipeError(step.where, str(exc)) from exc
            if self.trace:
                print_ir(self.func, step_snapshot(self.scope, self.index + 1))

    def _step(self, step: Step) -> None:
        emit = _SCRIPT_EMITTERS.get(type(step))
        if emit is None:
            raise RecipeError(
                step.where,
                f"the {step.primitive} step has no transform-script emitter, so it cannot run "
                "here (see the primitive's doc page for where it belongs)",
            )
        emit(self, step)

    def _match(self, step: MatchStep) -> None:
        criteria = criteria_of(step.spec, step.where, self.counts)
        found = match_ops(self.func, criteria, _known_loops(self.counts, step.spec))
        self._bind(step.name, found, step)

    def _producer(self, step: ProducerStep) -> None:
        operand = as_int(step.operand, step.where.child("operand"))
        self._bind(step.name, producer_of(self.op(step.of, step.where), operand), step)

    def _fuse_into(self, step: FuseIntoStep) -> None:
        fused, loop = fuse_into(
            self.op(step.producer, step.where), self.loop(step.loop, step.where)
        )
        self._produce(step.producer, fused, step)
        self._produce(step.loop, loop, step)

    def _generalize(self, step: GeneralizeStep) -> None:
        self._produce(step.target, generalize(self.op(step.target, step.where)), step)

    def _specialize(self, step: SpecializeStep) -> None:
        self._produce(step.target, specialize(self.op(step.target, step.where)), step)

    def _decompose(self, step: DecomposeStep) -> None:
        self._produce(step.target, decompose(self.op(step.target, step.where)), step)

    def _interchange(self, step: InterchangeStep) -> None:
        perm = as_ints(step.permutation, step.where.child("permutation"))
        self._produce(step.target, interchange(self.op(step.target, step.where), perm), step)

    def _cleanup(self, step: CleanupStep) -> None:
        cleanup(
            self.func,
            canonicalize=step.canonicalize,
            cse=step.cse,
            licm=step.licm,
            unit_dims=step.unit_dims,
        )

    def _produce(self, name: str, handle: OpHandle | LoopHandle, step: Step) -> None:
        """Bind ``name`` to a step's result; a later step that uses it requires that it
        holds ops where this step ran."""
        result = "loops" if isinstance(handle, LoopHandle) else "op"
        text = step_produced(self.scope, step.primitive, self.index, result)
        if name == ROOT:
            self.root_unchecked = False
        self.handles[name] = handle
        self.produced[name] = (text, step)
        self.invalidated.pop(name, None)

    def _require_produced(self, name: str, user: Where) -> None:
        """Print the marker of the step that bound ``name``, just before the step at
        ``user`` uses it, and require it (once per binding; unused results print
        nothing)."""
        if name == ROOT and self.root_unchecked:
            self._require_root(user)
            return
        if name not in self.produced:
            return
        text, step = self.produced[name]
        if text in self.required:
            return
        self.required.add(text)
        emit_remark(self.handles[name], text)
        missing = (
            f"this {step.primitive} step left handle {name!r} empty, so the step that uses it "
            f"({user}) would not apply"
        )
        self.markers.append(Marker(text, step.where, missing))

    def _require_root(self, user: Where) -> None:
        """Require the matcher's tagged root op where the strategy runs: IREE re-creates
        some ops between matching and the strategy (convolutions, whose unit dims it
        restores), and the re-created op has lost the tag, so ``root`` would be empty."""
        self.root_unchecked = False
        text = step_matched(self.scope, ROOT)
        emit_remark(self.handles[ROOT], text)
        missing = (
            f"this step uses '{ROOT}', the op kernel '{self.kernel}' matched, but the "
            "strategy does not find it in the dispatch: IREE re-created the op after "
            "matching (it does so for convolutions), dropping the tag that marks it. Bind "
            "the op with a match step instead, e.g. '- match: {op: linalg.generic, as: "
            "conv}', and give that handle as the step's target"
        )
        self.markers.append(Marker(text, user, missing))

    def _bind(self, name: str, handle: OpHandle, step: MatchStep | ProducerStep) -> None:
        """Bind ``name`` and require, via a marker, that it holds at least one op."""
        text = step_matched(self.scope, name)
        emit_remark(handle, text)
        place = "in the dispatch" if self.kernel_level else "in the module"
        missing = f"this {step.primitive} step matched no op {place}; the schedule would not apply"
        self.markers.append(Marker(text, step.where, missing))
        self.handles[name] = handle
        self.produced.pop(name, None)  # required already, by its match marker
        self.invalidated.pop(name, None)

    def _tile(self, step: TileStep) -> None:
        target = self.op(step.target, step.where)
        sizes = as_ints(step.sizes, step.where.child("sizes"))
        if step.loop == "forall":
            if step.interchange is not None:
                raise RecipeError(step.where, "interchange applies to loop: for only")
            tiled, loop = tile_using_forall(target, sizes, step.mapping)
            if step.mapping == "workgroup":
                distribute_to_workgroups(loop.value)
            loops = [loop]
        else:
            if step.mapping != "none":
                raise RecipeError(step.where, "mapping applies to loop: forall only")
            interchange_order = (
                as_ints(step.interchange, step.where.child("interchange"))
                if step.interchange
                else None
            )
            tiled, loops = tile_using_for(target, sizes, interchange_order)
        self._produce(step.target, tiled, step)
        if step.loops is not None:
            self._produce(step.loops, loops[0], step)

    def _fuse_ext(self, step: FuseExtStep) -> None:
        """Kernel-level fuse_ext: workgroup forall, producers fused, reductions tiled."""
        if step.loop != "forall":
            raise RecipeError(
                step.where.child("loop"),
                "inside a kernel schedule fuse_ext distributes the root's parallel loops to "
                "workgroups, so loop must be forall (tile further with 'tile' steps)",
            )
        request = KernelFusionRequest(
            self.kernel,
            payload_criteria(step.root, step.where.child("root"), "fuse_ext"),
            payload_criteria(step.stop, step.where.child("stop"), "fuse_ext"),
            step.intermediates,
        )
        self.fusion.requests.append(request)
        plan = self.fusion.plans.get(self.kernel) if self.fusion.plans is not None else None
        if plan is None:
            # Probe (or a kernel that matched no dispatch): show the dispatch as the
            # strategy sees it here, and stop: the rest needs the plan.
            emit_probe(self.func.value, self.kernel)
            raise _ProbeDone
        sizes, nums = tile_options(step)
        order = as_ints(step.interchange, step.where.child("interchange")) or None
        handles = plan.handles(self.func.value)
        roots = fuse_in_strategy(self.func.value, plan.plan, handles, sizes, order, nums)
        what = ", ".join(r.name for r in plan.plan.roots)
        loops = len(plan.plan.iterators)
        self._produce(ROOT, OpHandle(roots, f"{what} (tiled by fuse_ext)", loops), step)

    def _vectorize(self, step: VectorizeStep) -> None:
        if step.target is None:
            if step.sizes is not None:
                raise RecipeError(step.where, "vector sizes need a 'target' op")
            self.func = vectorize_all(self.func)
            for name in self.handles:
                self.invalidated[name] = f"the vectorize step at {step.where}"
            self.handles.clear()
        else:
            sizes = as_ints(step.sizes, step.where.child("sizes")) if step.sizes else None
            if sizes is None:
                raise RecipeError(step.where, "vectorizing one op needs its vector 'sizes'")
            vectorize_op(self.op(step.target, step.where), sizes)


_SCRIPT_EMITTERS: dict[type[Step], Callable[[_Emitter, Any], None]] = {
    MatchStep: _Emitter._match,
    ProducerStep: _Emitter._producer,
    TileStep: _Emitter._tile,
    FuseIntoStep: _Emitter._fuse_into,
    FuseExtStep: _Emitter._fuse_ext,
    GeneralizeStep: _Emitter._generalize,
    SpecializeStep: _Emitter._specialize,
    DecomposeStep: _Emitter._decompose,
    InterchangeStep: _Emitter._interchange,
    VectorizeStep: _Emitter._vectorize,
    CleanupStep: _Emitter._cleanup,
}
"""How each step that becomes transform IR is emitted (kernel strategies and graph
scripts; a graph-level fuse_ext is a stage of its own). Steps without an entry here or in
:data:`~.graph_rewrites.REWRITES` fail loudly (``tests/test_step_registry.py``)."""


EMITTED_STEPS: frozenset[type[Step]] = frozenset(
    {*_SCRIPT_EMITTERS, *REWRITES, DispatchRegionStep, TileExtStep, FuseOperandsStep}
)
"""Every step type emission knows (graph-level fuse_ext and dispatch_region are stages)."""


def _emit_graph(
    recipe: Recipe, counts: dict[str, set[int]], target: Target, trace: bool
) -> tuple[GraphStage, ...]:
    """The graph schedule's stages: runs of script steps become one script stage; fuse_ext,
    dispatch_region and the Python rewrites are stages of their own."""
    stages: list[GraphStage] = []
    pending: list[Step] = []
    for index, step in enumerate(recipe.graph):
        if type(step) in _SCRIPT_EMITTERS and not isinstance(step, FuseExtStep):
            pending.append(step)
            continue
        if pending:
            stages.append(_script_stage(pending, counts, index - len(pending), trace))
            pending = []
        stages.append(_graph_stage(step, target))
    if pending:
        first = len(recipe.graph) - len(pending)
        stages.append(_script_stage(pending, counts, first, trace))
    return tuple(stages)


def _graph_stage(step: Step, target: Target) -> GraphStage:
    """The stage of a graph step that is not part of a transform script."""
    if isinstance(step, NestStep):
        return FuseExtStage(nest_options(step), step.where)
    if isinstance(step, DispatchRegionStep):
        root = region_criteria(step.root, step.where.child("root"))
        assert root is not None
        stop = region_criteria(step.stop, step.where.child("stop"))
        return DispatchRegionStage(root, stop, step.where)
    if type(step) in REWRITES:
        return rewrite_stage(step, target)
    raise RecipeError(step.where, f"the {step.primitive} step has no graph-schedule emitter")


def _script_stage(
    steps: Sequence[Step], counts: dict[str, set[int]], first: int, trace: bool
) -> ScriptStage:
    """One transform script for graph steps ``first``... (0-based) of the schedule."""
    script = TransformScript()
    seq = script.named_sequence(GRAPH_ENTRY, arg_effect="consumed")
    with seq.building():
        module = OpHandle(seq.argument, "module")
        emitter = _Emitter(GRAPH_SCOPE, module, counts, False, trace=trace, first=first)
        emitter.run(steps)
    seq.finish()
    return ScriptStage(script.text(), tuple(emitter.markers), _label(steps), len(steps))


def _label(steps: Sequence[Step]) -> str:
    """``graph steps match, generalize (recipe.yaml:12-14)``: a script stage's name."""
    names = ", ".join(dict.fromkeys(s.primitive for s in steps))
    lines = [s.where.line for s in steps if s.where.line is not None]
    place = Path(steps[0].where.file).name if steps[0].where.file else ""
    if lines:
        span = str(lines[0]) if lines[0] == lines[-1] else f"{lines[0]}-{lines[-1]}"
        place = f"{place}:{span}" if place else f"line {span}"
    return f"graph steps {names}" + (f" ({place})" if place else "")


def tile_options(step: NestStep) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
    """A resolved nest step's ``tile_sizes`` and ``tile_nums`` (one is ``None``)."""

    def ints(values: tuple[IntOrParam, ...] | None, key: str) -> tuple[int, ...] | None:
        return None if values is None else tuple(as_ints(values, step.where.child(key)))

    return ints(step.tile_sizes, "tile_sizes"), ints(step.tile_nums, "tile_nums")


def nest_options(step: NestStep) -> FuseExtOptions:
    """The payload driver's options for a resolved graph-level fuse_ext, tile_ext or
    fuse_operands step."""
    primitive = step.primitive
    root = None
    if isinstance(step, FuseExtStep | TileExtStep):
        root = payload_criteria(step.root, step.where.child("root"), primitive)
        if root is None:
            raise RecipeError(
                step.where,
                f"{primitive} in a graph schedule needs 'root' (a match of the op(s) to "
                "tile); only kernel schedules default to the dispatch root",
            )
    sizes, nums = tile_options(step)
    options = FuseExtOptions(
        root=root,
        tile_sizes=sizes,
        tile_nums=nums,
        interchange=tuple(as_ints(step.interchange, step.where.child("interchange")))
        if step.interchange is not None
        else None,
        loop=step.loop,
        primitive=cast(NestPrimitive, primitive),
    )
    if not isinstance(step, FusingNestStep):
        return options
    return replace(
        options,
        stop=payload_criteria(step.stop, step.where.child("stop"), primitive),
        intermediates=step.intermediates,
    )


_UNMATCHED_KERNEL = (
    "this kernel schedule matched no dispatch, so IREE would have compiled it with its "
    "default pipeline. Check 'match' (op name, kind, shape, dtype, inputs, used_by, body) against "
    "the dispatch root ops; on Vulkan, matmuls are linalg.generic by then: match kind: contraction"
)


def _emit_kernels(
    recipe: Recipe,
    target: Target,
    counts: dict[str, set[int]],
    printing: _Printing,
    fusion: _Fusion,
) -> tuple[str, list[Marker]]:
    library = KernelLibrary()
    markers: list[Marker] = []
    for kernel in recipe.kernels:
        criteria = criteria_of(kernel.match, kernel.where.child("match"), counts)
        # First: a kernel that ran on no dispatch explains every marker of its steps.
        markers.append(Marker(kernel_applied(kernel.name), kernel.where, _UNMATCHED_KERNEL))
        try:
            if kernel.config is not None and not kernel.config.root:
                if kernel.config.pipeline or kernel.config.workgroup_size:
                    raise ScheduleError(
                        "config: a root: false config sets tile sizes only; the pipeline "
                        "and workgroup_size are the dispatch root's"
                    )
                sizes = _config_sizes(kernel.config)
                library.add_config(
                    kernel.name,
                    criteria,
                    op_lowering_config(target.codegen, sizes),
                    attribute="lowering_config",
                )
            elif kernel.config is not None:
                library.add_config(
                    kernel.name, criteria, _compilation_info(kernel.config, target.codegen)
                )
            else:
                markers.extend(
                    _add_strategy(library, kernel, criteria, target, counts, printing, fusion)
                )
        except ScheduleError as exc:
            raise RecipeError(kernel.where, str(exc)) from exc
    return library.text(), markers


def _add_strategy(
    library: KernelLibrary,
    kernel: KernelSchedule,
    criteria: OpCriteria,
    target: Target,
    counts: dict[str, set[int]],
    printing: _Printing,
    fusion: _Fusion,
) -> list[Marker]:
    emitted: list[Marker] = []

    fuse_steps = [s for s in kernel.steps if isinstance(s, FuseExtStep)]
    if len(fuse_steps) > 1:
        raise RecipeError(fuse_steps[1].where, "a kernel schedule takes one fuse_ext step")

    def body(root: OpHandle, func: OpHandle) -> None:
        scope = kernel_scope(kernel.name)
        emitter = _Emitter(scope, func, counts, kernel_level=True, trace=printing.steps)
        emitter.kernel, emitter.fusion = kernel.name, fusion
        emitter.handles[ROOT] = root
        if printing.steps:
            print_ir(func, step_snapshot(scope, 0))
        try:
            emitter.run(kernel.steps)
        except _ProbeDone:
            emitted.extend(emitter.markers)
            return
        _require_workgroup_forall(kernel)
        if printing.after_schedule:
            print_ir(emitter.func, kernel_after_schedule(kernel.name))
        for step in kernel.steps:
            if isinstance(step, TileStep) and step.mapping == "thread" and not target.is_gpu:
                raise RecipeError(step.where, "mapping: thread needs a GPU target (vulkan)")
        if target.is_gpu:
            if kernel.workgroup_size is None:
                raise RecipeError(
                    kernel.where,
                    "a Vulkan strategy needs 'workgroup_size' [x, y, z]: the threads its "
                    "mapping: thread foralls run on",
                )
            gpu_tail(
                emitter.func, as_ints(kernel.workgroup_size, kernel.where.child("workgroup_size"))
            )
        else:
            cpu_tail(emitter.func)
        emitted.extend(emitter.markers)

    library.add_strategy(kernel.name, criteria, _known_loops(counts, kernel.match), body)
    return emitted


def _require_workgroup_forall(kernel: KernelSchedule) -> None:
    """Refuse a kernel schedule that makes no workgroup-mapped forall: IREE distributes a
    strategy's work to workgroups through that forall, and without one iree-compile
    crashes (a segfault in its workgroup distribution) instead of reporting an error."""
    distributes = any(
        isinstance(s, FuseExtStep)
        or (isinstance(s, TileStep) and s.loop == "forall" and s.mapping == "workgroup")
        for s in kernel.steps
    )
    if not distributes:
        first = next((s for s in kernel.steps if isinstance(s, TileStep)), None)
        where = first.where if first is not None else kernel.where.child("schedule")
        raise RecipeError(
            where,
            "a kernel schedule must distribute its work to workgroups, and no step does: "
            "make the first tile a workgroup forall (tile: {sizes: [...], loop: forall, "
            "mapping: workgroup}) or start with fuse_ext (without one, iree-compile "
            "crashes)",
        )


def _config_sizes(config: LoweringConfig) -> dict[str, list[int]]:
    where = config.where
    return {lvl: as_ints(s, where.child(f"tile_sizes.{lvl}")) for lvl, s in config.tile_sizes}


def _compilation_info(config: LoweringConfig, codegen: Codegen) -> str:
    return compilation_info(
        codegen,
        _config_sizes(config),
        as_ints(config.workgroup_size, config.where.child("workgroup_size")) or None,
        config.pipeline,
    )
