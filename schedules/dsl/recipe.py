"""The recipe model shared by the YAML and Python front ends.

A :class:`Recipe` names a workload, its targets, an optional *graph* schedule (applied to
the whole module before IREE forms dispatches), *kernel* schedules (each matched to
dispatches by its root op and turned into an IREE kernel strategy or lowering config),
parameters and numeric tolerances. Schedules are lists of typed steps (:mod:`.steps`).
Integer fields may hold a parameter reference ``"${NAME}"`` until
:func:`tdsched.schedules.dsl.params.resolve` substitutes them; emission only accepts resolved
recipes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from tdsched.targets.target import TARGET_NAMES

from ..base.errors import RecipeError, Where
from .shape_table import ShapeChoice, ShapeTable
from .space import ParamValue, SearchSpace
from .steps import Scope, Step, step_info
from .values import IntOrParam, MatchSpec
from .when import Condition, Skipped, check_conditions, kernel_label, step_label

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")
MAX_NAME_LENGTH = 100
"""The longest recipe name: sweeps add the target, the shape and a suffix to it in file
names (``NAME.TARGET.shapes.yaml``, candidate folders), which most file systems end at
255 bytes."""


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a recipe, or None. Names become file names (sweep results,
    frozen best recipes), so only letters, digits and ``_ . + -`` are allowed, starting
    with a letter or digit: no path separators, ``..`` or control characters; and at most
    :data:`MAX_NAME_LENGTH` characters."""
    if len(name) > MAX_NAME_LENGTH:
        return (
            f"{name[:20]!r}... is {len(name)} characters; a recipe name has at most "
            f"{MAX_NAME_LENGTH} (it is used in file names): shorten it"
        )
    if _NAME.fullmatch(name) and ".." not in name:
        return None
    return (
        f"{name!r} cannot name a recipe: use letters, digits and _ . + - (starting with a "
        "letter or digit, no '..'); the name is used in file names"
    )


def recipe_name(text: str) -> str:
    """A name :func:`name_problem` accepts, made from ``text`` (a model file's stem may
    hold spaces): each other character becomes ``_``, runs of dots one dot, and what
    leads up to the first letter or digit is dropped."""
    name = re.sub(r"\.{2,}", ".", re.sub(r"[^A-Za-z0-9_.+-]", "_", text)).lstrip("_.+-")
    return name or "recipe"


def _check_scope(steps: tuple[Step, ...], scope: Scope) -> None:
    """Refuse steps that cannot appear in a ``scope`` schedule, saying why."""
    for step in steps:
        info = step_info(step)
        if info.scope not in (Scope.ANY, scope):
            raise RecipeError(step.where, info.elsewhere)


@dataclass(frozen=True)
class LoweringConfig:
    """Config-only kernel schedule: IREE's own pipeline with our tile sizes.

    ``tile_sizes`` maps a tiling level (``workgroup``, ``thread``/``vector``, ``reduction``,
    ``inner``) to sizes, ``workgroup_size`` is the GPU workgroup (Vulkan), ``pipeline``
    names IREE's pipeline (defaults per target). ``root``: the matched op is its
    dispatch's root, whose config sets the pipeline and the distribution to workgroups
    (``compilation_info``); otherwise it is another op of a dispatch whose root is
    configured too, and gets its own tile sizes (``lowering_config``, x86 only).
    """

    tile_sizes: tuple[tuple[str, tuple[IntOrParam, ...]], ...]
    workgroup_size: tuple[IntOrParam, ...] | None = None
    pipeline: str | None = None
    root: bool = True
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
    when: str | None = None
    """Leave the kernel schedule out unless this condition on the parameters holds
    (:mod:`.conditions`)."""
    where: Where = field(default_factory=Where)

    def __post_init__(self) -> None:
        _check_scope(self.steps, Scope.KERNEL)


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
    parameters: tuple[tuple[str, ParamValue], ...] = ()
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
    shapes: ShapeTable | None = None
    """Tuned parameters per workload shape (:mod:`.shape_table`)."""
    shape_choice: ShapeChoice | None = None
    """Set by resolving: the ``shapes`` entry the parameters came from."""
    skipped: tuple[Skipped, ...] = ()
    """Set by resolving: the steps and kernel schedules whose ``when`` was false."""
    applied: tuple[str, ...] = ()
    """Set by resolving: the graph steps and kernel schedules kept, as ``tdsched run``'s
    ``applied`` lines name them (:func:`.conditions.apply_conditions`)."""
    source: str | None = None

    def __post_init__(self) -> None:
        problem = name_problem(self.name)
        if problem:
            raise RecipeError(Where(self.source, None, "name"), problem)
        for target in self.targets:
            if target not in TARGET_NAMES:
                raise RecipeError(
                    Where(self.source, None, "targets"),
                    f"unknown target {target!r}; available: {', '.join(TARGET_NAMES)}",
                )
        _check_scope(self.graph, Scope.GRAPH)
        check_conditions(self.parameter_dict, self.source, self.conditions())
        if self.shapes is not None:
            self.shapes.check(self.parameter_dict)

    def conditions(self) -> Iterator[Condition]:
        """Every ``when`` of the recipe: its graph steps', its kernel schedules' and their
        steps', in order."""
        for i, step in enumerate(self.graph):
            if step.when is not None:
                yield step_label("graph", i, step.primitive), step.where, step.when
        for kernel in self.kernels:
            scope = kernel_label(kernel.name)
            if kernel.when is not None:
                yield scope, kernel.where, kernel.when
            for i, step in enumerate(kernel.steps):
                if step.when is not None:
                    yield step_label(scope, i, step.primitive), step.where, step.when

    @property
    def parameter_dict(self) -> dict[str, ParamValue]:
        return dict(self.parameters)
