"""Writing a shape table into a recipe file (what ``sweep --shape`` ends with)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from tdsched.schedules.errors import RecipeError
from tdsched.schedules.sweep.freeze import write_shape_table
from tdsched.schedules.yaml_frontend import load_recipe

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
    out = write_shape_table(source, tmp_path / "out.yaml", ["M", "N"], entries, "x86", {"s": 1})
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
    from tdsched.schedules.params import resolve
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
    out = write_shape_table(source, tmp_path / "out.yaml", ["M", "N"], entries, "x86", {})
    assert yaml.safe_load(out.read_text())["shapes"]["entries"] == [
        {"M": 32, "N": 32, "TM": 8},
        {"M": 32, "N": 32, "threads": 1, "TM": 16},
        {"M": 64, "N": 64, "threads": 1, "TM": 8},
        {"M": 64, "N": 64, "threads": 2, "TM": 16},
    ]
