// p = exp(x) feeds two elementwise ops (a diamond); both are returned (two roots).
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @f(%x: tensor<32x32xf32>) -> (tensor<32x32xf32>, tensor<32x32xf32>) {
  %two = arith.constant 2.0 : f32
  %e = tensor.empty() : tensor<32x32xf32>
  %p = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<32x32xf32>) outs(%e : tensor<32x32xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = math.exp %a : f32
    linalg.yield %v : f32
  } -> tensor<32x32xf32>
  %m = linalg.generic {tdsched.test_root, indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%p : tensor<32x32xf32>) outs(%e : tensor<32x32xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.mulf %a, %two : f32
    linalg.yield %v : f32
  } -> tensor<32x32xf32>
  %s = linalg.generic {tdsched.test_root, indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%p, %x : tensor<32x32xf32>, tensor<32x32xf32>) outs(%e : tensor<32x32xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %v = arith.addf %a, %b : f32
    linalg.yield %v : f32
  } -> tensor<32x32xf32>
  return %m, %s : tensor<32x32xf32>, tensor<32x32xf32>
}
