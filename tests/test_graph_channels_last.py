"""channels_last: IR structure (one transpose each way), report, refusals; numerics in
numpy (float64) and through IREE on x86 and Vulkan; a recipe step."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from iree.compiler import ir
from iree_numerics import assert_matches_numpy, assert_same_results
from tdsched.recipes.models.zoo import mobilenet, small_cnn
from tdsched.recipes.workloads.lowered import model_workload
from tdsched.schedules.cli.main import main
from tdsched.targets.ir_eval import check_equivalent
from tdsched.transform_lib.graph.channels_last import (
    BACKWARD,
    FORWARD,
    ChannelsLastOptions,
    channels_last,
)
from tdsched.transform_lib.graph.report import GraphRewriteError, RewriteReport, rewrite_text
from tdsched.transform_lib.match import OpCriteria

# A SqueezeNet fire module as the ONNX importer writes it: a bias broadcast into the
# convolutions' inits, relu generics, a padded 3x3 expand, the expands concatenated along
# the channels, a padded max pool, a per-channel scale read through a (d0, d1, 0, 0) map,
# and a residual add of two activations.
FIRE = """
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#ch = affine_map<(d0, d1, d2, d3) -> (d0, d1, 0, 0)>
func.func @main(%x: tensor<1x4x9x9xf32>, %ws: tensor<3x4x1x1xf32>, %bs: tensor<3xf32>,
                %w1: tensor<5x3x1x1xf32>, %w3: tensor<5x3x3x3xf32>,
                %scale: tensor<1x10x1x1xf32>) -> tensor<1x10x4x4xf32> {
  %zero = arith.constant 0.0 : f32
  %low = arith.constant -3.4e38 : f32
  %es = tensor.empty() : tensor<1x3x9x9xf32>
  %bias = linalg.broadcast ins(%bs : tensor<3xf32>) outs(%es : tensor<1x3x9x9xf32>) dimensions = [0, 2, 3]
  %s = linalg.conv_2d_nchw_fchw {tdsched.layer = "squeeze"} ins(%x, %ws : tensor<1x4x9x9xf32>, tensor<3x4x1x1xf32>)
      outs(%bias : tensor<1x3x9x9xf32>) -> tensor<1x3x9x9xf32>
  %sr = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%s : tensor<1x3x9x9xf32>) outs(%es : tensor<1x3x9x9xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.maximumf %in, %zero : f32
    linalg.yield %m : f32
  } -> tensor<1x3x9x9xf32>
  %ee = tensor.empty() : tensor<1x5x9x9xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%ee : tensor<1x5x9x9xf32>) -> tensor<1x5x9x9xf32>
  %e1 = linalg.conv_2d_nchw_fchw ins(%sr, %w1 : tensor<1x3x9x9xf32>, tensor<5x3x1x1xf32>)
      outs(%f1 : tensor<1x5x9x9xf32>) -> tensor<1x5x9x9xf32>
  %p = tensor.pad %sr low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%a: index, %b: index, %c: index, %d: index):
    tensor.yield %zero : f32
  } : tensor<1x3x9x9xf32> to tensor<1x3x11x11xf32>
  %e3 = linalg.conv_2d_nchw_fchw ins(%p, %w3 : tensor<1x3x11x11xf32>, tensor<5x3x3x3xf32>)
      outs(%f1 : tensor<1x5x9x9xf32>) -> tensor<1x5x9x9xf32>
  %cat = tensor.concat dim(1) %e1, %e3 : (tensor<1x5x9x9xf32>, tensor<1x5x9x9xf32>) -> tensor<1x10x9x9xf32>
  %ec = tensor.empty() : tensor<1x10x9x9xf32>
  %scaled = linalg.generic {indexing_maps = [#id, #ch, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%cat, %scale : tensor<1x10x9x9xf32>, tensor<1x10x1x1xf32>) outs(%ec : tensor<1x10x9x9xf32>) {
  ^bb0(%in: f32, %k: f32, %out: f32):
    %m = arith.mulf %in, %k : f32
    linalg.yield %m : f32
  } -> tensor<1x10x9x9xf32>
  %sum = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%scaled, %cat : tensor<1x10x9x9xf32>, tensor<1x10x9x9xf32>) outs(%ec : tensor<1x10x9x9xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %m = arith.addf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<1x10x9x9xf32>
  %pp = tensor.pad %sum low[0, 0, 0, 0] high[0, 0, 1, 1] {
  ^bb0(%a: index, %b: index, %c: index, %d: index):
    tensor.yield %low : f32
  } : tensor<1x10x9x9xf32> to tensor<1x10x10x10xf32>
  %window = tensor.empty() : tensor<3x3xf32>
  %ep = tensor.empty() : tensor<1x10x4x4xf32>
  %fp = linalg.fill ins(%low : f32) outs(%ep : tensor<1x10x4x4xf32>) -> tensor<1x10x4x4xf32>
  %pool = linalg.pooling_nchw_max {strides = dense<2> : vector<2xi64>, dilations = dense<1> : vector<2xi64>}
      ins(%pp, %window : tensor<1x10x10x10xf32>, tensor<3x3xf32>) outs(%fp : tensor<1x10x4x4xf32>) -> tensor<1x10x4x4xf32>
  return %pool : tensor<1x10x4x4xf32>
}
"""

DYNAMIC = """
func.func @main(%x: tensor<1x4x?x9xf32>, %w: tensor<3x4x1x1xf32>, %init: tensor<1x3x?x9xf32>) -> tensor<1x3x?x9xf32> {
  %c = linalg.conv_2d_nchw_fchw ins(%x, %w : tensor<1x4x?x9xf32>, tensor<3x4x1x1xf32>)
      outs(%init : tensor<1x3x?x9xf32>) -> tensor<1x3x?x9xf32>
  return %c : tensor<1x3x?x9xf32>
}
"""


def rewritten(text: str, ops: OpCriteria | None = None) -> tuple[str, RewriteReport]:
    return rewrite_text(text, lambda m: channels_last(m, ChannelsLastOptions(ops)))


def transposes(text: str) -> Counter[tuple[int, ...]]:
    """How many linalg.transpose ops of each permutation ``text`` holds."""
    found: Counter[tuple[int, ...]] = Counter()
    with ir.Context():
        module = ir.Module.parse(text)

        def visit(op: ir.Operation) -> ir.WalkResult:
            if op.name == "linalg.transpose":
                found[tuple(ir.DenseI64ArrayAttr(op.attributes["permutation"]))] += 1
            return ir.WalkResult.ADVANCE

        module.operation.walk(visit)
    return found


def test_fire_module_runs_in_nhwc_with_one_transpose_each_way() -> None:
    after, report = rewritten(FIRE)
    assert report.changed
    assert report.summary.startswith("converted 4 NCHW ops to NHWC")
    assert report.summary.endswith("2 transposes left")
    assert "nchw" not in after
    assert after.count("linalg.conv_2d_nhwc_hwcf") == 3
    assert "linalg.pooling_nhwc_max" in after
    # one transpose in, one out; the rest are the three filters (FCHW -> HWCF)
    assert transposes(after) == Counter({FORWARD: 1, BACKWARD: 1, (2, 3, 1, 0): 3})
    assert "tensor.concat dim(3)" in after
    assert "low[0, 1, 1, 0] high[0, 1, 1, 0]" in after  # the 3x3 expand's pad, permuted
    assert "dimensions = [0, 1, 2]" in after  # the bias broadcast rebuilt in NHWC
    assert "affine_map<(d0, d1, d2, d3) -> (d0, d3, 0, 0)>" in after  # the scale's map
    assert 'tdsched.layer = "squeeze"' in after


def test_fire_module_is_unchanged_in_float64() -> None:
    after, _ = rewritten(FIRE)
    report = check_equivalent(FIRE, after, "main", rtol=1e-12, atol=1e-12)
    assert report.equivalent


def test_fire_module_numerics_through_iree(target: str) -> None:
    after, _ = rewritten(FIRE)
    assert_same_results(FIRE, after, "main", target, atol=1e-4)


def test_small_cnn_matches_its_reference(target: str) -> None:
    model = small_cnn(size=16, channels=8)
    before = model.to_linalg()
    after, report = rewritten(before)
    assert report.summary.startswith("converted 8 NCHW ops to NHWC")
    assert Counter({k: v for k, v in transposes(after).items() if k != (2, 3, 1, 0)}) == Counter(
        {FORWARD: 1, BACKWARD: 1}
    )
    assert_matches_numpy(before, after, model.name, target, model.reference, atol=1e-4)


def test_nothing_to_convert_says_why() -> None:
    _, report = rewritten(DYNAMIC)
    assert not report.changed
    assert report.summary == (
        'changed nothing: linalg.conv_2d_nchw_fchw at loc("-":3:8): left as it is: its '
        "shapes are dynamic; make them static first"
    )


def test_a_depthwise_conv_with_a_1x1_output_stays_nchw() -> None:
    # IREE 3.13 cannot compile this one in NHWC (seen on MobileNet at 32x32)
    depthwise = """
