"""Python front end: build a :class:`Recipe` in the order the schedule applies.

Reads like the schedule it builds, in the spirit of Halide schedules::

    r = RecipeBuilder("matmul_x86", workload=generator("matmul", M=1024, N=1024, K=1024))
    r.parameters(TM=64, TN=128)
    k = r.kernel("matmul", match=Match(kind="contraction"))
    fill = k.match(op="linalg.fill", name="fill")
    wg = k.root.tile([P("TM"), P("TN"), 0], loop="forall", mapping="workgroup")
    fill.fuse_into(wg)
    k.root.tile([0, 0, P("TK")])
    k.vectorize()
    recipe = r.build()

Each call records one step of the same model the YAML front end produces, with the
calling file and line, so errors point at the Python line that made the step.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, TypeVar

from tdsched.transform_lib.fuse_ext.plan import Intermediates
from tdsched.transform_lib.match import AttrValue, OpKind
from tdsched.transform_lib.script import LoopKind
from tdsched.transform_lib.tiling import ForallMapping

from ..base.errors import RecipeError, Where
from ..dsl.recipe import (
    Baseline,
    KernelSchedule,
    LoweringConfig,
    Recipe,
    Tolerance,
    WorkloadSpec,
)
from ..dsl.shape_table import ENTRY_OPTIONS, ShapeEntry, ShapeTable
from ..dsl.space import Axis, ParamValue, SearchSpace, build_space, int_range, pow2_range
from ..dsl.steps import (
    STEPS,
    ChannelsLastStep,
    CleanupStep,
    CollapseDimsStep,
    Conv1x1ToMatmulStep,
    DecomposeSoftmaxStep,
    DecomposeStep,
    DispatchRegionStep,
    FuseElementwiseExtStep,
    FuseExtStep,
    FuseIntoStep,
    FuseOperandsStep,
    FusePadStep,
    GeneralizeStep,
    HoistPadStep,
    Im2colStep,
    InterchangeStep,
    MatchStep,
    Mmt4dStep,
    NestStep,
    ProducerStep,
    SpecializeStep,
    Step,
    TileExtStep,
    TileStep,
    VectorizeStep,
    step_info,
)
from ..dsl.values import ROOT, IntOrParam, MatchSpec
from .shipped import find_recipe
from .yaml_frontend import load_shape_table

AttributeSpec = Sequence[str] | Mapping[str, AttrValue]
"""Attribute names (unit attributes) or a mapping of names to required values."""


def Match(
    op: str | None = None,
    *,
    kind: OpKind | None = None,
    shape: Sequence[IntOrParam] | None = None,
    dtype: str = "f32",
    attributes: AttributeSpec = (),
    layer: str | Sequence[str] = (),
    inputs: int | None = None,
    used_by: str | Mapping[str, str | int] | None = None,
    body: str | None = None,
) -> MatchSpec:
    """What a kernel schedule or ``match`` step selects, as in YAML's ``match:`` mapping:
    ``Match(kind="contraction")``, ``Match(layer="block1.conv1")``,
    ``Match(attributes={"hot": True})``."""
    return MatchSpec(
        op=op,
        kind=kind,
        shape=tuple(shape) if shape is not None else None,
        dtype=dtype,
        attributes=_attribute_pairs(attributes),
        layers=(layer,) if isinstance(layer, str) else tuple(layer),
        inputs=inputs,
        **_used_by(used_by),
        body=body,
    )


def _used_by(used_by: str | Mapping[str, str | int] | None) -> dict[str, Any]:
    """``used_by="linalg.generic"`` or ``used_by={"op": "linalg.generic", "inputs": 2}``
    as MatchSpec fields; another mapping is an error at the caller's line."""
    if used_by is None or isinstance(used_by, str):
        return {"used_by": used_by}
    op, inputs = used_by.get("op"), used_by.get("inputs")
    if not isinstance(op, str) or set(used_by) - {"op", "inputs"}:
        raise RecipeError(
            _caller().child("used_by"),
            f"expected a name or {{'op': NAME, 'inputs': N}}, got {dict(used_by)!r}",
        )
    if inputs is not None and not isinstance(inputs, int):
        raise RecipeError(
            _caller().child("used_by").child("inputs"), f"expected an integer, got {inputs!r}"
        )
    return {"used_by": op, "used_by_inputs": inputs}


def _attribute_pairs(attributes: AttributeSpec) -> tuple[tuple[str, AttrValue | None], ...]:
    if isinstance(attributes, Mapping):
        return tuple(attributes.items())
    return tuple((name, None) for name in attributes)


