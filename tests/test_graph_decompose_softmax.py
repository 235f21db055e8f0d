"""decompose_softmax: IR structure, report and refusals; numerics vs numpy (x86, Vulkan)."""

from __future__ import annotations

import numpy as np
import pytest
from iree_numerics import assert_matches_numpy, op_names
from tdsched.transform_lib.graph.decompose_softmax import (
    DecomposeSoftmaxOptions,
    decompose_softmax,
)
from tdsched.transform_lib.graph.report import GraphRewriteError, RewriteReport, rewrite_text
from tdsched.transform_lib.match import OpCriteria

# Two softmax ops: over the last dim of a 2-D input (with a layer), over the middle dim
# of a 3-D one.
STATIC = """
func.func @f(%x: tensor<6x40xf32>, %y: tensor<3x5x7xf32>) -> (tensor<6x40xf32>, tensor<3x5x7xf32>) {
  %ex = tensor.empty() : tensor<6x40xf32>
  %a = linalg.softmax {tdsched.layer = "attn"} dimension(1) ins(%x : tensor<6x40xf32>) outs(%ex : tensor<6x40xf32>) -> tensor<6x40xf32>
  %ey = tensor.empty() : tensor<3x5x7xf32>
  %b = linalg.softmax dimension(1) ins(%y : tensor<3x5x7xf32>) outs(%ey : tensor<3x5x7xf32>) -> tensor<3x5x7xf32>
  return %a, %b : tensor<6x40xf32>, tensor<3x5x7xf32>
}
"""
# And one with a dynamic dim, which is left as it is.
SOFTMAXES = """
func.func @g(%x: tensor<6x40xf32>, %z: tensor<?x8xf32>) -> (tensor<6x40xf32>, tensor<?x8xf32>) {
  %ex = tensor.empty() : tensor<6x40xf32>
  %a = linalg.softmax dimension(1) ins(%x : tensor<6x40xf32>) outs(%ex : tensor<6x40xf32>) -> tensor<6x40xf32>
  %c0 = arith.constant 0 : index
  %n = tensor.dim %z, %c0 : tensor<?x8xf32>
  %ez = tensor.empty(%n) : tensor<?x8xf32>
  %c = linalg.softmax {dynamic} dimension(1) ins(%z : tensor<?x8xf32>) outs(%ez : tensor<?x8xf32>) -> tensor<?x8xf32>
  return %a, %c : tensor<6x40xf32>, tensor<?x8xf32>
}
"""


def _run(text: str, ops: OpCriteria | None = None) -> tuple[str, RewriteReport]:
    return rewrite_text(text, lambda m: decompose_softmax(m, DecomposeSoftmaxOptions(ops)))


def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _expected(inputs: list[np.ndarray]) -> list[np.ndarray]:
    x, y = (a.astype(np.float64) for a in inputs)
    return [_softmax(x, 1).astype(np.float32), _softmax(y, 1).astype(np.float32)]


def test_report_names_the_rewrite_and_each_softmax_left() -> None:
    _, report = _run(SOFTMAXES)
    assert report.changed
    assert report.summary == "decomposed 1 linalg.softmax into max, exp, sum, scale (exp once)"
    assert len(report.details) == 1
    assert report.details[0].startswith("linalg.softmax at ")
    assert report.details[0].endswith("left as it is: its shape is dynamic")


def test_exp_is_computed_once_and_the_ops_keep_the_layer() -> None:
    after, _ = _run(STATIC)
    names = op_names(after)
    assert "linalg.softmax" not in names
    assert names.count("linalg.generic") == 8 and names.count("linalg.fill") == 4
    assert names.count("math.exp") == 2  # one per softmax
    assert names.count("arith.maximumf") == 2 and names.count("arith.mulf") == 2
    assert after.count('tdsched.layer = "attn"') == 6  # its 2 fills and 4 generics
    # the 3-D softmax reduces its middle dim: the row maps drop d1
    assert "affine_map<(d0, d1, d2) -> (d0, d2)>" in after


@pytest.mark.usefixtures("iree")
def test_decomposed_softmax_matches_numpy_on_x86() -> None:
    after, _ = _run(STATIC)
    assert_matches_numpy(STATIC, after, "f", "x86", _expected, atol=1e-6)


def test_decomposed_softmax_matches_numpy_on_vulkan(vulkan: None) -> None:
    after, _ = _run(STATIC)
    assert_matches_numpy(STATIC, after, "f", "vulkan", _expected, atol=1e-6)


def test_selecting_a_softmax_that_cannot_be_rewritten_is_an_error() -> None:
    with pytest.raises(GraphRewriteError) as info:
        _run(SOFTMAXES, OpCriteria(attributes=(("dynamic", None),)))
    message = str(info.value)
    assert message.startswith("decompose_softmax: cannot rewrite linalg.softmax at ")
    assert "its shape is dynamic" in message and "narrow 'ops'" in message


def test_a_module_without_softmax_is_left_unchanged_and_says_so() -> None:
    text = "func.func @g(%a: tensor<4xf32>) -> tensor<4xf32> {\n  return %a : tensor<4xf32>\n}"
    _, report = _run(text)
    assert not report.changed
    assert report.summary == "changed nothing: no linalg.softmax selected"
