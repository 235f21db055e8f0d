"""im2col: IR structure, report and refusals; numerics vs numpy (x86, Vulkan)."""

from __future__ import annotations

import numpy as np
import pytest
from iree_numerics import assert_matches_numpy, op_names
from tdsched.transform_lib.graph.im2col import Im2colOptions, im2col
from tdsched.transform_lib.graph.report import GraphRewriteError, RewriteReport, rewrite_text
from tdsched.transform_lib.match import OpCriteria

# Three windowed convolutions, one per layout: NCHW 3x3 stride 2 dilation 2 (layer
# "stem"); NHWC HWCF 3x3, batch 2, into a bias; NHWC FHWC 2x3, stride 2x1, odd sizes.
# Then a 1x1 one (left to conv1x1_to_matmul unless selected) and an NCHW one of batch 2
# (never rewritten).
CONVS = """
#nhwc = affine_map<(n, h, w, c) -> (n, h, w, c)>
#bias = affine_map<(n, h, w, c) -> (c)>
func.func @f(%x: tensor<1x3x11x11xf32>, %wa: tensor<5x3x3x3xf32>,
             %y: tensor<2x6x6x4xf32>, %wb: tensor<3x3x4x6xf32>, %b: tensor<6xf32>,
             %z: tensor<1x7x8x4xf32>, %wc: tensor<6x2x3x4xf32>, %w1: tensor<1x1x4x6xf32>,
             %x2: tensor<2x3x5x5xf32>)
    -> (tensor<1x5x4x4xf32>, tensor<2x4x4x6xf32>, tensor<1x3x6x6xf32>, tensor<2x6x6x6xf32>,
        tensor<2x5x3x3xf32>) {
  %zero = arith.constant 0.0 : f32
  %ea = tensor.empty() : tensor<1x5x4x4xf32>
  %fa = linalg.fill ins(%zero : f32) outs(%ea : tensor<1x5x4x4xf32>) -> tensor<1x5x4x4xf32>
  %a = linalg.conv_2d_nchw_fchw {dilations = dense<2> : vector<2xi64>, strides = dense<2> : vector<2xi64>, tdsched.layer = "stem"}
      ins(%x, %wa : tensor<1x3x11x11xf32>, tensor<5x3x3x3xf32>) outs(%fa : tensor<1x5x4x4xf32>) -> tensor<1x5x4x4xf32>
  %eb = tensor.empty() : tensor<2x4x4x6xf32>
  %bb = linalg.generic {indexing_maps = [#bias, #nhwc], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%b : tensor<6xf32>) outs(%eb : tensor<2x4x4x6xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<2x4x4x6xf32>
  %bconv = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
      ins(%y, %wb : tensor<2x6x6x4xf32>, tensor<3x3x4x6xf32>) outs(%bb : tensor<2x4x4x6xf32>) -> tensor<2x4x4x6xf32>
  %ec = tensor.empty() : tensor<1x3x6x6xf32>
  %fc = linalg.fill ins(%zero : f32) outs(%ec : tensor<1x3x6x6xf32>) -> tensor<1x3x6x6xf32>
  %c = linalg.conv_2d_nhwc_fhwc {dilations = dense<1> : vector<2xi64>, strides = dense<[2, 1]> : vector<2xi64>}
      ins(%z, %wc : tensor<1x7x8x4xf32>, tensor<6x2x3x4xf32>) outs(%fc : tensor<1x3x6x6xf32>) -> tensor<1x3x6x6xf32>
  %e1 = tensor.empty() : tensor<2x6x6x6xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<2x6x6x6xf32>) -> tensor<2x6x6x6xf32>
  %d = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>, pointwise}
      ins(%y, %w1 : tensor<2x6x6x4xf32>, tensor<1x1x4x6xf32>) outs(%f1 : tensor<2x6x6x6xf32>) -> tensor<2x6x6x6xf32>
  %e2 = tensor.empty() : tensor<2x5x3x3xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<2x5x3x3xf32>) -> tensor<2x5x3x3xf32>
  %g = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>, batched}
      ins(%x2, %wa : tensor<2x3x5x5xf32>, tensor<5x3x3x3xf32>) outs(%f2 : tensor<2x5x3x3xf32>) -> tensor<2x5x3x3xf32>
  return %a, %bconv, %c, %d, %g : tensor<1x5x4x4xf32>, tensor<2x4x4x6xf32>, tensor<1x3x6x6xf32>, tensor<2x6x6x6xf32>, tensor<2x5x3x3xf32>
}
"""


def _conv_nhwc(
    x: np.ndarray, w: np.ndarray, stride: tuple[int, int], dilation: tuple[int, int]
) -> np.ndarray:
    """A direct NHWC x HWCF convolution in numpy (float64), window position by position."""
    kh, kw, _, f = w.shape
    n, h, wd, _ = x.shape
    oh = (h - (kh - 1) * dilation[0] - 1) // stride[0] + 1
    ow = (wd - (kw - 1) * dilation[1] - 1) // stride[1] + 1
    out = np.zeros((n, oh, ow, f))
    for i in range(kh):
        for j in range(kw):
            rows = slice(i * dilation[0], i * dilation[0] + (oh - 1) * stride[0] + 1, stride[0])
            cols = slice(j * dilation[1], j * dilation[1] + (ow - 1) * stride[1] + 1, stride[1])
            out += np.einsum("nhwc,cf->nhwf", x[:, rows, cols, :], w[i, j])
    return out


