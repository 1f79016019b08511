// A linear layer, a GELU and a cross-entropy: the backward uses the saved forward values, the
// seed is 1/2 (two micro-batches), gradients accumulate into ds.state symbols, and the input
// (not a parameter) gets no gradient.
module {
  ds.parameter @fc.weight trainable : tensor<4x16xf32>
  ds.parameter @fc.bias trainable : tensor<4xf32>
  ds.parameter @buf : tensor<4xf32>
  func.func @forward(%x: tensor<8x16xf32>, %y: tensor<8xi64>) -> tensor<f32> {
    %w = ds.get_parameter @fc.weight : tensor<4x16xf32>
    %b = ds.get_parameter @fc.bias : tensor<4xf32>
    %h = ds.linear %x, %w, %b : (tensor<8x16xf32>, tensor<4x16xf32>, tensor<4xf32>) -> tensor<8x4xf32>
    %g = ds.gelu %h : tensor<8x4xf32>
    %l = ds.cross_entropy %g, %y : (tensor<8x4xf32>, tensor<8xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
