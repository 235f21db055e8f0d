"""Schedule templates for a model's tasks: one kernel schedule with a parameter space,
written as a recipe of its own (``tdsched tune``; users may edit it and tune again).

A task whose dispatch is one op without a reduction loop (elementwise: a gather such as
``im2col``'s, a copy) has a template of its own, :func:`elementwise_template`. One
template covers every task whose root op has a reduction (convolution, contraction,
pooling, reduction) and an elementwise epilogue after it or none, on x86 (the epilogue:
one op over the root's output, or a chain of them, each reading the one before over the
same output, as IREE splits a matmul that accumulates into a bias: its fill, the
matmul, an add, then the activation):

1. distribute to workgroups with ``fuse_ext`` (tiling the epilogue, or the root where
   there is none, and fusing the rest, the init ``fill`` kept out of reduction loops),
   ``W<d>`` output elements per workgroup along output dim ``d``;
2. tile the root's main reduction loop (:func:`main_reduction`: the one IREE vectorizes
   the reduction along, else the longest) by ``TK`` (a cache tile: the register tiles
   below sweep one ``TK`` slice of the reduction at a time), then register-tile it to
   ``RH`` x ``RW`` outputs on its two innermost non-unit output dims (1 along the
   others), then its main reduction loop by ``RK`` (the other reduction loops by 1); the
   init and the epilogue get the same register tile;
3. fold unit loops and vectorize.

A task without an epilogue whose init is a ``fill`` has a second way through step 2,
``FILL: fused``: the root is register-tiled in a ``forall`` and the fill fused into it,
so each register tile starts from zeros in registers rather than reading a buffer the fill
wrote over the workgroup's tile (``FILL: apart``, the default); no cache tile (``TK``
held at the whole loop). A 56x56x96 depthwise convolution's 1-D form (below) ran
0.79-0.82x IREE default apart and 0.95-1.06x fused (1 thread, Zen 4).

A task with an epilogue has a second way through step 2, ``EPILOGUE: fused``: the
epilogue is register-tiled first and the root and its init are fused into that loop (the
ops of a chain before its last too), so
each register tile is reduced, goes through the epilogue and is written before the next
one starts (no cache tile: ``TK`` is held at the whole loop). The default,
``EPILOGUE: buffer``, reduces the workgroup's whole tile into a buffer, then runs the
epilogue over it. On resnet_block_x86's convolutions on 2 threads the buffer cost
4-5% (docs/benchmarks.md); on a large-reduction matmul the cache tile can matter more.

A task whose root is a 2-D window op, a depthwise convolution or a pooling (its only
non-unit reduction loops are the window's rows and columns), has a second way through
step 2's reduction, ``WINDOW: rows``: the window's rows are tiled by 1, the op is named
(``specialize``) and made 1-D (``decompose``), so that ``vectorize`` lowers it with the
convolution vectorizer (the window's columns unrolled, each input row loaded once for
all of them) instead of a contraction per window position (``WINDOW: loops``, the
default: ``RK`` over the rows, the columns by 1).

A task whose root is a named ``linalg.matmul`` or ``linalg.batch_matmul`` that a graph
step can select alone (from named layers, or the model's only op of that name) has a
second way to run, ``LAYOUT: packed``: the graph step ``mmt4d`` packs it
into ``M0`` x ``N0`` x ``K0`` tiles (IREE's data-tiling layout, compiled by IREE's mmt4d
codegen) instead of the kernel schedule, its unpack in a dispatch of its own or in the
mmt4d's (``UNPACK: separate | fused``, the step's ``fuse_unpack``). The two layouts are
alternatives selected by ``when``; each layout's unused parameters are held at one value
by a constraint, so the space holds every kernel candidate once and each packed tile
(:data:`PACK_TILES`, those that fit the build's vector registers) once per ``UNPACK``.

The space is centred on IREE's own choice for the dispatch (its ``distribution`` and
vector tile sizes): the workgroup tiles range from a quarter to four times IREE's,
powers of two that divide the loop. The register tile keeps its non-unit sizes on the
innermost dims: folding a unit loop between two tiled ones gives wrong results after
vectorizing (docs/primitives/cleanup.md). Every candidate is checked against IREE's
default build of the task, so a template that does not fit a task shows as failed
candidates, never as a wrong model.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tdsched.targets.cpu_isa import REGISTER_FILES
from tdsched.transform_lib.dispatch_config import ConfiguredDispatch, ConfiguredOp

from ..dsl.constraints import parse_constraint
from ..dsl.params import referenced_parameters
from ..dsl.space import ParamValue
from ..dsl.steps import (
    CleanupStep,
    DecomposeStep,
    FuseExtStep,
    FuseIntoStep,
    Mmt4dStep,
    ProducerStep,
    SpecializeStep,
    Step,
    TileStep,
    VectorizeStep,
)
from ..dsl.values import MatchSpec
from ..frontends.step_documents import step_document
from .tasks import Task

VECTOR_WIDTHS = (4, 8, 16, 32)
MAX_ROW_TILE = 16
"""``RH`` takes every divisor of its dim up to this (6 rows fill AVX2's registers with a
16-wide ``RW``; a convolution's 7, 14 or 28 output pixels a row take 7 or 14), as far
as :data:`REGISTER_FIT` allows."""
OPERAND_REGISTERS = 4
"""Vector registers a register tile leaves for the operands of one step."""


def _register_files_fit() -> str:
    """:data:`REGISTER_FIT`, from :data:`~tdsched.targets.cpu_isa.REGISTER_FILES`."""
    others = [isa for isa in REGISTER_FILES if isa != "avx512"]

    def fits(isa: str) -> str:
        registers, lanes = REGISTER_FILES[isa]
        return f"RH * max(1, RW // {lanes}) <= {registers - OPERAND_REGISTERS}"

    known = [f"(ISA == '{isa}' and {fits(isa)})" for isa in others]
    rest = " and ".join(f"ISA != '{isa}'" for isa in others)
    return " or ".join([*known, f"({rest} and {fits('avx512')})"])


REGISTER_FIT = _register_files_fit()
"""The register tile's accumulators (``RH`` rows of ``RW`` over the vector width) fit the
build's vector registers with :data:`OPERAND_REGISTERS` left for the operands: 12 of
AVX2's and SSE's 16, 28 of AVX-512's 32 (an ISA not known counts as AVX-512). IREE's own
register tile is kept in the space even where it does not fit."""
REDUCTION_TILES = (1, 2, 4, 8, 16)
CACHE_TILES = (32, 64, 128, 256, 512)
"""The main reduction loop's cache tile (``TK``): the slice of the reduction one pass of
register tiles covers, so the operands' panels stay in cache (the whole loop is a value
too: no cache tile)."""
CACHE_TILE_DEFAULT = 256
WORKGROUP_DIMS = 3
"""Output dims a workgroup tile may split (a forall maps at most x, y and z): those IREE's
distribution splits first, then the outermost; the others stay whole per workgroup."""
STACK_BYTES = 32768
"""IREE's default stack allocation limit per thread: the register tiles must fit it."""
PACKABLE = ("linalg.matmul", "linalg.batch_matmul")
"""Root ops the ``mmt4d`` graph step rewrites (the packed layout)."""
PACK_ROWS = (6, 8, 16)
PACK_COLUMNS = (8, 16, 32)
PACK_TILES = {"M0": PACK_ROWS, "N0": PACK_COLUMNS}
"""The packed layout's swept inner tiles (``K0`` is 1), of which :data:`PACK_PER_ISA`
keeps those that fit the build's registers: IREE's data tiling takes 16x16 on AVX-512 and
8x8 on AVX2; 16x32 measured fastest on AVX-512, 6x16 on AVX2 (docs/primitives/mmt4d.md)."""
PACK_PER_ISA = (
    "LAYOUT == 'rowmajor' or (ISA == 'avx2' and 64 <= M0 * N0 <= 96) or "
    "(ISA != 'avx2' and M0 >= 8 and N0 >= 16)"
)
"""AVX2 (16 registers of 8 floats): 8x8 or 6x16; otherwise 8 or 16 rows of 16 or 32."""
PACK_DEFAULT = {"M0": 16, "N0": 32, "K0": 1}
WINDOW_WAYS = ("loops", "rows")
"""How a 2-D window op reduces over its window (module docstring)."""
WINDOW_KINDS = ("convolution", "pooling")
FILL_WAYS = ("apart", "fused")
"""Where the init ``fill`` of a task without an epilogue runs (module docstring): over the
workgroup's tile before the reduction, or in each register tile."""
EPILOGUE_WAYS = ("buffer", "fused")
"""Where a task's epilogue runs (module docstring): over the workgroup's buffered result,
or on each register tile."""
UNPACK = ("separate", "fused")
"""Where a packed candidate's unpack runs: in a dispatch of its own, or in the mmt4d's
(``fuse_unpack``; it changes the best tile, docs/primitives/mmt4d.md)."""
UKERNELS_OFF = "--iree-llvmcpu-enable-ukernels=none"
"""The packed layout's compile flag: IREE 3.13's generic mmt4d ukernel fallback gives
wrong results for tiles it has no kernel for (docs/primitives/mmt4d.md)."""


