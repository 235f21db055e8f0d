"""softmax_x86: config kernels for the ops of one dispatch, told apart by their input
count (`match: {inputs: N}`), a non-root op's own tile sizes (`config: {root: false}`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tdsched.schedules.base.errors import RecipeError
from tdsched.schedules.compile.pipeline import plan
from tdsched.schedules.frontends.loading import load
from tdsched.schedules.frontends.python_api import Match, RecipeBuilder, generator
from tdsched.schedules.measure.run_report import run


def _library(recipe_text: str, tmp_path: Path, target: str | None = None) -> str:
    path = tmp_path / "r.yaml"
    path.write_text(recipe_text)
    library = plan(load(str(path)), target).scripts.kernel_library
    assert library is not None
    return library


RECIPE = """name: sm
workload: {generator: softmax, args: {M: 64, N: 256}}
targets: [x86, vulkan]
kernels:
  - name: row_sum
    match: {op: linalg.generic, inputs: 2}
    config: {tile_sizes: {workgroup: [8, 0], vector: [2, 0], reduction: [0, 32]}}
  - name: normalize
    match: {op: linalg.generic, inputs: 3}
    config:
      root: false
      tile_sizes: {vector: [2, 0], inner: [0, 16]}
"""


def test_kernels_match_ops_by_input_count_and_a_non_root_op_gets_a_lowering_config(
    tmp_path: Path,
) -> None:
    library = _library(RECIPE, tmp_path)
    counts = re.findall(r"transform\.param\.constant (\d+) : i64", library)
    assert counts == ["2", "3"]
    assert library.count("transform.match.structured.num_inputs") == 2
    assert library.count("transform.match.param.cmpi eq") == 2
    root = "lowering_config<distribution = [8, 0], vector_common_parallel = [2, 0], "
    assert root + "vector_reduction = [0, 32]>" in library
    other = "lowering_config<vector_common_parallel = [2, 0], vector_inner_parallel = [0, 16]>"
    assert other in library
    assert 'transform.annotate %arg0 "compilation_info"' in library
    assert 'transform.annotate %arg0 "lowering_config"' in library


def test_the_python_front_end_writes_the_same_kernels(tmp_path: Path) -> None:
    r = RecipeBuilder("sm", workload=generator("softmax", M=64, N=256), targets=["x86"])
    r.kernel_config(
        "row_sum",
        match=Match("linalg.generic", inputs=2),
        tile_sizes={"workgroup": [8, 0], "vector": [2, 0], "reduction": [0, 32]},
    )
    r.kernel_config(
        "normalize",
        match=Match("linalg.generic", inputs=3),
        tile_sizes={"vector": [2, 0], "inner": [0, 16]},
        root=False,
    )
    library = plan(r.build()).scripts.kernel_library
    assert library is not None
    without_locations = re.sub(r" loc\([^)]*\)|#loc.*\n", "", library)
    assert without_locations == re.sub(r" loc\([^)]*\)|#loc.*\n", "", _library(RECIPE, tmp_path))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            ("tile_sizes: {vector: [2, 0], inner: [0, 16]}", "tile_sizes: {workgroup: [8, 0]}"),
            "a root: false config has no 'workgroup' level",
        ),
        (("root: false", "root: false\n      pipeline: CPUDefault"), "the pipeline and "),
        (("inputs: 2}", "inputs: -1}"), "inputs counts input operands (>= 0), got -1"),
    ],
)
def test_bad_configs_are_refused_at_their_line(
    change: tuple[str, str], message: str, tmp_path: Path
) -> None:
    with pytest.raises(RecipeError, match=re.escape(message)) as info:
        _library(RECIPE.replace(*change), tmp_path)
    assert "r.yaml:" in str(info.value)


def test_a_non_root_config_is_refused_on_vulkan(tmp_path: Path) -> None:
    root_kernel = RECIPE[RECIPE.index("  - name: row_sum") : RECIPE.index("  - name: normalize")]
    with pytest.raises(RecipeError, match=r"root: false \(tile sizes .*\) is for x86"):
        _library(RECIPE.replace(root_kernel, ""), tmp_path, "vulkan")


def test_inputs_does_not_select_ops_inside_a_schedule(tmp_path: Path) -> None:
    text = RECIPE + "graph:\n  - match: {op: linalg.softmax, inputs: 1, as: s}\n"
    with pytest.raises(RecipeError, match="'inputs', 'used_by' and 'body' select kernels"):
        _library(text, tmp_path)


@pytest.mark.usefixtures("iree")
def test_softmax_x86_matches_numpy_where_no_tile_divides_the_row() -> None:
    # 40 columns: neither the 32-wide row sums nor the normalization's vectors divide them
    report = run(plan(load("softmax_x86"), None, {"M": 24, "N": 40}), time_it=False)
    assert report.status == "ok", report
    assert report.reference == "numpy"
    assert report.max_abs_error is not None and report.max_abs_error < 1e-6
