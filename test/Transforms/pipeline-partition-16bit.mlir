// RUN: ds-opt %s --ds-pipeline-partition="stages=2 partition=parameters" | FileCheck %s
// RUN: ds-opt %s --ds-pipeline-partition="stages=2 partition=parameters" --ds-autodiff --ds-pipeline="micro-batches=2" | FileCheck %s --check-prefix=RANKS

// A 16-bit model as ds-mixed-precision leaves it: each bf16 parameter read at the top of the
// forward and widened there. A widened read is copied to every chunk that uses it, as a plain
// read is, so the cut places each parameter (and its weight) with its layer and no chunk sends
// a parameter to another; l0 is also read by the last layer (tied), so both chunks read it.
// CHECK-DAG: %[[R0A:.+]] = ds.get_parameter @l0.weight {ds.stage = 0 : i64}
// CHECK-DAG: %[[R0B:.+]] = ds.get_parameter @l0.weight {ds.stage = 1 : i64}
// CHECK-DAG: %[[W0A:.+]] = ds.convert %[[R0A]] {ds.stage = 0 : i64}
// CHECK-DAG: %[[W0B:.+]] = ds.convert %[[R0B]] {ds.stage = 1 : i64}
// CHECK-DAG: %[[R1:.+]] = ds.get_parameter @l1.weight {ds.stage = 1 : i64}
// CHECK-DAG: %[[W1:.+]] = ds.convert %[[R1]] {ds.stage = 1 : i64}
// CHECK: ds.linear %arg0, %[[W0A]] {ds.stage = 0 : i64}
// CHECK: ds.linear %{{.+}}, %[[W1]] {ds.stage = 1 : i64}
// CHECK: ds.linear %{{.+}}, %[[W0B]] {ds.stage = 1 : i64}
// Rank 0 sends its activations (8x16) and nothing of 16x16; rank 1 reads both parameters.
// RANKS-LABEL: func.func @pipeline_step_0
// RANKS-NOT: shard.send %{{.+}} : (tensor<16x16x
// RANKS: shard.send %{{.+}} : (tensor<8x16xf32>)
// RANKS-NOT: shard.send %{{.+}} : (tensor<16x16x
// RANKS-LABEL: func.func @pipeline_step_1
// RANKS-DAG: ds.get_parameter @l0.weight
// RANKS-DAG: ds.get_parameter @l1.weight
module {
  ds.parameter @l0.weight trainable : tensor<16x16xbf16>
  ds.parameter @l1.weight trainable : tensor<16x16xbf16>
  func.func @forward(%x: tensor<8x16xf32>, %y: tensor<8xi64>) -> tensor<f32> {
    %r0 = ds.get_parameter @l0.weight : tensor<16x16xbf16>
    %w0 = ds.convert %r0 : tensor<16x16xbf16> -> tensor<16x16xf32>
    %r1 = ds.get_parameter @l1.weight : tensor<16x16xbf16>
    %w1 = ds.convert %r1 : tensor<16x16xbf16> -> tensor<16x16xf32>
    %h0 = ds.linear %x, %w0 : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
    %g0 = ds.gelu %h0 : tensor<8x16xf32>
    %h1 = ds.linear %g0, %w1 : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
    %g1 = ds.gelu %h1 : tensor<8x16xf32>
    %h2 = ds.linear %g1, %w0 : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
    %l = ds.cross_entropy %h2, %y : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
