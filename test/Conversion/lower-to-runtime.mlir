// RUN: ds-opt %s --ds-lower-to-runtime | FileCheck %s
// RUN: ds-opt %s --ds-lower-to-runtime | mlir-translate --mlir-to-llvmir | FileCheck %s --check-prefix=LLVM

// The result is plain LLVM IR against the runtime's C ABI (what ds-run JIT-compiles).
// LLVM-DAG: declare ptr @dsrt_tensor_alloc(ptr, i32, i32, ptr)
// LLVM-DAG: define void @ds_init_slots(ptr %0)
// LLVM-DAG: define ptr @ds_micro_step(ptr %0, ptr %1)
// LLVM-DAG: define void @ds_optimizer_step(ptr %0, ptr %1, ptr %2, ptr %3, ptr %4)
// LLVM-DAG: define ptr @ds_metadata()

// Each result is allocated before its kernel and freed after its last use; parameter reads are
// views; a transpose of the last two dims folds into the matmul's flag. The plan: slots 2 x 24
// bytes + input 24 + matmul result 16 + sum result 4 = 92 at the peak of @micro_step; slots 48
// + the step scalars 20 (lr, step, aux_lr f32; beta1 f64) + the new weight 24 = 92 in
// @optimizer_step.
// CHECK-DAG: llvm.func @dsrt_tensor_alloc(!llvm.ptr, i32, i32, !llvm.ptr) -> !llvm.ptr
// CHECK-LABEL: llvm.func @ds_init_slots
// CHECK-COUNT-2: llvm.call @dsrt_slot_define
// CHECK-NOT: llvm.call @dsrt_slot_define
// CHECK-LABEL: llvm.func @ds_micro_step(%{{.+}}: !llvm.ptr, %{{.+}}: !llvm.ptr) -> !llvm.ptr
// CHECK: %[[W:.+]] = llvm.call @dsrt_slot_get
// CHECK: %[[Y:.+]] = llvm.call @dsrt_tensor_alloc
// CHECK: %[[TA:.+]] = llvm.mlir.constant(1 : i32) : i32
// CHECK: llvm.call @dsrt_matmul(%{{.+}}, %[[Y]], %{{.+}}, %[[W]], %{{.+}}, %[[TA]])
// CHECK-NEXT: llvm.call @dsrt_tensor_free(%{{.+}}, %[[W]])
// CHECK: llvm.call @dsrt_reduce
// CHECK: llvm.call @dsrt_tensor_free(%{{.+}}, %[[Y]])
// CHECK-LABEL: llvm.func @ds_optimizer_step
// CHECK: llvm.call @dsrt_slot_set
// CHECK: \22plan\22:{\22buffers\22:
// CHECK-SAME: \22input_bytes\22:24
// CHECK-SAME: \22micro_step_communication_bytes\22:0,\22micro_step_peak_bytes\22:92,\22optimizer_step_communication_bytes\22:0,\22optimizer_step_peak_bytes\22:92,\22peak_bytes\22:92,
// CHECK-SAME: \22persistent_bytes\22:48
module attributes {ds.run = #ds.run<train_batch_size = 2, micro_batch_size = 2, gradient_accumulation_steps = 1, data_parallel_size = 1, steps_per_print = 10, seed = 1234, precision = fp32, zero_stage = 0, param_persistence_threshold = 100000, optimizer = AdamW, lr = 1.0e-3, aux_lr = 1.0e-3, beta1 = 0.9, schedule = <kind = constant>, deepspeed = "{}", numbers = "{}">} {
  ds.parameter @w trainable : tensor<2x3xf32>
  ds.state @"w@grad" of @w role grad : tensor<2x3xf32>
  func.func @micro_step(%x: tensor<2x3xf32> {ds.input_name = "x"}) -> tensor<f32> {
    %w = ds.get_parameter @w : tensor<2x3xf32>
    %t = ds.transpose %w perm = [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
    %y = ds.matmul %x, %t : tensor<2x3xf32>, tensor<3x2xf32> -> tensor<2x2xf32>
    %s = ds.sum %y dims = [0, 1] : tensor<2x2xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
  func.func @optimizer_step(%lr: tensor<f32>, %step: tensor<f32>, %beta1: tensor<f64>,
                            %aux_lr: tensor<f32>) {
    %w = ds.get_parameter @w : tensor<2x3xf32>
    %n = ds.mul %w, %lr : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xf32>
    ds.assign @w = %n : tensor<2x3xf32>
    return
  }
}
