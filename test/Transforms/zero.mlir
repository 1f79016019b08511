// RUN: ds-opt %s --ds-zero="stage=0 data-parallel-size=4" | FileCheck %s
// RUN: ds-opt %s --ds-zero="stage=0 data-parallel-size=1" | FileCheck %s --check-prefix=ONE
// RUN: ds-opt %s --ds-zero="stage=0 data-parallel-size=4" --ds-lower-to-runtime | FileCheck %s --check-prefix=LOWER

// Stage 0: a one-axis grid of the 4 ranks; at the start of @optimizer_step every gradient is
// summed over it (all the all-reduces first, then the write-backs), before the update reads it.
// CHECK: shard.grid @dp(shape = 4)
// CHECK-LABEL: func.func @optimizer_step
// CHECK-NEXT: %[[GW:.+]] = ds.get_parameter @"w@grad" : tensor<2x3xf32>
// CHECK-NEXT: %[[RW:.+]] = shard.all_reduce %[[GW]] on @dp grid_axes = [0] : tensor<2x3xf32> -> tensor<2x3xf32>
// CHECK-NEXT: %[[GB:.+]] = ds.get_parameter @"b@grad" : tensor<3xf32>
// CHECK-NEXT: %[[RB:.+]] = shard.all_reduce %[[GB]] on @dp grid_axes = [0] : tensor<3xf32> -> tensor<3xf32>
// CHECK-NEXT: ds.assign @"w@grad" = %[[RW]]
// CHECK-NEXT: ds.assign @"b@grad" = %[[RB]]
// CHECK-NEXT: ds.get_parameter @"w@grad"

// One rank: nothing to communicate.
// ONE-NOT: shard.

// Lowered: each all-reduce runs in place on its gradient slot, returns an event, and the
// compute stream waits for it where the write-back would be; the grid is gone.
// LOWER-NOT: shard.grid
// LOWER-LABEL: llvm.func @ds_optimizer_step
// LOWER: %[[G:.+]] = llvm.call @dsrt_slot_get
// LOWER: %[[V:.+]] = llvm.call @dsrt_tensor_view(%{{.+}}, %[[G]]
// LOWER: %[[E1:.+]] = llvm.call @dsrt_all_reduce(%{{.+}}, %[[V]], %[[G]], %{{.+}})
// LOWER: %[[E2:.+]] = llvm.call @dsrt_all_reduce
// LOWER: llvm.call @dsrt_event_wait(%{{.+}}, %[[E1]])
// LOWER-NEXT: llvm.call @dsrt_event_release(%[[E1]])
// LOWER: llvm.call @dsrt_event_wait(%{{.+}}, %[[E2]])
module attributes {ds.config = "{\"train_batch_size\":8}"} {
  ds.parameter @w trainable : tensor<2x3xf32>
  ds.parameter @b trainable : tensor<3xf32>
  ds.state @"w@grad" of @w role "grad" : tensor<2x3xf32>
  ds.state @"b@grad" of @b role "grad" : tensor<3xf32>
  func.func @micro_step(%x: tensor<2x3xf32> {ds.input_name = "x"}) -> tensor<f32> {
    %s = ds.sum %x dims = [0, 1] : tensor<2x3xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
  func.func @optimizer_step(%lr: tensor<f32>, %step: tensor<f32>, %beta1: tensor<f64>,
                            %aux_lr: tensor<f32>) {
    %g = ds.get_parameter @"w@grad" : tensor<2x3xf32>
    %w = ds.get_parameter @w : tensor<2x3xf32>
    %n = ds.sub %w, %g : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
    ds.assign @w = %n : tensor<2x3xf32>
    return
  }
}
