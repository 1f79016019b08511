// RUN: ds-opt %s --ds-zero="stage=2 data-parallel-size=2 reduce-bucket-size=6" | FileCheck %s
// RUN: ds-opt %s --ds-zero="stage=2 data-parallel-size=2 reduce-bucket-size=6" --ds-optimizer | FileCheck %s --check-prefix=OPT

// Stage 2: the per-parameter gradient states are gone. Backward produces the gradients of @b,
// @w, @v in that order; buckets of >= 6 elements group [@b, @w] and [@v]. Each bucket is a
// flat parameter buffer padded to 2 ranks x 16 elements with a 16-element gradient shard.
// CHECK-NOT: ds.state @"w@grad"
// CHECK: ds.flat_buffer @zero.params.0 role params members [@b, @w] : tensor<32xf32>
// CHECK: ds.state @"zero.params.0@grad" of @zero.params.0 role grad_shard : tensor<16xf32>
// CHECK: ds.flat_buffer @zero.params.1 role params members [@v] : tensor<32xf32>
// CHECK: ds.state @"zero.params.1@grad" of @zero.params.1 role grad_shard : tensor<16xf32>
// CHECK-LABEL: func.func @micro_step
// After @w's gradient: pack [b, w, padding], reduce-scatter; the shard is accumulated only
// after the next bucket has been issued.
// CHECK: %[[GW:.+]] = ds.mul %{{.+}}, %{{.+}} : tensor<6xf32>
// CHECK: %[[PACK:.+]] = ds.concat %{{.+}}, %{{.+}}, %{{.+}} dim = 0 : (tensor<3xf32>, tensor<6xf32>, tensor<23xf32>) -> tensor<32xf32>
// CHECK: %[[R0:.+]] = shard.reduce_scatter %[[PACK]] on @mesh grid_axes = [0] scatter_axis = 0 : tensor<32xf32> -> tensor<16xf32>
// CHECK: %[[R1:.+]] = shard.reduce_scatter %{{.+}} on @mesh grid_axes = [0] scatter_axis = 0 : tensor<32xf32> -> tensor<16xf32>
// CHECK: %[[S0:.+]] = ds.get_parameter @"zero.params.0@grad"
// CHECK: ds.add %[[S0]], %[[R0]]
// CHECK: ds.assign @"zero.params.0@grad"
// CHECK: ds.get_parameter @"zero.params.1@grad"
// CHECK: ds.assign @"zero.params.1@grad"
// CHECK: return

// The optimizer reads the shards directly (no reduce-scatter) and zeroes them after.
// OPT-LABEL: func.func @optimizer_step
// OPT-NOT: shard.reduce_scatter
// OPT: ds.get_parameter @"zero.params.0@grad" : tensor<16xf32>
// OPT: shard.all_slice
// OPT: ds.adamw_update
// OPT: shard.all_gather
// OPT: ds.assign @zero.params.0 =
// OPT: ds.assign @"zero.params.0@grad" =
module {
  ds.parameter @w trainable : tensor<6xf32>
  ds.parameter @b trainable : tensor<3xf32>
  ds.parameter @v trainable : tensor<2xf32>
  ds.state @"w@grad" of @w role grad : tensor<6xf32>
  ds.state @"b@grad" of @b role grad : tensor<3xf32>
  ds.state @"v@grad" of @v role grad : tensor<2xf32>
  func.func @micro_step(%x: tensor<6xf32>, %y: tensor<3xf32>, %z: tensor<2xf32>) -> tensor<f32> {
    // Gradients as backward would produce them: b, then w, then v.
    %gb = ds.mul %y, %y : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
    %gw = ds.mul %x, %x : tensor<6xf32>, tensor<6xf32> -> tensor<6xf32>
    %gv = ds.mul %z, %z : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
    %s = ds.sum %x dims = [0] : tensor<6xf32> -> tensor<f32>
    %ow = ds.get_parameter @"w@grad" : tensor<6xf32>
    %nw = ds.add %ow, %gw : tensor<6xf32>, tensor<6xf32> -> tensor<6xf32>
    ds.assign @"w@grad" = %nw : tensor<6xf32>
    %ob = ds.get_parameter @"b@grad" : tensor<3xf32>
    %nb = ds.add %ob, %gb : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
    ds.assign @"b@grad" = %nb : tensor<3xf32>
    %ov = ds.get_parameter @"v@grad" : tensor<2xf32>
    %nv = ds.add %ov, %gv : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
    ds.assign @"v@grad" = %nv : tensor<2xf32>
    return %s : tensor<f32>
  }
}
