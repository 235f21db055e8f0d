"""The arithmetic work counted from a payload's IR (GFLOP/s and % of peak rest on it)."""

from __future__ import annotations

from tdsched.recipes.workloads import generators
from tdsched.recipes.workloads.fma_probe import CHAINS, LENGTH, fma_probe
from tdsched.transform_lib.work import count_work_of_text

DYNAMIC = """\
func.func @f(%a: tensor<?x8xf32>, %b: tensor<8x4xf32>, %init: tensor<?x4xf32>)
    -> (tensor<?x4xf32>, tensor<2x3xf32>) {
  %c = linalg.matmul ins(%a, %b : tensor<?x8xf32>, tensor<8x4xf32>) outs(%init : tensor<?x4xf32>) -> tensor<?x4xf32>
  %e = tensor.empty() : tensor<2x3xf32>
  %s = linalg.softmax dimension(1) ins(%e : tensor<2x3xf32>) outs(%e : tensor<2x3xf32>) -> tensor<2x3xf32>
  return %c, %s : tensor<?x4xf32>, tensor<2x3xf32>
}
"""


def test_a_matmul_is_two_flops_per_multiply_add_and_its_fill_is_free() -> None:
    work = count_work_of_text(generators.matmul(64, 32, 16).mlir)
    assert work.ops == 2 * 64 * 32 * 16 and work.exact


def test_an_epilogue_counts_one_op_per_element_and_body_op() -> None:
    work = count_work_of_text(generators.matmul_bias_relu(64, 32, 16).mlir)
    assert work.ops == 2 * 64 * 32 * 16 + 2 * 64 * 32  # addf + maximumf per element


def test_a_convolution_counts_its_window() -> None:
    work = count_work_of_text(generators.conv2d_nhwc(1, 8, 8, 4, 6).mlir)
    assert work.ops == 2 * 8 * 8 * 6 * 3 * 3 * 4


def test_fma_counts_two_and_constants_count_nothing() -> None:
    elements = 128
    work = count_work_of_text(fma_probe(elements).mlir)
    assert work.ops == elements * (CHAINS * (2 * LENGTH + 1) + CHAINS - 1)


def test_dynamic_and_non_generic_ops_are_named_as_uncounted() -> None:
    work = count_work_of_text(DYNAMIC)
    assert work.ops == 0
    assert work.uncounted == (
        "linalg.generic (dynamic loop ranges)",
        "linalg.softmax (no generic form)",
    )
    assert not work.exact