class NoTemplate(Exception):
    """No template fits the task; the message says why."""


@dataclass(frozen=True)
class TemplateKernel:
    """A further kernel of a template: a ``root: false`` config for another op of the
    task's dispatch (an op after a row reduction's root)."""

    position: int
    """The op's index among the task's ops (those of its configured dispatch)."""
    suffix: str
    """The kernel is named ``<task>_<suffix>``."""
    config: dict[str, Any]


@dataclass(frozen=True)
class Template:
    """A task's kernel schedule with its parameter space (a recipe's parts)."""

    parameters: dict[str, ParamValue]
    space: dict[str, list[ParamValue]]
    constraints: list[str]
    schedule: list[Step]
    graph: list[Step] = field(default_factory=list)
    compile_flags: list[str] = field(default_factory=list)
    kernel_when: str | None = None
    """The kernel schedule's condition (the rowmajor layout, where a packed one exists)."""
    config: dict[str, Any] | None = None
    """A lowering config for IREE's own pipeline, in place of ``schedule``."""
    more_kernels: tuple[TemplateKernel, ...] = ()
    """Configs for other ops of the dispatch; the main kernel's is IREE's root's."""
    match_by_kind: bool = False
    """Whether the main kernel matches its root by kind (Vulkan's matmuls, which IREE's
    contraction matcher reads as ``[B,] M, N, K``) rather than by op name."""

    def keeping(self, kernels: Sequence[TemplateKernel]) -> Template:
        """The template with only ``kernels`` of its :attr:`more_kernels`, and without
        the swept parameters that only the others used."""
        kept = dataclasses.replace(self, more_kernels=tuple(kernels))
        used = referenced_parameters(
            (kept.schedule, kept.config, kept.graph, [k.config for k in kernels])
        )
        dropped = {
            name
            for k in self.more_kernels
            if k not in kernels
            for name in referenced_parameters(k.config)
        } - used
        return dataclasses.replace(
            kept,
            parameters={k: v for k, v in self.parameters.items() if k not in dropped},
            space={k: v for k, v in self.space.items() if k not in dropped},
        )

    def kernel_body(self) -> dict[str, Any]:
        """The kernel's ``schedule`` or ``config`` entry, as a recipe writes it."""
        if self.config is not None:
            return {"config": self.config}
        return {"schedule": [step_document(step) for step in self.schedule]}

    def graph_document(self) -> list[dict[str, Any]]:
        """The graph steps, as a recipe writes them."""
        return [step_document(step) for step in self.graph]


