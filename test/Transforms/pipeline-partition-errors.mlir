// RUN: not ds-opt %s --ds-pipeline-partition="stages=5 partition=type:^l[13]$" 2>&1 | FileCheck %s --check-prefix=FEW
// RUN: not ds-opt %s --ds-pipeline-partition="stages=2 partition=type:(" 2>&1 | FileCheck %s --check-prefix=REGEX
// RUN: not ds-opt %s --ds-pipeline-partition="stages=2 partition=layers" 2>&1 | FileCheck %s --check-prefix=NAME
// RUN: not ds-opt %s --ds-pipeline-partition="stages=9" 2>&1 | FileCheck %s --check-prefix=MANY
// RUN: not ds-opt %s --ds-pipeline-partition="stages=2" --ds-pipeline-partition="stages=2" 2>&1 | FileCheck %s --check-prefix=TWICE
// FEW: error: ds-pipeline-partition: partition 'type:^l[13]$' finds 2 weighed modules but 5 chunks (stages x virtual_stages) need one each; widen the pattern or use "best"
// REGEX: error: ds-pipeline-partition: partition 'type:(': not a valid regular expression (parentheses not balanced)
// NAME: error: ds-pipeline-partition: partition 'layers' is not best, parameters, uniform or type:REGEX
// MANY: error: ds-pipeline-partition: partition 'best' finds 8 weighed ops but 9 chunks (stages x virtual_stages) need one each; use fewer stages
// TWICE: error: ds-pipeline-partition: the module is already cut (ds.pipeline is set); run the pass once
module {
  ds.parameter @l0.weight trainable : tensor<16x16xf32>
  ds.parameter @l1.weight trainable : tensor<16x16xf32>
  ds.parameter @l2.weight trainable : tensor<16x16xf32>
  ds.parameter @l3.weight trainable : tensor<4x16xf32>
  func.func @forward(%x: tensor<8x16xf32>, %y: tensor<8xi64>) -> tensor<f32> {
    %w0 = ds.get_parameter @l0.weight : tensor<16x16xf32>
    %h0 = ds.linear %x, %w0 : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
    %g0 = ds.gelu %h0 : tensor<8x16xf32>
    %w1 = ds.get_parameter @l1.weight : tensor<16x16xf32>
    %h1 = ds.linear %g0, %w1 : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
    %g1 = ds.gelu %h1 : tensor<8x16xf32>
    %w2 = ds.get_parameter @l2.weight : tensor<16x16xf32>
    %h2 = ds.linear %g1, %w2 : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
    %g2 = ds.gelu %h2 : tensor<8x16xf32>
    %w3 = ds.get_parameter @l3.weight : tensor<4x16xf32>
    %h3 = ds.linear %g2, %w3 : (tensor<8x16xf32>, tensor<4x16xf32>) -> tensor<8x4xf32>
    %l = ds.cross_entropy %h3, %y : (tensor<8x4xf32>, tensor<8xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
