"""Every shape-table entry of a shipped recipe that runs a schedule is selected at its own
shape, thread count, vector ISA and CPU model, builds, and is correct against the
reference: a table entry is a transform the recipe applies, checked numerically like the
recipe's defaults. AVX2 entries are built for ``--cpu haswell``, which runs on any AVX2
machine; AVX-512 entries for this machine, when it has AVX-512. An entry tuned on another
CPU model than this machine's is selected for that model (``--cpu``, not built), and its
values are built for this machine; so are those of an entry without a model that an entry
for this machine's model replaces at the same shape and thread count. A recipe that
targets Vulkan too is checked at every shape of its table on Vulkan as well."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
from tdsched.schedules.compile.build_target import BuildTarget
from tdsched.schedules.compile.pipeline import plan
from tdsched.schedules.dsl.shape_table import ShapeEntry
from tdsched.schedules.frontends.loading import load
from tdsched.schedules.frontends.shipped import shipped_header, shipped_recipe_names
from tdsched.schedules.measure.run_report import run
from tdsched.targets.cpu_isa import host_isa
from tdsched.targets.cpu_model import host_cpu_model
from test_emission import _without_locations

CPU_FOR_ISA = {"avx2": "haswell", "sse": "x86-64"}
"""An LLVM CPU of each ISA below AVX-512 (AVX-512: the host, when it has it)."""
WIDER = ["sse", "avx2", "avx512"]


TWINS = {"matmul_x86_py": "matmul_x86"}
"""Shipped recipes that are another's in a second front end (the Python API, taking the
YAML recipe's table): their entries are checked to resolve and emit exactly as the
original's (:func:`test_a_twin_recipe_plans_every_entry_as_its_original`, fast), so
building and running them again would check the same build twice."""


def _scheduled_entries(names: list[str]) -> list[tuple[str, ShapeEntry]]:
    found = []
    for name in names:
        table = load(name).shapes
        if table is not None:
            found += [(name, entry) for entry in table.entries if not entry.iree_default]
    return found


ENTRIES = _scheduled_entries([n for n in shipped_recipe_names() if n not in TWINS])


def _planned(recipe: str, values: dict[str, Any]) -> tuple[list[Any], str]:
    """What a build of ``recipe`` at ``values`` applies: its resolved graph steps (without
    where they were written), its kernel schedules' matches and configs, and its kernel
    library's text (without locations, which name each front end's own file; the steps'
    handle names, which the Python API makes up, are not in it)."""
    p = plan(load(recipe), BuildTarget(None), values)

    def fields(obj: Any) -> Any:
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.name != "where"}

    kernels = [(k.name, k.match, len(k.steps), k.config) for k in p.recipe.kernels]
    library = p.scripts.kernel_library
    text = _without_locations(library) if library else ""
    return [[fields(s) for s in p.recipe.graph], kernels], text


@pytest.mark.parametrize(("twin", "original"), TWINS.items())
def test_a_twin_recipe_plans_every_entry_as_its_original(twin: str, original: str) -> None:
    """The twin's table is the original's; one entry of each way the recipe computes
    (the string parameters its ``when`` conditions read: layout, unpack placement, ...)
    plans the same build in both (planning every entry takes a minute)."""
    entries = _scheduled_entries([original])
    assert entries and load(twin).shapes == load(original).shapes
    ways: dict[tuple[tuple[str, Any], ...], dict[str, Any]] = {}
    by_size = sorted(
        entries, key=lambda e: math.prod(v for _, v in e[1].shape if isinstance(v, int))
    )
    for _, entry in by_size:  # the smallest shape of each way: its workload builds fastest
        values = {**dict(entry.shape), **dict(entry.params)}
        ways.setdefault(tuple((k, v) for k, v in values.items() if isinstance(v, str)), values)
    assert len(ways) > 1
    for values in ways.values():
        assert _planned(twin, values) == _planned(original, values), values


def test_the_shipped_tables_have_scheduled_entries() -> None:
    recipes = {name for name, _ in ENTRIES}
    assert {"matmul_x86", "resnet_block_x86", "small_cnn_x86"} <= recipes


@pytest.mark.parametrize(
    ("recipe", "entry"), ENTRIES, ids=[f"{name}[{entry.label}]" for name, entry in ENTRIES]
)
@pytest.mark.usefixtures("iree")
def test_a_scheduled_entry_applies_and_matches_the_reference(
    recipe: str, entry: ShapeEntry
) -> None:
    here = host_isa()
    runs = here is not None and entry.isa is not None and WIDER.index(here) > WIDER.index(entry.isa)
    cpu = (
        "host" if entry.isa in (None, here) else CPU_FOR_ISA.get(entry.isa or "") if runs else None
    )
    if cpu is None:
        pytest.skip(f"this machine ({host_isa()}) cannot run a build for {entry.isa}")
    shape = dict(entry.shape)
    # selected where it was tuned: on its own CPU model (named, not built), else here
    built_here = entry.cpu in (None, host_cpu_model())
    on = BuildTarget(None, cpu=cpu if built_here else str(entry.cpu), threads=entry.threads)
    p = plan(load(recipe), on, shape)
    choice = p.recipe.shape_choice
    assert choice is not None and choice.entry is not None, choice
    # an entry without cpu yields, at its own place, to one tuned on this machine's model
    shadowed = (
        entry.cpu is None
        and choice.entry.cpu == host_cpu_model()
        and (choice.entry.shape, choice.entry.threads) == (entry.shape, entry.threads)
    )
    assert choice.entry == entry or shadowed, choice
    if not built_here or shadowed:
        # its values, built for this machine
        p = plan(
            load(recipe),
            BuildTarget(None, cpu=cpu, threads=entry.threads),
            {**shape, **dict(entry.params)},
        )
    report = run(p, time_it=False)
    assert report.status == "ok", report


def _vulkan_shapes() -> list[tuple[str, dict[str, int | str]]]:
    """Each shape of the table of every shipped recipe that targets Vulkan too."""
    found = []
    for name in shipped_recipe_names():
        recipe = load(name)
        if recipe.shapes is not None and "vulkan" in recipe.targets:
            shapes = dict.fromkeys(entry.shape for entry in recipe.shapes.entries)
            found += [(name, dict(shape)) for shape in shapes]
    return found


VULKAN_SHAPES = _vulkan_shapes()


@pytest.mark.parametrize(
    ("recipe", "shape"),
    VULKAN_SHAPES,
    ids=[f"{name}[{','.join(f'{k}={v}' for k, v in s.items())}]" for name, s in VULKAN_SHAPES],
)
def test_every_shape_of_a_table_is_correct_on_vulkan(
    recipe: str, shape: dict[str, int | str], vulkan: None
) -> None:
    """The grid of a recipe written for x86 and Vulkan, on Vulkan: what the table's entry
    there makes of it (a layout, IREE's own pipeline) builds and matches the reference."""
    p = plan(load(recipe), "vulkan", shape)
    choice = p.recipe.shape_choice
    assert choice is not None and choice.how == "exact", choice
    report = run(p, time_it=False)
    assert report.status == "ok", report


def test_each_shipped_recipes_header_is_what_building_it_gives() -> None:
    # `tdsched list` reads headers without building the recipes: they must agree.
    for name in shipped_recipe_names():
        header = shipped_header(name)
        recipe = load(name)
        assert header is not None, name
        assert (header.name, header.targets, header.description) == (
            recipe.name,
            recipe.targets,
            recipe.description,
        ), name
        assert header.sweepable == bool(recipe.space.axes), name
