// RUN: ds-opt %s --ds-pipeline-partition="stages=2" --ds-autodiff=gradient-accumulation-steps=3 --canonicalize --cse --ds-pipeline="micro-batches=3" | FileCheck %s
// RUN: ds-opt %s --ds-pipeline-partition="stages=4" --ds-autodiff=gradient-accumulation-steps=4 --canonicalize --cse --ds-pipeline="micro-batches=4" | FileCheck %s --check-prefix=PP4
// RUN: ds-opt %s --ds-pipeline-partition="stages=2 virtual-stages=2" --ds-autodiff=gradient-accumulation-steps=4 --canonicalize --cse --ds-pipeline="micro-batches=4 schedule=interleaved" | FileCheck %s --check-prefix=INTER

// 1F1B on 2 ranks, 3 micro-batches (PipeDream-Flush): rank 0 warms up with one forward, rank
// 1 with none; each forward sends its activation (>1), each backward of rank 1 its input's
// gradient (>0). F0.1 is chunk 0's forward of micro-batch 1.
// CHECK: ds.pipeline = #ds.pipeline<stages = 2, virtual_stages = 1, schedule = "1f1b", micro_batches = 3, phase_flops = [{{[0-9, ]+}}]>
// CHECK: ds.parameter @l0.weight trainable : tensor<16x16xf32> {ds.stages = array<i64: 0>}
// CHECK: ds.parameter @l3.weight trainable : tensor<4x16xf32> {ds.stages = array<i64: 1>}
// CHECK: ds.state @"l0.weight@grad" of @l0.weight role grad : tensor<16x16xf32> {ds.stages = array<i64: 0>}
// CHECK: ds.state @"l3.weight@grad" of @l3.weight role grad : tensor<4x16xf32> {ds.stages = array<i64: 1>}
// CHECK-NOT: func.func @micro_step
// CHECK-LABEL: func.func @pipeline_step_0(%arg0: tensor<8x16xf32>, %arg1: tensor<8xi64>, %arg2: tensor<8x16xf32>, %arg3: tensor<8xi64>, %arg4: tensor<8x16xf32>, %arg5: tensor<8xi64>) -> tensor<3xf32>
// CHECK-SAME: ds.pipeline_rank = 0
// CHECK-SAME: ds.schedule = "F0.0 >1 F0.1 >1 <1 B0.0 F0.2 >1 <1 B0.1 <1 B0.2"
// CHECK: %[[H:.+]] = ds.linear %arg0
// CHECK: shard.send %{{.+}} on @mesh grid_axes = [0] destination = [1] : (tensor<8x16xf32>) -> tensor<8x16xf32>
// CHECK: ds.linear %arg2
// CHECK: shard.recv %{{.+}} on @mesh grid_axes = [0] source = [1] : (tensor<8x16xf32>) -> tensor<8x16xf32>
// CHECK: ds.assign @"l0.weight@grad"
// CHECK: %[[Z:.+]] = ds.constant dense<0.000000e+00> : tensor<3xf32>
// CHECK: return %[[Z]] : tensor<3xf32>
// CHECK-LABEL: func.func @pipeline_step_1
// CHECK-SAME: ds.pipeline_rank = 1
// CHECK-SAME: ds.schedule = "<0 F1.0 <0 B1.0 >0 F1.1 B1.1 <0 >0 F1.2 B1.2 >0"
// CHECK: %[[L0:.+]] = ds.cross_entropy %{{.+}}, %arg1
// CHECK: %[[L1:.+]] = ds.cross_entropy %{{.+}}, %arg3
// CHECK: %[[L2:.+]] = ds.cross_entropy %{{.+}}, %arg5
// CHECK: ds.reshape %[[L0]] : tensor<f32> -> tensor<1xf32>
// CHECK: %[[ALL:.+]] = ds.concat
// CHECK: return %[[ALL]] : tensor<3xf32>

// 1F1B on 4 ranks, 4 micro-batches: rank r warms up with 3 - r forwards.
// PP4: ds.schedule = "F0.0 >1 F0.1 >1 F0.2 >1 F0.3 >1 <1 B0.0 <1 B0.1 <1 B0.2 <1 B0.3"
// PP4: ds.schedule = "<0 F1.0 <0 >2 F1.1 <0 >2 F1.2 <0 >2 <2 B1.0 >0 F1.3 >2 <2 B1.1 >0 <2 B1.2 >0 <2 B1.3 >0"
// PP4: ds.schedule = "<1 F2.0 <1 >3 F2.1 <1 >3 <3 B2.0 >1 F2.2 >3 <3 B2.1 <1 >1 F2.3 >3 <3 B2.2 >1 <3 B2.3 >1"
// PP4: ds.schedule = "<2 F3.0 <2 B3.0 >2 F3.1 B3.1 <2 >2 F3.2 B3.2 <2 >2 F3.3 B3.3 >2"

// Interleaved (Megatron's), 2 ranks x 2 chunks, 4 micro-batches: rank 0 holds chunks 0 and 2,
// rank 1 chunks 1 and 3; rank 0 warms up with (2 - 0 - 1) x 2 + (2 - 1) x 2 = 4 forwards
// (micro-batches 0 and 1 of chunk 0, then of chunk 2), rank 1 with 2.
// INTER: ds.schedule = "F0.0 >1 F0.1 >1 <1 F2.0 >1 <1 F2.1 >1 F0.2 >1 <1 B2.0 >1 F0.3 >1 <1 B2.1 >1 <1 F2.2 >1 <1 B0.0 <1 F2.3 >1 <1 B0.1 <1 B2.2 >1 <1 B2.3 >1 <1 B0.2 <1 B0.3"
// INTER: ds.schedule = "<0 F1.0 <0 >0 F1.1 <0 >0 F3.0 <0 B3.0 <0 >0 F3.1 <0 B3.1 <0 >0 F1.2 <0 >0 B1.0 <0 >0 F1.3 >0 B1.1 <0 >0 F3.2 B3.2 >0 F3.3 <0 B3.3 >0 B1.2 <0 >0 B1.3 >0"
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
