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

import pytest
from tdsched.schedules.compile.build_target import BuildTarget
from tdsched.schedules.compile.pipeline import plan
from tdsched.schedules.dsl.shape_table import ShapeEntry
from tdsched.schedules.frontends.loading import load, shipped_recipe_names
from tdsched.schedules.measure.run_report import run
from tdsched.targets.cpu_isa import host_isa
from tdsched.targets.cpu_model import host_cpu_model

CPU_FOR_ISA = {"avx2": "haswell", "sse": "x86-64"}
"""An LLVM CPU of each ISA below AVX-512 (AVX-512: the host, when it has it)."""
WIDER = ["sse", "avx2", "avx512"]


def _scheduled_entries() -> list[tuple[str, ShapeEntry]]:
    found = []
    for name in shipped_recipe_names():
        table = load(name).shapes
        if table is not None:
            found += [(name, entry) for entry in table.entries if not entry.iree_default]
    return found


ENTRIES = _scheduled_entries()


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
