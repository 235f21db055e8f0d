"""``tdsched tune``'s row-reduction template (IREE's pipeline with swept tile sizes for a
layer norm's or a softmax's dispatch) and the softmax task workload."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from kernel_dispatch import prepared_tasks
from onnx_models import encoder_block_model
from tdsched.recipes.workloads.lowered import file_workload
from tdsched.schedules.compile.pipeline import plan
from tdsched.schedules.frontends.loading import load
from tdsched.schedules.measure.run_report import run
from tdsched.schedules.tune.templates import NoTemplate, TemplateKernel
from tdsched.schedules.tune.templates_rows import is_row_reduction, row_reduction_template
from tdsched.transform_lib.dispatch_config import ConfiguredDispatch, ConfiguredOp
from tdsched.transform_lib.standalone_dispatch import as_softmax

ROWS = ("parallel", "reduction")
OVER = ("parallel", "parallel")


def _norm(after: tuple[ConfiguredOp, ...]) -> ConfiguredDispatch:
    """A layer norm's dispatch over 64x256: fill, row sum (the root), ``after``."""
    root = ConfiguredOp(
        "linalg.generic",
        (64, 256),
        ROWS,
        (0,),
        {"distribution": (16, 0), "vector_common_parallel": (8, 0), "vector_reduction": (0, 16)},
    )
    fill = ConfiguredOp("linalg.fill", (64,), ("parallel",), (0,), {})
    return ConfiguredDispatch("t0_dispatch_0", (fill, root, *after), 1, {}, True, 1)


NORMALIZE = ConfiguredOp(
    "linalg.generic", (64, 256), OVER, (0, 1), {"vector_inner_parallel": (0, 32)}
)


def test_a_row_reduction_gets_configs_for_its_root_and_the_ops_over_its_rows() -> None:
    dispatch = _norm((NORMALIZE,))
    assert is_row_reduction(dispatch)
    template = row_reduction_template(dispatch)
    assert template.config == {
        "tile_sizes": {
            "workgroup": ["${WG}", 0],
            "vector": ["${VR}", 0],
            "reduction": [0, "${RV}"],
        }
    }
    assert template.more_kernels == (
        TemplateKernel(
            2,
            "after",
            {
                "root": False,
                "tile_sizes": {"vector": ["${VR}", 0], "inner": [0, "${IV}"]},
            },
        ),
    )
    # Centred on IREE's tiles: 16 rows per workgroup, 8 per vector, 16 and 32 columns.
    assert template.parameters == {"WG": 16, "VR": 8, "RV": 16, "IV": 32}
    assert template.space["WG"] == [4, 8, 16, 32, 64]
    assert template.constraints == ["WG % VR == 0"]
    # Without the op after the root's own kernel, IV goes with it.
    bare = template.keeping([])
    assert "IV" not in bare.space and "IV" not in bare.parameters and not bare.more_kernels


def test_a_dispatch_whose_epilogue_runs_over_the_roots_output_is_no_row_reduction() -> None:
    mean = ConfiguredOp("linalg.generic", (64,), ("parallel",), (0,), {})
    assert not is_row_reduction(_norm((mean,)))
    assert not is_row_reduction(_norm(()))
    with pytest.raises(NoTemplate, match="not a row reduction"):
        row_reduction_template(_norm((mean,)))


@pytest.mark.usefixtures("iree")
def test_softmax_and_layer_norm_tasks_get_row_templates_that_run_correct(tmp_path: Path) -> None:
    encoder_block_model(tmp_path / "block.onnx")
    folder = tmp_path / "tasks"
    templated: list[tuple[str, Path]] = []
    for tuning in prepared_tasks(file_workload(tmp_path / "block.onnx"), folder):
        if tuning.recipe is not None and "config" in tuning.recipe.read_text():
            templated.append((tuning.task.layers[0], tuning.recipe))
    # The softmax (written as a linalg.softmax: IREE forms its one dispatch from it) and
    # the layer norm's two dispatches (its mean, then its variance and normalization).
    assert sorted(layer for layer, _ in templated) == ["norm", "norm", "softmax"]
    softmax = yaml.safe_load(dict(templated)["softmax"].read_text())
    assert [k["match"].get("inputs") for k in softmax["kernels"]] == [2, 3]
    assert "linalg.softmax" in (folder / f"{softmax['name'][5:]}.mlir").read_text()
    for _, recipe in templated:
        values = {"WG": 8, "VR": 2, "RV": 32, "IV": 16}
        report = run(plan(load(str(recipe)), None, values), time_it=False)
        assert report.status == "ok", report
        assert report.max_abs_error is not None and report.max_abs_error < 1e-5


def test_a_decomposed_softmax_is_rebuilt_as_the_op_and_nothing_else_is() -> None:
    decomposed = """
func.func @t0(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %ninf = arith.constant -3.40282347E+38 : f32
  %e = tensor.empty() : tensor<4xf32>
  %f = linalg.fill ins(%ninf : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %m = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
      iterator_types = ["parallel", "reduction"]} ins(%x : tensor<4x8xf32>) outs(%f : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32):
    %r = arith.maxnumf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %o = tensor.empty() : tensor<4x8xf32>
  %n = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i, j)>],
      iterator_types = ["parallel", "parallel"]} ins(%x, %m : tensor<4x8xf32>, tensor<4xf32>) outs(%o : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %r = arith.subf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  return %n : tensor<4x8xf32>
}
"""
    rebuilt = as_softmax(decomposed)
    assert rebuilt is not None
    assert "linalg.softmax dimension(1) ins(%arg0 : tensor<4x8xf32>)" in rebuilt
    assert "func.func @t0(" in rebuilt
    assert as_softmax(decomposed.replace("arith.maxnumf", "arith.addf")) is None
