// The max of each row of an 8x4 input, into an output filled with -inf.
#in = affine_map<(d0, d1) -> (d0, d1)>
#out = affine_map<(d0, d1) -> (d0)>
func.func @f(%x: tensor<8x4xf32>) -> tensor<8xf32> {
  %init = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<8xf32>
  %filled = linalg.fill ins(%init : f32) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %red = linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<8x4xf32>) outs(%filled : tensor<8xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %n = arith.maxnumf %v, %acc : f32
    linalg.yield %n : f32
  } -> tensor<8xf32>
  return %red : tensor<8xf32>
}
