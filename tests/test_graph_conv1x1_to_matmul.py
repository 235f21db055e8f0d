"""conv1x1_to_matmul: IR structure, report and refusals; numerics vs numpy (x86, Vulkan)."""

from __future__ import annotations

import numpy as np
import pytest
from iree_numerics import assert_matches_numpy, op_names
from tdsched.transform_lib.graph.conv1x1_to_matmul import (
    Conv1x1ToMatmulOptions,
    conv1x1_to_matmul,
)
from tdsched.transform_lib.graph.report import GraphRewriteError, RewriteReport, rewrite_text
from tdsched.transform_lib.match import OpCriteria

# Three 1x1 convolutions, one per layout (strided NCHW; NHWC HWCF with batch 2 into a
# bias; strided NHWC FHWC with an odd input size), a 3x3 one and an NCHW one of batch 2,
# which stay convolutions.
CONVS = """
#nhwc = affine_map<(n, h, w, c) -> (n, h, w, c)>
#bias = affine_map<(n, h, w, c) -> (c)>
func.func @f(%x: tensor<1x8x9x9xf32>, %wa: tensor<6x8x1x1xf32>,
             %y: tensor<2x5x5x8xf32>, %wb: tensor<1x1x8x6xf32>, %b: tensor<6xf32>,
             %z: tensor<1x7x7x8xf32>, %wc: tensor<6x1x1x8xf32>, %w3: tensor<3x3x8x6xf32>,
             %x2: tensor<2x8x4x4xf32>)
    -> (tensor<1x6x5x5xf32>, tensor<2x5x5x6xf32>, tensor<1x4x4x6xf32>, tensor<2x3x3x6xf32>,
        tensor<2x6x4x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %ea = tensor.empty() : tensor<1x6x5x5xf32>
  %fa = linalg.fill ins(%zero : f32) outs(%ea : tensor<1x6x5x5xf32>) -> tensor<1x6x5x5xf32>
  %a = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>, tdsched.layer = "proj"}
      ins(%x, %wa : tensor<1x8x9x9xf32>, tensor<6x8x1x1xf32>) outs(%fa : tensor<1x6x5x5xf32>) -> tensor<1x6x5x5xf32>
  %eb = tensor.empty() : tensor<2x5x5x6xf32>
  %bb = linalg.generic {indexing_maps = [#bias, #nhwc], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%b : tensor<6xf32>) outs(%eb : tensor<2x5x5x6xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<2x5x5x6xf32>
  %bconv = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
      ins(%y, %wb : tensor<2x5x5x8xf32>, tensor<1x1x8x6xf32>) outs(%bb : tensor<2x5x5x6xf32>) -> tensor<2x5x5x6xf32>
  %ec = tensor.empty() : tensor<1x4x4x6xf32>
  %fc = linalg.fill ins(%zero : f32) outs(%ec : tensor<1x4x4x6xf32>) -> tensor<1x4x4x6xf32>
  %c = linalg.conv_2d_nhwc_fhwc {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>}
      ins(%z, %wc : tensor<1x7x7x8xf32>, tensor<6x1x1x8xf32>) outs(%fc : tensor<1x4x4x6xf32>) -> tensor<1x4x4x6xf32>
  %e3 = tensor.empty() : tensor<2x3x3x6xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<2x3x3x6xf32>) -> tensor<2x3x3x6xf32>
  %d = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>, window}
      ins(%y, %w3 : tensor<2x5x5x8xf32>, tensor<3x3x8x6xf32>) outs(%f3 : tensor<2x3x3x6xf32>) -> tensor<2x3x3x6xf32>
  %e2 = tensor.empty() : tensor<2x6x4x4xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<2x6x4x4xf32>) -> tensor<2x6x4x4xf32>
  %g = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>, batched}
      ins(%x2, %wa : tensor<2x8x4x4xf32>, tensor<6x8x1x1xf32>) outs(%f2 : tensor<2x6x4x4xf32>) -> tensor<2x6x4x4xf32>
  return %a, %bconv, %c, %d, %g : tensor<1x6x5x5xf32>, tensor<2x5x5x6xf32>, tensor<1x4x4x6xf32>, tensor<2x3x3x6xf32>, tensor<2x6x4x4xf32>
}
"""