def template_for(task: Task, dispatch: ConfiguredDispatch, sole: bool = False) -> Template:
    """The template for ``task``, whose standalone dispatch IREE configured as
    ``dispatch`` (``sole``: its root is the model's only op of that name, so a graph step
    selects it by name alone). Raises :class:`NoTemplate` naming what does not fit."""
    root = dispatch.root_op
    if root.output_loops is None or len(set(root.output_loops)) != len(root.output_loops):
        raise NoTemplate("the root's output is not indexed by plain loops")
    if "reduction" not in root.iterators:
        return elementwise_template(dispatch)
    out_ranges = [root.loop_ranges[loop] for loop in root.output_loops]
    epilogue = dispatch.epilogue
    identity = tuple(range(len(out_ranges)))
    checked = [(op, op.output_loops == identity) for op in _init(dispatch)]
    checked += [(op, _epilogue_over_root(dispatch, op)) for op in epilogue[:1]]
    for index in range(dispatch.root + 2, len(dispatch.ops)):
        checked.append((dispatch.ops[index], _follows_previous(dispatch, index)))
    for op, over in checked:
        if list(op.loop_ranges) != out_ranges or not over:
            why = "the root's output" if op is epilogue[0] else "the op before it's output"
            raise NoTemplate(f"{op.op} does not iterate over {why}")
    tiles = _output_tiles(dispatch, out_ranges)
    permuted = [op for op in epilogue if op.output_loops != identity]
    if permuted and len(epilogue) > 1:
        raise NoTemplate(
            f"{permuted[0].op} writes its result permuted in a chain of "
            f"{len(epilogue)} ops after the root; the template permutes one epilogue op only"
        )
    if any(not _unit_dims_lead(op, tiles.register) for op in permuted):
        raise NoTemplate(
            f"{permuted[0].op} writes the register tile with a unit dim between tiled ones "
            "(its output permutes the root's), which IREE 3.13 folds and vectorizes wrong"
        )
    # RH 1 is a unit dim too: where it would land after a tiled dim, it must be more
    # (a 32x64 matmul written transposed came out wrong at 1536 of 2048 elements with
    # RH 1, right with RH 2)
    rh_one = [1 if size == "${RH}" else size for size in tiles.register]
    rh_above_one = any(not _unit_dims_lead(op, rh_one) for op in permuted)
    reduction_space, reduction_defaults = _reduction_space(dispatch)
    space = {**tiles.space, **reduction_space}
    defaults = {**tiles.defaults, **reduction_defaults}
    window = _window_rows(task, dispatch)
    schedule = _steps(dispatch, tiles.workgroup, tiles.register, window)
    constraints = list(tiles.constraints)
    if rh_above_one:
        constraints.append("RH > 1")
    constraints.append(f"RH * RW * RK * 4 <= {STACK_BYTES}")
    constraints.append("TK % RK == 0")
    swept: dict[str, list[ParamValue]] = {name: list(values) for name, values in space.items()}
    parameters: dict[str, ParamValue] = dict(defaults)
    if window is not None:
        swept["WINDOW"] = list(WINDOW_WAYS)
        parameters["WINDOW"] = WINDOW_WAYS[0]
        held = f"RK == {defaults['RK']} and TK == {defaults['TK']}"
        # decompose needs the output row of the window's row at 1: the register tile
        # leaves it so where its rows are not that dim (NHWC: RH on the columns, RW on
        # the channels the filter reads), else only with one row
        rows = "" if _reads_register_columns(dispatch) else " and RH == 1"
        constraints.append(f"WINDOW == 'loops' or ({held}{rows})")
    if dispatch.epilogue:
        swept["EPILOGUE"] = list(EPILOGUE_WAYS)
        parameters["EPILOGUE"] = EPILOGUE_WAYS[0]
        constraints.append(f"EPILOGUE == 'buffer' or TK == {max(space['TK'])}")
    elif dispatch.init_is_fill:
        swept["FILL"] = list(FILL_WAYS)
        parameters["FILL"] = FILL_WAYS[0]
        constraints.append(f"FILL == 'apart' or TK == {max(space['TK'])}")
    template = Template(parameters, swept, constraints, schedule)
    named = bool(task.layers) and len(task.layers) >= len(task.dispatches)
    # the packed layout holds its unused kernel parameters at the defaults: they must
    # meet the kernel's constraints
    selectable = named or sole
    if root.op in PACKABLE and selectable and conditions_hold(template.constraints, parameters):
        template = with_packed_layout(template, parameters)
    return dataclasses.replace(
        template, constraints=[*template.constraints, _register_fit(parameters)]
    )


