// RUN: ds-opt %s --ds-autodiff | FileCheck %s

// The ends of a tensor-parallel region are each other's gradient, and an all-to-all's is the
// all-to-all back: after ds-autodiff, parallel_copy is gone (its gradient is the all-reduce
// before the input's use), parallel_sum is an all-reduce (its gradient passes through), and
// parallel_max an all-reduce of kind max without a gradient.
// CHECK-LABEL: func.func @micro_step
// CHECK-NOT: ds.parallel_
// CHECK: %[[H:.+]] = ds.linear %arg0, %{{.+}} :
// CHECK: %[[S:.+]] = shard.all_reduce %[[H]] on @mesh grid_axes = [1] : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK: %[[A:.+]] = shard.all_to_all %[[S]] on @mesh grid_axes = [1] split_axis = 0 concat_axis = 0
// CHECK: shard.all_reduce %{{.+}} on @mesh grid_axes = [1] reduction = max
// The backward: the all-to-all back, then the input's gradient summed over tp.
// CHECK: shard.all_to_all %{{.+}} on @mesh grid_axes = [1] split_axis = 0 concat_axis = 0
// CHECK: ds.linear_grad_weight
// CHECK-NOT: ds.parallel_
module attributes {ds.mesh = #ds.mesh<axes = ["dp", "tp"], shape = [1, 2]>} {
  shard.grid @mesh(shape = 1x2)
  ds.parameter @w trainable : tensor<8x8xf32>
  func.func @forward(%x: tensor<4x8xf32>) -> tensor<f32> {
    %c = ds.parallel_copy %x on @mesh grid_axes = [1] : tensor<4x8xf32>
    %w = ds.get_parameter @w : tensor<8x8xf32>
    %h = ds.linear %c, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %s = ds.parallel_sum %h on @mesh grid_axes = [1] : tensor<4x8xf32>
    %a = shard.all_to_all %s on @mesh grid_axes = [1] split_axis = 0 concat_axis = 0 : tensor<4x8xf32> -> tensor<4x8xf32>
    %m = ds.amax %a dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
    %mm = ds.parallel_max %m on @mesh grid_axes = [1] : tensor<4xf32>
    %t = ds.sum %a dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
    %u = ds.sum %mm dims = [0] : tensor<4xf32> -> tensor<f32>
    %l = ds.add %t, %u : tensor<f32>, tensor<f32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
