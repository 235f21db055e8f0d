func.func @net(%x: tensor<1x8xf32>) -> tensor<1x8xf32> {
  %0 = "tosa.abs"(%x) : (tensor<1x8xf32>) -> tensor<1x8xf32>
  %1 = "tosa.custom"(%0) <{domain_name = "ex", implementation_attrs = "", operator_name = "mystery"}> : (tensor<1x8xf32>) -> tensor<1x8xf32>
  return %1 : tensor<1x8xf32>
}
