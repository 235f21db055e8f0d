"""The recipe model shared by the YAML and Python front ends.

A :class:`Recipe` names a workload, its targets, an optional *graph* schedule (applied to
the whole module before IREE forms dispatches), *kernel* schedules (each matched to
dispatches by its root op and turned into an IREE kernel strategy or lowering config),
parameters and numeric tolerances. Schedules are lists of typed steps. Integer fields may
hold a parameter reference ``"${NAME}"`` until :func:`tdsched.schedules.params.resolve`
substitutes them; emission only accepts resolved recipes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from tdsched.transform_lib.match import AttrValue

from .errors import Where
from .space import SearchSpace

IntOrParam = int | str
"""An integer, or a ``"${NAME}"`` parameter reference awaiting substitution."""

LoopKind = Literal["for", "forall"]
MappingKind = Literal["workgroup", "thread", "none"]
Intermediates = Literal["yield", "recompute"]
TARGETS: tuple[str, ...] = ("x86", "vulkan")
ROOT = "root"
"""Handle name of the op a kernel schedule matched (its dispatch root)."""


@dataclass(frozen=True)
class MatchSpec:
    """Which ops a kernel schedule (or a ``match`` step) selects. See OpCriteria.

    ``layers`` are layer names or ``*`` / ``?`` patterns over the names of the workload's
    layers (``tdsched.layer``); plan time expands them to exact names. ``attributes``
    pairs a name with the value it must have (``None``: a unit attribute).
    """

    op: str | None = None
    kind: Literal["contraction", "convolution"] | None = None
    shape: tuple[IntOrParam, ...] | None = None
    dtype: str = "f32"
    attributes: tuple[tuple[str, AttrValue | None], ...] = ()
    layers: tuple[str, ...] = ()


@dataclass(frozen=True)
class MatchStep:
    """Bind ``name`` to the ops selected by ``spec`` inside the schedule's scope."""

    spec: MatchSpec
    name: str
    where: Where = field(default_factory=Where)


@dataclass(frozen=True)
class ProducerStep:
    """Bind ``name`` to the op producing operand ``operand`` (inputs first, then inits)."""

    of: str
    operand: IntOrParam
    name: str
    where: Where = field(default_factory=Where)


@dataclass(frozen=True)
class TileStep:
    """Tile the op bound to ``target``; ``loops`` names the resulting loop handle.

    ``loop="for"`` makes one ``scf.for`` per non-zero size (``interchange`` orders them);
    ``loop="forall"`` makes one ``scf.forall`` mapped to ``mapping``.
    """

    sizes: tuple[IntOrParam, ...]
    target: str = ROOT
    loop: LoopKind = "for"
    mapping: MappingKind = "none"
    interchange: tuple[IntOrParam, ...] | None = None
    loops: str | None = None
    where: Where = field(default_factory=Where)


@dataclass(frozen=True)
class FuseIntoStep:
    """Fuse the op bound to ``producer`` into the loop bound to ``loop``."""

    producer: str
    loop: str
    where: Where = field(default_factory=Where)


@dataclass(frozen=True)
class GeneralizeStep:
    """Rewrite the named linalg op bound to ``target`` as ``linalg.generic``."""

    target: str = ROOT
    where: Where = field(default_factory=Where)


@dataclass(frozen=True)
class InterchangeStep:
    """Permute the loops of the ``linalg.generic`` bound to ``target``."""

    permutation: tuple[IntOrParam, ...]
    target: str = ROOT
    where: Where = field(default_factory=Where)


@dataclass(frozen=True)
class VectorizeStep:
    """Vectorize: the whole kernel (no target), or one op with explicit ``sizes``."""

    target: str | None = None
    sizes: tuple[IntOrParam, ...] | None = None
    where: Where = field(default_factory=Where)


@dataclass(frozen=True)
class CleanupStep:
    """Canonicalize, CSE and hoist loop invariants over the schedule's scope.

    ``unit_dims`` also folds unit-extent loops of linalg ops away (after tiling a conv's
    filter window to 1x1, its ``h + kh`` accesses become plain dims it can vectorize).
    """

    canonicalize: bool = True
    cse: bool = True
    licm: bool = True
    unit_dims: bool = False
    where: Where = field(default_factory=Where)


