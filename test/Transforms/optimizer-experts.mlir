// RUN: ds-opt %s --ds-expert-parallel=expert-parallel-size=2 --ds-autodiff --ds-zero --ds-optimizer="gradient-clipping=1.0" | FileCheck %s
// RUN: sed 's/ds.mesh = #ds.mesh<axes = \["dp", "ep"\], shape = \[1, 2\]>/ds.mesh = #ds.mesh<axes = ["dp", "ep"], shape = [2, 2]>/' %s | ds-opt --ds-expert-parallel=expert-parallel-size=2 --ds-autodiff --ds-zero --ds-optimizer | FileCheck %s --check-prefix=EDP
// RUN: ds-opt %s --ds-expert-parallel=expert-parallel-size=2 --ds-autodiff --ds-zero=stage=1 --ds-optimizer | FileCheck %s --check-prefix=ZERO

// Expert parallelism's update at ZeRO stage 0 on dp=1 x ep=2: the router's gradient is summed
// over dp x ep, the experts' (each rank's already sums its ep group's rows) over their
// replicas alone, none here; the global norm adds the experts' squares summed over ep to the
// replicated parameters'. On dp=2 x ep=2 the experts' gradients are summed over dp.
// CHECK-LABEL: func.func @optimizer_step
// CHECK: %[[R:.+]] = ds.get_parameter @"router.weight@grad" : tensor<4x8xf32>
// CHECK-NEXT: shard.all_reduce %[[R]] on @mesh grid_axes = [0, 1]
// CHECK-NOT: shard.all_reduce {{.*}} : tensor<2x16x8xf32>
// CHECK: %[[E:.+]] = ds.get_parameter @"experts.up@grad" : tensor<2x16x8xf32>
// CHECK: %[[ESQ:.+]] = ds.mul %{{.+}}, %{{.+}} : tensor<f32>
// CHECK: %[[RSQ:.+]] = ds.mul %{{.+}}, %{{.+}} : tensor<f32>
// CHECK: %[[ESUM:.+]] = shard.all_reduce %[[ESQ]] on @mesh grid_axes = [1] : tensor<f32> -> tensor<f32>
// CHECK: ds.add %[[RSQ]], %[[ESUM]]
// EDP-LABEL: func.func @optimizer_step
// EDP: %[[E:.+]] = ds.get_parameter @"experts.up@grad" : tensor<2x16x8xf32>
// EDP-NEXT: %[[S:.+]] = shard.all_reduce %[[E]] on @mesh grid_axes = [0] : tensor<2x16x8xf32>
// EDP-NEXT: ds.assign @"experts.up@grad" = %[[S]]
// At ZeRO stage 1 the experts stay outside the flat buffers, whole on their rank.
// ZERO: ds.state @"experts.up@grad" of @experts.up role grad : tensor<2x16x8xf32>
// ZERO: ds.flat_buffer @zero.params role params members [@router.weight] :
// ZERO-NEXT: ds.flat_buffer @zero.grads role grads members [@"router.weight@grad"] :
// ZERO: ds.state @"experts.up@exp_avg" of @experts.up role exp_avg : tensor<2x16x8xf32>
module attributes {ds.mesh = #ds.mesh<axes = ["dp", "ep"], shape = [1, 2]>} {
  ds.parameter @experts.up trainable : tensor<4x16x8xf32>
  ds.parameter @router.weight trainable : tensor<4x8xf32>
  func.func @forward(%x: tensor<6x8xf32>, %t: tensor<6xi64>) -> tensor<f32> {
    %r = ds.get_parameter @router.weight : tensor<4x8xf32>
    %logits = ds.linear %x, %r : (tensor<6x8xf32>, tensor<4x8xf32>) -> tensor<6x4xf32>
    %v, %i = ds.top_k %logits k = 1 : (tensor<6x4xf32>) -> (tensor<6x1xf32>, tensor<6x1xi64>)
    %ids = ds.reshape %i : tensor<6x1xi64> -> tensor<6xi64>
    %up = ds.get_parameter @experts.up : tensor<4x16x8xf32>
    %h = ds.expert_linear %x, %up[%ids] : (tensor<6x8xf32>, tensor<4x16x8xf32>, tensor<6xi64>) -> tensor<6x16xf32>
    %w = ds.mul %h, %v : tensor<6x16xf32>, tensor<6x1xf32> -> tensor<6x16xf32>
    %l = ds.cross_entropy %w, %t : (tensor<6x16xf32>, tensor<6xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
