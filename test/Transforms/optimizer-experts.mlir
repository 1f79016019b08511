// RUN: ds-opt %s --ds-expert-parallel=expert-parallel-size=2 --ds-autodiff --ds-zero --ds-optimizer="gradient-clipping=1.0" | FileCheck %s
// RUN: not ds-opt %s --ds-expert-parallel=expert-parallel-size=2 --ds-autodiff --ds-zero="stage=1 data-parallel-size=2" 2>&1 | FileCheck %s --check-prefix=ZERO

// Expert parallelism's update at ZeRO stage 0: the router's gradient is summed over dp, the
// experts' (each rank's already sums every rank's rows) is not; the global norm adds the
// experts' squares summed over dp to the replicated parameters'.
// CHECK-LABEL: func.func @optimizer_step
// CHECK: %[[R:.+]] = ds.get_parameter @"router.weight@grad" : tensor<4x8xf32>
// CHECK-NEXT: shard.all_reduce %[[R]] on @mesh grid_axes = [0]
// CHECK-NOT: shard.all_reduce {{.*}} : tensor<2x16x8xf32>
// CHECK: %[[E:.+]] = ds.get_parameter @"experts.up@grad" : tensor<2x16x8xf32>
// CHECK: %[[ESQ:.+]] = ds.mul %{{.+}}, %{{.+}} : tensor<f32>
// CHECK: %[[RSQ:.+]] = ds.mul %{{.+}}, %{{.+}} : tensor<f32>
// CHECK: %[[ESUM:.+]] = shard.all_reduce %[[ESQ]] on @mesh grid_axes = [0] : tensor<f32> -> tensor<f32>
// CHECK: ds.add %[[RSQ]], %[[ESUM]]
// ZERO: ds-zero: 'experts.up' is split over the data-parallel ranks (expert parallelism); ZeRO stage 1 with expert parallelism is not built yet: use stage 0
module {
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
