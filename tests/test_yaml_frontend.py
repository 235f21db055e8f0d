"""YAML front end: valid recipes load; every invalid one names file, line and field."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from tdsched.schedules.base.errors import RecipeError
from tdsched.schedules.dsl.params import resolve
from tdsched.schedules.dsl.steps import FuseIntoStep, MatchStep, TileStep
from tdsched.schedules.frontends.yaml_frontend import load_recipe, parse_recipe

GOOD = """\
name: t
workload:
  generator: matmul
  args: {M: 64, N: 64, K: 64}
parameters: {TM: 16}
kernels:
  - name: mm
    match: {op: linalg.matmul}
    schedule:
      - match: {op: linalg.fill, as: fill}
      - tile: {sizes: ["${TM}", 16, 0], loop: forall, mapping: workgroup, loops: wg}
      - fuse_into: {producer: fill, loop: wg}
      - vectorize: {}
"""


def _error(text: str) -> RecipeError:
    with pytest.raises(RecipeError) as info:
        resolve(parse_recipe(textwrap.dedent(text), "r.yaml"))
    return info.value


def test_good_recipe_loads_steps_in_order() -> None:
    recipe = parse_recipe(GOOD, "r.yaml")
    steps = recipe.kernels[0].steps
    assert [type(s) for s in steps][:3] == [MatchStep, TileStep, FuseIntoStep]
    tile = steps[1]
    assert isinstance(tile, TileStep) and tile.sizes == ("${TM}", 16, 0)
    assert tile.where.line == 11 and tile.where.file == "r.yaml"


def test_parameters_substitute_with_their_type() -> None:
    recipe = resolve(parse_recipe(GOOD, "r.yaml"), {"TM": 32})
    tile = recipe.kernels[0].steps[1]
    assert isinstance(tile, TileStep) and tile.sizes == (32, 16, 0)


def test_a_reference_may_compute_from_parameters() -> None:
    text = GOOD.replace('["${TM}", 16, 0]', '["${TM * 2}", "${64 // TM}", 0]')
    recipe = resolve(parse_recipe(text, "r.yaml"), {"TM": 8})
    tile = recipe.kernels[0].steps[1]
    assert isinstance(tile, TileStep) and tile.sizes == (16, 8, 0)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            GOOD.replace("loop: forall", "loop: parallel"),
            "r.yaml:11: kernels[0].schedule[1].tile.loop: got 'parallel'; allowed: for, forall",
        ),
        (
            GOOD.replace("- vectorize: {}", "- vectorise: {}"),
            "r.yaml:13: kernels[0].schedule[3].vectorise: unknown primitive 'vectorise'",
        ),
        (
            GOOD.replace("sizes:", "size:"),
            "r.yaml:11: kernels[0].schedule[1].tile.size: unknown field 'size'",
        ),
        (
            GOOD.replace('"${TM}"', '"${TX}"'),
            "r.yaml:11: kernels[0].schedule[1].tile: parameter ${TX} is not declared",
        ),
        (
            GOOD.replace('"${TM}"', '"${TM * TX}"'),
            "r.yaml:11: kernels[0].schedule[1].tile: in ${TM * TX}: 'TM * TX' names TX, "
            "which is not a parameter; declared: TM",
        ),
        (
            GOOD.replace('"${TM}"', '"${TM > 8}"'),
            "r.yaml:11: kernels[0].schedule[1].tile: ${TM > 8} is a condition, not a value",
        ),
        (
            GOOD.replace('"${TM}"', '"${TM / 3}"'),
            "r.yaml:11: kernels[0].schedule[1].tile.sizes",
        ),
        (
            GOOD.replace("match: {op: linalg.matmul}", "match: {}"),
            "r.yaml:8: kernels[0].match: give at least one of 'op', 'kind'",
        ),
        (
            GOOD.replace("targets", "x").replace("name: t\n", "name: t\ntargets: [gpu]\n"),
            "r.yaml:2: targets[0]: got 'gpu'; allowed: x86, vulkan",
        ),
        (
            "name: t\nworkload: {generator: matmul, args: {M: 1}}\nkernels: [{name: k}]\n",
            "r.yaml:3: kernels[0]: missing required field 'match'",
        ),
        ("name: t\nworkload: [1\n", "r.yaml:3: not valid YAML"),
    ],
)
def test_errors_name_file_line_and_field(text: str, expected: str) -> None:
    assert str(_error(text)).startswith(expected), str(_error(text))


def test_unreadable_file_is_a_recipe_error(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match="cannot read the recipe"):
        load_recipe(tmp_path / "missing.yaml")


def test_yaml_is_loaded_safely() -> None:
    text = "name: !!python/name:os.system ''\nworkload: {generator: matmul}\n"
    with pytest.raises(RecipeError, match=r"^r.yaml:1: name: unsupported YAML value"):
        parse_recipe(text, "r.yaml")