def elementwise_template(dispatch: ConfiguredDispatch) -> Template:
    """The template of a dispatch of one op without a reduction loop (a gather such as
    ``im2col``'s, a copy, an elementwise op): ``fuse_ext`` tiles it to workgroups of
    ``W<d>`` outputs along dim ``d``, then it is register-tiled to ``RH`` x ``RW`` outputs
    on its two innermost non-unit dims (1 on the others), unit loops folded, vectorized.
    Raises :class:`NoTemplate` for a dispatch of several ops."""
    root = dispatch.root_op
    if len(dispatch.ops) > 1:
        raise NoTemplate(
            f"elementwise: {len(dispatch.ops)} ops in the dispatch; the elementwise "
            "template takes one"
        )
    assert root.output_loops is not None
    tiles = _output_tiles(dispatch, [root.loop_ranges[loop] for loop in root.output_loops])
    schedule: list[Step] = [
        FuseExtStep(
            root=MatchSpec(op=root.op), tile_sizes=tuple(_on_root_loops(dispatch, tiles.workgroup))
        ),
        TileStep(sizes=tuple(_on_root_loops(dispatch, tiles.register))),
        CleanupStep(unit_dims=True),
        VectorizeStep(),
    ]
    swept: dict[str, list[ParamValue]] = {k: list(v) for k, v in tiles.space.items()}
    constraints = [*tiles.constraints, _register_fit(tiles.defaults)]
    return Template(dict(tiles.defaults), swept, constraints, schedule)


def _register_fit(defaults: Mapping[str, ParamValue]) -> str:
    """:data:`REGISTER_FIT`, or IREE's own register tile (``defaults``)."""
    return f"(RH == {defaults['RH']} and RW == {defaults['RW']}) or {REGISTER_FIT}"


@dataclass(frozen=True)
class _OutputTiles:
    """A template's tiles of the root's output (both templates share them)."""

    space: dict[str, list[int]]
    """``W<d>`` (the distributed dims), ``RW`` and ``RH``."""
    defaults: dict[str, int]
    workgroup: list[Any]
    """Per output dim: ``${W<d>}``, or 0 (whole) for a dim not distributed."""
    register: list[int | str]
    """Per output dim: ``${RH}``/``${RW}`` on the two innermost non-unit dims, else 1."""
    constraints: list[str]
    """Each register tile divides its workgroup tile."""


