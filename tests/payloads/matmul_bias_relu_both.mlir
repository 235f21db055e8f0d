// relu(A @ B + bias), returning the matmul too: an intermediate used outside the region.
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
func.func @f(%a: tensor<32x24xf32>, %b: tensor<24x40xf32>, %bias: tensor<40xf32>) -> (tensor<32x40xf32>, tensor<32x40xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32x40xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<32x40xf32>) -> tensor<32x40xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<32x24xf32>, tensor<24x40xf32>) outs(%init : tensor<32x40xf32>) -> tensor<32x40xf32>
  %e2 = tensor.empty() : tensor<32x40xf32>
  %r = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%mm, %bias : tensor<32x40xf32>, tensor<40xf32>) outs(%e2 : tensor<32x40xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    %z = arith.maximumf %s, %zero : f32
    linalg.yield %z : f32
  } -> tensor<32x40xf32>
  return %r, %mm : tensor<32x40xf32>, tensor<32x40xf32>
}
