// (relu(A) @ B) @ D, the second matmul the root: tiling only its K loop (the first
// matmul's N) fuses relu and the first matmul, with its fill, into the k-loop, while the
// second matmul's fill stays before the loop as its iter_args value.
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @f(%a: tensor<16x12xf32>, %b: tensor<12x32xf32>, %d: tensor<32x20xf32>) -> tensor<16x20xf32> {
  %zero = arith.constant 0.0 : f32
  %ea = tensor.empty() : tensor<16x12xf32>
  %ra = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%a : tensor<16x12xf32>) outs(%ea : tensor<16x12xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.maximumf %x, %zero : f32
    linalg.yield %r : f32
  } -> tensor<16x12xf32>
  %e1 = tensor.empty() : tensor<16x32xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<16x32xf32>) -> tensor<16x32xf32>
  %m1 = linalg.matmul ins(%ra, %b : tensor<16x12xf32>, tensor<12x32xf32>) outs(%f1 : tensor<16x32xf32>) -> tensor<16x32xf32>
  %e2 = tensor.empty() : tensor<16x20xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<16x20xf32>) -> tensor<16x20xf32>
  %m2 = linalg.matmul {tdsched.test_root} ins(%m1, %d : tensor<16x32xf32>, tensor<32x20xf32>) outs(%f2 : tensor<16x20xf32>) -> tensor<16x20xf32>
  return %m2 : tensor<16x20xf32>
}
