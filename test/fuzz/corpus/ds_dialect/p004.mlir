module {
  ds.parameter @w trainable : tensor<2xf32>
  func.func @forward(%x: tensor<2xf32>) -> tensor<2xf32> {
    %w = ds.get_parameter @w : tensor<2xf32>
    %y = ds.add %x, %w : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
    return %y : tensor<2xf32>
  }
}
