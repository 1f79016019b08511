// RUN: ds-opt %s --ds-sequence-parallel=sequence-parallel-size=2 --ds-autodiff --canonicalize --cse --ds-activation-checkpoint | FileCheck %s

// Ulysses under activation checkpointing: two blocks (h.0, h.1), each a linear, attention
// over heads exchanged by all-to-all, and a residual add. The all-to-alls move activations
// as large as the block's own, so they are recomputed with their block in the backward
// (DeepSpeed's checkpointed DistributedAttention) rather than kept through the step: the
// forward keeps only the blocks' outputs, and each block's backward first exchanges its
// recomputed q, k and v again.
// CHECK-LABEL: func.func @micro_step
// CHECK: ds.cross_entropy_grad
// CHECK: ds.linear %{{.+}}, %{{.+}} {ds.recompute}
// CHECK: %[[X1:.+]] = shard.all_to_all %{{.+}} on @mesh grid_axes = [1] split_axis = 0 concat_axis = 0 {ds.recompute}
// CHECK-NEXT: %[[T1:.+]] = ds.transpose %[[X1]] {{.+}} {ds.recompute}
// CHECK-NEXT: %[[Q1:.+]] = ds.reshape %[[T1]] {ds.recompute}
// CHECK-NEXT: ds.attention %[[Q1]], %[[Q1]], %[[Q1]] {{.+}} {ds.recompute}
// CHECK-NEXT: ds.attention_grad %[[Q1]], %[[Q1]], %[[Q1]]
// CHECK: ds.linear %{{.+}}, %{{.+}} {ds.recompute}
// CHECK: %[[X0:.+]] = shard.all_to_all %{{.+}} {ds.recompute}
// CHECK-NEXT: %[[T0:.+]] = ds.transpose %[[X0]] {{.+}} {ds.recompute}
// CHECK-NEXT: %[[Q0:.+]] = ds.reshape %[[T0]] {ds.recompute}
// CHECK-NEXT: ds.attention %[[Q0]], %[[Q0]], %[[Q0]] {{.+}} {ds.recompute}
// CHECK-NEXT: ds.attention_grad %[[Q0]], %[[Q0]], %[[Q0]]
// CHECK: return
module {
  ds.parameter @h.0.w trainable : tensor<4x4xf32>
  ds.parameter @h.1.w trainable : tensor<4x4xf32>
  ds.parameter @head trainable : tensor<8x4xf32>
  func.func @forward(%x: tensor<1x8x4xf32>, %t: tensor<1x8xi64>) -> tensor<f32> {
    %w0 = ds.get_parameter @h.0.w : tensor<4x4xf32>
    %a0 = ds.linear %x, %w0 : (tensor<1x8x4xf32>, tensor<4x4xf32>) -> tensor<1x8x4xf32>
    %r0 = ds.reshape %a0 : tensor<1x8x4xf32> -> tensor<1x8x2x2xf32>
    %q0 = ds.transpose %r0 perm = [0, 2, 1, 3] : tensor<1x8x2x2xf32> -> tensor<1x2x8x2xf32>
    %o0:2 = ds.attention %q0, %q0, %q0 scale = 0.5 causal : (tensor<1x2x8x2xf32>, tensor<1x2x8x2xf32>, tensor<1x2x8x2xf32>) -> (tensor<1x2x8x2xf32>, tensor<1x2x8xf32>)
    %p0 = ds.transpose %o0#0 perm = [0, 2, 1, 3] : tensor<1x2x8x2xf32> -> tensor<1x8x2x2xf32>
    %b0 = ds.reshape %p0 : tensor<1x8x2x2xf32> -> tensor<1x8x4xf32>
    %y0 = ds.add %x, %b0 : tensor<1x8x4xf32>, tensor<1x8x4xf32> -> tensor<1x8x4xf32>
    %w1 = ds.get_parameter @h.1.w : tensor<4x4xf32>
    %a1 = ds.linear %y0, %w1 : (tensor<1x8x4xf32>, tensor<4x4xf32>) -> tensor<1x8x4xf32>
    %r1 = ds.reshape %a1 : tensor<1x8x4xf32> -> tensor<1x8x2x2xf32>
    %q1 = ds.transpose %r1 perm = [0, 2, 1, 3] : tensor<1x8x2x2xf32> -> tensor<1x2x8x2xf32>
    %o1:2 = ds.attention %q1, %q1, %q1 scale = 0.5 causal : (tensor<1x2x8x2xf32>, tensor<1x2x8x2xf32>, tensor<1x2x8x2xf32>) -> (tensor<1x2x8x2xf32>, tensor<1x2x8xf32>)
    %p1 = ds.transpose %o1#0 perm = [0, 2, 1, 3] : tensor<1x2x8x2xf32> -> tensor<1x8x2x2xf32>
    %b1 = ds.reshape %p1 : tensor<1x8x2x2xf32> -> tensor<1x8x4xf32>
    %y1 = ds.add %y0, %b1 : tensor<1x8x4xf32>, tensor<1x8x4xf32> -> tensor<1x8x4xf32>
    %wh = ds.get_parameter @head : tensor<8x4xf32>
    %lg = ds.linear %y1, %wh : (tensor<1x8x4xf32>, tensor<8x4xf32>) -> tensor<1x8x8xf32>
    %l2 = ds.reshape %lg : tensor<1x8x8xf32> -> tensor<8x8xf32>
    %t2 = ds.reshape %t : tensor<1x8xi64> -> tensor<8xi64>
    %loss = ds.cross_entropy %l2, %t2 : (tensor<8x8xf32>, tensor<8xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
