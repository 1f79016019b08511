// RUN: ds-opt %s --ds-zero="stage=2 reduce-bucket-size=6" | FileCheck %s
// RUN: ds-opt %s --ds-zero="stage=2 reduce-bucket-size=6" --ds-optimizer | FileCheck %s --check-prefix=OPT

// With sequence parallelism the parameters are replicated on dp x sp (each sp rank
// differentiates its block of the sequence): ZeRO partitions over both axes, 2 x 2 = 4 ranks,
// so each flat buffer is padded to 4 x 16 elements and its gradient shard is a quarter; the
// reduce-scatters and the optimizer's all-gathers span grid axes [0, 1] (tp stays out).
// CHECK: shard.grid @mesh(shape = 2x2x2)
// CHECK: ds.flat_buffer @zero.params.0 role params members [@b, @w] : tensor<64xf32>
// CHECK: ds.state @"zero.params.0@grad" of @zero.params.0 role grad_shard : tensor<16xf32>
// CHECK-LABEL: func.func @micro_step
// CHECK: shard.reduce_scatter %{{.+}} on @mesh grid_axes = [0, 1] scatter_axis = 0 : tensor<64xf32> -> tensor<16xf32>
// OPT-LABEL: func.func @optimizer_step
// OPT: shard.all_slice %{{.+}} on @mesh grid_axes = [0, 1] slice_axis = 0 : tensor<64xf32> -> tensor<16xf32>
// OPT: shard.all_gather %{{.+}} on @mesh grid_axes = [0, 1] gather_axis = 0 : tensor<16xf32> -> tensor<64xf32>
module attributes {ds.mesh = #ds.mesh<axes = ["dp", "sp", "tp"], shape = [2, 2, 2]>} {
  ds.parameter @w trainable : tensor<6xf32>
  ds.parameter @b trainable : tensor<3xf32>
  ds.state @"w@grad" of @w role grad : tensor<6xf32>
  ds.state @"b@grad" of @b role grad : tensor<3xf32>
  func.func @micro_step(%x: tensor<6xf32>, %y: tensor<3xf32>) -> tensor<f32> {
    %gb = ds.mul %y, %y : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
    %gw = ds.mul %x, %x : tensor<6xf32>, tensor<6xf32> -> tensor<6xf32>
    %s = ds.sum %x dims = [0] : tensor<6xf32> -> tensor<f32>
    %ow = ds.get_parameter @"w@grad" : tensor<6xf32>
    %nw = ds.add %ow, %gw : tensor<6xf32>, tensor<6xf32> -> tensor<6xf32>
    ds.assign @"w@grad" = %nw : tensor<6xf32>
    %ob = ds.get_parameter @"b@grad" : tensor<3xf32>
    %nb = ds.add %ob, %gb : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
    ds.assign @"b@grad" = %nb : tensor<3xf32>
    return %s : tensor<f32>
  }
}
