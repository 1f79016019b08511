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

