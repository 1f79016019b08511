// RUN: ds-opt %s --ds-zero="stage=1 data-parallel-size=4" | FileCheck %s --check-prefix=PART
// RUN: ds-opt %s --ds-zero="stage=1 data-parallel-size=4" --ds-optimizer="gradient-clipping=1.0" | FileCheck %s
// RUN: ds-opt %s --ds-zero="stage=1 data-parallel-size=4" --ds-optimizer --ds-lower-to-runtime | FileCheck %s --check-prefix=LOWER

// Stage 1 lays the 9 trainable elements out in one flat buffer padded once to 4 ranks x 16
// elements (64), and their gradients likewise; each rank owns 16.
// PART: ds.flat_buffer @zero.params role params members [@w, @b] : tensor<64xf32>
// PART: ds.flat_buffer @zero.grads role grads members [@"w@grad", @"b@grad"] : tensor<64xf32>

// The optimizer keeps shard-sized moments; it reduce-scatters the flat gradients, clips by the
// norm summed over the ranks, updates this rank's slice of the flat parameters, all-gathers
// them back and zeroes the flat gradients.
// CHECK: ds.state @"zero.params@exp_avg" of @zero.params role exp_avg : tensor<16xf32>
// CHECK: ds.state @"zero.params@exp_avg_sq" of @zero.params role exp_avg_sq : tensor<16xf32>
// CHECK-LABEL: func.func @optimizer_step
// CHECK: %[[G:.+]] = ds.get_parameter @zero.grads : tensor<64xf32>
// CHECK: %[[GS:.+]] = shard.reduce_scatter %[[G]] on @mesh grid_axes = [0] scatter_axis = 0 : tensor<64xf32> -> tensor<16xf32>
// CHECK: %[[SQ:.+]] = ds.sum
// CHECK: shard.all_reduce %[[SQ]] on @mesh grid_axes = [0] : tensor<f32> -> tensor<f32>
// CHECK: %[[P:.+]] = ds.get_parameter @zero.params : tensor<64xf32>
// CHECK: %[[PS:.+]] = shard.all_slice %[[P]] on @mesh grid_axes = [0] slice_axis = 0 : tensor<64xf32> -> tensor<16xf32>
// CHECK: %[[NP:.+]], %{{.+}}, %{{.+}} = ds.adamw_update %[[PS]]
// CHECK: %[[ALL:.+]] = shard.all_gather %[[NP]] on @mesh grid_axes = [0] gather_axis = 0 : tensor<16xf32> -> tensor<64xf32>
// CHECK: ds.assign @zero.params = %[[ALL]]
// CHECK: ds.assign @zero.grads =

// Lowered: the members are views of their flat buffer's slot; this rank's shard is a view too.
// LOWER-LABEL: llvm.func @ds_init_slots
// LOWER-COUNT-4: llvm.call @dsrt_slot_define(
// LOWER: llvm.call @dsrt_slot_define_view(
// LOWER-LABEL: llvm.func @ds_optimizer_step
// The update writes this rank's shard of the flat buffer in place and the all-gather fills
// the buffer around it; the gradients are zeroed in place.
// LOWER: llvm.call @dsrt_reduce_scatter
// LOWER: %[[CHUNK:.+]] = llvm.call @dsrt_comm_chunk
// LOWER: %[[NEW:.+]] = llvm.call @dsrt_tensor_view(%{{.+}}, %[[CHUNK]]
// LOWER: llvm.call @dsrt_adamw_update(%{{.+}}, %[[NEW]], %{{.+}}, %{{.+}}, %[[CHUNK]]
// LOWER: %[[FLAT:.+]] = llvm.call @dsrt_slot_get
// LOWER: llvm.call @dsrt_all_gather(%{{.+}}, %[[FLAT]], %[[NEW]])
// LOWER: %[[GRADS:.+]] = llvm.call @dsrt_slot_get
// LOWER: llvm.call @dsrt_fill(%{{.+}}, %[[GRADS]]
// LOWER: \22name\22:\22w\22,\22offset\22:0,\22role\22:\22parameter\22,\22view_of\22:\22zero.params\22
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
