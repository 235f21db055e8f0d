// Batch matmul: B=8, M=256, N=128, K=256 (f32).
func.func @main(%a: tensor<8x256x256xf32>, %b: tensor<8x256x128xf32>) -> tensor<8x256x128xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x256x128xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<8x256x128xf32>) -> tensor<8x256x128xf32>
  %c = linalg.batch_matmul ins(%a, %b : tensor<8x256x256xf32>, tensor<8x256x128xf32>) outs(%init : tensor<8x256x128xf32>) -> tensor<8x256x128xf32>
  return %c : tensor<8x256x128xf32>
}
