// RUN: ds-opt %s --ds-autodiff --ds-activation-checkpoint 2>&1 | FileCheck %s --check-prefix=WARN
// RUN: not ds-opt %s --split-input-file --ds-activation-checkpoint 2>&1 | FileCheck %s --check-prefix=ERR

// A model without repeated blocks is left as it is, with a warning.
// WARN: warning: ds-activation-checkpoint: no repeated blocks (parameters named PREFIX.N.NAME for two or more N) in @micro_step; nothing is recomputed
// WARN-NOT: ds.recompute
// ERR: error: ds-activation-checkpoint needs @micro_step (run ds-autodiff first)
module {
  ds.parameter @fc.weight trainable : tensor<4x4xf32>
  func.func @forward(%x: tensor<2x4xf32>, %y: tensor<2xi64>) -> tensor<f32> {
    %w = ds.get_parameter @fc.weight : tensor<4x4xf32>
    %h = ds.linear %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %g = ds.gelu %h : tensor<2x4xf32>
    %l = ds.cross_entropy %g, %y : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
