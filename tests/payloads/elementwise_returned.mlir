// add(x, y) feeds the root and is returned too: a generic intermediate used outside.
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @f(%x: tensor<16x32xf32>, %y: tensor<16x32xf32>) -> (tensor<16x32xf32>, tensor<16x32xf32>) {
  %e = tensor.empty() : tensor<16x32xf32>
  %add = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %y : tensor<16x32xf32>, tensor<16x32xf32>) outs(%e : tensor<16x32xf32>) {
  ^bb0(%a: f32, %b: f32, %o1: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<16x32xf32>
  %e2 = tensor.empty() : tensor<16x32xf32>
  %r = linalg.generic {tdsched.test_root, indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%add : tensor<16x32xf32>) outs(%e2 : tensor<16x32xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %a : f32
    linalg.yield %m : f32
  } -> tensor<16x32xf32>
  return %r, %add : tensor<16x32xf32>, tensor<16x32xf32>
}
