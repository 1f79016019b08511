// RUN: ds-opt %s --ds-pipeline-partition="stages=2" --ds-autodiff=gradient-accumulation-steps=2 --canonicalize --cse --ds-pipeline="micro-batches=2" --ds-optimizer --ds-lower-to-runtime | FileCheck %s

// A pipeline program: each rank defines only its stage's slots (rank 0: l0 and l1 with their
// gradients and moments); l1's output goes to rank 1 (the cut is inside the layer), and a
// send completes before the rank goes on (its input is freed after the wait); a receive's
// buffer operand is not made; ds_micro_step and ds_optimizer_step run the program of the
// rank's pp coordinate; the metadata gives each slot's stages and each rank's plan (rank 0
// holds 2 x 16x16 parameters, gradients and 2 moments: 8192 bytes).
// CHECK-LABEL: llvm.func @ds_init_slots(
// CHECK: %[[PP:.+]] = llvm.call @dsrt_comm_coordinate(%arg0, %{{.+}})
// CHECK: %[[IS0:.+]] = llvm.icmp "eq" %[[PP]], %{{.+}} : i32
// CHECK: llvm.cond_br %[[IS0]], ^bb1, ^bb2
// CHECK: ^bb1:
// CHECK: llvm.call @dsrt_slot_define(
// CHECK: llvm.br ^bb2
// CHECK-LABEL: llvm.func @ds_pipeline_step_0(
// CHECK: llvm.call @dsrt_linear(
// CHECK: llvm.call @dsrt_linear(%arg0, %[[H:[0-9]+]],
// CHECK: %[[E:[0-9]+]] = llvm.call @dsrt_send_recv(%arg0, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %[[H]], %{{[0-9]+}})
// CHECK-NEXT: llvm.call @dsrt_event_wait(%arg0, %[[E]])
// CHECK-NEXT: llvm.call @dsrt_event_release(%[[E]])
// CHECK-NEXT: llvm.call @dsrt_tensor_free(%arg0, %[[H]])
// CHECK-LABEL: llvm.func @ds_optimizer_step_0(
// CHECK-LABEL: llvm.func @ds_pipeline_step_1(
// CHECK-NOT: llvm.call @dsrt_fill
// CHECK: llvm.call @dsrt_send_recv(
// CHECK-LABEL: llvm.func @ds_optimizer_step_1(
// CHECK-LABEL: llvm.func @ds_micro_step(%arg0: !llvm.ptr, %arg1: !llvm.ptr) -> !llvm.ptr
// CHECK: %[[C:.+]] = llvm.call @dsrt_comm_coordinate(
// CHECK: llvm.call @ds_pipeline_step_0(%arg0, %arg1)
// CHECK: llvm.call @ds_pipeline_step_1(%arg0, %arg1)
// CHECK-LABEL: llvm.func @ds_optimizer_step(
// CHECK: llvm.call @ds_optimizer_step_0(
// CHECK: llvm.call @ds_optimizer_step_1(
// CHECK: \22pipeline\22:{\22micro_batches\22:2,\22ranks\22:[{\22optimizer_step_communication_bytes\22:0,\22optimizer_step_peak_bytes\22:{{[0-9]+}},\22peak_bytes\22:{{[0-9]+}},\22persistent_bytes\22:8192,
// CHECK-SAME: \22l0.weight\22,\22role\22:\22parameter\22,\22stages\22:[0]}
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