def P(name: str) -> str:
    """A reference to parameter ``name`` (substituted when the recipe is resolved)."""
    return f"${{{name}}}"


def generator(name: str, **args: IntOrParam | str) -> WorkloadSpec:
    """A generated workload (``matmul``, ``matmul_bias_relu``, ``conv2d_nhwc``)."""
    return WorkloadSpec(generator=name, args=tuple(args.items()), where=_caller())


def workload_file(path: str, function: str | None = None, format: str = "auto") -> WorkloadSpec:
    """A file workload: linalg or TOSA ``.mlir``, or ``.onnx`` (``format`` guesses from
    the suffix and contents unless given: linalg, tosa, onnx). ``path`` is relative to
    the calling recipe file."""
    where = _caller()
    file = str(_beside(where) / path)
    return WorkloadSpec(file=file, function=function, format=format, where=where)


def model(name: str, via: str = "builder", **args: IntOrParam | str) -> WorkloadSpec:
    """A model-builder model: a shipped one (``small_cnn``) or ``FILE.py[:FUNCTION]``
    (relative to the calling recipe file), lowered ``via`` the builder or ONNX."""
    where = _caller()
    return WorkloadSpec(
        model=name, args=tuple(args.items()), via=via, base=str(_beside(where)), where=where
    )


def _beside(where: Where) -> Path:
    return Path(where.file).resolve().parent if where.file else Path.cwd()


@dataclass(frozen=True)
class Range:
    """Swept integer values ``start, start+step, ...`` up to and including ``stop``."""

    start: int
    stop: int
    step: int = 1


@dataclass(frozen=True)
class Pow2:
    """Swept powers of two between ``low`` and ``high`` (inclusive)."""

    low: int
    high: int


def _caller() -> Where:
    """The first stack frame outside this module: where the user wrote the step."""
    frame = sys._getframe(1)
    while frame.f_globals.get("__name__") == __name__ and frame.f_back is not None:
        frame = frame.f_back
    return Where(frame.f_code.co_filename, frame.f_lineno)


S = TypeVar("S", bound=Step)


@dataclass
class _Schedule:
    steps: list[Step] = field(default_factory=list)
    handles: int = 0

    def fresh(self, prefix: str) -> str:
        self.handles += 1
        return f"{prefix}{self.handles}"

    def add(self, cls: type[S], **options: Any) -> S:
        """Append a ``cls`` step made from ``options`` (checked by the model), located at
        the user's line."""
        step = cls(**options, where=_caller().child(step_info(cls).primitive))
        self.steps.append(step)
        return step


def _step_class(primitive: str) -> type[Step]:
    if primitive not in STEPS:
        raise RecipeError(
            _caller(), f"unknown primitive {primitive!r}; available: {', '.join(STEPS)}"
        )
    return STEPS[primitive].cls


@dataclass(frozen=True)
class LoopRef:
    """Typed handle to the loops a ``tile`` made (fuse producers into them)."""

    schedule: _Schedule
    name: str


@dataclass(frozen=True)
class OpRef:
    """Typed handle to payload ops; each method appends a step and returns handles.

    Defaults are the step classes' own (:mod:`tdsched.schedules.dsl.steps`)."""

    schedule: _Schedule
    name: str

    def tile(
        self,
        sizes: Sequence[IntOrParam],
        *,
        loop: LoopKind = TileStep.loop,
        mapping: ForallMapping = TileStep.mapping,
        interchange: Sequence[IntOrParam] | None = None,
        loops: str | None = None,
    ) -> LoopRef:
        """Tile this op (one size per loop, 0 = untiled); returns the outermost loop."""
        loops = loops or self.schedule.fresh("loops")
        self.schedule.add(
            TileStep,
            sizes=sizes,
            target=self.name,
            loop=loop,
            mapping=mapping,
            interchange=interchange,
            loops=loops,
        )
        return LoopRef(self.schedule, loops)

    def producer(self, operand: IntOrParam, *, name: str | None = None) -> OpRef:
        """Bind the op producing operand ``operand`` of this op (inputs first, then inits)."""
        name = name or self.schedule.fresh("producer")
        self.schedule.add(ProducerStep, of=self.name, operand=operand, name=name)
        return OpRef(self.schedule, name)

    def fuse_into(self, loop: LoopRef) -> OpRef:
        """Fuse this producer into ``loop``, computing only the slices the loop uses."""
        self.schedule.add(FuseIntoStep, producer=self.name, loop=loop.name)
        return self

    def generalize(self) -> OpRef:
        """Rewrite this named linalg op as ``linalg.generic``."""
        self.schedule.add(GeneralizeStep, target=self.name)
        return self

    def specialize(self) -> OpRef:
        """Rewrite these generics as named ops where they are one (e.g. ``linalg.matmul``)."""
        self.schedule.add(SpecializeStep, target=self.name)
        return self

    def decompose(self) -> OpRef:
        """Rewrite this named 2-D convolution, tiled to one window row and one output row,
        as its 1-D form (vectorized with the window unrolled)."""
        self.schedule.add(DecomposeStep, target=self.name)
        return self

    def interchange(self, permutation: Sequence[IntOrParam]) -> OpRef:
        """Permute this generic's loops."""
        self.schedule.add(InterchangeStep, permutation=permutation, target=self.name)
        return self

    def vectorize(self, sizes: Sequence[IntOrParam]) -> None:
        """Vectorize this op with explicit vector sizes."""
        self.schedule.add(VectorizeStep, target=self.name, sizes=sizes)

    def step(self, primitive: str, **options: Any) -> OpRef:
        """Any registered primitive acting on this op (``target`` = this handle), with its
        YAML options as keywords (``as`` is ``name``): ``op.step("generalize")``."""
        self.schedule.add(_step_class(primitive), target=self.name, **options)
        return self