func.func @main(%x: tensor<1x8x4x4xf32>, %w: tensor<8x3x3xf32>, %init: tensor<1x8x1x1xf32>) -> tensor<1x8x1x1xf32> {
  %c = linalg.depthwise_conv_2d_nchw_chw {strides = dense<2> : vector<2xi64>, dilations = dense<1> : vector<2xi64>}
      ins(%x, %w : tensor<1x8x4x4xf32>, tensor<8x3x3xf32>) outs(%init : tensor<1x8x1x1xf32>) -> tensor<1x8x1x1xf32>
  return %c : tensor<1x8x1x1xf32>
}
"""
    after, report = rewritten(depthwise)
    assert not report.changed
    assert "its output is 1x1, and IREE 3.13 fails to compile" in report.summary
    assert "linalg.depthwise_conv_2d_nchw_chw" in after


def test_a_selected_op_that_cannot_be_converted_is_an_error() -> None:
    with pytest.raises(
        GraphRewriteError,
        match=r"channels_last: cannot convert linalg\.conv_2d_nchw_fchw at .*: its shapes are dynamic",
    ):
        rewritten(DYNAMIC, OpCriteria(op="linalg.conv_2d_nchw_fchw"))


def test_ops_selects_which_ops_are_converted() -> None:
    after, report = rewritten(FIRE, OpCriteria(layers=("squeeze",)))
    assert report.summary.startswith("converted 1 NCHW ops to NHWC")
    assert after.count("linalg.conv_2d_nchw_fchw") == 2
    assert after.count("linalg.conv_2d_nhwc_hwcf") == 1


def test_a_recipe_step_runs_a_model_in_nhwc(
    target: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = tmp_path / "cnn.yaml"
    recipe.write_text(
        "name: cnn_nhwc\n"
        "workload: {model: small_cnn, args: {size: 16, channels: 8}}\n"
        "targets: [x86, vulkan]\n"
        "graph:\n"
        "  - channels_last: {}\n"
    )
    assert main(["apply", str(recipe), "--target", target]) == 0
    applied = capsys.readouterr().out
    assert "channels_last: converted 8 NCHW ops to NHWC" in applied
    assert main(["run", str(recipe), "--target", target, "--no-time", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["status"] == "ok"


def test_mobilenet_from_onnx_runs_in_nhwc(target: str) -> None:
    workload = model_workload("mobilenet", {"size": 64, "width": 4, "classes": 10}, "onnx")
    after, report = rewritten(workload.mlir)
    # the stem and 13 pointwise convs, 13 depthwise convs, the global pool
    assert report.summary.startswith("converted 28 NCHW ops to NHWC")
    assert after.count("linalg.depthwise_conv_2d_nhwc_hwc") == 13
    activation = {k: v for k, v in transposes(after).items() if k in (FORWARD, BACKWARD)}
    assert activation == {FORWARD: 1, BACKWARD: 1}
    assert workload.reference is not None
    reference = workload.reference
    assert_matches_numpy(workload.mlir, after, workload.function, target, reference, atol=1e-4)


def test_the_builders_grouped_depthwise_convs_run_in_nhwc(target: str) -> None:
    model = mobilenet(size=64, width=4, classes=10)
    before = model.to_linalg()
    assert before.count("linalg.conv_2d_ngchw_gfchw") == 13
    after, report = rewritten(before)
    assert report.summary.startswith("converted 28 NCHW ops to NHWC")
    assert "ngchw" not in after and "tensor.expand_shape" not in after
    assert after.count("linalg.depthwise_conv_2d_nhwc_hwc") == 13
    activation = {k: v for k, v in transposes(after).items() if k in (FORWARD, BACKWARD)}
    assert activation == {FORWARD: 1, BACKWARD: 1}
    assert check_equivalent(before, after, model.name).equivalent
    assert_matches_numpy(before, after, model.name, target, model.reference, atol=1e-4)