def _expected(inputs: list[np.ndarray]) -> list[np.ndarray]:
    """numpy's results of ``@f``."""
    x, wa, y, wb, b, z, wc, w1, x2 = (a.astype(np.float64) for a in inputs)
    nchw, fchw_to_hwcf = (0, 2, 3, 1), (2, 3, 1, 0)
    a = _conv_nhwc(x.transpose(nchw), wa.transpose(fchw_to_hwcf), (2, 2), (2, 2))
    bconv = _conv_nhwc(y, wb, (1, 1), (1, 1)) + b
    c = _conv_nhwc(z, wc.transpose(1, 2, 3, 0), (2, 1), (1, 1))
    d = _conv_nhwc(y, w1, (1, 1), (1, 1))
    g = _conv_nhwc(x2.transpose(nchw), wa.transpose(fchw_to_hwcf), (1, 1), (1, 1))
    to_nchw = (0, 3, 1, 2)
    return [a.transpose(to_nchw), bconv, c, d, g.transpose(to_nchw)]


def _run(text: str, ops: OpCriteria | None = None) -> tuple[str, RewriteReport]:
    return rewrite_text(text, lambda m: im2col(m, Im2colOptions(ops)))


def _check_numerics(after: str, target: str) -> None:
    assert_matches_numpy(CONVS, after, "f", target, _expected)


def test_report_names_each_rewrite_and_each_convolution_left() -> None:
    _, report = _run(CONVS)
    assert report.changed
    assert report.summary == (
        "rewrote 1 linalg.conv_2d_nchw_fchw, 1 linalg.conv_2d_nhwc_hwcf, "
        "1 linalg.conv_2d_nhwc_fhwc into a gather and linalg.matmul"
    )
    details = "\n".join(report.details)
    assert (
        "input 1x3x11x11, filter 3x3, stride 2x2, dilation 2x2 -> linalg.matmul 5x16x27" in details
    )
    assert "input 2x6x6x4, filter 3x3 -> linalg.matmul 32x6x36" in details
    assert "input 1x7x8x4, filter 2x3, stride 2x1 -> linalg.matmul 18x6x24" in details
    assert "left as it is: its filter is 1x1: conv1x1_to_matmul rewrites it" in details
    assert "left as it is: it is NCHW with batch 2" in details


def test_gathers_read_through_strides_and_dilations_and_matmuls_keep_the_layer() -> None:
    after, _ = _run(CONVS)
    names = op_names(after)
    assert names.count("linalg.matmul") == 3
    assert names.count("linalg.conv_2d_nhwc_hwcf") == 1  # the 1x1
    assert names.count("linalg.conv_2d_nchw_fchw") == 1  # batch 2
    assert names.count("linalg.transpose") == 1  # the FHWC filter
    assert 'linalg.matmul {tdsched.layer = "stem"}' in after
    # NCHW: the gather is C x KH x KW x OH x OW, reading (0, c, oh*2 + kh*2, ow*2 + kw*2).
    assert "(d0, d1, d2, d3, d4) -> (0, d0, d3 * 2 + d1 * 2, d4 * 2 + d2 * 2)" in after
    assert "tensor<3x3x3x4x4xf32> into tensor<27x16xf32>" in after
    # NHWC, stride 2x1: N x OH x OW x KH x KW x C.
    assert "(d0, d1, d2, d3, d4, d5) -> (d0, d1 * 2 + d3, d2 + d4, d5)" in after


def test_an_explicit_selection_rewrites_a_1x1_convolution_too() -> None:
    after, report = _run(CONVS, OpCriteria(attributes=(("pointwise", None),)))
    assert report.summary == "rewrote 1 linalg.conv_2d_nhwc_hwcf into a gather and linalg.matmul"
    assert op_names(after).count("linalg.matmul") == 1


@pytest.mark.usefixtures("iree")
def test_rewritten_convolutions_match_numpy_on_x86() -> None:
    after, _ = _run(CONVS)
    _check_numerics(after, "x86")


def test_rewritten_convolutions_match_numpy_on_vulkan(vulkan: None) -> None:
    after, _ = _run(CONVS)
    _check_numerics(after, "vulkan")


def test_selecting_a_convolution_that_cannot_be_rewritten_is_an_error() -> None:
    with pytest.raises(GraphRewriteError) as info:
        _run(CONVS, OpCriteria(attributes=(("batched", None),)))
    message = str(info.value)
    assert message.startswith("im2col: cannot rewrite linalg.conv_2d_nchw_fchw at ")
    assert "it is NCHW with batch 2" in message
    assert "narrow 'ops' to the convolutions it can rewrite" in message


def test_a_module_without_convolutions_is_left_unchanged_and_says_so() -> None:
    text = "func.func @g(%a: tensor<4xf32>) -> tensor<4xf32> {\n  return %a : tensor<4xf32>\n}"
    _, report = _run(text)
    assert not report.changed
    assert report.summary == "changed nothing: no convolution selected"