@dataclass(frozen=True)
class FuseExtStep:
    """Tile ``root``'s loops and fuse its producer DAG into the loop nest (ByteIR semantics).

    ``tile_sizes`` has one entry per loop of the root (0 = untiled); parallel dims become
    the fused loop nest, reduction dims an ``scf.for`` around the root alone, so an
    accumulator initializer is never re-run per reduction step. ``stop`` ops stay outside
    at full size; ``intermediates: yield`` returns intermediates used outside the region
    from the loop nest instead of computing them twice. A root matching several ops tiles
    them together in one nest. In a kernel schedule ``root`` defaults to the dispatch
    root and the parallel loops are distributed to workgroups.
    """

    root: MatchSpec | None
    tile_sizes: tuple[IntOrParam, ...]
    interchange: tuple[IntOrParam, ...] | None = None
    stop: MatchSpec | None = None
    intermediates: Intermediates = "yield"
    loop: LoopKind = "forall"
    where: Where = field(default_factory=Where)


@dataclass(frozen=True)
class DispatchRegionStep:
    """Group ``root`` and the ops it depends on (up to ``stop``) into one IREE dispatch.

    A graph step: IREE then compiles the whole group as one kernel, which a kernel
    schedule (typically fuse_ext on the last op) must compile.
    """

    root: MatchSpec
    stop: MatchSpec | None = None
    where: Where = field(default_factory=Where)


@dataclass(frozen=True)
class SpecializeStep:
    """Rewrite the ``linalg.generic`` ops bound to ``target`` as named ops where they are
    one (``linalg.matmul``, ``linalg.fill``, ...); generics that are not stay generic."""

    target: str = ROOT
    where: Where = field(default_factory=Where)


@dataclass(frozen=True)
class FuseElementwiseExtStep:
    """Fuse elementwise generics: producer→consumer (yielding results also used elsewhere)
    and, with ``shared_input``, independent generics reading the same tensor (graph step).

    ``ops`` limits which ops take part; ``max_operands`` bounds a fused op's operands.
    """

    ops: MatchSpec | None = None
    shared_input: bool = True
    max_operands: IntOrParam | None = None
    where: Where = field(default_factory=Where)


@dataclass(frozen=True)
class CollapseDimsStep:
    """Collapse contiguous loops of ``linalg.generic`` ops (graph step).

    ``reassociation`` groups the loops (``((0,), (1, 2))``); ``None`` is ``auto``: the
    maximal groups every operand allows.
    """

    reassociation: tuple[tuple[IntOrParam, ...], ...] | None = None
    ops: MatchSpec | None = None
    where: Where = field(default_factory=Where)


@dataclass(frozen=True)
class Mmt4dStep:
    """Rewrite matmuls as pack + ``linalg.mmt4d`` + unpack with inner tile ``tile``
    (M0, N0, K0) (graph step). ``lower_packs`` (default: on Vulkan) lowers the packs to
    pad/reshape/transpose, which every target compiles."""

    tile: tuple[IntOrParam, ...]
    ops: MatchSpec | None = None
    lower_packs: bool | None = None
    where: Where = field(default_factory=Where)


@dataclass(frozen=True)
class FusePadStep:
    """Make ``tensor.pad`` ops' producers write straight into the padded buffer (graph step).

    ``ops`` selects pads; without it every pad that can be fused is, and the others are
    reported with the reason.
    """

    ops: MatchSpec | None = None
    where: Where = field(default_factory=Where)


GraphRewriteStep = FuseElementwiseExtStep | CollapseDimsStep | Mmt4dStep | FusePadStep
"""Steps that rewrite the whole module in Python before IREE (not transform scripts)."""

Step = (
    MatchStep
    | GraphRewriteStep
    | SpecializeStep
    | DispatchRegionStep
    | FuseExtStep
    | ProducerStep
    | TileStep
    | FuseIntoStep
    | GeneralizeStep
    | InterchangeStep
    | VectorizeStep
    | CleanupStep
)