class ScheduleBuilder:
    """Steps over one scope: the whole module (graph) or one kernel."""

    def __init__(self, schedule: _Schedule) -> None:
        self._schedule = schedule

    def match(
        self,
        op: str | None = None,
        *,
        attributes: AttributeSpec = (),
        layer: str | Sequence[str] = (),
        name: str | None = None,
    ) -> OpRef:
        """Bind a handle to the ops named ``op`` (and/or carrying ``attributes``, and/or
        belonging to ``layer``)."""
        name = name or self._schedule.fresh("ops")
        spec = Match(op, attributes=attributes, layer=layer)
        self._schedule.add(MatchStep, spec=spec, name=name)
        return OpRef(self._schedule, name)

    def fuse_ext(
        self,
        root: MatchSpec | None,
        tile_sizes: Sequence[IntOrParam] | None = None,
        *,
        tile_nums: Sequence[IntOrParam] | None = None,
        interchange: Sequence[IntOrParam] | None = None,
        stop: MatchSpec | None = None,
        intermediates: Intermediates = FuseExtStep.intermediates,
        loop: LoopKind = FuseExtStep.loop,
    ) -> None:
        """Tile ``root`` and fuse its producer DAG into the loop nest (see fuse_ext docs).

        In a kernel schedule, ``root=None`` means the dispatch root; afterwards
        ``kernel.root`` refers to the tiled root(s). Give ``tile_sizes`` (trailing loops
        left out are not tiled) or ``tile_nums`` (tiles per loop, in ``interchange`` order),
        not both.
        """
        self._nest(
            FuseExtStep,
            tile_sizes,
            tile_nums,
            interchange,
            loop,
            root=root,
            stop=stop,
            intermediates=intermediates,
        )

    def tile_ext(
        self,
        root: MatchSpec,
        tile_sizes: Sequence[IntOrParam] | None = None,
        *,
        tile_nums: Sequence[IntOrParam] | None = None,
        interchange: Sequence[IntOrParam] | None = None,
        loop: LoopKind = TileExtStep.loop,
    ) -> None:
        """Tile ``root`` alone, reduction-aware (graph schedules; see tile_ext docs)."""
        self._nest(TileExtStep, tile_sizes, tile_nums, interchange, loop, root=root)

    def fuse_operands(
        self,
        tile_sizes: Sequence[IntOrParam] | None = None,
        *,
        stop: MatchSpec | None = None,
        intermediates: Intermediates = FuseOperandsStep.intermediates,
        tile_nums: Sequence[IntOrParam] | None = None,
        interchange: Sequence[IntOrParam] | None = None,
        loop: LoopKind = FuseOperandsStep.loop,
    ) -> None:
        """fuse_ext with the function's returned values' ops as roots (graph schedules)."""
        self._nest(
            FuseOperandsStep,
            tile_sizes,
            tile_nums,
            interchange,
            loop,
            stop=stop,
            intermediates=intermediates,
        )

    def _nest(
        self,
        cls: type[NestStep],
        tile_sizes: Sequence[IntOrParam] | None,
        tile_nums: Sequence[IntOrParam] | None,
        interchange: Sequence[IntOrParam] | None,
        loop: LoopKind,
        **options: Any,
    ) -> None:
        """Add a loop-nest step (fuse_ext, tile_ext, fuse_operands) with its own options."""
        self._schedule.add(
            cls,
            tile_sizes=tile_sizes,
            tile_nums=tile_nums,
            interchange=interchange,
            loop=loop,
            **options,
        )

    def dispatch_region(self, root: MatchSpec, *, stop: MatchSpec | None = None) -> None:
        """Group ``root`` and the ops it depends on into one dispatch (graph schedules)."""
        self._schedule.add(DispatchRegionStep, root=root, stop=stop)

    def fuse_elementwise_ext(
        self,
        *,
        shared_input: bool = FuseElementwiseExtStep.shared_input,
        max_operands: IntOrParam | None = None,
        ops: MatchSpec | None = None,
    ) -> None:
        """Fuse elementwise ops to a fixpoint, incl. shared-input groups (graph schedules)."""
        self._schedule.add(
            FuseElementwiseExtStep, ops=ops, shared_input=shared_input, max_operands=max_operands
        )

    def collapse_dims(
        self,
        reassociation: Sequence[Sequence[IntOrParam]] | Literal["auto"] = "auto",
        *,
        ops: MatchSpec | None = None,
    ) -> None:
        """Collapse contiguous loops of generics (``"auto"``: maximal groups; graph schedules)."""
        groups = None if reassociation == "auto" else reassociation
        self._schedule.add(CollapseDimsStep, reassociation=groups, ops=ops)

    def mmt4d(
        self,
        tile: Sequence[IntOrParam],
        *,
        ops: MatchSpec | None = None,
        lower_packs: bool | None = None,
        fuse_unpack: bool = False,
    ) -> None:
        """Rewrite matmuls as pack + linalg.mmt4d + unpack, inner tile (M0, N0, K0);
        ``fuse_unpack`` puts each mmt4d and its unpack in one dispatch."""
        self._schedule.add(
            Mmt4dStep, tile=tile, ops=ops, lower_packs=lower_packs, fuse_unpack=fuse_unpack
        )

    def fuse_pad(self, *, ops: MatchSpec | None = None) -> None:
        """Let pads' producers write into the padded buffer (graph schedules)."""
        self._schedule.add(FusePadStep, ops=ops)

    def hoist_pad(self, *, ops: MatchSpec | None = None) -> None:
        """Let pads' pointwise producers compute the border from padded inputs, masked
        back to the pad value (graph schedules)."""
        self._schedule.add(HoistPadStep, ops=ops)

    def conv1x1_to_matmul(self, *, ops: MatchSpec | None = None) -> None:
        """Rewrite 1x1 convolutions (any stride) as linalg.matmul (graph schedules)."""
        self._schedule.add(Conv1x1ToMatmulStep, ops=ops)

    def decompose_softmax(self, *, ops: MatchSpec | None = None) -> None:
        """Rewrite linalg.softmax as row max, exp, row sum and scale, exp computed once
        (graph schedules)."""
        self._schedule.add(DecomposeSoftmaxStep, ops=ops)

    def channels_last(self, *, ops: MatchSpec | None = None) -> None:
        """Run an NCHW network in NHWC: its convolutions and poolings converted, the
        layout moved through the ops between them (graph schedules)."""
        self._schedule.add(ChannelsLastStep, ops=ops)

    def im2col(self, *, ops: MatchSpec | None = None) -> None:
        """Rewrite convolutions as a gather of their windows and linalg.matmul (graph
        schedules)."""
        self._schedule.add(Im2colStep, ops=ops)

    def vectorize(self) -> None:
        """Vectorize every op in scope (invalidates op handles: do it after tiling)."""
        self._schedule.add(VectorizeStep)

    def cleanup(
        self,
        *,
        canonicalize: bool = CleanupStep.canonicalize,
        cse: bool = CleanupStep.cse,
        licm: bool = CleanupStep.licm,
        unit_dims: bool = CleanupStep.unit_dims,
    ) -> None:
        """Canonicalize, CSE and hoist loop invariants (``unit_dims``: fold unit loops)."""
        self._schedule.add(
            CleanupStep, canonicalize=canonicalize, cse=cse, licm=licm, unit_dims=unit_dims
        )

    def step(self, primitive: str, **options: Any) -> None:
        """Any registered primitive, with its YAML options as keywords (``as`` is
        ``name``, a match step's selection is ``spec=Match(...)``):
        ``graph.step("fuse_pad", ops=Match("tensor.pad"))``."""
        self._schedule.add(_step_class(primitive), **options)


