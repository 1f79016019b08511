// Dropout becomes a mask multiply whose mask the backward reuses; a weight used twice gets the
// sum of both gradients.
module {
  ds.parameter @w trainable : tensor<2x3xf32>
  func.func @forward(%x: tensor<2x3xf32>) -> tensor<f32> {
    %w = ds.get_parameter @w : tensor<2x3xf32>
    %d = ds.dropout %w p = 1.000000e-01 : tensor<2x3xf32>
    %p = ds.mul %d, %w : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
    %s = ds.sum %p dims = [0, 1] : tensor<2x3xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}
