// ResNet-style bottleneck at 1x14x14x256 (NHWC/HWCF, f32): 1x1 conv 256->64, relu,
// 3x3 conv 64->64 (input padded by tensor.pad), relu, 1x1 conv 64->256, + residual, relu.
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func @main(%x: tensor<1x14x14x256xf32>, %w1: tensor<1x1x256x64xf32>, %w2: tensor<3x3x64x64xf32>, %w3: tensor<1x1x64x256xf32>) -> tensor<1x14x14x256xf32> {
  %zero = arith.constant 0.0 : f32
  %e64 = tensor.empty() : tensor<1x14x14x64xf32>
  %f64 = linalg.fill ins(%zero : f32) outs(%e64 : tensor<1x14x14x64xf32>) -> tensor<1x14x14x64xf32>
  %c1 = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %w1 : tensor<1x14x14x256xf32>, tensor<1x1x256x64xf32>) outs(%f64 : tensor<1x14x14x64xf32>) -> tensor<1x14x14x64xf32>
  %r1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%c1 : tensor<1x14x14x64xf32>) outs(%e64 : tensor<1x14x14x64xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.maximumf %a, %zero : f32
    linalg.yield %m : f32
  } -> tensor<1x14x14x64xf32>
  %p = tensor.pad %r1 low[0, 1, 1, 0] high[0, 1, 1, 0] {
  ^bb0(%i0: index, %i1: index, %i2: index, %i3: index):
    tensor.yield %zero : f32
  } : tensor<1x14x14x64xf32> to tensor<1x16x16x64xf32>
  %e64b = tensor.empty() : tensor<1x14x14x64xf32>
  %f64b = linalg.fill ins(%zero : f32) outs(%e64b : tensor<1x14x14x64xf32>) -> tensor<1x14x14x64xf32>
  %c2 = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%p, %w2 : tensor<1x16x16x64xf32>, tensor<3x3x64x64xf32>) outs(%f64b : tensor<1x14x14x64xf32>) -> tensor<1x14x14x64xf32>
  %e64c = tensor.empty() : tensor<1x14x14x64xf32>
  %r2 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%c2 : tensor<1x14x14x64xf32>) outs(%e64c : tensor<1x14x14x64xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.maximumf %a, %zero : f32
    linalg.yield %m : f32
  } -> tensor<1x14x14x64xf32>
  %e256 = tensor.empty() : tensor<1x14x14x256xf32>
  %f256 = linalg.fill ins(%zero : f32) outs(%e256 : tensor<1x14x14x256xf32>) -> tensor<1x14x14x256xf32>
  %c3 = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%r2, %w3 : tensor<1x14x14x64xf32>, tensor<1x1x64x256xf32>) outs(%f256 : tensor<1x14x14x256xf32>) -> tensor<1x14x14x256xf32>
  %e256b = tensor.empty() : tensor<1x14x14x256xf32>
  %out = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%c3, %x : tensor<1x14x14x256xf32>, tensor<1x14x14x256xf32>) outs(%e256b : tensor<1x14x14x256xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    %m = arith.maximumf %s, %zero : f32
    linalg.yield %m : f32
  } -> tensor<1x14x14x256xf32>
  return %out : tensor<1x14x14x256xf32>
}
