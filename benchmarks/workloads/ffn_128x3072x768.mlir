// FFN-shaped matmul: M=128 tokens, N=3072, K=768 (f32).
func.func @main(%a: tensor<128x768xf32>, %b: tensor<768x3072xf32>) -> tensor<128x3072xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<128x3072xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<128x3072xf32>) -> tensor<128x3072xf32>
  %c = linalg.matmul ins(%a, %b : tensor<128x768xf32>, tensor<768x3072xf32>) outs(%init : tensor<128x3072xf32>) -> tensor<128x3072xf32>
  return %c : tensor<128x3072xf32>
}
