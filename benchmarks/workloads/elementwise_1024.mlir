// Elementwise chain on 1024x1024 (f32), four separate linalg.generic ops:
// t = x * a; t = t + b; t = max(t, 0); y = t / (t + 1).
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @main(%x: tensor<1024x1024xf32>, %a: tensor<1024x1024xf32>, %b: tensor<1024x1024xf32>) -> tensor<1024x1024xf32> {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %e1 = tensor.empty() : tensor<1024x1024xf32>
  %t1 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %a : tensor<1024x1024xf32>, tensor<1024x1024xf32>) outs(%e1 : tensor<1024x1024xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %r = arith.mulf %p, %q : f32
    linalg.yield %r : f32
  } -> tensor<1024x1024xf32>
  %e2 = tensor.empty() : tensor<1024x1024xf32>
  %t2 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%t1, %b : tensor<1024x1024xf32>, tensor<1024x1024xf32>) outs(%e2 : tensor<1024x1024xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %r = arith.addf %p, %q : f32
    linalg.yield %r : f32
  } -> tensor<1024x1024xf32>
  %e3 = tensor.empty() : tensor<1024x1024xf32>
  %t3 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%t2 : tensor<1024x1024xf32>) outs(%e3 : tensor<1024x1024xf32>) {
  ^bb0(%p: f32, %o: f32):
    %r = arith.maximumf %p, %zero : f32
    linalg.yield %r : f32
  } -> tensor<1024x1024xf32>
  %e4 = tensor.empty() : tensor<1024x1024xf32>
  %t4 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%t3 : tensor<1024x1024xf32>) outs(%e4 : tensor<1024x1024xf32>) {
  ^bb0(%p: f32, %o: f32):
    %d = arith.addf %p, %one : f32
    %r = arith.divf %p, %d : f32
    linalg.yield %r : f32
  } -> tensor<1024x1024xf32>
  return %t4 : tensor<1024x1024xf32>
}