class KernelBuilder(ScheduleBuilder):
    """A kernel schedule; :attr:`root` is the dispatch root op it matched."""

    def __init__(self, schedule: _Schedule) -> None:
        super().__init__(schedule)
        self.root = OpRef(schedule, ROOT)


class RecipeBuilder:
    """Builds a :class:`Recipe`; see the module docstring for an example."""

    def __init__(
        self,
        name: str,
        *,
        workload: WorkloadSpec,
        targets: Sequence[str] = ("x86",),
        description: str = "",
    ) -> None:
        self._recipe = Recipe(
            name=name,
            workload=workload,
            targets=tuple(targets),
            description=description,
            source=_caller().file,
        )
        self._graph = _Schedule()
        self._kernels: list[tuple[KernelSchedule, _Schedule | None]] = []
        self._axes: list[Axis] = []
        self._constraints: list[tuple[str, Where]] = []
        self._shapes: ShapeTable | None = None

    def parameters(self, **defaults: ParamValue) -> RecipeBuilder:
        """Declare parameters and their defaults (referenced with ``P("NAME")``)."""
        self._recipe = replace(
            self._recipe, parameters=(*self._recipe.parameters, *defaults.items())
        )
        return self

    def space(self, **axes: Sequence[ParamValue] | Range | Pow2) -> RecipeBuilder:
        """Sweep parameters over values: a list, ``Range(start, stop, step)`` or
        ``Pow2(low, high)``. Each must also be declared with ``parameters``."""
        where = _caller()
        for name, spec in axes.items():
            here = where.child(f"space.{name}")
            if isinstance(spec, Range):
                values: tuple[ParamValue, ...] = int_range(spec.start, spec.stop, spec.step, here)
            elif isinstance(spec, Pow2):
                values = pow2_range(spec.low, spec.high, here)
            else:
                values = tuple(spec)
            self._axes.append(Axis(name, values, here))
        return self

    def constrain(self, *expressions: str) -> RecipeBuilder:
        """Constraints every swept candidate must satisfy, e.g. ``"TM * TN <= 16384"``."""
        where = _caller()
        self._constraints += [(e, where.child(f"constraints[{e!r}]")) for e in expressions]
        return self

    def tolerance(self, *, atol: float, rtol: float) -> RecipeBuilder:
        """Numeric tolerance for the reference check."""
        self._recipe = replace(self._recipe, tolerance=Tolerance(atol, rtol))
        return self

    def baseline(self, *, flags: Sequence[str]) -> RecipeBuilder:
        """Time against IREE's default build with extra iree-compile ``flags``."""
        self._recipe = replace(self._recipe, baseline=Baseline(tuple(flags), where=_caller()))
        return self

    def compile_flags(self, *flags: str) -> RecipeBuilder:
        """Extra iree-compile flags for the scheduled build (target-level knobs)."""
        self._recipe = replace(self._recipe, compile_flags=tuple(flags))
        return self

    def shapes(
        self,
        key: Sequence[str],
        entries: Sequence[Mapping[str, ParamValue | bool]],
        rule: Literal["nearest", "exact"] = "nearest",
    ) -> RecipeBuilder:
        """Tuned parameters per workload shape (:mod:`.shape_table`): each entry maps the
        ``key`` parameters to their values, then tuned parameters to theirs; the keys
        ``iree_default`` (bool), ``threads`` (int: the CPU thread count it was tuned for),
        ``isa`` (str: the x86 vector ISA it was tuned for), ``cpu`` (str: the CPU model it
        was tuned on, as LLVM names it), ``gpu`` (str: the Vulkan GPU it was tuned for, as
        ``--gpu`` names it, or ``generic``) and ``note`` (str) are the entry's options."""
        where = _caller()
        built = []
        for entry in entries:
            missing = [name for name in key if name not in entry]
            if missing:
                raise RecipeError(where, f"shapes entry {dict(entry)} lacks key value(s) {missing}")
            shape = []
            for name in key:
                value = entry[name]
                if not isinstance(value, int | str) or isinstance(value, bool):
                    raise RecipeError(where, f"shapes entry: {name} must be an integer or a string")
                shape.append((name, value))
            params = tuple(
                (k, v)
                for k, v in entry.items()
                if k not in key and k not in ENTRY_OPTIONS and not isinstance(v, bool)
            )
            threads = entry.get("threads")
            if threads is not None and (not isinstance(threads, int) or isinstance(threads, bool)):
                raise RecipeError(
                    where, f"shapes entry: threads must be an integer, got {threads!r}"
                )
            isa, cpu, gpu = entry.get("isa"), entry.get("cpu"), entry.get("gpu")
            built.append(
                ShapeEntry(
                    shape=tuple(shape),
                    params=params,
                    iree_default=bool(entry.get("iree_default", False)),
                    note=str(entry.get("note", "")),
                    threads=threads,
                    isa=None if isa is None else str(isa),
                    cpu=None if cpu is None else str(cpu),
                    gpu=None if gpu is None else str(gpu),
                    where=where,
                )
            )
        self._shapes = ShapeTable(tuple(key), tuple(built), rule, where)
        return self

    def shapes_from(self, recipe: str) -> RecipeBuilder:
        """Use the ``shapes`` table of a YAML recipe: a path relative to this file (e.g.
        the one ``tdsched sweep --shape`` wrote), or a shipped recipe's name (which
        still resolves in a frozen copy of this file written elsewhere)."""
        beside = _beside(_caller()) / recipe
        self._shapes = load_shape_table(beside if beside.is_file() else find_recipe(recipe))
        return self

    def metrics(self, *names: str) -> RecipeBuilder:
        """Extra figures ``tdsched run`` reports (``"bandwidth"``)."""
        self._recipe = replace(self._recipe, metrics=tuple(names))
        return self

    @property
    def graph(self) -> ScheduleBuilder:
        """The whole-module schedule, applied before IREE forms dispatches."""
        return ScheduleBuilder(self._graph)

    def kernel(
        self,
        name: str,
        *,
        match: MatchSpec,
        workgroup_size: Sequence[IntOrParam] | None = None,
        targets: Sequence[str] | None = None,
        when: str | None = None,
    ) -> KernelBuilder:
        """Start a kernel schedule (a transform-dialect strategy) for matching dispatches
        (on ``targets`` only, when given; only where the condition ``when`` on the
        parameters holds, when given)."""
        schedule = _Schedule()
        kernel = KernelSchedule(
            name=name,
            match=match,
            workgroup_size=tuple(workgroup_size) if workgroup_size is not None else None,
            targets=tuple(targets) if targets is not None else None,
            when=when,
            where=_caller(),
        )
        self._kernels.append((kernel, schedule))
        return KernelBuilder(schedule)

    def kernel_config(
        self,
        name: str,
        *,
        match: MatchSpec,
        tile_sizes: dict[str, Sequence[IntOrParam]],
        workgroup_size: Sequence[IntOrParam] | None = None,
        pipeline: str | None = None,
        targets: Sequence[str] | None = None,
        when: str | None = None,
        root: bool = True,
    ) -> None:
        """A config-only kernel schedule: IREE's own pipeline with these tile sizes
        (``targets`` and ``when`` as in :meth:`kernel`; ``root=False``: tile sizes for a
        non-root op of a dispatch whose root another kernel configures, as YAML's
        ``root: false``)."""
        where = _caller()
        config = LoweringConfig(
            tile_sizes=tuple((k, tuple(v)) for k, v in tile_sizes.items()),
            workgroup_size=tuple(workgroup_size) if workgroup_size is not None else None,
            pipeline=pipeline,
            root=root,
            where=where,
        )
        self._kernels.append(
            (
                KernelSchedule(
                    name=name,
                    match=match,
                    config=config,
                    targets=tuple(targets) if targets is not None else None,
                    when=when,
                    where=where,
                ),
                None,
            )
        )

    def build(self) -> Recipe:
        """The recipe, as the YAML front end would produce it."""
        kernels = tuple(
            replace(k, steps=tuple(s.steps)) if s is not None else k for k, s in self._kernels
        )
        space = build_space(self._axes, self._constraints, self._recipe.parameter_dict)
        return replace(
            self._recipe,
            graph=tuple(self._graph.steps),
            kernels=kernels,
            space=space,
            shapes=self._shapes,
        )


def frozen(recipe: Recipe, params: Mapping[str, ParamValue], target: str) -> Recipe:
    """``recipe`` with ``params`` as its defaults, no space or shape table (whose entries
    would override them), and ``target`` first (what a sweep writes as its best)."""
    defaults = {**recipe.parameter_dict, **params}
    targets = (target, *(t for t in recipe.targets if t != target))
    return replace(
        recipe,
        parameters=tuple(defaults.items()),
        space=SearchSpace(),
        shapes=None,
        targets=targets,
    )
