#id2 = affine_map<(d0, d1) -> (d0, d1)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @f(%x: tensor<16x32xf32>, %y: tensor<16x4x8xf32>) -> tensor<16x4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e2 = tensor.empty() : tensor<16x32xf32>
  %pos, %neg = linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<16x32xf32>) outs(%e2, %e2 : tensor<16x32xf32>, tensor<16x32xf32>) {
  ^bb0(%a: f32, %o1: f32, %o2: f32):
    %p = arith.maximumf %a, %zero : f32
    %n = arith.minimumf %a, %zero : f32
    linalg.yield %p, %n : f32, f32
  } -> (tensor<16x32xf32>, tensor<16x32xf32>)
  %pe = tensor.expand_shape %pos [[0], [1, 2]] output_shape [16, 4, 8] : tensor<16x32xf32> into tensor<16x4x8xf32>
  %ne = tensor.expand_shape %neg [[0], [1, 2]] output_shape [16, 4, 8] : tensor<16x32xf32> into tensor<16x4x8xf32>
  %e3 = tensor.empty() : tensor<16x4x8xf32>
  %r = linalg.generic {tdsched.test_root, indexing_maps = [#id3, #id3, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%pe, %ne, %y : tensor<16x4x8xf32>, tensor<16x4x8xf32>, tensor<16x4x8xf32>) outs(%e3 : tensor<16x4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32, %o: f32):
    %s = arith.mulf %a, %c : f32
    %t = arith.addf %s, %b : f32
    linalg.yield %t : f32
  } -> tensor<16x4x8xf32>
  return %r : tensor<16x4x8xf32>
}
