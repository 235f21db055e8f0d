"""The schedule steps: one keyword-only dataclass per primitive, registered by name.

Each step's fields are declared once with :func:`~.options.option`; that metadata drives
the YAML front end, validation (every step checks its options when it is made and again
when parameters are substituted, whichever front end made it), the Python API's generic
``step()``, the docs' option tables and the JSON Schema. Adding a primitive means adding
its class here (``@register``), its emitter (``emit.py`` or ``graph_rewrites.py``), its
doc page and its tests; see ``docs/architecture.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar, TypeVar, get_args

from tdsched.transform_lib.fuse_ext.plan import Intermediates
from tdsched.transform_lib.script import LoopKind
from tdsched.transform_lib.tiling import ForallMapping

from ..base.errors import RecipeError, Where
from .options import Kind, check_options, option
from .values import ROOT, IntOrParam, MatchSpec


class Scope(Enum):
    """Where a step may appear: a graph schedule, a kernel schedule, or both."""

    ANY = "graph or kernel schedules"
    GRAPH = "graph schedules"
    KERNEL = "kernel schedules"


@dataclass(frozen=True)
class StepInfo:
    """A registered primitive: its recipe name, step class, where it may appear (and why
    not elsewhere, as the error says it)."""

    primitive: str
    cls: type[StepBase]
    scope: Scope
    elsewhere: str

    @property
    def summary(self) -> str:
        """The first line of the step's docstring."""
        return (self.cls.__doc__ or "").strip().splitlines()[0]


STEPS: dict[str, StepInfo] = {}
"""Every primitive by recipe name, in the order the docs list them."""

S = TypeVar("S", bound="type[StepBase]")


def register(primitive: str, scope: Scope = Scope.ANY, elsewhere: str = "") -> Callable[[S], S]:
    """Register a step class as ``primitive``; ``elsewhere`` explains why it is refused
    outside ``scope``."""

    def add(cls: S) -> S:
        STEPS[primitive] = StepInfo(primitive, cls, scope, elsewhere)
        return cls

    return add


def step_info(step: StepBase | type[StepBase]) -> StepInfo:
    """The registry entry of a step (or step class)."""
    cls = step if isinstance(step, type) else type(step)
    for info in STEPS.values():
        if info.cls is cls:
            return info
    raise LookupError(f"{cls.__name__} is not a registered step")


@dataclass(frozen=True, kw_only=True)
class StepBase:
    """Common to every step: where it was written and ``when`` it applies (a condition on
    the recipe's parameters, checked when the recipe is made and evaluated when it is
    resolved). Options are checked on creation."""

    where: Where = field(default_factory=Where)
    when: str | None = option(
        "leave the step out unless this condition on the parameters holds "
        "(docs/recipes.md#conditional-steps-and-kernels)",
        Kind.CONDITION,
        default=None,
    )

    binds_only: ClassVar[bool] = False
    """The step only binds a handle (match, producer): it never changes the payload, so
    ``tdsched explain`` does not flag it as a step that changed nothing."""

    def __post_init__(self) -> None:
        check_options(self, self.where)

    @property
    def primitive(self) -> str:
        return step_info(self).primitive


def _target(default: str | None = ROOT, doc: str = "handle of the op to act on") -> Any:
    """The ``target`` option: a handle, by default the kernel's root op."""
    return option(doc, Kind.HANDLE, default=default)


def _ops() -> Any:
    """The ``ops`` option of a graph rewrite: which ops take part."""
    return option(
        "which ops it acts on ({op, attributes, layer}); default all", Kind.OPS, default=None
    )


def _at_least(low: int, what: str) -> Callable[[IntOrParam | None], str | None]:
    def check(value: IntOrParam | None) -> str | None:
        return f"{what}, got {value}" if isinstance(value, int) and value < low else None

    return check


