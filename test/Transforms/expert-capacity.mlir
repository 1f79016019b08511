// RUN: ds-opt %s --ds-expert-capacity=capacity-factor=0.5 --split-input-file | FileCheck %s
// RUN: ds-opt %s --ds-expert-capacity --split-input-file | FileCheck %s --check-prefix=MIN
// RUN: ds-opt %s --ds-expert-capacity="capacity-factor=1.0 min-capacity=0" --split-input-file | FileCheck %s --check-prefix=CF1
// RUN: ds-opt %s --ds-expert-capacity=capacity-factor=0.5 --ds-expert-parallel=expert-parallel-size=2 --split-input-file | FileCheck %s --check-prefix=EP

// HF's batched_mm experts: a router's top-2 of 6 tokens over 4 experts, the indices flattened
// in token order and wrapped (negative ids + E), two products on the same ids. One capacity
// drop between the ids and both products: C = max(ceil(6 / 4 x 0.5 x 2), 4) = 4 with
// DeepSpeed's min_capacity; ceil(6 / 4 x 1.0 x 2) = 3 without it.
// CHECK-LABEL: func.func @forward
// CHECK: %[[V:.+]], %[[I:.+]] = ds.top_k
// CHECK: %[[IDS:.+]] = ds.where
// CHECK-NEXT: %[[KEPT:.+]] = ds.expert_capacity %[[IDS]] experts = 4 choices = 2 capacity = 4 : tensor<12xi64>
// CHECK-NOT: ds.expert_capacity
// CHECK: ds.expert_linear %{{.+}}, %{{.+}}[%[[KEPT]]]
// CHECK: ds.expert_linear %{{.+}}, %{{.+}}[%[[KEPT]]]
// MIN: ds.expert_capacity %{{.+}} experts = 4 choices = 2 capacity = 4
// CF1: ds.expert_capacity %{{.+}} experts = 4 choices = 2 capacity = 3
// Under expert parallelism the receive buffers hold E C = 16 rows, not the dropless 24.
// EP: ds.expert_route %{{.+}} experts = 4 on @mesh grid_axes = [1] : (tensor<12xi64>) -> (tensor<16xi64>, tensor<16xi64>)
// EP: ds.expert_dispatch %{{.+}} : (tensor<12x8xf32>, tensor<16xi64>) -> tensor<16x8xf32>
// EP: ds.expert_combine %{{.+}} : (tensor<16x8xf32>, tensor<16xi64>) -> tensor<12x8xf32>
module {
  ds.parameter @experts.up trainable : tensor<4x16x8xf32>
  ds.parameter @experts.down trainable : tensor<4x8x16xf32>
  ds.parameter @router.weight trainable : tensor<4x8xf32>
  func.func @forward(%x: tensor<6x8xf32>, %t: tensor<6xi64>) -> tensor<f32> {
    %r = ds.get_parameter @router.weight : tensor<4x8xf32>
    %logits = ds.linear %x, %r : (tensor<6x8xf32>, tensor<4x8xf32>) -> tensor<6x4xf32>
    %p = ds.softmax %logits dim = 1 : tensor<6x4xf32>
    %v, %i = ds.top_k %p k = 2 : (tensor<6x4xf32>) -> (tensor<6x2xf32>, tensor<6x2xi64>)
    %flat = ds.reshape %i : tensor<6x2xi64> -> tensor<12xi64>
    %zero = ds.constant dense<0> : tensor<i64>
    %e = ds.constant dense<4> : tensor<i64>
    %neg = ds.cmp lt, %flat, %zero : tensor<12xi64>, tensor<i64> -> tensor<12xi1>
    %up1 = ds.add %flat, %e : tensor<12xi64>, tensor<i64> -> tensor<12xi64>
    %ids = ds.where %neg, %up1, %flat : (tensor<12xi1>, tensor<12xi64>, tensor<12xi64>) -> tensor<12xi64>
    %xr = ds.reshape %x : tensor<6x8xf32> -> tensor<6x1x8xf32>
    %xb = ds.broadcast_to %xr : tensor<6x1x8xf32> -> tensor<6x2x8xf32>
    %rows = ds.reshape %xb : tensor<6x2x8xf32> -> tensor<12x8xf32>
    %up = ds.get_parameter @experts.up : tensor<4x16x8xf32>
    %h = ds.expert_linear %rows, %up[%ids] : (tensor<12x8xf32>, tensor<4x16x8xf32>, tensor<12xi64>) -> tensor<12x16xf32>
    %g = ds.gelu %h : tensor<12x16xf32>
    %down = ds.get_parameter @experts.down : tensor<4x8x16xf32>
    %y = ds.expert_linear %g, %down[%ids] : (tensor<12x16xf32>, tensor<4x8x16xf32>, tensor<12xi64>) -> tensor<12x8xf32>
    %w = ds.reshape %v : tensor<6x2xf32> -> tensor<12x1xf32>
    %yw = ds.mul %y, %w : tensor<12x8xf32>, tensor<12x1xf32> -> tensor<12x8xf32>
    %y3 = ds.reshape %yw : tensor<12x8xf32> -> tensor<6x2x8xf32>
    %out = ds.sum %y3 dims = [1] : tensor<6x2x8xf32> -> tensor<6x8xf32>
    %l = ds.cross_entropy %out, %t : (tensor<6x8xf32>, tensor<6xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