def _output_tiles(dispatch: ConfiguredDispatch, out_ranges: list[int]) -> _OutputTiles:
    """The workgroup and register tiles of the root's output (``out_ranges``, per output
    dim). Raises :class:`NoTemplate` for an output of one element."""
    tiled = [d for d, size in enumerate(out_ranges) if size > 1]
    if not tiled:
        raise NoTemplate("the root's output has one element")
    space, defaults = _space(dispatch, out_ranges, tiled)
    register: list[int | str] = [1] * len(out_ranges)
    register[tiled[-1]] = "${RW}"
    if len(tiled) > 1:
        register[tiled[-2]] = "${RH}"
    workgroup = [f"${{W{d}}}" if f"W{d}" in space else 0 for d in range(len(out_ranges))]
    constraints = [
        f"W{d} % {_register_name(d, tiled)} == 0" for d in tiled[-2:] if f"W{d}" in space
    ]
    return _OutputTiles(space, defaults, workgroup, register, constraints)


def conditions_hold(conditions: Sequence[str], values: Mapping[str, ParamValue]) -> bool:
    """Whether ``values`` meet every one of ``conditions`` (constraints or ``when``
    conditions, in the constraint language)."""
    return all(parse_constraint(c, set(values)).holds(dict(values)) for c in conditions)


def with_packed_layout(template: Template, kernel_defaults: Mapping[str, ParamValue]) -> Template:
    """``template`` with ``LAYOUT: rowmajor | packed`` (see the module docstring): the
    kernel schedule when ``rowmajor``, the ``mmt4d`` graph step when ``packed``."""
    held = " and ".join(
        f"{name} == {value!r}" if isinstance(value, str) else f"{name} == {value}"
        for name, value in kernel_defaults.items()
    )
    packed_held = " and ".join(f"{name} == {PACK_DEFAULT[name]}" for name in PACK_TILES)
    space: dict[str, list[ParamValue]] = {
        **template.space,
        "LAYOUT": ["rowmajor", "packed"],
        **{name: list(values) for name, values in PACK_TILES.items()},
        "UNPACK": list(UNPACK),
    }
    steps: list[Step] = [
        Mmt4dStep(
            tile=("${M0}", "${N0}", "${K0}"),
            fuse_unpack=unpack == "fused",
            when=f"LAYOUT == 'packed' and UNPACK == '{unpack}'",
        )
        for unpack in UNPACK
    ]
    return Template(
        parameters={
            **template.parameters,
            "LAYOUT": "rowmajor",
            **PACK_DEFAULT,
            "UNPACK": UNPACK[0],
        },
        space=space,
        constraints=[
            *template.constraints,
            f"LAYOUT == 'rowmajor' or ({held})",
            f"LAYOUT == 'packed' or ({packed_held} and UNPACK == '{UNPACK[0]}')",
            PACK_PER_ISA,
        ],
        schedule=template.schedule,
        graph=steps,
        compile_flags=[UKERNELS_OFF],
        kernel_when="LAYOUT == 'rowmajor'",
    )


def _follows_previous(dispatch: ConfiguredDispatch, index: int) -> bool:
    """Whether the op at ``index``, in a chain of epilogue ops, iterates over the output
    of the op before it (:func:`_elementwise_over`), writing its own dim by dim."""
    op = dispatch.ops[index]
    read = dispatch.reads_previous.get(index)
    return _elementwise_over(op, read) and op.output_loops == tuple(range(len(op.loop_ranges)))


def _epilogue_over_root(dispatch: ConfiguredDispatch, op: ConfiguredOp) -> bool:
    """Whether ``op``, the op after the root, iterates over the root's output dims in
    their order (:func:`_elementwise_over`). It may write its own result with the dims
    permuted (a projection written transposed for attention): tiling it tiles the root's
    output, and each tile goes to its permuted place."""
    return _elementwise_over(op, dispatch.root_reads.get(dispatch.root + 1))


def _elementwise_over(op: ConfiguredOp, read: int | None) -> bool:
    """Whether ``op`` is all parallel, reads its input operand ``read`` (None: it reads
    none) dim by dim, and writes its result through a permutation of its loops."""
    identity = tuple(range(len(op.loop_ranges)))
    return (
        read is not None
        and read < len(op.input_loops)
        and op.input_loops[read] == identity
        and all(it == "parallel" for it in op.iterators)
        and op.output_loops is not None
        and sorted(op.output_loops) == list(identity)
    )


