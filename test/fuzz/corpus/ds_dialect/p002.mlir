// A model's own rounding, y.to(bf16).float(), beside another use of y: the backward of y * k
// reads y itself (not a rounding of it), and k's widening is recomputed from the bf16 value.
module {
  ds.parameter @w trainable : tensor<4x8xf32>
  func.func @forward(%x: tensor<2x8xf32>, %t: tensor<2xi64>) -> tensor<f32> {
    %w = ds.get_parameter @w : tensor<4x8xf32>
    %y = ds.linear %x, %w : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
    %n = ds.convert %y : tensor<2x4xf32> -> tensor<2x4xbf16>
    %k = ds.convert %n : tensor<2x4xbf16> -> tensor<2x4xf32>
    %m = ds.mul %y, %k : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
    %l = ds.cross_entropy %m, %t : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
