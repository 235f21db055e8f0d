// One generic computes add and sub: the root reads add, and add and sub are both returned.
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @f(%x: tensor<16x32xf32>, %y: tensor<16x32xf32>) -> (tensor<16x32xf32>, tensor<16x32xf32>, tensor<16x32xf32>) {
  %e = tensor.empty() : tensor<16x32xf32>
  %add, %sub = linalg.generic {indexing_maps = [#id, #id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %y : tensor<16x32xf32>, tensor<16x32xf32>) outs(%e, %e : tensor<16x32xf32>, tensor<16x32xf32>) {
  ^bb0(%a: f32, %b: f32, %o1: f32, %o2: f32):
    %s = arith.addf %a, %b : f32
    %d = arith.subf %a, %b : f32
    linalg.yield %s, %d : f32, f32
  } -> (tensor<16x32xf32>, tensor<16x32xf32>)
  %e2 = tensor.empty() : tensor<16x32xf32>
  %r = linalg.generic {tdsched.test_root, indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%add : tensor<16x32xf32>) outs(%e2 : tensor<16x32xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %a : f32
    linalg.yield %m : f32
  } -> tensor<16x32xf32>
  return %r, %add, %sub : tensor<16x32xf32>, tensor<16x32xf32>, tensor<16x32xf32>
}