def _unit_dims_lead(op: ConfiguredOp, register: Sequence[int | str]) -> bool:
    """Whether ``op`` (an epilogue over the root's output) writes the register tile
    (``register``, per root output dim: a size, or a parameter taken as more than 1)
    with its unit dims leading, in the order of its own output. A unit dim after a tiled
    one is folded and the write's permutation dropped with it (IREE 3.13,
    docs/primitives/cleanup.md): attention's context, a batch matmul (head, token,
    feature) written token-major with a [1, RH, RW] register tile, wrote [RH, 1, RW] as
    if it were [1, RH, RW], wrong in the model."""
    assert op.output_loops is not None
    order = [register[loop] for loop in op.output_loops]
    tiled = [i for i, size in enumerate(order) if size != 1]
    return not tiled or all(size != 1 for size in order[tiled[0] :])


def _init(dispatch: ConfiguredDispatch) -> tuple[Any, ...]:
    if not dispatch.init_is_fill:
        return ()
    fills = [op for op in dispatch.ops[: dispatch.root] if op.op == "linalg.fill"]
    return tuple(fills[-1:])


def _register_name(dim: int, tiled: list[int]) -> str:
    return "RW" if dim == tiled[-1] else "RH"


def _space(
    dispatch: ConfiguredDispatch, out_ranges: list[int], tiled: list[int]
) -> tuple[dict[str, list[int]], dict[str, int]]:
    """The workgroup (``W<d>``) and register (``RW``, ``RH``) tiles' swept values and
    defaults (IREE's choice where it is in the space)."""
    root = dispatch.root_op
    loops = root.output_loops or ()
    distribution = root.levels.get("distribution", (0,) * len(root.loop_ranges))
    vector = root.levels.get("vector_common_parallel", (0,) * len(root.loop_ranges))
    space: dict[str, list[int]] = {}
    defaults: dict[str, int] = {}
    split = [d for d in tiled if 0 < distribution[loops[d]] < out_ranges[d]]
    distributed = sorted([*split, *(d for d in tiled if d not in split)][:WORKGROUP_DIMS])
    for d in distributed:
        size = out_ranges[d]
        iree = distribution[loops[d]] or size
        values = [v for v in pow2_divisors(size) if iree / 4 <= v <= iree * 4]
        space[f"W{d}"] = values or [size]
        defaults[f"W{d}"] = nearest(space[f"W{d}"], iree)
    inner = out_ranges[tiled[-1]]
    space["RW"] = [v for v in VECTOR_WIDTHS if inner % v == 0] or [inner]
    defaults["RW"] = nearest(space["RW"], vector[loops[tiled[-1]]] or 16)
    if len(tiled) > 1:
        rows = out_ranges[tiled[-2]]
        space["RH"] = [v for v in range(1, MAX_ROW_TILE + 1) if rows % v == 0]
        defaults["RH"] = nearest(space["RH"], vector[loops[tiled[-2]]] or 1)
    else:
        space["RH"], defaults["RH"] = [1], 1
    for register, dim in zip(("RW", "RH"), reversed(tiled[-2:]), strict=False):
        tiles = space.get(f"W{dim}")
        if tiles:  # a register tile divides a workgroup tile of its dim (a constraint)
            fitting = [v for v in space[register] if any(w % v == 0 for w in tiles)]
            space[register] = fitting or [1]
            defaults[register] = nearest(space[register], defaults[register])
    return space, defaults


def _reduction_space(dispatch: ConfiguredDispatch) -> tuple[dict[str, list[int]], dict[str, int]]:
    """``RK`` (the register tile's reduction step) and ``TK`` (the cache tile) of the
    root's main reduction loop, with their defaults."""
    along = main_reduction(dispatch)
    if along is None:
        return {"RK": [1], "TK": [1]}, {"RK": 1, "TK": 1}
    root = dispatch.root_op
    reduction = root.levels.get("vector_reduction", (0,) * len(root.loop_ranges))
    size = root.loop_ranges[along]
    rk = [v for v in REDUCTION_TILES if size % v == 0]
    if size < max(REDUCTION_TILES) and size not in rk:
        rk.append(size)  # a short loop whole (a 3-wide window: IREE's choice)
    tk = [*(v for v in CACHE_TILES if v < size and size % v == 0), size]
    return {"RK": rk, "TK": tk}, {
        "RK": nearest(rk, reduction[along] or 1),
        "TK": nearest(tk, CACHE_TILE_DEFAULT),
    }


