"""The numpy IR evaluator against numpy references, and ``tdsched check`` on hand-written
schedules: correct tilings are equivalent, the classic broken ones are caught."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from tdsched.schedules.cli.main import main
from tdsched.targets.ir_eval import EvalError, check_equivalent, evaluate, supported_ops

RNG = np.random.default_rng(1234)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def f64(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float64)


MATMUL = """
func.func @mm(%a: tensor<8x16xf32>, %b: tensor<16x12xf32>) -> tensor<8x12xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x12xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x12xf32>) -> tensor<8x12xf32>
  %m = linalg.matmul ins(%a, %b : tensor<8x16xf32>, tensor<16x12xf32>) outs(%f : tensor<8x12xf32>) -> tensor<8x12xf32>
  return %m : tensor<8x12xf32>
}
"""

# fill + matmul tiled by hand: M and N by 4x6, then K by 8. RIGHT fills each output tile
# once, outside the k-loop; WRONG fills inside it, re-zeroing the accumulator each step.
_TILED_FOR = """
func.func @mm(%a: tensor<8x16xf32>, %b: tensor<16x12xf32>) -> tensor<8x12xf32> {{
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c6 = arith.constant 6 : index
  %c8 = arith.constant 8 : index
  %c12 = arith.constant 12 : index
  %c16 = arith.constant 16 : index
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x12xf32>
  %r = scf.for %i = %c0 to %c8 step %c4 iter_args(%acc_i = %e) -> (tensor<8x12xf32>) {{
    %r2 = scf.for %j = %c0 to %c12 step %c6 iter_args(%acc_j = %acc_i) -> (tensor<8x12xf32>) {{
      %init = tensor.extract_slice %acc_j[%i, %j] [4, 6] [1, 1] : tensor<8x12xf32> to tensor<4x6xf32>
      {outer_fill}
      %sum = scf.for %k = %c0 to %c16 step %c8 iter_args(%c = {k_init}) -> (tensor<4x6xf32>) {{
        %as = tensor.extract_slice %a[%i, %k] [4, 8] [1, 1] : tensor<8x16xf32> to tensor<4x8xf32>
        %bs = tensor.extract_slice %b[%k, %j] [8, 6] [1, 1] : tensor<16x12xf32> to tensor<8x6xf32>
        {inner_fill}
        %p = linalg.matmul ins(%as, %bs : tensor<4x8xf32>, tensor<8x6xf32>) outs({mm_init} : tensor<4x6xf32>) -> tensor<4x6xf32>
        scf.yield %p : tensor<4x6xf32>
      }}
      %ins = tensor.insert_slice %sum into %acc_j[%i, %j] [4, 6] [1, 1] : tensor<4x6xf32> into tensor<8x12xf32>
      scf.yield %ins : tensor<8x12xf32>
    }}
    scf.yield %r2 : tensor<8x12xf32>
  }}
  return %r : tensor<8x12xf32>
}}
"""
_FILL = "%filled = linalg.fill ins(%zero : f32) outs({0} : tensor<4x6xf32>) -> tensor<4x6xf32>"
TILED_FOR_RIGHT = _TILED_FOR.format(
    outer_fill=_FILL.format("%init"), k_init="%filled", inner_fill="", mm_init="%c"
)
TILED_FOR_WRONG = _TILED_FOR.format(
    outer_fill="", k_init="%init", inner_fill=_FILL.format("%c"), mm_init="%filled"
)

# fill + matmul as a normalized scf.forall over 3x5 tiles (partial tiles at the ends, so
# dynamic sizes from affine.min), the fill fused into the loop, as tile_using_forall and
# fuse_into_containing_op leave it. OFFSET is the row offset map; a wrong one races.
_TILED_FORALL = """
#rows = affine_map<(d0) -> ({offset})>
#cols = affine_map<(d0) -> (d0 * 5)>
#m_size = affine_map<(d0) -> (-d0 + 8, 3)>
#n_size = affine_map<(d0) -> (-d0 + 12, 5)>
func.func @mm(%a: tensor<8x16xf32>, %b: tensor<16x12xf32>) -> tensor<8x12xf32> {{
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x12xf32>
  %r = scf.forall (%ti, %tj) in (3, 3) shared_outs(%out = %e) -> (tensor<8x12xf32>) {{
    %i = affine.apply #rows(%ti)
    %j = affine.apply #cols(%tj)
    %m = affine.min #m_size(%i)
    %n = affine.min #n_size(%j)
    %as = tensor.extract_slice %a[%i, 0] [%m, 16] [1, 1] : tensor<8x16xf32> to tensor<?x16xf32>
    %bs = tensor.extract_slice %b[0, %j] [16, %n] [1, 1] : tensor<16x12xf32> to tensor<16x?xf32>
    %init = tensor.extract_slice %out[%i, %j] [%m, %n] [1, 1] : tensor<8x12xf32> to tensor<?x?xf32>
    %filled = linalg.fill ins(%zero : f32) outs(%init : tensor<?x?xf32>) -> tensor<?x?xf32>
    %p = linalg.matmul ins(%as, %bs : tensor<?x16xf32>, tensor<16x?xf32>) outs(%filled : tensor<?x?xf32>) -> tensor<?x?xf32>
    scf.forall.in_parallel {{
      tensor.parallel_insert_slice %p into %out[%i, %j] [%m, %n] [1, 1] : tensor<?x?xf32> into tensor<8x12xf32>
    }}
  }}
  return %r : tensor<8x12xf32>
}}
"""
TILED_FORALL = _TILED_FORALL.format(offset="d0 * 3")


def test_matmul_with_fill_matches_numpy() -> None:
    a, b = rand(8, 16), rand(16, 12)
    (result,) = evaluate(MATMUL, None, [a, b])
    assert result.dtype == np.float64
    np.testing.assert_allclose(result, f64(a) @ f64(b), rtol=1e-12, atol=1e-12)


def test_integer_matmul_extends_and_accumulates_in_i32() -> None:
    src = """
    func.func @mm(%a: tensor<4x5xi8>, %b: tensor<5x3xi8>) -> tensor<4x3xi32> {
      %zero = arith.constant 0 : i32
      %e = tensor.empty() : tensor<4x3xi32>
      %f = linalg.fill ins(%zero : i32) outs(%e : tensor<4x3xi32>) -> tensor<4x3xi32>
      %m = linalg.matmul ins(%a, %b : tensor<4x5xi8>, tensor<5x3xi8>) outs(%f : tensor<4x3xi32>) -> tensor<4x3xi32>
      return %m : tensor<4x3xi32>
    }
    """
    a = RNG.integers(-128, 128, (4, 5)).astype(np.int8)
    b = RNG.integers(-128, 128, (5, 3)).astype(np.int8)
    (result,) = evaluate(src, "mm", [a, b])
    assert result.dtype == np.int32
    np.testing.assert_array_equal(result, a.astype(np.int32) @ b.astype(np.int32))


def test_strided_conv_with_pad_matches_numpy() -> None:
    src = """
    func.func @conv(%x: tensor<2x7x7x3xf32>, %w: tensor<3x3x3x4xf32>) -> tensor<2x4x4x4xf32> {
      %zero = arith.constant 0.0 : f32
      %padded = tensor.pad %x low[0, 1, 1, 0] high[0, 1, 1, 0] {
      ^bb0(%i: index, %j: index, %k: index, %l: index):
        tensor.yield %zero : f32
      } : tensor<2x7x7x3xf32> to tensor<2x9x9x3xf32>
      %e = tensor.empty() : tensor<2x4x4x4xf32>
      %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
      %y = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
             ins(%padded, %w : tensor<2x9x9x3xf32>, tensor<3x3x3x4xf32>) outs(%acc : tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
      return %y : tensor<2x4x4x4xf32>
    }
    """
    x, w = rand(2, 7, 7, 3), rand(3, 3, 3, 4)
    (result,) = evaluate(src, None, [x, w])
    xp = np.pad(f64(x), ((0, 0), (1, 1), (1, 1), (0, 0)))
    expected = sum(
        np.einsum("nhwc,cf->nhwf", xp[:, kh : kh + 7 : 2, kw : kw + 7 : 2, :], f64(w)[kh, kw])
        for kh in range(3)
        for kw in range(3)
    )
    np.testing.assert_allclose(result, expected, rtol=1e-12, atol=1e-12)


def test_max_pooling_matches_numpy() -> None:
    src = """
    func.func @pool(%x: tensor<1x6x6x2xf32>) -> tensor<1x3x3x2xf32> {
      %ninf = arith.constant 0xFF800000 : f32
      %window = tensor.empty() : tensor<2x2xf32>
      %e = tensor.empty() : tensor<1x3x3x2xf32>
      %acc = linalg.fill ins(%ninf : f32) outs(%e : tensor<1x3x3x2xf32>) -> tensor<1x3x3x2xf32>
      %y = linalg.pooling_nhwc_max {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
             ins(%x, %window : tensor<1x6x6x2xf32>, tensor<2x2xf32>) outs(%acc : tensor<1x3x3x2xf32>) -> tensor<1x3x3x2xf32>
      return %y : tensor<1x3x3x2xf32>
    }
    """
    x = rand(1, 6, 6, 2)
    (result,) = evaluate(src, None, [x])
    np.testing.assert_array_equal(result, f64(x).reshape(1, 3, 2, 3, 2, 2).max(axis=(2, 4)))


def test_generic_with_broadcast_maps_index_and_two_results() -> None:
    src = """
    #id = affine_map<(d0, d1) -> (d0, d1)>
    #col = affine_map<(d0, d1) -> (d0, 0)>
    #row = affine_map<(d0, d1) -> (d1)>
    func.func @bcast(%a: tensor<5x7xf32>, %b: tensor<5x1xf32>, %c: tensor<7xf32>) -> (tensor<5x7xf32>, tensor<5x7xf32>) {
      %e = tensor.empty() : tensor<5x7xf32>
      %r:2 = linalg.generic {indexing_maps = [#id, #col, #row, #id, #id], iterator_types = ["parallel", "parallel"]}
          ins(%a, %b, %c : tensor<5x7xf32>, tensor<5x1xf32>, tensor<7xf32>) outs(%e, %e : tensor<5x7xf32>, tensor<5x7xf32>) {
      ^bb0(%x: f32, %y: f32, %z: f32, %o0: f32, %o1: f32):
        %m = arith.mulf %x, %y : f32
        %s = arith.addf %m, %z : f32
        %j = linalg.index 1 : index
        %ji = arith.index_cast %j : index to i32
        %jf = arith.sitofp %ji : i32 to f32
        %t = arith.maximumf %x, %jf : f32
        linalg.yield %s, %t : f32, f32
      } -> (tensor<5x7xf32>, tensor<5x7xf32>)
      return %r#0, %r#1 : tensor<5x7xf32>, tensor<5x7xf32>
    }
    """
    a, b, c = rand(5, 7), rand(5, 1), rand(7)
    s, t = evaluate(src, None, [a, b, c])
    np.testing.assert_allclose(s, f64(a) * f64(b) + f64(c)[None, :], rtol=1e-12)
    np.testing.assert_array_equal(t, np.maximum(f64(a), np.arange(7.0)[None, :]))


def test_reduction_generic_carries_two_accumulators() -> None:
    """Argmax: a reduction whose two outputs (max, position) are both carried."""
    src = """
    #in = affine_map<(d0, d1) -> (d0, d1)>
    #out = affine_map<(d0, d1) -> (d0)>
    func.func @argmax(%x: tensor<6x9xf32>) -> (tensor<6xf32>, tensor<6xi32>) {
      %ninf = arith.constant 0xFF800000 : f32
      %c0 = arith.constant 0 : i32
      %e = tensor.empty() : tensor<6xf32>
      %ei = tensor.empty() : tensor<6xi32>
      %m = linalg.fill ins(%ninf : f32) outs(%e : tensor<6xf32>) -> tensor<6xf32>
      %i = linalg.fill ins(%c0 : i32) outs(%ei : tensor<6xi32>) -> tensor<6xi32>
      %r:2 = linalg.generic {indexing_maps = [#in, #out, #out], iterator_types = ["parallel", "reduction"]}
          ins(%x : tensor<6x9xf32>) outs(%m, %i : tensor<6xf32>, tensor<6xi32>) {
      ^bb0(%v: f32, %best: f32, %bi: i32):
        %k = linalg.index 1 : index
        %ki = arith.index_cast %k : index to i32
        %gt = arith.cmpf ogt, %v, %best : f32
        %nb = arith.select %gt, %v, %best : f32
        %ni = arith.select %gt, %ki, %bi : i32
        linalg.yield %nb, %ni : f32, i32
      } -> (tensor<6xf32>, tensor<6xi32>)
      return %r#0, %r#1 : tensor<6xf32>, tensor<6xi32>
    }
    """
    x = rand(6, 9)
    best, where = evaluate(src, None, [x])
    np.testing.assert_array_equal(best, f64(x).max(axis=1))
    np.testing.assert_array_equal(where, x.argmax(axis=1))


def test_generic_yielding_an_old_output_value_as_another_result() -> None:
    """Swapping two outputs: each result gets the other output's value from before."""
    src = """
    #id = affine_map<(d0) -> (d0)>
    func.func @swap(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
      %r:2 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} outs(%a, %b : tensor<4xf32>, tensor<4xf32>) {
      ^bb0(%x: f32, %y: f32):
        linalg.yield %y, %x : f32, f32
      } -> (tensor<4xf32>, tensor<4xf32>)
      return %r#0, %r#1 : tensor<4xf32>, tensor<4xf32>
    }
    """
    a, b = rand(4), rand(4)
    x, y = evaluate(src, None, [a, b])
    np.testing.assert_array_equal(x, b)
    np.testing.assert_array_equal(y, a)


def test_integer_division_comparison_and_cast_semantics() -> None:
    src = """
    func.func private @div(%a: tensor<6xi32>, %b: tensor<6xi32>) -> tensor<6xi32> {
      %q = arith.divsi %a, %b : tensor<6xi32>
      return %q : tensor<6xi32>
    }
    func.func @ops(%a: tensor<6xi32>, %b: tensor<6xi32>, %x: tensor<6xf32>, %y: tensor<6xf32>) -> (tensor<6xi32>, tensor<6xi32>, tensor<6xi32>, tensor<6xi32>, tensor<6xi32>, tensor<6xi1>, tensor<6xi32>, tensor<6xi1>, tensor<6xi32>, tensor<6xf16>, tensor<6xbf16>, tensor<6xi32>, tensor<6xi8>) {
      %q = func.call @div(%a, %b) : (tensor<6xi32>, tensor<6xi32>) -> tensor<6xi32>
      %r = arith.remsi %a, %b : tensor<6xi32>
      %fd = arith.floordivsi %a, %b : tensor<6xi32>
      %cd = arith.ceildivsi %a, %b : tensor<6xi32>
      %du = arith.divui %a, %b : tensor<6xi32>
      %lt = arith.cmpi ult, %a, %b : tensor<6xi32>
      %ext = arith.extsi %lt : tensor<6xi1> to tensor<6xi32>
      %une = arith.cmpf une, %x, %y : tensor<6xf32>
      %fi = arith.fptosi %x : tensor<6xf32> to tensor<6xi32>
      %h = arith.truncf %x : tensor<6xf32> to tensor<6xf16>
      %bf = arith.truncf %x : tensor<6xf32> to tensor<6xbf16>
      %bits = arith.bitcast %x : tensor<6xf32> to tensor<6xi32>
      %t8 = arith.trunci %a : tensor<6xi32> to tensor<6xi8>
      return %q, %r, %fd, %cd, %du, %lt, %ext, %une, %fi, %h, %bf, %bits, %t8 : tensor<6xi32>, tensor<6xi32>, tensor<6xi32>, tensor<6xi32>, tensor<6xi32>, tensor<6xi1>, tensor<6xi32>, tensor<6xi1>, tensor<6xi32>, tensor<6xf16>, tensor<6xbf16>, tensor<6xi32>, tensor<6xi8>
    }
    """
    a = np.array([7, -7, 7, -7, 300, -1], np.int32)
    b = np.array([2, 2, -2, -2, 7, 3], np.int32)
    x = np.array([1.5, -2.7, np.nan, 0.1, 3.0, -0.0], np.float32)
    y = np.array([1.5, 1.0, 1.0, np.nan, 2.0, 0.0], np.float32)
    q, r, fd, cd, du, lt, ext, une, fi, h, bf, bits, t8 = evaluate(src, "ops", [a, b, x, y])
    assert q.tolist() == [3, -3, -3, 3, 42, 0]  # toward zero
    assert r.tolist() == [1, -1, 1, -1, 6, -1]  # sign of the dividend
    assert fd.tolist() == [3, -4, -4, 3, 42, -1]
    assert cd.tolist() == [4, -3, -3, 4, 43, 0]
    assert du.tolist() == (a.view(np.uint32) // b.view(np.uint32)).tolist()
    assert lt.tolist() == (a.view(np.uint32) < b.view(np.uint32)).tolist()
    assert ext.tolist() == [-1 if v else 0 for v in lt]  # i1 true sign-extends to -1
    assert une.tolist() == [False, True, True, True, True, False]  # unordered: NaN is unequal
    assert fi[[0, 1, 3, 4]].tolist() == [1, -2, 0, 3]
    np.testing.assert_array_equal(h, x.astype(np.float16))
    assert bf[[0, 1, 3]].tolist() == [1.5, -2.703125, 0.10009765625]
    np.testing.assert_array_equal(bits, x.view(np.int32))
    assert t8.tolist() == [7, -7, 7, -7, 44, -1]


def test_tiled_matmul_with_fill_outside_k_loop_is_equivalent() -> None:
    report = check_equivalent(MATMUL, TILED_FOR_RIGHT)
    assert report.equivalent and report.function == "mm"
    assert report.outputs[0].max_abs_error < 1e-12


def test_fill_inside_k_loop_is_reported_as_mismatch() -> None:
    report = check_equivalent(MATMUL, TILED_FOR_WRONG, seed=3)
    assert not report.equivalent
    assert report.outputs[0].max_rel_error > 0.05


def test_forall_with_partial_tiles_and_parallel_insert_is_equivalent() -> None:
    assert check_equivalent(MATMUL, TILED_FORALL).equivalent


def test_forall_iterations_writing_the_same_elements_are_a_race() -> None:
    overlapping = _TILED_FORALL.format(offset="d0 * 2")
    with pytest.raises(EvalError, match=r"AFTER:\d+:\d+: tensor.parallel_insert_slice: .*race"):
        check_equivalent(MATMUL, overlapping)


_ROWS = """
#size = affine_map<(d0) -> ({size})>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @rows(%x: tensor<4x6x8xf32>) -> (tensor<4x6x8xf32>, tensor<4x8xf32>) {{
  %c0 = arith.constant 0 : index
  %c5 = arith.constant 5 : index
  %c24 = arith.constant 24 : index
  %two = arith.constant 2.0 : f32
  %flat = tensor.collapse_shape %x [[0, 1], [2]] : tensor<4x6x8xf32> into tensor<24x8xf32>
  %e = tensor.empty() : tensor<24x8xf32>
  %r = scf.for %i = %c0 to %c24 step %c5 iter_args(%acc = %e) -> (tensor<24x8xf32>) {{
    %n = affine.min #size(%i)
    %rows = tensor.extract_slice %flat[%i, 0] [%n, 8] [1, 1] : tensor<24x8xf32> to tensor<?x8xf32>
    %dst = tensor.extract_slice %acc[%i, 0] [%n, 8] [1, 1] : tensor<24x8xf32> to tensor<?x8xf32>
    %y = linalg.generic {{indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}}
        ins(%rows : tensor<?x8xf32>) outs(%dst : tensor<?x8xf32>) {{
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %two : f32
      linalg.yield %m : f32
    }} -> tensor<?x8xf32>
    %ins = tensor.insert_slice %y into %acc[%i, 0] [%n, 8] [1, 1] : tensor<?x8xf32> into tensor<24x8xf32>
    scf.yield %ins : tensor<24x8xf32>
  }}
  %out = tensor.expand_shape %r [[0, 1], [2]] output_shape [4, 6, 8] : tensor<24x8xf32> into tensor<4x6x8xf32>
  %row = tensor.extract_slice %x[0, 2, 0] [4, 1, 8] [1, 1, 1] : tensor<4x6x8xf32> to tensor<4x8xf32>
  return %out, %row : tensor<4x6x8xf32>, tensor<4x8xf32>
}}
"""


def test_reshapes_and_dynamic_slices_from_affine_min() -> None:
    x = rand(4, 6, 8)
    doubled, row = evaluate(_ROWS.format(size="5, -d0 + 24"), None, [x])
    np.testing.assert_array_equal(doubled, 2 * f64(x))
    np.testing.assert_array_equal(row, f64(x)[:, 2, :])


def test_slice_past_the_end_is_an_error_not_a_clip() -> None:
    with pytest.raises(
        EvalError, match=r"rows\.mlir:\d+:\d+: tensor.extract_slice: .*out of bounds"
    ):
        evaluate(_ROWS.format(size="5"), None, [rand(4, 6, 8)], source="rows.mlir")


def test_pack_and_unpack_round_trip() -> None:
    src = """
    func.func @pack(%x: tensor<7x10xf32>) -> (tensor<4x2x4x3xf32>, tensor<7x10xf32>) {
      %zero = arith.constant 0.0 : f32
      %e = tensor.empty() : tensor<4x2x4x3xf32>
      %p = linalg.pack %x padding_value(%zero : f32) outer_dims_perm = [1, 0] inner_dims_pos = [0, 1] inner_tiles = [4, 3] into %e : tensor<7x10xf32> -> tensor<4x2x4x3xf32>
      %e2 = tensor.empty() : tensor<7x10xf32>
      %u = linalg.unpack %p outer_dims_perm = [1, 0] inner_dims_pos = [0, 1] inner_tiles = [4, 3] into %e2 : tensor<4x2x4x3xf32> -> tensor<7x10xf32>
      return %p, %u : tensor<4x2x4x3xf32>, tensor<7x10xf32>
    }
    """
    x = rand(7, 10)
    packed, unpacked = evaluate(src, None, [x])
    padded = np.zeros((8, 12))
    padded[:7, :10] = x
    np.testing.assert_array_equal(packed, padded.reshape(2, 4, 4, 3).transpose(2, 0, 1, 3))
    np.testing.assert_array_equal(unpacked, f64(x))


def test_unsupported_op_names_op_location_and_what_is_supported() -> None:
    src = "func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n  %y = math.cbrt %x : tensor<4xf32>\n  return %y : tensor<4xf32>\n}\n"
    with pytest.raises(EvalError, match=r"^kernel\.mlir:2:8: math\.cbrt: unsupported op") as info:
        evaluate(src, None, [rand(4)], source="kernel.mlir")
    assert "linalg.{generic" in str(info.value) and "scf.{" in str(info.value)


def test_docs_list_every_supported_op() -> None:
    doc = (Path(__file__).parents[1] / "docs" / "commands" / "check.md").read_text()
    rows = {line.split("|")[1].strip(): line for line in doc.splitlines() if line.startswith("| ")}
    missing = [
        name
        for name in supported_ops()
        if name.partition(".")[2] not in rows.get(name.partition(".")[0], "")
    ]
    assert not missing


def test_different_signatures_are_an_error() -> None:
    other = MATMUL.replace("8x16", "8x15").replace("16x12", "15x12")
    with pytest.raises(
        EvalError, match=r"@mm has type \(tensor<8x16xf32>.* in BEFORE but \(tensor<8x15xf32>"
    ):
        check_equivalent(MATMUL, other)


@pytest.fixture
def mlir_files(tmp_path: Path) -> dict[str, Path]:
    files = {
        "before": MATMUL,
        "right": TILED_FOR_RIGHT,
        "wrong": TILED_FOR_WRONG,
        "invalid": "func.func @f( {",
    }
    paths = {}
    for name, text in files.items():
        paths[name] = tmp_path / f"{name}.mlir"
        paths[name].write_text(text)
    return paths


def test_cli_check_exit_codes_and_table(
    mlir_files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", str(mlir_files["before"]), str(mlir_files["right"])]) == 0
    out = capsys.readouterr().out
    assert "max abs err" in out and out.rstrip().endswith("equivalent")
    assert main(["check", str(mlir_files["before"]), str(mlir_files["wrong"])]) == 1
    assert "MISMATCH" in capsys.readouterr().out


def test_cli_check_json(mlir_files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["check", str(mlir_files["before"]), str(mlir_files["wrong"]), "--json", "--seed", "5"]
    )
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and report["equivalent"] is False and report["seed"] == 5
    (output,) = report["outputs"]
    assert (
        output["type"] == "tensor<8x12xf32>" and not output["ok"] and output["max_rel_error"] > 0.05
    )


@pytest.mark.parametrize(
    ("after", "message"),
    [("missing", "missing.mlir: cannot read"), ("invalid", "invalid.mlir: not valid MLIR")],
)
def test_cli_check_errors_exit_2_without_traceback(
    mlir_files: dict[str, Path], capsys: pytest.CaptureFixture[str], after: str, message: str
) -> None:
    path = mlir_files.get(after, mlir_files["before"].with_name("missing.mlir"))
    assert main(["check", str(mlir_files["before"]), str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tdsched: error: ") and message in err and "Traceback" not in err


# The accumulator is never filled: every element of BEFORE's result reads tensor.empty.
UNFILLED = MATMUL.replace(
    "outs(%f : tensor<8x12xf32>) -> tensor<8x12xf32>\n  return",
    "outs(%e : tensor<8x12xf32>) -> tensor<8x12xf32>\n  return",
)
# Half the k range only: wrong, whatever BEFORE is.
HALF_K = UNFILLED.replace(
    "%m = linalg.matmul ins(%a, %b : tensor<8x16xf32>, tensor<16x12xf32>)",
    "%ah = tensor.extract_slice %a[0, 0] [8, 8] [1, 1] : tensor<8x16xf32> to tensor<8x8xf32>\n"
    "  %bh = tensor.extract_slice %b[0, 0] [8, 12] [1, 1] : tensor<16x12xf32> to tensor<8x12xf32>\n"
    "  %m = linalg.matmul ins(%ah, %bh : tensor<8x8xf32>, tensor<8x12xf32>)",
)


def test_a_before_that_reads_uninitialized_data_never_passes() -> None:
    # Both results are NaN everywhere: NaN == NaN once made this 'equivalent'.
    assert "linalg.fill" in UNFILLED.split("linalg.matmul")[0]  # filled, but not used
    for after in (UNFILLED, HALF_K):
        report = check_equivalent(UNFILLED, after)
        (output,) = report.outputs
        assert not report.equivalent and not output.ok
        assert (output.compared, output.undefined, output.size) == (0, 96, 96)
        assert "the reference is undefined at 96 of 96 elements" in (output.problem or "")
        assert "BEFORE reads uninitialized data" in report.format_table()
        assert "UNDEFINED" in report.format_table()


def test_a_correct_pair_compares_every_element() -> None:
    report = check_equivalent(MATMUL, TILED_FOR_RIGHT)
    (output,) = report.outputs
    assert report.equivalent and (output.compared, output.undefined) == (96, 0)
    assert output.problem is None and " 96/96 " in report.format_table()


def test_json_says_what_was_compared(
    mlir_files: dict[str, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    unfilled = tmp_path / "unfilled.mlir"
    unfilled.write_text(UNFILLED)
    assert main(["check", str(unfilled), str(mlir_files["before"]), "--json"]) == 1
    (output,) = json.loads(capsys.readouterr().out)["outputs"]
    assert (output["compared"], output["undefined"], output["size"]) == (0, 96, 96)
    assert output["problem"].startswith("the reference is undefined at 96 of 96 elements")


def test_cli_check_evaluates_dynamic_shapes_with_sizes_from_the_one_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A dynamic ?x? module (tensor.dim, tensor.empty with sizes) against its
    horizontally fused form: an error naming the option without --dynamic-size, and every
    element compared with it, each dim its own size except where the ops tie them (the
    second generic reads x and y with one map: same shape)."""
    from tdsched.transform_lib.graph.fuse_elementwise import (
        FuseElementwiseOptions,
        fuse_elementwise_ext,
    )
    from tdsched.transform_lib.graph.report import rewrite_text

    before = (Path(__file__).parent / "payloads" / "dynamic_shared_input.mlir").read_text()
    after, _ = rewrite_text(before, lambda m: fuse_elementwise_ext(m, FuseElementwiseOptions()))
    paths = [tmp_path / "before.mlir", tmp_path / "after.mlir"]
    for path, text in zip(paths, (before, after), strict=True):
        path.write_text(text)
    assert main(["check", *map(str, paths)]) == 2
    assert "@f has dynamic dims, (tensor<?x?xf32>, tensor<?x?xf32>) -> (" in (
        capsys.readouterr().err
    )
    assert main(["check", *map(str, paths), "--dynamic-size", "6"]) == 0
    out = capsys.readouterr().out
    assert out.count(" 42/42 ") == 2 and out.rstrip().endswith("equivalent")
    assert (
        "arguments #0 tensor<?x?xf32> as 6x7, #1 tensor<?x?xf32> as 6x7: each dynamic dim its "
        "own size, except dims BEFORE's ops make equal"
    ) in out
    wrong = after.replace("arith.mulf", "arith.addf")
    paths[1].write_text(wrong)
    assert main(["check", *map(str, paths), "--dynamic-size", "6"]) == 1


# A reduction over d1 of an 8x4 input, into an output filled with the reduction's
# identity (-inf, the most negative i32, true) by linalg.fill, by tensor.splat, or not at
# all: the unfilled one reads tensor.empty, which the first fill (NaN, the most negative
# integer, true) hides, being that identity.
_REDUCTION = """
#in = affine_map<(d0, d1) -> (d0, d1)>
#out = affine_map<(d0, d1) -> (d0)>
func.func @f(%x: tensor<8x4x{t}>) -> tensor<8x{r}> {{
  %init = arith.constant {init}
  %c3 = arith.constant 3 : i32
  %e = tensor.empty() : tensor<8x{r}>
  {fill}
  %red = linalg.generic {{indexing_maps = [#in, #out], iterator_types = ["parallel", "reduction"]}}
      ins(%x : tensor<8x4x{t}>) outs({out} : tensor<8x{r}>) {{
  ^bb0(%v: {t}, %acc: {r}):
    {body}
    linalg.yield %n : {r}
  }} -> tensor<8x{r}>
  return %red : tensor<8x{r}>
}}
"""
_REDUCTIONS = {
    "maxnumf": dict(
        t="f32", r="f32", init="0xFF800000 : f32", body="%n = arith.maxnumf %v, %acc : f32"
    ),
    "maxsi": dict(
        t="i32", r="i32", init="-2147483648 : i32", body="%n = arith.maxsi %v, %acc : i32"
    ),
    "andi": dict(
        t="i32",
        r="i1",
        init="true",
        body="%p = arith.cmpi ne, %v, %c3 : i32\n    %n = arith.andi %p, %acc : i1",
    ),
}


def _reduction(op: str, filled_by: str | None) -> str:
    case = _REDUCTIONS[op]
    fill = {
        "fill": "%filled = linalg.fill ins(%init : {r}) outs(%e : tensor<8x{r}>) -> tensor<8x{r}>",
        "splat": "%filled = tensor.splat %init : tensor<8x{r}>",
        None: "",
    }[filled_by].format(**case)
    return _REDUCTION.format(fill=fill, out="%e" if filled_by is None else "%filled", **case)


@pytest.mark.parametrize("op", sorted(_REDUCTIONS))
def test_an_after_whose_uninitialized_read_one_fill_hides_is_a_mismatch(
    op: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """maxnumf(NaN, x), maxsi(INT_MIN, x) and andi(true, x) are x: under the first fill
    alone these were 'equivalent'. AFTER runs under every fill, as BEFORE does."""
    before, unfilled = _reduction(op, "fill"), _reduction(op, None)
    (output,) = check_equivalent(before, unfilled).outputs
    assert not output.ok and output.undefined == 0
    assert (output.problem or "").startswith(
        "AFTER reads uninitialized data: with tensor.empty filled with "
    )
    paths = [tmp_path / "before.mlir", tmp_path / "after.mlir"]
    for path, text in zip(paths, (before, unfilled), strict=True):
        path.write_text(text)
    assert main(["check", *map(str, paths)]) == 1
    out = capsys.readouterr().out
    assert "MISMATCH" in out and out.rstrip().endswith("NOT equivalent: 1 of 1 results do not pass")
    # filled another way: still equivalent, every element compared
    report = check_equivalent(before, _reduction(op, "splat"))
    assert report.equivalent and report.outputs[0].compared == 8


_DYNAMIC_ROW_SUM = """
#in = affine_map<(d0, d1) -> (d0, d1)>
#out = affine_map<(d0, d1) -> (d0)>
func.func @rows(%x: tensor<?x?xf32>) -> tensor<?xf32> {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x?xf32>
  %n = tensor.dim %x, {cols} : tensor<?x?xf32>
  %xs = tensor.extract_slice %x[0, 0] [%m, %n] [1, 1] : tensor<?x?xf32> to tensor<?x?xf32>
  %e = tensor.empty(%m) : tensor<?xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  %r = linalg.generic {{indexing_maps = [#in, #out], iterator_types = ["parallel", "reduction"]}}
      ins(%xs : tensor<?x?xf32>) outs(%f : tensor<?xf32>) {{
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %v, %acc : f32
    linalg.yield %s : f32
  }} -> tensor<?xf32>
  return %r : tensor<?xf32>
}}
"""


def test_a_dim_read_from_the_wrong_dimension_is_a_mismatch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """AFTER sums the first dim-0 columns instead of all dim-1 of them: with one size for
    every dynamic dim the two were the same, and 'equivalent'."""
    paths = {name: tmp_path / f"{name}.mlir" for name in ("before", "wrong", "right")}
    paths["before"].write_text(_DYNAMIC_ROW_SUM.format(cols="%c1"))
    paths["wrong"].write_text(_DYNAMIC_ROW_SUM.format(cols="%c0"))
    paths["right"].write_text(_DYNAMIC_ROW_SUM.format(cols="%c1").replace("ins(%xs", "ins(%x"))
    before = str(paths["before"])
    assert main(["check", before, str(paths["wrong"]), "--dynamic-size", "6"]) == 1
    out = capsys.readouterr().out
    assert "arguments #0 tensor<?x?xf32> as 6x7: each dynamic dim its own size" in out
    assert "results differ from the reference at 6 of 6 elements" in out
    assert main(["check", before, str(paths["right"]), "--dynamic-size", "6", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["arguments"] == [{"type": "tensor<?x?xf32>", "shape": [6, 7]}]


DYNAMIC_MATMUL = """
func.func @mm(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>, %bias: tensor<?xf32>) -> tensor<?x?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %a, %c0 : tensor<?x?xf32>
  %n = tensor.dim %b, %c1 : tensor<?x?xf32>
  %e = tensor.empty(%m, %n) : tensor<?x?xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x?xf32>) -> tensor<?x?xf32>
  %p = linalg.matmul ins(%a, %b : tensor<?x?xf32>, tensor<?x?xf32>) outs(%f : tensor<?x?xf32>) -> tensor<?x?xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%p, %bias : tensor<?x?xf32>, tensor<?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%v: f32, %w: f32, %o: f32):
    %s = arith.addf %v, %w : f32
    linalg.yield %s : f32
  } -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}
"""


def test_dims_that_the_ops_tie_share_one_size() -> None:
    """The matmul's K in both operands, and the bias along N: M, K, N get 3, 4, 5."""
    report = check_equivalent(DYNAMIC_MATMUL, DYNAMIC_MATMUL, dynamic_size=3)
    assert report.equivalent and report.outputs[0].compared == 15
    assert [shape for _, shape in report.arguments] == [(3, 4), (4, 5), (5,)]


def test_a_scalar_argument_beside_dynamic_ones_is_the_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "scalar.mlir"
    path.write_text(
        "func.func @f(%x: tensor<?xf32>, %s: f32) -> tensor<?xf32> {\n"
        "  return %x : tensor<?xf32>\n}\n"
    )
    assert main(["check", str(path), str(path), "--dynamic-size", "4"]) == 2
    assert capsys.readouterr().err == (
        f"tdsched: error: {path}: argument type f32 is not a ranked tensor; "
        "tdsched feeds static-shaped tensors\n"
    )
