// Row softmax of a 256x2048 matrix (f32).
func.func @main(%x: tensor<256x2048xf32>) -> tensor<256x2048xf32> {
  %e = tensor.empty() : tensor<256x2048xf32>
  %s = linalg.softmax dimension(1) ins(%x : tensor<256x2048xf32>) outs(%e : tensor<256x2048xf32>) -> tensor<256x2048xf32>
  return %s : tensor<256x2048xf32>
}
