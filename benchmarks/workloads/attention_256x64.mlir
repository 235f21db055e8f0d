// Attention block (f32): Q, K, V 256x64; scores = Q K^T (256x256), row softmax, then P V (256x64).
func.func @main(%q: tensor<256x64xf32>, %k: tensor<256x64xf32>, %v: tensor<256x64xf32>) -> tensor<256x64xf32> {
  %zero = arith.constant 0.0 : f32
  %es = tensor.empty() : tensor<256x256xf32>
  %fs = linalg.fill ins(%zero : f32) outs(%es : tensor<256x256xf32>) -> tensor<256x256xf32>
  %s = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>,
                                      affine_map<(m, n, k) -> (n, k)>,
                                      affine_map<(m, n, k) -> (m, n)>]
      ins(%q, %k : tensor<256x64xf32>, tensor<256x64xf32>)
      outs(%fs : tensor<256x256xf32>) -> tensor<256x256xf32>
  %ep = tensor.empty() : tensor<256x256xf32>
  %p = linalg.softmax dimension(1) ins(%s : tensor<256x256xf32>) outs(%ep : tensor<256x256xf32>) -> tensor<256x256xf32>
  %eo = tensor.empty() : tensor<256x64xf32>
  %fo = linalg.fill ins(%zero : f32) outs(%eo : tensor<256x64xf32>) -> tensor<256x64xf32>
  %o = linalg.matmul ins(%p, %v : tensor<256x256xf32>, tensor<256x64xf32>) outs(%fo : tensor<256x64xf32>) -> tensor<256x64xf32>
  return %o : tensor<256x64xf32>
}
