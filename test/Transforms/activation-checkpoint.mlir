// RUN: ds-opt %s --ds-autodiff --canonicalize --cse --ds-activation-checkpoint | FileCheck %s
// RUN: ds-opt %s --ds-autodiff --canonicalize --cse --ds-activation-checkpoint=segments=1 | FileCheck %s --check-prefix=ONE
// RUN: ds-opt %s --ds-autodiff --canonicalize --cse --ds-activation-checkpoint=cpu=true | FileCheck %s --check-prefix=CPU

// Three repeated blocks (h.0, h.1, h.2: linear, GELU, residual add) and a head. One segment per
// block: each block's output is kept (the checkpoint), everything else the backward needs
// from a block (the linear's pre-activation) is recomputed from the block's input, right
// before the backward op that reads it. The head's input (outside the blocks) is kept.
// CHECK-LABEL: func.func @micro_step
// CHECK: %[[W0:.+]] = ds.get_parameter @h.0.w
// CHECK: %[[R0:.+]] = ds.add %arg0, %{{.+}}
// CHECK: %[[W1:.+]] = ds.get_parameter @h.1.w
// CHECK: %[[R1:.+]] = ds.add %[[R0]], %{{.+}}
// CHECK: %[[W2:.+]] = ds.get_parameter @h.2.w
// CHECK: %[[R2:.+]] = ds.add %[[R1]], %{{.+}}
// CHECK: ds.cross_entropy_grad
// CHECK: ds.linear_grad_weight %[[R2]]
// CHECK: %[[A2:.+]] = ds.linear %[[R1]], %[[W2]] {ds.recompute}
// CHECK-NEXT: %[[D2:.+]] = ds.gelu_grad %[[A2]]
// CHECK: ds.linear_grad_weight %[[R1]], %[[D2]]
// CHECK: %[[A1:.+]] = ds.linear %[[R0]], %[[W1]] {ds.recompute}
// CHECK-NEXT: %[[D1:.+]] = ds.gelu_grad %[[A1]]
// CHECK: ds.linear_grad_weight %[[R0]], %[[D1]]
// CHECK: %[[A0:.+]] = ds.linear %arg0, %[[W0]] {ds.recompute}
// CHECK-NEXT: ds.gelu_grad %[[A0]]
// CHECK-NOT: ds.recompute
// CHECK: return

// One segment for the three blocks: only its input is kept; the backward of h.2 recomputes
// the whole chain from it.
// ONE-LABEL: func.func @micro_step
// ONE: ds.cross_entropy_grad
// ONE: %[[C0:.+]] = ds.linear %arg0, %{{.+}} {ds.recompute}
// ONE-NEXT: %[[C1:.+]] = ds.gelu %[[C0]] {ds.recompute}
// ONE-NEXT: %[[C2:.+]] = ds.add %arg0, %[[C1]] {ds.recompute}
// ONE-NEXT: %[[C3:.+]] = ds.linear %[[C2]], %{{.+}} {ds.recompute}
// ONE-NEXT: %[[C4:.+]] = ds.gelu %[[C3]] {ds.recompute}
// ONE-NEXT: %[[C5:.+]] = ds.add %[[C2]], %[[C4]] {ds.recompute}
// ONE-NEXT: %[[C6:.+]] = ds.linear %[[C5]], %{{.+}} {ds.recompute}
// ONE-NEXT: ds.gelu_grad %[[C6]]

// cpu_checkpointing: the checkpoints h.0 and h.1 computed go to the host after their last
// forward use and come back before the recomputation that reads them.
// CPU: %[[R0:.+]] = ds.add %arg0
// CPU: %[[R1:.+]] = ds.add %[[R0]]
// CPU-NEXT: %[[H0:.+]] = ds.move %[[R0]] to host
// CPU: %[[H1:.+]] = ds.move %[[R1]] to host
// CPU: ds.cross_entropy_grad
// CPU: %[[B1:.+]] = ds.move %[[H1]] to device
// CPU-NEXT: ds.linear %[[B1]], %{{.+}} {ds.recompute}
// CPU: %[[B0:.+]] = ds.move %[[H0]] to device
// CPU-NEXT: ds.linear %[[B0]], %{{.+}} {ds.recompute}
module {
  ds.parameter @h.0.w trainable : tensor<16x16xf32>
  ds.parameter @h.1.w trainable : tensor<16x16xf32>
  ds.parameter @h.2.w trainable : tensor<16x16xf32>
  ds.parameter @head.w trainable : tensor<4x16xf32>
  func.func @forward(%x: tensor<8x16xf32>, %y: tensor<8xi64>) -> tensor<f32> {
    %w0 = ds.get_parameter @h.0.w : tensor<16x16xf32>
    %a0 = ds.linear %x, %w0 : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
    %g0 = ds.gelu %a0 : tensor<8x16xf32>
    %r0 = ds.add %x, %g0 : tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
    %w1 = ds.get_parameter @h.1.w : tensor<16x16xf32>
    %a1 = ds.linear %r0, %w1 : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
    %g1 = ds.gelu %a1 : tensor<8x16xf32>
    %r1 = ds.add %r0, %g1 : tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
    %w2 = ds.get_parameter @h.2.w : tensor<16x16xf32>
    %a2 = ds.linear %r1, %w2 : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
    %g2 = ds.gelu %a2 : tensor<8x16xf32>
    %r2 = ds.add %r1, %g2 : tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
    %wh = ds.get_parameter @head.w : tensor<4x16xf32>
    %o = ds.linear %r2, %wh : (tensor<8x16xf32>, tensor<4x16xf32>) -> tensor<8x4xf32>
    %l = ds.cross_entropy %o, %y : (tensor<8x4xf32>, tensor<8xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
