"""The loop-nest view (``tdsched explain``) read from hand-written IR and checked by hand:
loop bounds, trip counts, parallel/reduction roles, mappings, and the ops shown."""

from __future__ import annotations

import pytest
from tdsched.transform_lib.loop_nest import LoopNestError, loop_nest, render

TILED_MATMUL = """
func.func @mm(%a: tensor<64x32xf32>, %b: tensor<32x16xf32>, %c: tensor<64x16xf32>)
    -> tensor<64x16xf32> {
  %c0 = arith.constant 0 : index
  %c8 = arith.constant 8 : index
  %c32 = arith.constant 32 : index
  %r = scf.forall (%i) in (4) shared_outs(%o = %c) -> (tensor<64x16xf32>) {
    %off = affine.apply affine_map<(d0) -> (d0 * 16)>(%i)
    %as = tensor.extract_slice %a[%off, 0] [16, 32] [1, 1]
        : tensor<64x32xf32> to tensor<16x32xf32>
    %os = tensor.extract_slice %o[%off, 0] [16, 16] [1, 1]
        : tensor<64x16xf32> to tensor<16x16xf32>
    %acc = scf.for %k = %c0 to %c32 step %c8 iter_args(%x = %os) -> (tensor<16x16xf32>) {
      %ak = tensor.extract_slice %as[0, %k] [16, 8] [1, 1]
          : tensor<16x32xf32> to tensor<16x8xf32>
      %bk = tensor.extract_slice %b[%k, 0] [8, 16] [1, 1]
          : tensor<32x16xf32> to tensor<8x16xf32>
      %m = linalg.matmul ins(%ak, %bk : tensor<16x8xf32>, tensor<8x16xf32>)
          outs(%x : tensor<16x16xf32>) -> tensor<16x16xf32>
      scf.yield %m : tensor<16x16xf32>
    }
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %acc into %o[%off, 0] [16, 16] [1, 1]
          : tensor<16x16xf32> into tensor<64x16xf32>
    }
  } {mapping = [#gpu.block<x>]}
  return %r : tensor<64x16xf32>
}
"""


def test_a_reduction_loop_inside_a_workgroup_forall() -> None:
    assert render(loop_nest(TILED_MATMUL)).splitlines() == [
        "func @mm",
        "  forall (%arg3) in (4)  (4 trips, parallel, workgroup x)",
        "    for %arg5 = 0 to 32 step 8  (4 trips, reduction)",
        "      linalg.matmul ins(16x8xf32, 8x16xf32) outs(16x16xf32)",
    ]


ROWS = """
func.func @rows(%t: tensor<?x8xf32>, %n: index) -> tensor<?x8xf32> {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %cst = arith.constant 0.0 : f32
  %r = scf.for %i = %c0 to %n step %c2 iter_args(%x = %t) -> (tensor<?x8xf32>) {
    %v = vector.transfer_read %x[%i, %c0], %cst {in_bounds = [true, true]}
        : tensor<?x8xf32>, vector<2x8xf32>
    %w = vector.transfer_read %x[%i, %c0], %cst {in_bounds = [true, true]}
        : tensor<?x8xf32>, vector<2x8xf32>
    %s = arith.addf %v, %w : vector<2x8xf32>
    %y = vector.transfer_write %s, %x[%i, %c0] {in_bounds = [true, true]}
        : vector<2x8xf32>, tensor<?x8xf32>
    scf.yield %y : tensor<?x8xf32>
  }
  return %r : tensor<?x8xf32>
}
func.func private @declared(%a: f32) -> f32
"""


def test_a_loop_that_writes_where_its_induction_variable_says_is_parallel() -> None:
    """A dynamic bound gives an unknown trip count; consecutive vector ops of one name
    are one line; a declaration without a body is not listed."""
    assert render(loop_nest(ROWS)).splitlines() == [
        "func @rows",
        "  for %arg2 = 0 to %arg1 step 2  (? trips, parallel)",
        "    vector.transfer_read (2 ops)  2x8xf32",
        "    vector.transfer_write  2x8xf32",
    ]


