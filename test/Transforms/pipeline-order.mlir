// The phase order of 1F1B and of the interleaved schedule at 4 ranks (2 chunks each),
// against the schedules' definitions written out in pipeline_order.py (not ds's code).
// RUN: ds-opt %s --ds-pipeline-partition="stages=4" --ds-autodiff=gradient-accumulation-steps=8 --canonicalize --cse --ds-pipeline="micro-batches=8" | %python_torch %S/pipeline_order.py --stages 4 --micro-batches 8 | FileCheck %s
// RUN: ds-opt %s --ds-pipeline-partition="stages=4 virtual-stages=2" --ds-autodiff=gradient-accumulation-steps=4 --canonicalize --cse --ds-pipeline="micro-batches=4 schedule=interleaved" | %python_torch %S/pipeline_order.py --stages 4 --virtual 2 --micro-batches 4 | FileCheck %s
// RUN: ds-opt %s --ds-pipeline-partition="stages=4 virtual-stages=2" --ds-autodiff=gradient-accumulation-steps=8 --canonicalize --cse --ds-pipeline="micro-batches=8 schedule=interleaved" | %python_torch %S/pipeline_order.py --stages 4 --virtual 2 --micro-batches 8 | FileCheck %s
// RUN: ds-opt %s --ds-pipeline-partition="stages=2 virtual-stages=2" --ds-autodiff=gradient-accumulation-steps=6 --canonicalize --cse --ds-pipeline="micro-batches=6 schedule=interleaved" | %python_torch %S/pipeline_order.py --stages 2 --virtual 2 --micro-batches 6 | FileCheck %s
// CHECK-NOT: DIFFER
// CHECK: ranks: PASS
module {
  ds.parameter @l0.weight trainable : tensor<16x16xf32>
  ds.parameter @l1.weight trainable : tensor<16x16xf32>
  ds.parameter @l2.weight trainable : tensor<16x16xf32>
  ds.parameter @l3.weight trainable : tensor<16x16xf32>
  ds.parameter @l4.weight trainable : tensor<16x16xf32>
  ds.parameter @l5.weight trainable : tensor<16x16xf32>
  ds.parameter @l6.weight trainable : tensor<16x16xf32>
  ds.parameter @l7.weight trainable : tensor<4x16xf32>
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
    %w3 = ds.get_parameter @l3.weight : tensor<16x16xf32>
    %h3 = ds.linear %g2, %w3 : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
    %g3 = ds.gelu %h3 : tensor<8x16xf32>
    %w4 = ds.get_parameter @l4.weight : tensor<16x16xf32>
    %h4 = ds.linear %g3, %w4 : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
    %g4 = ds.gelu %h4 : tensor<8x16xf32>
    %w5 = ds.get_parameter @l5.weight : tensor<16x16xf32>
    %h5 = ds.linear %g4, %w5 : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
    %g5 = ds.gelu %h5 : tensor<8x16xf32>
    %w6 = ds.get_parameter @l6.weight : tensor<16x16xf32>
    %h6 = ds.linear %g5, %w6 : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
    %g6 = ds.gelu %h6 : tensor<8x16xf32>
    %w7 = ds.get_parameter @l7.weight : tensor<4x16xf32>
    %h7 = ds.linear %g6, %w7 : (tensor<8x16xf32>, tensor<4x16xf32>) -> tensor<8x4xf32>
    %l = ds.cross_entropy %h7, %y : (tensor<8x4xf32>, tensor<8xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
