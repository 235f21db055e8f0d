"""A kernel match by ``body``: the body of a ``linalg.generic`` tells apart ops that
agree on their name, loop bounds, input count and the op using their result, as the
exp-once softmax's row max and row sum do (transform_lib/op_body.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from iree.compiler import ir
from kernel_dispatch import assert_selects, prepared_tasks
from tdsched.recipes.workloads.lowered import file_workload
from tdsched.schedules.base.errors import RecipeError
from tdsched.schedules.compile.pipeline import apply_graph, plan
from tdsched.schedules.frontends.loading import load
from tdsched.schedules.frontends.python_api import Match, RecipeBuilder, generator
from tdsched.schedules.measure.run_report import run
from tdsched.transform_lib.op_body import body_of

MAX = """^bb0(%in: f32, %out: f32):
  %0 = arith.maximumf %in, %out : f32
  linalg.yield %0 : f32"""
SUM = MAX.replace("arith.maximumf", "arith.addf")
TILES = {
    "x86": "{workgroup: [8, 0], vector: [2, 0], reduction: [0, 32]}",
    "vulkan": "{workgroup: [8, 0], thread: [1, 0], reduction: [0, 32]}",
}


def _recipe(tmp_path: Path, body: str, target: str = "x86") -> Path:
    indented = "\n".join("        " + line for line in body.splitlines())
    path = tmp_path / "r.yaml"
    path.write_text(
        "name: body\n"
        "workload: {generator: softmax, args: {M: 32, N: 256}}\n"
        f"targets: [{target}]\n"
        "graph:\n  - decompose_softmax: {}\n"
        "kernels:\n"
        "  - name: row\n"
        "    match:\n"
        "      op: linalg.generic\n"
        "      inputs: 1\n"
        f"      body: |\n{indented}\n"
        f"    config: {{tile_sizes: {TILES[target]}}}\n"
    )
    return path


def test_a_body_becomes_a_structural_region_match(tmp_path: Path) -> None:
    library = plan(load(str(_recipe(tmp_path, MAX)))).scripts.kernel_library
    assert library is not None
    match = library[library.index("transform.iree.match.regions") :]
    assert re.search(r"linalg\.generic \{indexing_maps = \[#map\d*, #map\d*\]", match)
    assert "arith.maximumf %in, %out : f32" in match


def test_the_python_front_end_takes_a_body(tmp_path: Path) -> None:
    r = RecipeBuilder("body", workload=generator("softmax", M=32, N=256), targets=["x86"])
    r.kernel_config(
        "row",
        match=Match("linalg.generic", inputs=1, body=MAX),
        tile_sizes={"workgroup": [8, 0], "vector": [2, 0], "reduction": [0, 32]},
    )
    library = plan(r.build()).scripts.kernel_library
    assert library is not None
    assert "transform.iree.match.regions" in library
    assert "arith.maximumf %in, %out : f32" in library


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("%0 = arith.maximumf %in, %out : f32", r"expected a linalg.generic's block"),
        (MAX.replace("%in, %out", "%in, %cst"), r"use of undeclared SSA value name"),
        (MAX.replace("arith.maximumf", "arith.maxmumf"), r"not a valid linalg.generic body"),
        (MAX.replace("%0 : f32", "%0, %0, %0 : f32, f32, f32"), r"3 values for 2 block"),
    ],
)
def test_a_body_that_is_no_generic_body_is_refused_at_its_line(
    body: str, message: str, tmp_path: Path
) -> None:
    with pytest.raises(RecipeError, match=r"r\.yaml:\d+: kernels\[0\]\.match\.body: ") as caught:
        plan(load(str(_recipe(tmp_path, body))))
    assert re.search(message, str(caught.value)), caught.value


def test_the_census_reads_a_generics_body_and_none_that_captures_a_value() -> None:
    module = """
func.func @f(%a: tensor<4x8xf32>, %o: tensor<4xf32>, %p: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4x8xf32>) {
  %c = arith.constant 2.0 : f32
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]} ins(%a : tensor<4x8xf32>) outs(%o : tensor<4xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %m = arith.maximumf %x, %acc : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%a : tensor<4x8xf32>) outs(%p : tensor<4x8xf32>) {
  ^bb0(%x: f32, %y: f32):
    %m = arith.mulf %x, %c : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  return %r, %s : tensor<4xf32>, tensor<4x8xf32>
}"""
    with ir.Context():
        parsed = ir.Module.parse(module)
        ops = list(parsed.body.operations[0].regions[0].blocks[0].operations)
        reduction, scale = ops[1].operation, ops[2].operation
        # Numbered values start from 0 whatever the function around the op.
        assert body_of(reduction) == MAX
        assert body_of(scale) is None


@pytest.mark.usefixtures("iree")
@pytest.mark.parametrize(("body", "configured"), [(MAX, ["row", None]), (SUM, [None, "row"])])
def test_a_body_selects_the_row_max_or_the_row_sum_on_x86(
    body: str, configured: list[str | None], tmp_path: Path
) -> None:
    assert_selects(_recipe(tmp_path, body), "x86", tmp_path, configured, 1e-6)


@pytest.mark.usefixtures("vulkan")
def test_a_body_selects_the_row_sum_on_vulkan(tmp_path: Path) -> None:
    assert_selects(_recipe(tmp_path, SUM, "vulkan"), "vulkan", tmp_path, [None, "row"], 1e-6)


@pytest.mark.usefixtures("iree")
def test_tune_templates_both_exp_once_softmax_dispatches(tmp_path: Path) -> None:
    recipe = _recipe(tmp_path, MAX)
    model = tmp_path / "model.mlir"
    model.write_text(apply_graph(plan(load(str(recipe)))).module)
    bodies = []
    for tuning in prepared_tasks(file_workload(model), tmp_path / "tasks"):
        assert tuning.recipe is not None, tuning.reason
        document = yaml.safe_load(tuning.recipe.read_text())
        bodies.append(document["kernels"][0]["match"]["body"])
        # The sum's scaling reads a constant IREE hoisted out of its body: no body
        # tells it apart from the exponentials, so it keeps IREE's tiles (and IV goes).
        chosen = {"WG": 8, "VR": 2, "RV": 32, "IV": 16}
        values = {k: v for k, v in chosen.items() if k in document["parameters"]}
        report = run(plan(load(str(tuning.recipe)), None, values), time_it=False)
        assert report.status == "ok", report
    assert sorted(bodies) == sorted([MAX, SUM])
