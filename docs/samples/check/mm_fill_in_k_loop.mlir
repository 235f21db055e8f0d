// mm.mlir tiled by hand (4x6 output tiles, K by 8) with the fill inside the k-loop:
// each step re-zeroes the accumulator, the bug of fusing a fill into a reduction loop.
func.func @mm(%a: tensor<8x16xf32>, %b: tensor<16x12xf32>) -> tensor<8x12xf32> {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c6 = arith.constant 6 : index
  %c8 = arith.constant 8 : index
  %c12 = arith.constant 12 : index
  %c16 = arith.constant 16 : index
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x12xf32>
  %r = scf.for %i = %c0 to %c8 step %c4 iter_args(%acc_i = %e) -> (tensor<8x12xf32>) {
    %r2 = scf.for %j = %c0 to %c12 step %c6 iter_args(%acc_j = %acc_i) -> (tensor<8x12xf32>) {
      %init = tensor.extract_slice %acc_j[%i, %j] [4, 6] [1, 1] : tensor<8x12xf32> to tensor<4x6xf32>
      %sum = scf.for %k = %c0 to %c16 step %c8 iter_args(%c = %init) -> (tensor<4x6xf32>) {
        %as = tensor.extract_slice %a[%i, %k] [4, 8] [1, 1] : tensor<8x16xf32> to tensor<4x8xf32>
        %bs = tensor.extract_slice %b[%k, %j] [8, 6] [1, 1] : tensor<16x12xf32> to tensor<8x6xf32>
        %filled = linalg.fill ins(%zero : f32) outs(%c : tensor<4x6xf32>) -> tensor<4x6xf32>
        %p = linalg.matmul ins(%as, %bs : tensor<4x8xf32>, tensor<8x6xf32>) outs(%filled : tensor<4x6xf32>) -> tensor<4x6xf32>
        scf.yield %p : tensor<4x6xf32>
      }
      %ins = tensor.insert_slice %sum into %acc_j[%i, %j] [4, 6] [1, 1] : tensor<4x6xf32> into tensor<8x12xf32>
      scf.yield %ins : tensor<8x12xf32>
    }
    scf.yield %r2 : tensor<8x12xf32>
  }
  return %r : tensor<8x12xf32>
}
