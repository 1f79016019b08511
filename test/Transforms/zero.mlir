// RUN: ds-opt %s --ds-zero="stage=0 data-parallel-size=4" | FileCheck %s --check-prefix=PART0
// RUN: ds-opt %s --ds-zero="stage=0 data-parallel-size=4" --ds-optimizer | FileCheck %s
// RUN: ds-opt %s --ds-zero="stage=0 data-parallel-size=1" --ds-optimizer | FileCheck %s --check-prefix=ONE
// RUN: ds-opt %s --ds-zero="stage=0 data-parallel-size=4" --ds-optimizer --ds-lower-to-runtime | FileCheck %s --check-prefix=LOWER

// ds-zero records the stage and the grid of the 4 ranks.
// PART0: module attributes {{{.*}}ds.zero = #ds.zero<stage = 0>} {
// PART0-NEXT: shard.grid @mesh(shape = 4)
// PART0-NOT: ds.flat_buffer

// Stage 0: at the start of @optimizer_step every gradient is summed over the grid (all the
// all-reduces first, then the write-backs), before the update reads it.
// CHECK-LABEL: func.func @optimizer_step
// CHECK-NEXT: %[[GW:.+]] = ds.get_parameter @"w@grad" : tensor<2x3xf32>
// CHECK-NEXT: %[[RW:.+]] = shard.all_reduce %[[GW]] on @mesh grid_axes = [0] : tensor<2x3xf32> -> tensor<2x3xf32>
// CHECK-NEXT: %[[GB:.+]] = ds.get_parameter @"b@grad" : tensor<3xf32>
// CHECK-NEXT: %[[RB:.+]] = shard.all_reduce %[[GB]] on @mesh grid_axes = [0] : tensor<3xf32> -> tensor<3xf32>
// CHECK-NEXT: ds.assign @"w@grad" = %[[RW]]
// CHECK-NEXT: ds.assign @"b@grad" = %[[RB]]
// CHECK: ds.adamw_update

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
module attributes {ds.run = #ds.run<train_batch_size = 8, micro_batch_size = 8, gradient_accumulation_steps = 1, data_parallel_size = 1, steps_per_print = 10, seed = 1234, precision = fp32, zero_stage = 0, param_persistence_threshold = 100000, optimizer = AdamW, lr = 1.0e-3, aux_lr = 1.0e-3, beta1 = 0.9, schedule = <kind = constant>, deepspeed = "{}", numbers = "{}">} {
  ds.parameter @w trainable : tensor<2x3xf32>
  ds.parameter @b trainable : tensor<3xf32>
  ds.state @"w@grad" of @w role grad : tensor<2x3xf32>
  ds.state @"b@grad" of @b role grad : tensor<3xf32>
  func.func @micro_step(%x: tensor<2x3xf32> {ds.input_name = "x"}) -> tensor<f32> {
    %s = ds.sum %x dims = [0, 1] : tensor<2x3xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}
