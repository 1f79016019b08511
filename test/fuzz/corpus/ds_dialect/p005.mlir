module {
  ds.parameter @b : tensor<2xf32>
  func.func @forward(%x: tensor<2xf32>) -> tensor<f32> {
    %w = ds.get_parameter @b : tensor<2xf32>
    %y = ds.add %x, %w : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
    %s = ds.sum %y dims = [0] : tensor<2xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}