@dataclass(frozen=True)
class LoweringConfig:
    """Config-only kernel schedule: IREE's own pipeline with our tile sizes.

    ``tile_sizes`` maps a tiling level (``workgroup``, ``thread``/``vector``, ``reduction``)
    to sizes, ``workgroup_size`` is the GPU workgroup (Vulkan), ``pipeline`` names IREE's
    pipeline (defaults per target).
    """

    tile_sizes: tuple[tuple[str, tuple[IntOrParam, ...]], ...]
    workgroup_size: tuple[IntOrParam, ...] | None = None
    pipeline: str | None = None
    where: Where = field(default_factory=Where)


@dataclass(frozen=True)
class KernelSchedule:
    """A schedule for the dispatches whose root op satisfies ``match``.

    Exactly one of ``steps`` (a full transform-dialect strategy) and ``config`` is used.
    ``workgroup_size`` ([x, y, z] threads) is required by Vulkan strategies, whose thread
    foralls are mapped onto it.
    """

    name: str
    match: MatchSpec
    steps: tuple[Step, ...] = ()
    config: LoweringConfig | None = None
    workgroup_size: tuple[IntOrParam, ...] | None = None
    targets: tuple[str, ...] | None = None
    """The targets it applies to (``None``: all the recipe's); kernel schedules are
    target-specific, so a recipe for x86 and Vulkan may give each its own."""
    where: Where = field(default_factory=Where)


@dataclass(frozen=True)
class WorkloadSpec:
    """What a recipe computes: a generated kernel (``generator`` + ``args``), a model
    built with the Python model builder (``model`` + ``args``, lowered ``via`` the builder
    or through ONNX), or a file (``file``: linalg or TOSA ``.mlir``, or ``.onnx``; its
    ``format`` is guessed unless given)."""

    generator: str | None = None
    args: tuple[tuple[str, IntOrParam | str], ...] = ()
    file: str | None = None
    function: str | None = None
    model: str | None = None
    via: str = "builder"
    format: str = "auto"
    base: str | None = None
    """The recipe's folder, against which a ``FILE.py`` model is found."""
    where: Where = field(default_factory=Where)


@dataclass(frozen=True)
class Tolerance:
    """Numeric tolerance: |got - want| <= atol + rtol * |want| elementwise."""

    atol: float = 1e-4
    rtol: float = 1e-4


@dataclass(frozen=True)
class Baseline:
    """What the scheduled module is timed against: IREE's default build of the untouched
    workload, with extra iree-compile ``flags`` (e.g. ``--iree-opt-data-tiling``)."""

    flags: tuple[str, ...] = ()
    where: Where = field(default_factory=Where)

    @property
    def label(self) -> str:
        return "iree-default" + "".join(f" {f}" for f in self.flags)


METRICS: tuple[str, ...] = ("bandwidth",)
"""Extra figures ``tdsched run`` can report: ``bandwidth`` = GB/s of the scheduled and
baseline modules and of a memory-bound probe with the same traffic, timed in the same run."""


@dataclass(frozen=True)
class Recipe:
    """A complete schedule recipe (see the module docstring)."""

    name: str
    workload: WorkloadSpec
    targets: tuple[str, ...] = ("x86",)
    description: str = ""
    parameters: tuple[tuple[str, int | float | str], ...] = ()
    graph: tuple[Step, ...] = ()
    kernels: tuple[KernelSchedule, ...] = ()
    tolerance: Tolerance = field(default_factory=Tolerance)
    baseline: Baseline = field(default_factory=Baseline)
    compile_flags: tuple[str, ...] = ()
    """Extra iree-compile flags for the scheduled build (target-level knobs a schedule
    cannot set, e.g. ``--iree-llvmcpu-enable-ukernels=none``)."""
    metrics: tuple[str, ...] = ()
    space: SearchSpace = field(default_factory=SearchSpace)
    """What ``tdsched sweep`` explores; ``tdsched run`` uses the parameters' defaults."""
    source: str | None = None

    @property
    def parameter_dict(self) -> dict[str, int | float | str]:
        return dict(self.parameters)
