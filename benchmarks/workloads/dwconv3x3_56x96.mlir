// Depthwise 3x3 convolution, NHWC/HWC, 1x56x56x96, stride 1, input pre-padded to 1x58x58x96 (f32).
func.func @main(%x: tensor<1x58x58x96xf32>, %w: tensor<3x3x96xf32>) -> tensor<1x56x56x96xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x56x56x96xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x56x56x96xf32>) -> tensor<1x56x56x96xf32>
  %c = linalg.depthwise_conv_2d_nhwc_hwc {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %w : tensor<1x58x58x96xf32>, tensor<3x3x96xf32>) outs(%init : tensor<1x56x56x96xf32>) -> tensor<1x56x56x96xf32>
  return %c : tensor<1x56x56x96xf32>
}
