// relu(x) feeds a padded 3x3 conv and the residual add: fused through the pad, the relu
// is read at two different slices (halo and tile) and must be computed once on their union.
#id = affine_map<(d0,d1,d2,d3)->(d0,d1,d2,d3)>
func.func @f(%x: tensor<1x16x16x8xf32>, %w: tensor<3x3x8x8xf32>) -> tensor<1x16x16x8xf32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x16x16x8xf32>
  %p = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel","parallel","parallel","parallel"]} ins(%x : tensor<1x16x16x8xf32>) outs(%e : tensor<1x16x16x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.maximumf %a, %c0 : f32
    linalg.yield %r : f32
  } -> tensor<1x16x16x8xf32>
  %pad = tensor.pad %p low[0, 1, 1, 0] high[0, 1, 1, 0] {
  ^bb0(%i0: index, %i1: index, %i2: index, %i3: index):
    tensor.yield %c0 : f32
  } : tensor<1x16x16x8xf32> to tensor<1x18x18x8xf32>
  %fill = linalg.fill ins(%c0 : f32) outs(%e : tensor<1x16x16x8xf32>) -> tensor<1x16x16x8xf32>
  %conv = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%pad, %w : tensor<1x18x18x8xf32>, tensor<3x3x8x8xf32>) outs(%fill : tensor<1x16x16x8xf32>) -> tensor<1x16x16x8xf32>
  %sum = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel","parallel","parallel","parallel"]} ins(%conv, %p : tensor<1x16x16x8xf32>, tensor<1x16x16x8xf32>) outs(%e : tensor<1x16x16x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<1x16x16x8xf32>
  return %sum : tensor<1x16x16x8xf32>
}
