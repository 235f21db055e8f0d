// Matmul 512x512x512 with a sigmoid-gate epilogue (GELU's sigmoid approximation):
// y = x * sigmoid(1.702 x) = x / (1 + exp(-1.702 x)) (f32).
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @main(%a: tensor<512x512xf32>, %b: tensor<512x512xf32>) -> tensor<512x512xf32> {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %k = arith.constant 1.702 : f32
  %e = tensor.empty() : tensor<512x512xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<512x512xf32>) -> tensor<512x512xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<512x512xf32>, tensor<512x512xf32>) outs(%init : tensor<512x512xf32>) -> tensor<512x512xf32>
  %e2 = tensor.empty() : tensor<512x512xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%mm : tensor<512x512xf32>) outs(%e2 : tensor<512x512xf32>) {
  ^bb0(%x: f32, %o: f32):
    %t = arith.mulf %x, %k : f32
    %n = arith.negf %t : f32
    %ex = math.exp %n : f32
    %d = arith.addf %ex, %one : f32
    %r = arith.divf %x, %d : f32
    linalg.yield %r : f32
  } -> tensor<512x512xf32>
  return %y : tensor<512x512xf32>
}
