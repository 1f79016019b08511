// RUN: not ds-opt %s --split-input-file --ds-pipeline-partition="stages=0" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not ds-opt %s --split-input-file --ds-pipeline-partition="stages=2" 2>&1 | FileCheck %s --check-prefix=CUT
// RUN: not ds-opt %s --split-input-file --ds-pipeline-partition="stages=2" --ds-autodiff --ds-pipeline="micro-batches=0" 2>&1 | FileCheck %s --check-prefix=MICRO

// The option checks, and a mesh whose pp axis disagrees with the stages asked for.
// ZERO: error: ds-pipeline-partition: stages and virtual-stages must be >= 1
// CUT: error: ds-pipeline-partition: stages 2 disagrees with the module's mesh pp=4 x dp=1 (drop the option; the mesh decides)
// CUT: error: ds-pipeline-partition needs a func.func @forward (run it before ds-autodiff)
// MICRO: error: ds-pipeline: micro-batches must be >= 1
module attributes {ds.mesh = #ds.mesh<axes = ["pp", "dp"], shape = [4, 1]>} {
  ds.parameter @w trainable : tensor<4x4xf32>
  func.func @forward(%x: tensor<2x4xf32>, %y: tensor<2xi64>) -> tensor<f32> {
    %w = ds.get_parameter @w : tensor<4x4xf32>
    %h = ds.linear %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %l = ds.cross_entropy %h, %y : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

module {
  ds.parameter @w trainable : tensor<4x4xf32>
  func.func @loss(%x: tensor<2x4xf32>) -> tensor<f32> {
    %s = ds.sum %x dims = [0, 1] : tensor<2x4xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

module {
  ds.parameter @w1 trainable : tensor<4x4xf32>
  ds.parameter @w2 trainable : tensor<4x4xf32>
  func.func @forward(%x: tensor<2x4xf32>, %y: tensor<2xi64>) -> tensor<f32> {
    %w1 = ds.get_parameter @w1 : tensor<4x4xf32>
    %h = ds.linear %x, %w1 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %w2 = ds.get_parameter @w2 : tensor<4x4xf32>
    %g = ds.linear %h, %w2 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %l = ds.cross_entropy %g, %y : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