def main_reduction(dispatch: ConfiguredDispatch) -> int | None:
    """The root's reduction loop that the register tile steps through by ``RK`` and the
    cache tile cuts by ``TK``: the non-unit reduction loop IREE's configuration gives the
    largest vector reduction tile, else the longest one (the first on a tie); None where
    every reduction loop is a unit one.

    A convolution's window loops come before its channel loop (NHWC/HWCF: ``kh, kw, c``),
    and stepping a 3x3 window three rows at a time leaves every other loop scalar: on a
    28x28x64 3x3 convolution the best such candidate ran 0.49x IREE default, where the
    channel loop is the one to vectorize the reduction along (as IREE and conv2d_x86's
    direct kernel do)."""
    root = dispatch.root_op
    loops = _non_unit_reductions(root)
    if not loops:
        return None
    vector = root.levels.get("vector_reduction", (0,) * len(root.loop_ranges))
    return max(loops, key=lambda i: (vector[i], root.loop_ranges[i], -i))


def _window_rows(task: Task, dispatch: ConfiguredDispatch) -> int | None:
    """The window-row loop of a root that is a 2-D window op (a convolution or pooling
    whose only non-unit reduction loops are two: the window's rows, then its columns, as
    linalg orders them), else None."""
    if task.kind not in WINDOW_KINDS:
        return None
    loops = _non_unit_reductions(dispatch.root_op)
    return loops[0] if len(loops) == 2 else None


def _non_unit_reductions(op: ConfiguredOp) -> list[int]:
    """``op``'s reduction loops of more than one iteration, in loop order."""
    return [i for i, it in enumerate(op.iterators) if it == "reduction" and op.loop_ranges[i] > 1]


def _reads_register_columns(dispatch: ConfiguredDispatch) -> bool:
    """Whether an input the root reads through plain loops (a filter) reads the loop of
    the register tile's ``RW`` dim: the channels of an NHWC depthwise convolution, so its
    ``RH`` dim is the output's columns and its rows stay 1."""
    root = dispatch.root_op
    columns = (root.output_loops or ())[-1:]
    return any(loops is not None and set(columns) <= set(loops) for loops in root.input_loops)


def _steps(
    dispatch: ConfiguredDispatch,
    workgroup: list[Any],
    register: list[int | str],
    window: int | None = None,
) -> list[Step]:
    root = dispatch.root_op
    steps: list[Step] = []
    if dispatch.epilogue:
        last = len(dispatch.ops) - 1
        steps.append(
            FuseExtStep(root=MatchSpec(op=dispatch.ops[last].op), tile_sizes=tuple(workgroup))
        )
        steps += _chain_handles(dispatch)
        main = "main"
    else:
        # Named, not "the dispatch root", where the op is unique: IREE may re-create the
        # matched op before the strategy runs (seen on a conv whose fill follows it),
        # losing its tag.
        unique = sum(op.op == root.op for op in dispatch.ops) == 1
        steps.append(
            FuseExtStep(
                root=MatchSpec(op=root.op) if unique else None,
                tile_sizes=tuple(_on_root_loops(dispatch, workgroup)),
            )
        )
        main = "root"
    if dispatch.init_is_fill:
        steps.append(ProducerStep(of=main, operand=dispatch.root_inputs, name="init"))
    along = main_reduction(dispatch)
    reduce: list[Any] = [
        0 if it == "parallel" else ("${RK}" if i == along else 1)
        for i, it in enumerate(root.iterators)
    ]
    reducing = _reduction_steps(dispatch, main, reduce, window)
    if dispatch.epilogue:
        steps += _when("EPILOGUE == 'buffer'", _buffered(dispatch, main, register, reducing))
        steps += _when("EPILOGUE == 'fused'", _fused(dispatch, main, register, reducing))
    elif dispatch.init_is_fill:
        steps += _when("FILL == 'apart'", _buffered(dispatch, main, register, reducing))
        steps += _when("FILL == 'fused'", _fill_fused(dispatch, main, register, reducing))
    else:
        steps += _buffered(dispatch, main, register, reducing)
    steps.append(CleanupStep(unit_dims=True))
    steps.append(VectorizeStep())
    return steps


def _reduction_steps(
    dispatch: ConfiguredDispatch, main: str, reduce: list[Any], window: int | None
) -> list[Step]:
    """The root's reduction below its register tile: ``reduce`` (``RK`` on the main
    reduction loop, the others by 1); for a 2-D window op also the ``WINDOW: rows`` way
    (module docstring), each way's steps taken where ``WINDOW`` names it."""
    stepped: list[Step] = [TileStep(target=main, sizes=tuple(reduce))]
    if window is None:
        return stepped
    rows: list[Any] = [0] * len(dispatch.root_op.loop_ranges)
    rows[window] = 1
    one_d: list[Step] = [
        TileStep(target=main, sizes=tuple(rows)),
        SpecializeStep(target=main),
        DecomposeStep(target=main),
    ]
    return [*_when("WINDOW == 'loops'", stepped), *_when("WINDOW == 'rows'", one_d)]