CONTRACT = """
func.func @acc(%a: vector<8x1xf32>, %b: vector<1x32xf32>, %c: vector<8x32xf32>,
               %t: tensor<8x32xf32>) -> tensor<8x32xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %cst = arith.constant 0.0 : f32
  %r = scf.for %k = %c0 to %c64 step %c1 iter_args(%x = %t) -> (tensor<8x32xf32>) {
    %acc = vector.transfer_read %x[%c0, %c0], %cst {in_bounds = [true, true]}
        : tensor<8x32xf32>, vector<8x32xf32>
    %d = vector.contract {indexing_maps = [affine_map<(i, j, k) -> (i, k)>,
        affine_map<(i, j, k) -> (k, j)>, affine_map<(i, j, k) -> (i, j)>],
        iterator_types = ["parallel", "parallel", "reduction"],
        kind = #vector.kind<add>} %a, %b, %acc
        : vector<8x1xf32>, vector<1x32xf32> into vector<8x32xf32>
    %w = vector.transfer_write %d, %x[%c0, %c0] {in_bounds = [true, true]}
        : vector<8x32xf32>, tensor<8x32xf32>
    scf.yield %w : tensor<8x32xf32>
  }
  %p = scf.forall (%i, %j) = (0, 0) to (64, 30) step (16, 8)
      shared_outs(%o = %t) -> (tensor<8x32xf32>) {
    scf.forall.in_parallel {}
  } {mapping = [#gpu.thread<y>, #gpu.thread<x>]}
  return %r : tensor<8x32xf32>
}
"""


def test_a_register_tile_accumulated_in_place_is_a_reduction() -> None:
    """The accumulator is read and written at fixed positions: a reduction loop. The
    contraction shows its vector shapes; a forall with steps shows its bounds, the
    trips rounded up (30 / 8: 4), and its thread mapping."""
    assert render(loop_nest(CONTRACT)).splitlines() == [
        "func @acc",
        "  for %arg4 = 0 to 64 step 1  (64 trips, reduction)",
        "    vector.transfer_read  8x32xf32",
        "    vector.contract  8x1xf32 · 1x32xf32 · 8x32xf32 → 8x32xf32",
        "    vector.transfer_write  8x32xf32",
        "  forall (%arg4, %arg5) = (0, 0) to (64, 30) step (16, 8)  "
        "(16 trips, parallel, thread y, x)",
    ]


GRAPH = """
func.func @conv_pad(%x: tensor<1x56x56x64xf32>, %w: tensor<3x3x64x64xf32>,
                    %init: tensor<1x56x56x64xf32>) -> tensor<1x56x56x64xf32> {
  %cst = arith.constant 0.0 : f32
  %p = tensor.pad %x low[0, 1, 1, 0] high[0, 1, 1, 0] {
  ^bb0(%a: index, %b: index, %c: index, %d: index):
    tensor.yield %cst : f32
  } : tensor<1x56x56x64xf32> to tensor<1x58x58x64xf32>
  %f = linalg.fill ins(%cst : f32) outs(%init : tensor<1x56x56x64xf32>)
      -> tensor<1x56x56x64xf32>
  %c = linalg.conv_2d_nhwc_hwcf ins(%p, %w : tensor<1x58x58x64xf32>, tensor<3x3x64x64xf32>)
      outs(%f : tensor<1x56x56x64xf32>) -> tensor<1x56x56x64xf32>
  return %c : tensor<1x56x56x64xf32>
}
"""


def test_an_untiled_graph_lists_its_ops_with_their_shapes() -> None:
    assert render(loop_nest(GRAPH)).splitlines() == [
        "func @conv_pad",
        "  tensor.pad 1x56x56x64xf32 -> 1x58x58x64xf32",
        "  linalg.fill outs(1x56x56x64xf32)",
        "  linalg.conv_2d_nhwc_hwcf ins(1x58x58x64xf32, 3x3x64x64xf32) outs(1x56x56x64xf32)",
    ]


def test_ir_that_does_not_parse_is_an_error_not_a_crash() -> None:
    with pytest.raises(LoopNestError, match="cannot parse the IR"):
        loop_nest("func.func @f( {")
