"""A kernel match by ``used_by``: the op using the matched op's result (and its input
count) tells apart ops of different dispatches with the same name and loop bounds (a
matmul whose result is stored, one with a ReLU after it, one with a residual add)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from kernel_dispatch import assert_selects
from tdsched.schedules.base.errors import RecipeError
from tdsched.schedules.compile.pipeline import plan
from tdsched.schedules.frontends.loading import load
from tdsched.schedules.frontends.python_api import Match, RecipeBuilder, workload_file

THREE_MATMULS = """
func.func @three(%a: tensor<64x32xf32>, %b: tensor<32x64xf32>, %res: tensor<64x64xf32>) -> (tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x64xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %stored = linalg.matmul ins(%a, %b : tensor<64x32xf32>, tensor<32x64xf32>) outs(%f : tensor<64x64xf32>) -> tensor<64x64xf32>
  %bt = arith.constant dense<1.5> : tensor<32x64xf32>
  %fused = linalg.matmul ins(%a, %bt : tensor<64x32xf32>, tensor<32x64xf32>) outs(%f : tensor<64x64xf32>) -> tensor<64x64xf32>
  %relu = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
      iterator_types = ["parallel", "parallel"]} ins(%fused : tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.maximumf %x, %z : f32
    linalg.yield %y : f32
  } -> tensor<64x64xf32>
  %bt2 = arith.constant dense<-0.5> : tensor<32x64xf32>
  %mm3 = linalg.matmul ins(%a, %bt2 : tensor<64x32xf32>, tensor<32x64xf32>) outs(%f : tensor<64x64xf32>) -> tensor<64x64xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
      iterator_types = ["parallel", "parallel"]} ins(%mm3, %res : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) {
  ^bb0(%x: f32, %r: f32, %o: f32):
    %y = arith.addf %x, %r : f32
    linalg.yield %y : f32
  } -> tensor<64x64xf32>
  return %stored, %relu, %sum : tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>
}
"""

STORE = "iree_tensor_ext.dispatch.tensor.store"


def _recipe(tmp_path: Path, match: str, target: str = "x86") -> Path:
    (tmp_path / "three.mlir").write_text(THREE_MATMULS)
    config = (
        "{tile_sizes: {workgroup: [16, 16, 0], vector: [8, 16, 0], reduction: [0, 0, 1]}}"
        if target == "x86"
        else "{tile_sizes: {workgroup: [16, 16], thread: [4, 4], reduction: [0, 0, 4]}}"
    )
    path = tmp_path / "r.yaml"
    path.write_text(
        f"name: used_by\nworkload: {{file: three.mlir}}\ntargets: [{target}]\n"
        f"kernels:\n  - name: mm\n    match: {match}\n    config: {config}\n"
    )
    return path


def test_used_by_becomes_a_single_use_match_on_the_users_name(tmp_path: Path) -> None:
    library = plan(load(str(_recipe(tmp_path, "{op: linalg.matmul, used_by: linalg.generic}"))))
    text = library.scripts.kernel_library
    assert text is not None
    assert re.search(r"transform\.match\.structured\.result %\w+\[0\] single", text)
    assert re.search(r'transform\.match\.operation_name %\w+ \["linalg\.generic"\]', text)


def test_the_python_front_end_takes_used_by(tmp_path: Path) -> None:
    (tmp_path / "three.mlir").write_text(THREE_MATMULS)
    r = RecipeBuilder("used_by", workload=workload_file(str(tmp_path / "three.mlir")))
    r.kernel_config(
        "mm",
        match=Match("linalg.matmul", used_by=STORE),
        tile_sizes={"workgroup": [16, 16, 0], "vector": [8, 16, 0], "reduction": [0, 0, 1]},
    )
    text = plan(r.build()).scripts.kernel_library
    assert text is not None
    assert re.search(rf'transform\.match\.operation_name %\w+ \["{re.escape(STORE)}"\]', text)


def test_a_used_by_that_names_no_operation_is_refused_at_its_line(tmp_path: Path) -> None:
    path = _recipe(tmp_path, "{op: linalg.matmul, used_by: linalg.generc}")
    with pytest.raises(RecipeError, match=r"r\.yaml:\d+: kernels\[0\]\.match\.used_by: no op"):
        plan(load(str(path)))


@pytest.mark.usefixtures("iree")
@pytest.mark.parametrize(
    ("used_by", "configured"),
    [
        ("linalg.generic", [None, "mm", "mm"]),
        (STORE, ["mm", None, None]),
        ("{op: linalg.generic, inputs: 1}", [None, "mm", None]),
        ("{op: linalg.generic, inputs: 2}", [None, None, "mm"]),
    ],
)
def test_used_by_selects_among_three_same_shape_matmuls_on_x86(
    used_by: str, configured: list[str | None], tmp_path: Path
) -> None:
    path = _recipe(tmp_path, f"{{op: linalg.matmul, used_by: {used_by}}}")
    assert_selects(path, "x86", tmp_path, configured, 1e-4)


@pytest.mark.usefixtures("vulkan")
def test_used_by_selects_the_matmul_with_an_epilogue_on_vulkan(tmp_path: Path) -> None:
    path = _recipe(tmp_path, "{kind: contraction, used_by: linalg.generic}", "vulkan")
    report = assert_selects(path, "vulkan", tmp_path, [None, "mm", "mm"], 1e-4)
    assert report.max_abs_error is not None and np.isfinite(report.max_abs_error)


@pytest.mark.parametrize("used_by", [{"inputs": 2}, {"op": "linalg.generic", "input": 2}])
def test_a_python_used_by_mapping_without_op_or_with_other_keys_is_refused(
    used_by: dict[str, str | int],
) -> None:
    with pytest.raises(RecipeError, match=r"test_match_used_by\.py:\d+: used_by: expected a name"):
        Match("linalg.matmul", used_by=used_by)