def _inner_tile(tile: tuple[IntOrParam, ...]) -> str | None:
    if len(tile) != 3:
        return f"expected the inner tile [M0, N0, K0], got {len(tile)} sizes"
    if any(isinstance(size, int) and size < 1 for size in tile):
        return f"inner tile sizes must be >= 1, got {list(tile)}"
    return None


@register("match")
@dataclass(frozen=True, kw_only=True)
class MatchStep(StepBase):
    """Bind a handle to the ops a selection picks inside the schedule's scope."""

    binds_only: ClassVar[bool] = True

    spec: MatchSpec = option(
        "which ops to bind: any of these keys, as in a kernel's match", Kind.MATCH, inline=True
    )
    name: str = option("handle name to bind the matched ops to", Kind.HANDLE, key="as")


@register("producer")
@dataclass(frozen=True, kw_only=True)
class ProducerStep(StepBase):
    """Bind a handle to the op producing one operand of another op."""

    binds_only: ClassVar[bool] = True

    of: str = option("handle of the consumer", Kind.HANDLE, default=ROOT)
    operand: IntOrParam = option("operand number (inputs first, then inits)", Kind.INT)
    name: str = option("handle name to bind the producer to", Kind.HANDLE, key="as")


@register(
    "tile",
    Scope.KERNEL,
    "tile in a graph schedule would leave host-level loops, which IREE cannot compile; "
    "tile inside a kernel schedule",
)
@dataclass(frozen=True, kw_only=True)
class TileStep(StepBase):
    """Tile an op into scf.for loops (one per non-zero size) or one scf.forall."""

    sizes: tuple[IntOrParam, ...] = option("one tile size per loop, 0 = untiled", Kind.INTS)
    target: str = _target()
    loop: LoopKind = option("loop kind", Kind.CHOICE, default="for", choices=get_args(LoopKind))
    mapping: ForallMapping = option(
        "what a forall is mapped to (forall only)",
        Kind.CHOICE,
        default="none",
        choices=get_args(ForallMapping),
    )
    interchange: tuple[IntOrParam, ...] | None = option(
        "loop order (for only)", Kind.INTS, default=None
    )
    loops: str | None = option("handle name for the outermost loop", Kind.HANDLE, default=None)


@register("fuse_into")
@dataclass(frozen=True, kw_only=True)
class FuseIntoStep(StepBase):
    """Fuse a producer into a loop, computing only the slices the loop uses."""

    producer: str = option("handle of the op to fuse", Kind.HANDLE)
    loop: str = option("handle of the loop", Kind.HANDLE)