def _buffered(
    dispatch: ConfiguredDispatch, main: str, register: list[int | str], reducing: list[Step]
) -> list[Step]:
    """Step 2 over the workgroup's tile: cache tile, register tile, reduction; the init
    and the epilogue register-tiled after it, each in loops of its own."""
    root = dispatch.root_op
    steps: list[Step] = []
    along = main_reduction(dispatch)
    if along is not None:
        cache: list[Any] = [0] * len(root.loop_ranges)
        cache[along] = "${TK}"
        steps.append(TileStep(target=main, sizes=tuple(cache)))
    steps.append(TileStep(target=main, sizes=tuple(_on_root_loops(dispatch, register))))
    steps += reducing
    if dispatch.init_is_fill:
        steps.append(TileStep(target="init", sizes=tuple(register)))
    before_last = _before_last(dispatch)
    if before_last:  # the chain's ops before its last fused into its register loop
        steps.append(TileStep(sizes=tuple(register), loops="registers"))
        steps += [FuseIntoStep(producer=name, loop="registers") for name in before_last]
    elif dispatch.epilogue:
        steps.append(TileStep(sizes=tuple(register)))
    return steps


def _chain_handles(dispatch: ConfiguredDispatch) -> list[Step]:
    """Handles from the epilogue's last op (``fuse_ext``'s root) back to the root: each
    op the producer of an operand of the op after it; the root is ``main``, the chain's
    ops before the last ``epilogue<n>`` (n: the op's place after the root, from 1)."""
    steps: list[Step] = []
    consumer = "root"
    for index in range(len(dispatch.ops) - 1, dispatch.root, -1):
        first = index == dispatch.root + 1
        producer = "main" if first else f"epilogue{index - 1 - dispatch.root}"
        operand = dispatch.root_reads[index] if first else dispatch.reads_previous[index]
        steps.append(ProducerStep(of=consumer, operand=operand, name=producer))
        consumer = producer
    return steps


def _before_last(dispatch: ConfiguredDispatch) -> list[str]:
    """The handles (:func:`_chain_handles`) of the epilogue's ops before its last, from
    the last back: the order in which they fuse into its loop."""
    return [f"epilogue{n}" for n in range(len(dispatch.epilogue) - 1, 0, -1)]


def _fused(
    dispatch: ConfiguredDispatch, main: str, register: list[int | str], reducing: list[Step]
) -> list[Step]:
    """Step 2 per register tile of the epilogue: the root and its init fused into it,
    then the root's reduction tiled."""
    steps: list[Step] = [
        TileStep(sizes=tuple(register), loops="registers"),
        *(FuseIntoStep(producer=name, loop="registers") for name in _before_last(dispatch)),
        FuseIntoStep(producer=main, loop="registers"),
    ]
    if dispatch.init_is_fill:
        steps.append(FuseIntoStep(producer="init", loop="registers"))
    return steps + reducing


def _fill_fused(
    dispatch: ConfiguredDispatch, main: str, register: list[int | str], reducing: list[Step]
) -> list[Step]:
    """Step 2 of a task without an epilogue, ``FILL: fused``: the root register-tiled in
    a ``forall`` with its init ``fill`` fused into it, then its reduction: each register
    tile starts from zeros in registers, not from a buffer the fill wrote."""
    tiles = TileStep(
        target=main,
        sizes=tuple(_on_root_loops(dispatch, register)),
        loop="forall",
        loops="registers",
    )
    return [tiles, FuseIntoStep(producer="init", loop="registers"), *reducing]


def _on_root_loops(dispatch: ConfiguredDispatch, per_output: Sequence[Any]) -> list[Any]:
    """Tile sizes given per output dim of the root, as sizes of the root's loops (0 on
    its reduction loops)."""
    root = dispatch.root_op
    sizes: list[Any] = [0] * len(root.loop_ranges)
    for d, loop in enumerate(root.output_loops or ()):
        sizes[loop] = per_output[d]
    return sizes


def _when(condition: str, steps: list[Step]) -> list[Step]:
    """``steps``, each taken only where ``condition`` holds (and its own, if it has one)."""
    return [
        dataclasses.replace(step, when=f"{condition} and {step.when}" if step.when else condition)
        for step in steps
    ]


def pow2_divisors(size: int) -> list[int]:
    """The powers of two that divide ``size``, and ``size`` itself."""
    values, v = [], 1
    while v <= size:
        if size % v == 0:
            values.append(v)
        v *= 2
    if size not in values:
        values.append(size)
    return values


def nearest(values: list[int], wanted: int) -> int:
    """The value closest to ``wanted`` (the smaller on a tie)."""
    return min(values, key=lambda v: (abs(v - wanted), v))
