// RUN: ds-opt %s --ds-lower-to-runtime --split-input-file --verify-diagnostics

// expected-error @below {{ds-lower-to-runtime needs @micro_step and @optimizer_step (run ds-autodiff and ds-optimizer first)}}
module {
  func.func @forward() { return }
}

// -----

module {
  // expected-error @below {{ds-lower-to-runtime: unsupported element type 'i8'}}
  ds.parameter @q : tensor<4xi8>
  func.func @micro_step(%x: tensor<2xf32>) -> tensor<f32> {
    %s = ds.sum %x dims = [0] : tensor<2xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
  func.func @optimizer_step(%lr: tensor<f32>, %step: tensor<f32>, %beta1: tensor<f64>,
                            %aux_lr: tensor<f32>) { return }
}

// -----

module {
  ds.parameter @w trainable : tensor<2xf32>
  func.func @micro_step(%x: tensor<2xf32>) -> tensor<f32> {
    %s = ds.sum %x dims = [0] : tensor<2xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
  // expected-error @below {{ds-lower-to-runtime: @optimizer_step must take (lr: tensor<f32>, step: tensor<f32>, beta1: tensor<f64>, aux_lr: tensor<f32>) as ds-optimizer builds it; got '(tensor<f32>, tensor<f32>) -> ()'}}
  func.func @optimizer_step(%lr: tensor<f32>, %step: tensor<f32>) { return }
}
