// RUN: ds-opt %s --ds-pipeline-partition="stages=2 partition=parameters" --ds-autodiff --canonicalize --cse --ds-activation-checkpoint=segments=1 | FileCheck %s
// RUN: ds-opt %s --ds-pipeline-partition="stages=2 partition=parameters" --ds-autodiff --canonicalize --cse --ds-activation-checkpoint=cpu=true | FileCheck %s --check-prefix=CPU
// RUN: ds-opt %s --ds-pipeline-partition="stages=2 partition=parameters" --ds-autodiff --canonicalize --cse --ds-activation-checkpoint=segments=1 --ds-pipeline=micro-batches=2 | FileCheck %s --check-prefix=PIPE

// Recomputation in a pipeline: four blocks cut into two chunks (h.0, h.1 | h.2, h.3). One
// segment for all four is split at the cut: each chunk's part is recomputed in that chunk's
// backward phase (ds.stage of the chunk, ds.backward) from what that chunk kept: chunk 1 from
// h.1's output (which it received), chunk 0 from the step's input.
// CHECK-LABEL: func.func @micro_step
// CHECK: %[[R0:.+]] = ds.add %arg0, %{{.+}} {ds.stage = 0 : i64}
// CHECK: %[[R1:.+]] = ds.add %[[R0]], %{{.+}} {ds.stage = 0 : i64}
// CHECK: ds.cross_entropy_grad
// CHECK-NEXT: %[[A2:.+]] = ds.linear %[[R1]], %{{.+}} {ds.backward, ds.recompute, ds.stage = 1 : i64}
// CHECK-NEXT: %[[G2:.+]] = ds.gelu %[[A2]] {ds.backward, ds.recompute, ds.stage = 1 : i64}
// CHECK-NEXT: %[[R2:.+]] = ds.add %[[R1]], %[[G2]] {ds.backward, ds.recompute, ds.stage = 1 : i64}
// CHECK-NEXT: ds.linear %[[R2]], %{{.+}} {ds.backward, ds.recompute, ds.stage = 1 : i64}
// CHECK: ds.linear_grad_weight %[[R1]]
// CHECK: %[[A0:.+]] = ds.linear %arg0, %{{.+}} {ds.backward, ds.recompute, ds.stage = 0 : i64}
// CHECK-NEXT: ds.gelu %[[A0]] {ds.backward, ds.recompute, ds.stage = 0 : i64}
// CHECK-NEXT: ds.add %arg0, %{{.+}} {ds.backward, ds.recompute, ds.stage = 0 : i64}
// CHECK-NEXT: ds.linear %{{.+}} {ds.backward, ds.recompute, ds.stage = 0 : i64}
// CHECK-NOT: ds.recompute
// CHECK: return

// cpu_checkpointing: a checkpoint is kept on the host of the rank that recomputes from it;
// h.1's output, computed by chunk 0, goes to the host in chunk 1's forward.
// CPU: %[[R0:.+]] = ds.add %arg0, %{{.+}} {ds.stage = 0 : i64}
// CPU: %[[R1:.+]] = ds.add %[[R0]], %{{.+}} {ds.stage = 0 : i64}
// CPU-DAG: %[[H0:.+]] = ds.move %[[R0]] to host {ds.stage = 0 : i64}
// CPU-DAG: %[[H1:.+]] = ds.move %[[R1]] to host {ds.stage = 1 : i64}
// CPU: ds.cross_entropy_grad
// CPU: ds.move %[[H1]] to device {ds.backward, ds.stage = 1 : i64}
// CPU: ds.move %[[H0]] to device {ds.backward, ds.stage = 0 : i64}

// Each rank's program recomputes its own chunk, once per micro-batch, in its backward; rank
// 1 from the activation rank 0 sent it in the forward.
// PIPE-LABEL: func.func @pipeline_step_0
// PIPE: ds.linear %arg0, %{{.+}} {ds.recompute}
// PIPE: ds.linear %arg2, %{{.+}} {ds.recompute}
// PIPE-LABEL: func.func @pipeline_step_1
// PIPE-COUNT-2: ds.linear %recv{{(_[0-9]+)?}}, %{{.+}} {ds.recompute}
module {
  ds.parameter @h.0.w trainable : tensor<8x8xf32>
  ds.parameter @h.1.w trainable : tensor<8x8xf32>
  ds.parameter @h.2.w trainable : tensor<8x8xf32>
  ds.parameter @h.3.w trainable : tensor<8x8xf32>
  func.func @forward(%x: tensor<2x8xf32>, %y: tensor<2xi64>) -> tensor<f32> {
    %w0 = ds.get_parameter @h.0.w : tensor<8x8xf32>
    %a0 = ds.linear %x, %w0 : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %g0 = ds.gelu %a0 : tensor<2x8xf32>
    %r0 = ds.add %x, %g0 : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
    %w1 = ds.get_parameter @h.1.w : tensor<8x8xf32>
    %a1 = ds.linear %r0, %w1 : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %g1 = ds.gelu %a1 : tensor<2x8xf32>
    %r1 = ds.add %r0, %g1 : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
    %w2 = ds.get_parameter @h.2.w : tensor<8x8xf32>
    %a2 = ds.linear %r1, %w2 : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %g2 = ds.gelu %a2 : tensor<2x8xf32>
    %r2 = ds.add %r1, %g2 : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
    %w3 = ds.get_parameter @h.3.w : tensor<8x8xf32>
    %a3 = ds.linear %r2, %w3 : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %g3 = ds.gelu %a3 : tensor<2x8xf32>
    %r3 = ds.add %r2, %g3 : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
    %l = ds.cross_entropy %r3, %y : (tensor<2x8xf32>, tensor<2xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
