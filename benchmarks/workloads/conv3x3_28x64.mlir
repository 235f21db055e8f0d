// 3x3 convolution, NHWC/HWCF, 1x28x28x64 -> 64 channels, stride 1, input pre-padded to 1x30x30x64 (f32).
func.func @main(%x: tensor<1x30x30x64xf32>, %w: tensor<3x3x64x64xf32>) -> tensor<1x28x28x64xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x28x28x64xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x28x28x64xf32>) -> tensor<1x28x28x64xf32>
  %c = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %w : tensor<1x30x30x64xf32>, tensor<3x3x64x64xf32>) outs(%init : tensor<1x28x28x64xf32>) -> tensor<1x28x28x64xf32>
  return %c : tensor<1x28x28x64xf32>
}
