// RUN: ds-opt %s --ds-autodiff --canonicalize --cse --ds-optimizer --canonicalize --cse --ds-offload="optimizer=nvme param=nvme persistence-threshold=100" --ds-lower-to-runtime | FileCheck %s

// ds-offload's program, lowered: NVMe and host slots are defined in their space (2, 1), an
// NVMe read lands in a host tensor and goes on to the device on the transfer stream without
// the host waiting in between; the host update's results are written back with at most two
// writes in flight.
// CHECK-LABEL: llvm.func @ds_init_slots
// CHECK: llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[NVME:.+]] = llvm.mlir.constant(2 : i32) : i32
// CHECK-NEXT: llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: llvm.mlir.constant(2 : i32) : i32
// CHECK-NEXT: llvm.mlir.addressof
// CHECK-NEXT: llvm.call @dsrt_slot_define_in(%arg0, %{{.+}}, %[[NVME]],
// Slot 3, l3.weight, stays on the device; slot 4, l0.weight@grad, is in host memory.
// CHECK: llvm.call @dsrt_slot_define(
// CHECK: llvm.mlir.constant(4 : i32) : i32
// CHECK-NEXT: %[[HOST:.+]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: llvm.mlir.constant(2 : i32) : i32
// CHECK-NEXT: llvm.mlir.addressof
// CHECK-NEXT: llvm.call @dsrt_slot_define_in(%arg0, %{{.+}}, %[[HOST]],
// CHECK-LABEL: llvm.func @ds_micro_step
// CHECK: %[[STAGE:.+]] = llvm.call @dsrt_tensor_alloc_host(
// CHECK: %[[READ:.+]] = llvm.call @dsrt_slot_fetch(%arg0, %{{.+}}, %[[STAGE]])
// CHECK-NOT: llvm.call @dsrt_event_wait(%arg0, %[[READ]])
// CHECK: %[[DEV:.+]] = llvm.call @dsrt_tensor_alloc(
// CHECK-NEXT: %[[MOVE:.+]] = llvm.call @dsrt_move(%arg0, %[[DEV]], %[[STAGE]])
// CHECK: llvm.call @dsrt_event_wait(%arg0, %[[MOVE]])
// CHECK-NEXT: llvm.call @dsrt_event_release(%[[MOVE]])
// CHECK-NEXT: llvm.call @dsrt_event_release(%[[READ]])
// CHECK: llvm.call @dsrt_linear(%arg0, %{{.+}}, %{{.+}}, %[[DEV]],
// CHECK-LABEL: llvm.func @ds_optimizer_step
// CHECK: llvm.call @dsrt_adamw_update
// CHECK: %[[W1:.+]] = llvm.call @dsrt_slot_store(
// CHECK: %[[W2:.+]] = llvm.call @dsrt_slot_store(
// CHECK: llvm.call @dsrt_slot_store(
// CHECK-NEXT: llvm.call @dsrt_event_wait(%arg0, %[[W1]])
// The plan: each space's peak and the bytes each tier moves per step (gradient 3x1024 + 256
// and l3 256 + two scalars to the host; parameters 3x1024 forward, 2x1024 backward and l3 256
// to the device; every NVMe state written once (3x1024 parameters + 6x1024 + 2x256 moments)
// and read in both functions).
// CHECK: host_peak_bytes\22:11540,\22host_persistent_bytes\22:3328,
// CHECK-SAME: moved_bytes_per_step\22:{\22device_to_host\22:3592,\22host_to_device\22:5376,\22host_to_nvme\22:9728,\22nvme_to_host\22:14848}
// CHECK-SAME: nvme_bytes\22:9728,\22nvme_file_bytes\22:45056
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
