// Layer norm over the rows of a 512x768 matrix (f32): mean, variance, normalize, scale and shift.
#id = affine_map<(d0, d1) -> (d0, d1)>
#rowred = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
#vec = affine_map<(d0) -> (d0)>
func.func @main(%x: tensor<512x768xf32>, %gamma: tensor<768xf32>, %beta: tensor<768xf32>) -> tensor<512x768xf32> {
  %zero = arith.constant 0.0 : f32
  %n = arith.constant 768.0 : f32
  %eps = arith.constant 1.0e-5 : f32
  %er = tensor.empty() : tensor<512xf32>
  %fr = linalg.fill ins(%zero : f32) outs(%er : tensor<512xf32>) -> tensor<512xf32>
  %sum = linalg.generic {indexing_maps = [#id, #rowred], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<512x768xf32>) outs(%fr : tensor<512xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  } -> tensor<512xf32>
  %er2 = tensor.empty() : tensor<512xf32>
  %mean = linalg.generic {indexing_maps = [#vec, #vec], iterator_types = ["parallel"]} ins(%sum : tensor<512xf32>) outs(%er2 : tensor<512xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.divf %a, %n : f32
    linalg.yield %m : f32
  } -> tensor<512xf32>
  %er3 = tensor.empty() : tensor<512xf32>
  %fr3 = linalg.fill ins(%zero : f32) outs(%er3 : tensor<512xf32>) -> tensor<512xf32>
  %sq = linalg.generic {indexing_maps = [#id, #rowred, #rowred], iterator_types = ["parallel", "reduction"]} ins(%x, %mean : tensor<512x768xf32>, tensor<512xf32>) outs(%fr3 : tensor<512xf32>) {
  ^bb0(%a: f32, %m: f32, %acc: f32):
    %d = arith.subf %a, %m : f32
    %d2 = arith.mulf %d, %d : f32
    %s = arith.addf %d2, %acc : f32
    linalg.yield %s : f32
  } -> tensor<512xf32>
  %e = tensor.empty() : tensor<512x768xf32>
  %y = linalg.generic {indexing_maps = [#id, #rowred, #rowred, #col, #col, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %mean, %sq, %gamma, %beta : tensor<512x768xf32>, tensor<512xf32>, tensor<512xf32>, tensor<768xf32>, tensor<768xf32>) outs(%e : tensor<512x768xf32>) {
  ^bb0(%a: f32, %m: f32, %v: f32, %g: f32, %b: f32, %o: f32):
    %d = arith.subf %a, %m : f32
    %var = arith.divf %v, %n : f32
    %ve = arith.addf %var, %eps : f32
    %sd = math.sqrt %ve : f32
    %nrm = arith.divf %d, %sd : f32
    %sc = arith.mulf %nrm, %g : f32
    %r = arith.addf %sc, %b : f32
    linalg.yield %r : f32
  } -> tensor<512x768xf32>
  return %y : tensor<512x768xf32>
}
