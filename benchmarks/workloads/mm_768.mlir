// Square matmul, 768x768x768 (f32).
func.func @main(%a: tensor<768x768xf32>, %b: tensor<768x768xf32>) -> tensor<768x768xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<768x768xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<768x768xf32>) -> tensor<768x768xf32>
  %c = linalg.matmul ins(%a, %b : tensor<768x768xf32>, tensor<768x768xf32>) outs(%init : tensor<768x768xf32>) -> tensor<768x768xf32>
  return %c : tensor<768x768xf32>
}
