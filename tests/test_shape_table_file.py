"""Writing a shape table into a recipe file (what ``sweep --shape`` ends with)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from tdsched.schedules.base.errors import RecipeError
from tdsched.schedules.frontends.yaml_frontend import load_recipe
from tdsched.schedules.sweep.freeze import write_shape_table

RECIPE = """\
name: t
workload: {generator: matmul, args: {M: "${M}", N: "${N}", K: 64}}
targets: [vulkan, x86]
parameters: {M: 64, N: 64, TM: 8}
space: {TM: [8, 16]}
shapes:
  key: [M, N]
  rule: exact
  entries:
    - {M: 64, N: 64, TM: 16}
    - {M: 32, N: 32, TM: 8}
"""


def test_entries_merge_by_shape_and_the_space_stays(tmp_path: Path) -> None:
    source = tmp_path / "t.yaml"
    source.write_text(RECIPE)
    entries = [{"M": 64, "N": 64, "iree_default": True, "note": "n"}, {"M": 16, "N": 16, "TM": 8}]
    written = write_shape_table(source, tmp_path / "out.yaml", ["M", "N"], entries, "x86", {"s": 1})
    out = written.path
    assert written.replaced == [{"M": 64, "N": 64, "TM": 16}]  # the recipe's own
    document = yaml.safe_load(out.read_text())
    assert document["targets"] == ["x86", "vulkan"] and document["space"] == {"TM": [8, 16]}
    assert document["shapes"]["rule"] == "exact"
    assert document["shapes"]["entries"] == [
        {"M": 16, "N": 16, "TM": 8},
        {"M": 32, "N": 32, "TM": 8},
        {"M": 64, "N": 64, "iree_default": True, "note": "n"},
    ]
    assert document["provenance"] == {"s": 1}
    assert load_recipe(out).shapes is not None  # it loads as a recipe


def test_a_table_with_another_key_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "t.yaml"
    source.write_text(RECIPE)
    with pytest.raises(RecipeError, match=r"keyed by \['M', 'N'\], the sweep's shapes by \['M'\]"):
        write_shape_table(source, tmp_path / "o.yaml", ["M"], [{"M": 8}], "x86", {})


def test_a_frozen_best_recipe_drops_the_table_that_would_override_it(tmp_path: Path) -> None:
    from tdsched.schedules.dsl.params import resolve
    from tdsched.schedules.sweep.freeze import write_frozen

    source = tmp_path / "t.yaml"
    source.write_text(RECIPE)
    frozen = write_frozen(source, tmp_path / "best.yaml", {"TM": 8}, "x86", {"s": 1})
    recipe = load_recipe(frozen)
    assert recipe.shapes is None
    assert resolve(recipe).parameter_dict["TM"] == 8  # not the 64x64 entry's 16


def test_an_entry_for_another_thread_count_is_kept_beside_the_new_one(tmp_path: Path) -> None:
    source = tmp_path / "t.yaml"
    source.write_text(
        RECIPE.replace("{M: 64, N: 64, TM: 16}", "{M: 64, N: 64, threads: 2, TM: 16}")
    )
    entries = [
        {"M": 64, "N": 64, "threads": 1, "TM": 8},
        {"M": 32, "N": 32, "threads": 1, "TM": 16},
    ]
    out = write_shape_table(source, tmp_path / "out.yaml", ["M", "N"], entries, "x86", {}).path
    assert yaml.safe_load(out.read_text())["shapes"]["entries"] == [
        {"M": 32, "N": 32, "TM": 8},
        {"M": 32, "N": 32, "threads": 1, "TM": 16},
        {"M": 64, "N": 64, "threads": 1, "TM": 8},
        {"M": 64, "N": 64, "threads": 2, "TM": 16},
    ]


def test_a_second_sweep_into_the_same_file_keeps_the_first_sweeps_entries(
    tmp_path: Path,
) -> None:
    """Hardening item 11: a second ``sweep --shape`` into the table file of a first merges
    into it (an entry for the same shape and conditions replaced), never drops it."""
    source = tmp_path / "t.yaml"
    source.write_text(RECIPE)
    out = tmp_path / "t.x86.shapes.yaml"
    first = [
        {"M": 16, "N": 16, "threads": 2, "TM": 8, "note": "sweep 1"},
        {"M": 16, "N": 16, "threads": 1, "TM": 8, "note": "sweep 1"},
    ]
    provenance = {"database": "s.db", "sweeps": [1]}
    assert write_shape_table(source, out, ["M", "N"], first, "x86", provenance).replaced == []
    second = [
        {"M": 16, "N": 16, "threads": 2, "TM": 16, "note": "sweep 2"},
        {"M": 128, "N": 128, "threads": 2, "TM": 16, "note": "sweep 2"},
    ]
    written = write_shape_table(
        source, out, ["M", "N"], second, "x86", {"database": "s.db", "sweeps": [2]}
    )
    assert written.replaced == [first[0]]
    document = yaml.safe_load(out.read_text())
    assert document["shapes"]["entries"] == [
        {"M": 16, "N": 16, "threads": 1, "TM": 8, "note": "sweep 1"},
        second[0],
        {"M": 32, "N": 32, "TM": 8},
        {"M": 64, "N": 64, "TM": 16},
        second[1],
    ]
    assert document["provenance"]["sweeps"] == [1, 2]
    # a sweep from another database keeps the entries, and lists its own sweeps only
    other = write_shape_table(
        source, out, ["M", "N"], [], "x86", {"database": "t.db", "sweeps": [1]}
    )
    assert len(yaml.safe_load(other.path.read_text())["shapes"]["entries"]) == 5
    assert yaml.safe_load(out.read_text())["provenance"]["sweeps"] == [1]
