// relu(A @ B + bias): M=384, N=1024, K=512, bias a row vector broadcast over rows (f32).
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
func.func @main(%a: tensor<384x512xf32>, %b: tensor<512x1024xf32>, %bias: tensor<1024xf32>) -> tensor<384x1024xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<384x1024xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<384x1024xf32>) -> tensor<384x1024xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<384x512xf32>, tensor<512x1024xf32>) outs(%init : tensor<384x1024xf32>) -> tensor<384x1024xf32>
  %e2 = tensor.empty() : tensor<384x1024xf32>
  %r = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%mm, %bias : tensor<384x1024xf32>, tensor<1024xf32>) outs(%e2 : tensor<384x1024xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    %z = arith.maximumf %s, %zero : f32
    linalg.yield %z : f32
  } -> tensor<384x1024xf32>
  return %r : tensor<384x1024xf32>
}
