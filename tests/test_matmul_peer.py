"""A workload file that is one matmul gets numpy's ``a @ b`` as its ``numpy`` peer
(``tdsched run --peers``); anything more has none."""

from __future__ import annotations

import numpy as np
import pytest
from tdsched.targets.workload import workload_from_text

TRANSPOSE_A = "affine_map<(m, n, k) -> (k, m)>"
TRANSPOSE_B = "affine_map<(m, n, k) -> (n, k)>"
PLAIN_A, PLAIN_B = "affine_map<(m, n, k) -> (m, k)>", "affine_map<(m, n, k) -> (k, n)>"
OUT = "affine_map<(m, n, k) -> (m, n)>"


def _matmul(
    a: str = "4x8",
    b: str = "8x6",
    maps: str = "",
    t: str = "f32",
    zero: str = "0.0",
    op: str = "linalg.matmul",
    c: str = "4x6",
    tail: str = "",
) -> str:
    return f"""
func.func @mm(%x: tensor<2xf32>, %a: tensor<{a}x{t}>, %b: tensor<{b}x{t}>) -> tensor<{c}x{t}> {{
  %zero = arith.constant {zero} : {t}
  %e = tensor.empty() : tensor<{c}x{t}>
  %c = linalg.fill ins(%zero : {t}) outs(%e : tensor<{c}x{t}>) -> tensor<{c}x{t}>
  %m = {op} {maps} ins(%a, %b : tensor<{a}x{t}>, tensor<{b}x{t}>) outs(%c : tensor<{c}x{t}>) -> tensor<{c}x{t}>
  {tail}return %m : tensor<{c}x{t}>
}}
"""


def _inputs(*shapes: tuple[int, ...]) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [np.zeros(2, np.float32), *(rng.standard_normal(s).astype(np.float32) for s in shapes)]


@pytest.mark.parametrize(
    ("a", "b", "maps", "shapes", "want"),
    [
        ("4x8", "8x6", "", ((4, 8), (8, 6)), lambda a, b: a @ b),
        (
            "8x4",
            "8x6",
            f"indexing_maps = [{TRANSPOSE_A}, {PLAIN_B}, {OUT}]",
            ((8, 4), (8, 6)),
            lambda a, b: a.T @ b,
        ),
        (
            "4x8",
            "6x8",
            f"indexing_maps = [{PLAIN_A}, {TRANSPOSE_B}, {OUT}]",
            ((4, 8), (6, 8)),
            lambda a, b: a @ b.T,
        ),
    ],
)
def test_a_matmul_of_two_arguments_has_numpy_as_its_peer(
    a: str, b: str, maps: str, shapes: tuple[tuple[int, ...], ...], want: object
) -> None:
    workload = workload_from_text(_matmul(a, b, maps), "mm.mlir", "mm")
    assert workload.peer is not None
    inputs = _inputs(*shapes)
    (got,) = workload.peer(inputs)
    np.testing.assert_allclose(got, want(inputs[1], inputs[2]), rtol=1e-6)  # type: ignore[operator]


def test_a_batch_matmul_has_numpy_as_its_peer() -> None:
    text = _matmul("2x4x8", "2x8x6", op="linalg.batch_matmul", c="2x4x6")
    workload = workload_from_text(text, "bmm.mlir", "bmm")
    assert workload.peer is not None
    inputs = _inputs((2, 4, 8), (2, 8, 6))
    np.testing.assert_allclose(workload.peer(inputs)[0], inputs[1] @ inputs[2], rtol=1e-6)


@pytest.mark.parametrize(
    "text",
    [
        _matmul(t="i32", zero="0"),  # integers: numpy's a @ b is no BLAS call
        _matmul(zero="1.0"),  # accumulates onto ones: not a @ b
        _matmul(tail="%n = arith.constant 0.0 : f32\n  "),  # harmless extra constant: still one
        _matmul(
            tail="%d = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x6xf32>) outs(%c : tensor<4x6xf32>) -> tensor<4x6xf32>\n  "
        ),
    ],
    ids=["integers", "non-zero-init", "extra-constant", "two-matmuls"],
)
def test_anything_but_one_plain_float_matmul_has_no_peer(text: str) -> None:
    peer = workload_from_text(text, "mm.mlir", "mm").peer
    assert (peer is not None) == ("%n = arith.constant" in text)


RELU = """%r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%m : tensor<4x6xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%v: f32, %o: f32):
    %y = arith.maximumf %v, %zero : f32
    linalg.yield %y : f32
  } -> tensor<4x6xf32>
  return %r : tensor<4x6xf32>
}
"""


def test_an_epilogue_leaves_the_workload_without_a_peer() -> None:
    text = _matmul().split("  return %m")[0] + "  " + RELU
    assert workload_from_text(text, "mm.mlir", "mm").peer is None