@dataclass(frozen=True, kw_only=True)
class NestStep(StepBase):
    """What every step that builds a ByteIR-style tiled loop nest takes: how to tile the
    root(s) and which loops to make (fuse_ext, tile_ext, fuse_operands)."""

    tile_sizes: tuple[IntOrParam, ...] | None = option(
        "one size per loop of the root, 0 = untiled; trailing loops left out are not tiled",
        Kind.INTS,
        default=None,
    )
    tile_nums: tuple[IntOrParam, ...] | None = option(
        "instead of tile_sizes: tiles per loop, in interchange order (size = static range / "
        "number, rounded up)",
        Kind.INTS,
        default=None,
    )
    interchange: tuple[IntOrParam, ...] | None = option(
        "loop order, outermost first: the tiled parallel loops then the reduction ones, or "
        "(graph level) the reductions first; a forall keeps its parallel loops in order",
        Kind.INTS,
        default=None,
    )
    loop: LoopKind = option(
        "loop kind of the parallel nest",
        Kind.CHOICE,
        default="forall",
        choices=get_args(LoopKind),
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if (self.tile_sizes is None) == (self.tile_nums is None):
            raise RecipeError(
                self.where,
                f"{self.primitive} needs one of 'tile_sizes' (a size per loop) and "
                "'tile_nums' (a number of tiles per loop), "
                f"{'not both' if self.tile_sizes else 'got neither'}",
            )


@dataclass(frozen=True, kw_only=True)
class FusingNestStep(NestStep):
    """A loop nest that producers are fused into: where fusion stops, and what happens
    to intermediates used outside it (fuse_ext, fuse_operands)."""

    stop: MatchSpec | None = option(
        "ops fusion stops at (kept outside at full size)", Kind.MATCH, default=None
    )
    intermediates: Intermediates = option(
        "intermediates used outside: yield them from the loop nest, or recompute",
        Kind.CHOICE,
        default="yield",
        choices=get_args(Intermediates),
    )


@register("fuse_ext")
@dataclass(frozen=True, kw_only=True)
class FuseExtStep(FusingNestStep):
    """Tile a root's loops and fuse its producer DAG into the loop nest (ByteIR semantics).

    ``tile_sizes`` has one entry per loop of the root (0 = untiled; loops left out at the
    end are not tiled), or ``tile_nums`` a number of tiles per loop; parallel dims become
    the fused loop nest, reduction dims an ``scf.for`` around the root alone, so an
    accumulator initializer is never re-run per reduction step. ``stop`` ops stay outside
    at full size; ``intermediates: yield`` returns intermediates used outside the region
    from the loop nest instead of computing them twice. A root matching several ops tiles
    them together in one nest. In a kernel schedule ``root`` defaults to the dispatch
    root and the parallel loops are distributed to workgroups.
    """

    root: MatchSpec | None = option(
        "the op(s) to tile (kernel schedules: default the dispatch root)",
        Kind.MATCH,
        default=None,
    )


@register(
    "tile_ext",
    Scope.GRAPH,
    "tile_ext tiles ops on the whole payload for inspection (its loops stay on the host): "
    "put it under 'graph'; in a kernel schedule use 'tile' or fuse_ext",
)
@dataclass(frozen=True, kw_only=True)
class TileExtStep(NestStep):
    """Tile root op(s) alone, reduction-aware, on the payload (ByteIR's tile_ext).

    The loops are those of fuse_ext, without fusion: parallel dims form the nest (one
    nest for several roots with the same loops), reduction dims an ``scf.for`` around the
    root, so its accumulator's initializer stays outside; the reductions may be tiled
    alone or put outermost. Checked with ``tdsched check`` / ``tdsched run``.
    """

    root: MatchSpec = option("the op(s) to tile", Kind.MATCH)


@register(
    "fuse_operands",
    Scope.GRAPH,
    "fuse_operands takes its roots from the payload function's return: put it under "
    "'graph'; in a kernel schedule use fuse_ext, whose root defaults to the dispatch root",
)
@dataclass(frozen=True, kw_only=True)
class FuseOperandsStep(FusingNestStep):
    """fuse_ext whose roots are the ops producing the function's returned values.

    All of them are tiled in one loop nest (they must share its loops) and their producer
    DAG is fused into it, with fuse_ext's semantics; a returned value that another
    returned op consumes is fused and yielded.
    """


@register(
    "dispatch_region",
    Scope.GRAPH,
    "this step rewrites the whole module before IREE forms dispatches: put it under 'graph'",
)
@dataclass(frozen=True, kw_only=True)
class DispatchRegionStep(StepBase):
    """Group an op and the ops it depends on (up to a stop set) into one IREE dispatch.

    IREE then compiles the whole group as one kernel, which a kernel schedule (typically
    fuse_ext on the last op) must compile.
    """

    root: MatchSpec = option("the last op(s) of the group", Kind.MATCH)
    stop: MatchSpec | None = option(
        "ops the group stops at (they stay outside)", Kind.MATCH, default=None
    )


@register("generalize")
@dataclass(frozen=True, kw_only=True)
class GeneralizeStep(StepBase):
    """Rewrite a named linalg op as linalg.generic."""

    target: str = _target()


@register("specialize")
@dataclass(frozen=True, kw_only=True)
class SpecializeStep(StepBase):
    """Rewrite linalg.generic ops as named ops where they are one (linalg.matmul, ...).

    Generics that are not a named op stay generic.
    """

    target: str = _target()


@register("decompose")
@dataclass(frozen=True, kw_only=True)
class DecomposeStep(StepBase):
    """Rewrite a named 2-D convolution tiled to one window and output row as its 1-D form.

    vectorize lowers the 1-D form with the window unrolled, each input loaded once.
    """

    target: str = _target()


_GRAPH_REWRITE = (
    "this step rewrites the whole module before IREE forms dispatches: put it under 'graph'"
)


@register("fuse_elementwise_ext", Scope.GRAPH, _GRAPH_REWRITE)
@dataclass(frozen=True, kw_only=True)
class FuseElementwiseExtStep(StepBase):
    """Fuse elementwise generics: producer to consumer, and independent ones reading one tensor.

    Results also used elsewhere are yielded from the fused op; ``shared_input`` also fuses
    independent generics reading the same tensor.
    """

    ops: MatchSpec | None = _ops()
    shared_input: bool = option(
        "also fuse independent ops reading one tensor", Kind.FLAG, default=True
    )
    max_operands: IntOrParam | None = option(
        "largest operand count of a fused op (default unbounded)",
        Kind.INT,
        default=None,
        check=_at_least(2, "a fused op has at least 2 operands (an input and an output)"),
    )


@register("collapse_dims", Scope.GRAPH, _GRAPH_REWRITE)
@dataclass(frozen=True, kw_only=True)
class CollapseDimsStep(StepBase):
    """Collapse contiguous loops of linalg.generic ops.

    ``reassociation`` groups the loops (``((0,), (1, 2))``); ``None`` (YAML ``auto``) is
    the maximal groups every operand allows.
    """

    reassociation: tuple[tuple[IntOrParam, ...], ...] | None = option(
        "auto, or loop groups such as [[0], [1, 2]]", Kind.INT_GROUPS, default=None
    )
    ops: MatchSpec | None = _ops()


@register("mmt4d", Scope.GRAPH, _GRAPH_REWRITE)
@dataclass(frozen=True, kw_only=True)
class Mmt4dStep(StepBase):
    """Rewrite matmuls as pack + linalg.mmt4d + unpack with inner tile (M0, N0, K0).

    ``lower_packs`` (default: on Vulkan) lowers the packs to pad/reshape/transpose, which
    every target compiles. ``fuse_unpack`` groups each mmt4d with its unpack and
    elementwise consumers in one dispatch.
    """

    tile: tuple[IntOrParam, ...] = option("inner tile [M0, N0, K0]", Kind.INTS, check=_inner_tile)
    ops: MatchSpec | None = _ops()
    lower_packs: bool | None = option(
        "lower pack/unpack (default: true on vulkan)", Kind.FLAG, default=None
    )
    fuse_unpack: bool = option(
        "put each mmt4d, its unpack and the elementwise ops after it in one dispatch, as "
        "IREE data tiling does (needs unlowered packs)",
        Kind.FLAG,
        default=False,
    )


@register("conv1x1_to_matmul", Scope.GRAPH, _GRAPH_REWRITE)
@dataclass(frozen=True, kw_only=True)
class Conv1x1ToMatmulStep(StepBase):
    """Rewrite convolutions with a 1x1 filter (any stride) as linalg.matmul.

    Without ``ops`` every 1x1 convolution is rewritten and the others are reported with
    the reason; the matmuls can then be packed by ``mmt4d``.
    """

    ops: MatchSpec | None = _ops()


@register("im2col", Scope.GRAPH, _GRAPH_REWRITE)
@dataclass(frozen=True, kw_only=True)
class Im2colStep(StepBase):
    """Rewrite convolutions as a gather of their input windows and a linalg.matmul.

    Without ``ops`` every convolution with a filter larger than 1x1 is rewritten and the
    others are reported with the reason; the matmuls can then be packed by ``mmt4d``.
    """

    ops: MatchSpec | None = _ops()


@register("channels_last", Scope.GRAPH, _GRAPH_REWRITE)
@dataclass(frozen=True, kw_only=True)
class ChannelsLastStep(StepBase):
    """Run an NCHW network in NHWC: convert its convolutions and poolings, then move
    the layout through the elementwise ops, pads and concatenations between them.

    The layout is converted once where the network's input first meets a converted op
    and once at its outputs. Without ``ops`` every NCHW convolution and pooling with
    static shapes is converted; with it only those selected (the layout still moves
    through the whole module).
    """

    ops: MatchSpec | None = _ops()


@register("decompose_softmax", Scope.GRAPH, _GRAPH_REWRITE)
@dataclass(frozen=True, kw_only=True)
class DecomposeSoftmaxStep(StepBase):
    """Rewrite linalg.softmax as row max, exp, row sum and scale, computing exp once.

    IREE's own softmax dispatch computes exp twice per element; this form keeps the
    exponentials in memory between two dispatches. Without ``ops`` every softmax with
    static shapes is rewritten, and the others are reported with the reason.
    """

    ops: MatchSpec | None = _ops()


@register("fuse_pad", Scope.GRAPH, _GRAPH_REWRITE)
@dataclass(frozen=True, kw_only=True)
class FusePadStep(StepBase):
    """Make tensor.pad ops' producers write straight into the padded buffer.

    Without ``ops`` every pad that can be fused is, and the others are reported with the
    reason.
    """

    ops: MatchSpec | None = _ops()


@register("hoist_pad", Scope.GRAPH, _GRAPH_REWRITE)
@dataclass(frozen=True, kw_only=True)
class HoistPadStep(StepBase):
    """Let a padded tensor's pointwise producers compute its border, from padded inputs.

    The producers of each selected tensor.pad then work on the padded shape, and a mask
    writes the pad value on the border; their tiles under a halo consumer (a 3x3 conv)
    have static sizes, so the whole chain can be fused into one dispatch. Without ``ops``
    every pad that can be hoisted is, and the others are reported with the reason.
    """

    ops: MatchSpec | None = _ops()


@register("interchange")
@dataclass(frozen=True, kw_only=True)
class InterchangeStep(StepBase):
    """Permute the loops of a linalg.generic."""

    permutation: tuple[IntOrParam, ...] = option("the new loop order", Kind.INTS)
    target: str = _target()


@register("vectorize")
@dataclass(frozen=True, kw_only=True)
class VectorizeStep(StepBase):
    """Vectorize the whole kernel (no target), or one op with explicit vector sizes."""

    target: str | None = _target(None, "handle of the op to vectorize (unset: the whole kernel)")
    sizes: tuple[IntOrParam, ...] | None = option(
        "vector sizes (with a target)", Kind.INTS, default=None
    )


@register("cleanup")
@dataclass(frozen=True, kw_only=True)
class CleanupStep(StepBase):
    """Canonicalize, CSE and hoist loop invariants over the schedule's scope.

    ``unit_dims`` also folds unit-extent loops of linalg ops away (after tiling a conv's
    filter window to 1x1, its ``h + kh`` accesses become plain dims it can vectorize).
    """

    canonicalize: bool = option("canonicalize", Kind.FLAG, default=True)
    cse: bool = option("common-subexpression elimination", Kind.FLAG, default=True)
    licm: bool = option("hoist loop invariants", Kind.FLAG, default=True)
    unit_dims: bool = option("fold unit-extent loops", Kind.FLAG, default=False)


GraphRewriteStep = (
    FuseElementwiseExtStep
    | CollapseDimsStep
    | Mmt4dStep
    | FusePadStep
    | HoistPadStep
    | Conv1x1ToMatmulStep
    | Im2colStep
    | DecomposeSoftmaxStep
    | ChannelsLastStep
)
"""Steps that rewrite the whole module in Python before IREE (not transform scripts)."""

Step = StepBase
"""Any schedule step (a registered :class:`StepBase` subclass)."""
