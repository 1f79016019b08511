// RUN: ds-opt %s --ds-autodiff --split-input-file --verify-diagnostics

// expected-error @+1 {{ds-autodiff needs a func.func @forward}}
module {
  func.func @main() { return }
}

// -----

module {
  ds.parameter @w trainable : tensor<2xf32>
  // expected-error @+1 {{ds-autodiff needs @forward to return one float scalar (the loss)}}
  func.func @forward(%x: tensor<2xf32>) -> tensor<2xf32> {
    %w = ds.get_parameter @w : tensor<2xf32>
    %y = ds.add %x, %w : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
    return %y : tensor<2xf32>
  }
}

// -----

module {
  ds.parameter @b : tensor<2xf32>
  // expected-error @+1 {{the loss does not depend on any trainable parameter}}
  func.func @forward(%x: tensor<2xf32>) -> tensor<f32> {
    %w = ds.get_parameter @b : tensor<2xf32>
    %y = ds.add %x, %w : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
    %s = ds.sum %y dims = [0] : tensor<2xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}


// -----

// A float attention mask that a trainable parameter reaches (a learned bias): the fused op
// gives the mask no gradient, so autodiff refuses it by name.
module {
  ds.parameter @q trainable : tensor<1x1x4x8xf32>
  ds.parameter @bias trainable : tensor<1x1x4x4xf32>
  func.func @forward() -> tensor<f32> {
    %q = ds.get_parameter @q : tensor<1x1x4x8xf32>
    %b = ds.get_parameter @bias : tensor<1x1x4x4xf32>
    // expected-error @below {{'ds.attention' op has a mask that needs a gradient (a learned attention bias); the fused attention gives none}}
    // expected-error @below {{'ds.attention' op failed to build its gradient}}
    %a:2 = ds.attention %q, %q, %q mask %b scale = 0.5 : (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x4xf32>) -> (tensor<1x1x4x8xf32>, tensor<1x1x4xf32>)
    %s = ds.sum %a#0 dims = [0, 1, 2, 3] : tensor<1x1x4x8xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}
