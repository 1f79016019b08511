// RUN: ds-opt %s --ds-zero="stage=3 data-parallel-size=2 param-persistence-threshold=4 max-reuse-distance=0" | FileCheck %s
// RUN: ds-opt %s --ds-zero="stage=3 data-parallel-size=2 param-persistence-threshold=4 max-reuse-distance=0" --ds-optimizer --canonicalize --cse | FileCheck %s --check-prefix=OPT
// RUN: ds-opt %s --ds-zero="stage=3 data-parallel-size=2 param-persistence-threshold=4 max-reuse-distance=0" --ds-optimizer --canonicalize --cse --ds-lower-to-runtime | FileCheck %s --check-prefix=LOWER

// Stage 3: @w (6 elements) is partitioned: its bucket keeps only a 16-element shard; @b (3,
// under the threshold of 4) persists whole in a bucket of its own, as in stage 2.
// CHECK-DAG: ds.flat_buffer @zero.params.{{[0-9]}} role params_sharded members [@w] : tensor<32xf32>
// CHECK-DAG: ds.state @"zero.params.{{[0-9]}}@shard" of @zero.params.{{[0-9]}} role param_shard : tensor<16xf32>
// CHECK-DAG: ds.flat_buffer @zero.params.{{[0-9]}} role params members [@b] : tensor<32xf32>
// Forward reads @w through a view of the gathered bucket; after the loss, backward gathers it
// again (marked so that CSE keeps both) instead of keeping it alive across the loss (with
// max-reuse-distance 0; zero-stage3-prefetch.mlir shows the other cases).
// CHECK-LABEL: func.func @micro_step
// CHECK: %[[S0:.+]] = ds.get_parameter @"zero.params.{{[0-9]}}@shard" : tensor<16xf32>
// CHECK: %[[F0:.+]] = shard.all_gather %[[S0]] on @mesh grid_axes = [0] gather_axis = 0 : tensor<16xf32> -> tensor<32xf32>
// CHECK: %[[W0:.+]] = ds.slice %[[F0]] dim = 0[0 : 6] : tensor<32xf32> -> tensor<6xf32>
// CHECK: ds.mul %{{.+}}, %[[W0]]
// CHECK: %[[LOSS:.+]] = ds.add
// CHECK: %[[S1:.+]] = ds.get_parameter @"zero.params.{{[0-9]}}@shard" {rematerialized} : tensor<16xf32>
// CHECK: %[[F1:.+]] = shard.all_gather %[[S1]]
// CHECK: %[[W1:.+]] = ds.slice %[[F1]] dim = 0[0 : 6]
// CHECK: ds.mul %[[W1]], %[[W1]]
// CHECK: return %[[LOSS]]

// The optimizer updates the shard itself: no all-gather after the update.
// OPT-LABEL: func.func @optimizer_step
// OPT: ds.adamw_update
// OPT: ds.assign @"zero.params.{{[0-9]}}@shard" =
// OPT: shard.all_gather
// OPT-NOT: shard.all_gather

// Lowered: @w has no slot of its own (only the shard), and its views are offset views.
// LOWER: llvm.call @dsrt_tensor_view_at
// LOWER: \22name\22:\22w\22,\22offset\22:0,\22role\22:\22parameter\22,\22sharded_by\22:\22zero.params.{{[0-9]}}@shard\22
module {
  ds.parameter @w trainable : tensor<6xf32>
  ds.parameter @b trainable : tensor<3xf32>
  ds.state @"w@grad" of @w role grad : tensor<6xf32>
  ds.state @"b@grad" of @b role grad : tensor<3xf32>
  func.func @micro_step(%x: tensor<6xf32>, %y: tensor<3xf32>) -> tensor<f32> {
    %w = ds.get_parameter @w : tensor<6xf32>
    %b = ds.get_parameter @b : tensor<3xf32>
    // Forward.
    %fw = ds.mul %x, %w : tensor<6xf32>, tensor<6xf32> -> tensor<6xf32>
    %fb = ds.mul %y, %b : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
    %s1 = ds.sum %fw dims = [0] : tensor<6xf32> -> tensor<f32>
    %s2 = ds.sum %fb dims = [0] : tensor<3xf32> -> tensor<f32>
    %loss = ds.add %s1, %s2 : tensor<f32>, tensor<f32> -> tensor<f32>
    // Backward (stand-ins that read the parameters again).
    %gw = ds.mul %w, %w : tensor<6xf32>, tensor<6xf32> -> tensor<6xf32>
    %gb = ds.mul %b, %y : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
    %ow = ds.get_parameter @"w@grad" : tensor<6xf32>
    %nw = ds.add %ow, %gw : tensor<6xf32>, tensor<6xf32> -> tensor<6xf32>
    ds.assign @"w@grad" = %nw : tensor<6xf32>
    %ob = ds.get_parameter @"b@grad" : tensor<3xf32>
    %nb = ds.add %ob, %gb : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
    ds.assign @"b@grad" = %nb : tensor<3xf32>
    return %loss : tensor<f32>
  }
}
