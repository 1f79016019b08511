// RUN: not ds-opt %s --ds-pipeline-partition="stages=2 virtual-stages=2" --ds-autodiff=gradient-accumulation-steps=3 --canonicalize --cse --ds-pipeline="micro-batches=3 schedule=interleaved" 2>&1 | FileCheck %s --check-prefix=COUNT
// RUN: not ds-opt %s --ds-pipeline-partition="stages=2" --ds-autodiff=gradient-accumulation-steps=4 --ds-pipeline="micro-batches=4 schedule=interleaved" 2>&1 | FileCheck %s --check-prefix=CHUNKS
// RUN: not ds-opt %s --ds-pipeline-partition="stages=2" --ds-autodiff=gradient-accumulation-steps=4 --ds-pipeline="micro-batches=4 schedule=gpipe" 2>&1 | FileCheck %s --check-prefix=NAME
// RUN: not ds-opt %s --ds-autodiff --ds-pipeline 2>&1 | FileCheck %s --check-prefix=UNCUT
// COUNT: error: ds-pipeline: the interleaved schedule needs the micro-batches per step (gradient_accumulation_steps, 3) to be a multiple of the pipeline stages (2); use 2 or 4, or schedule 1f1b
// CHUNKS: error: ds-pipeline: schedule 'interleaved' with 1 chunks per rank; interleaved needs virtual_stages >= 2 and 1f1b one chunk per rank
// NAME: for the --schedule option: Cannot find option named 'gpipe'!
// UNCUT: error: ds-pipeline needs a module cut by ds-pipeline-partition and a func.func @micro_step (run ds-pipeline-partition, then ds-autodiff)
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
