// neg(x) collapsed from 16x4x8 to 16x32, then squared (the root): a tile of the collapsed dim
// that covers whole rows of 8 is a slice of the source, and the producer fuses.
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @f(%x: tensor<16x4x8xf32>) -> tensor<16x32xf32> {
  %e3 = tensor.empty() : tensor<16x4x8xf32>
  %n = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : tensor<16x4x8xf32>) outs(%e3 : tensor<16x4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.negf %a : f32
    linalg.yield %m : f32
  } -> tensor<16x4x8xf32>
  %c = tensor.collapse_shape %n [[0], [1, 2]] : tensor<16x4x8xf32> into tensor<16x32xf32>
  %e2 = tensor.empty() : tensor<16x32xf32>
  %r = linalg.generic {tdsched.test_root, indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%c : tensor<16x32xf32>) outs(%e2 : tensor<16x32xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.mulf %a, %a : f32
    linalg.yield %s : f32
  } -> tensor<16x32xf32>
  return %r : tensor<16x32xf32>
}