def _expected(inputs: list[np.ndarray]) -> list[np.ndarray]:
    """numpy's results of ``@f``."""
    x, wa, y, wb, b, z, wc, w3, x2 = (a.astype(np.float64) for a in inputs)
    a = np.einsum("nchw,fc->nfhw", x[:, :, ::2, ::2], wa[:, :, 0, 0])
    bconv = np.einsum("nhwc,cf->nhwf", y, wb[0, 0]) + b
    c = np.einsum("nhwc,fc->nhwf", z[:, ::2, ::2, :], wc[:, 0, 0, :])
    d = np.zeros((2, 3, 3, 6))
    for i in range(3):
        for j in range(3):
            d += np.einsum("nhwc,cf->nhwf", y[:, i : i + 3, j : j + 3, :], w3[i, j])
    g = np.einsum("nchw,fc->nfhw", x2, wa[:, :, 0, 0])
    return [a, bconv, c, d, g]


def _run(text: str, ops: OpCriteria | None = None) -> tuple[str, RewriteReport]:
    return rewrite_text(text, lambda m: conv1x1_to_matmul(m, Conv1x1ToMatmulOptions(ops)))


def _check_numerics(after: str, target: str) -> None:
    assert_matches_numpy(CONVS, after, "f", target, _expected)


def test_report_names_each_rewrite_and_each_convolution_left() -> None:
    _, report = _run(CONVS)
    assert report.changed
    assert report.summary == (
        "rewrote 1 linalg.conv_2d_nchw_fchw, 1 linalg.conv_2d_nhwc_hwcf, "
        "1 linalg.conv_2d_nhwc_fhwc into linalg.matmul"
    )
    details = "\n".join(report.details)
    assert "input 1x8x9x9, stride 2x2 -> linalg.matmul 6x25x8" in details
    assert "input 2x5x5x8 -> linalg.matmul 50x6x8" in details
    assert "input 1x7x7x8, stride 2x2 -> linalg.matmul 16x6x8" in details
    assert "left as it is: its filter is 3x3, not 1x1" in details
    assert "left as it is: it is NCHW with batch 2" in details


def test_matmuls_keep_the_layer_and_strided_inputs_are_sliced() -> None:
    after, _ = _run(CONVS)
    names = op_names(after)
    assert names.count("linalg.matmul") == 3
    assert names.count("linalg.conv_2d_nhwc_hwcf") == 1  # the 3x3
    assert names.count("linalg.conv_2d_nchw_fchw") == 1  # batch 2
    assert names.count("tensor.extract_slice") == 2  # the two strided ones
    assert names.count("linalg.transpose") == 1  # the FHWC filter
    assert 'linalg.matmul {tdsched.layer = "proj"}' in after
    assert "[1, 1, 2, 2] : tensor<1x8x9x9xf32> to tensor<1x8x5x5xf32>" in after
    assert "[1, 2, 2, 1] : tensor<1x7x7x8xf32> to tensor<1x4x4x8xf32>" in after


@pytest.mark.usefixtures("iree")
def test_rewritten_convolutions_match_numpy_on_x86() -> None:
    after, _ = _run(CONVS)
    _check_numerics(after, "x86")


def test_rewritten_convolutions_match_numpy_on_vulkan(vulkan: None) -> None:
    after, _ = _run(CONVS)
    _check_numerics(after, "vulkan")


@pytest.mark.parametrize(
    ("tag", "why"),
    [("window", "its filter is 3x3, not 1x1"), ("batched", "it is NCHW with batch 2")],
)
def test_selecting_a_convolution_that_cannot_be_rewritten_is_an_error(tag: str, why: str) -> None:
    with pytest.raises(GraphRewriteError) as info:
        _run(CONVS, OpCriteria(attributes=((tag, None),)))
    message = str(info.value)
    assert message.startswith("conv1x1_to_matmul: cannot rewrite linalg.conv_2d_")
    assert why in message and "narrow 'ops' to convolutions with a 1x1 filter" in message


def test_a_module_without_convolutions_is_left_unchanged_and_says_so() -> None:
    text = "func.func @g(%a: tensor<4xf32>) -> tensor<4xf32> {\n  return %a : tensor<4xf32>\n}"
    _, report = _run(text)
    assert not report.changed
    assert report.summary == "changed nothing: no convolution selected"
