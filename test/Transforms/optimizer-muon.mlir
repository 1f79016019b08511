// RUN: ds-opt %s --ds-optimizer="type=Muon momentum=0.95 beta1=0.9 beta2=0.95 eps=1e-10 weight-decay=0.1" | FileCheck %s
// RUN: ds-opt %s --ds-optimizer="scheduled-beta1=true beta2=0.99" | FileCheck %s --check-prefix=CYCLE

// Muon's selection: the >= 2-D parameters outside the embedding and the LM head take a
// momentum buffer; the embedding table (read by ds.embedding, whatever its name), the LM head
// (by name), and the 1-D bias take AdamW's two moments.
// CHECK: ds.state @"wte@exp_avg" of @wte role exp_avg
// CHECK: ds.state @"h.fc.weight@momentum_buffer" of @h.fc.weight role momentum_buffer : tensor<8x4xf32>
// CHECK-NOT: ds.state @"h.fc.weight@exp_avg"
// CHECK: ds.state @"h.proj.weight@momentum_buffer" of @h.proj.weight role momentum_buffer : tensor<4x8xf32>
// CHECK: ds.state @"lm_head.weight@exp_avg" of @lm_head.weight role exp_avg
// CHECK: ds.state @"ln.bias@exp_avg_sq" of @ln.bias role exp_avg_sq
// CHECK: func.func @optimizer_step(%{{.+}}: tensor<f32>, %{{.+}}: tensor<f32>, %{{.+}}: tensor<f64>, %[[AUXLR:[^:]+]]: tensor<f32>)
// The tall 8x4 weight: Nesterov momentum by lerp, transposed to 4x8, normalized, 5 quintic
// iterations of X X^T products, transposed back and scaled by sqrt(8/4).
// CHECK: ds.get_parameter @"h.fc.weight@grad"
// CHECK: ds.assign @"h.fc.weight@momentum_buffer"
// CHECK: ds.transpose %{{.+}} perm = [1, 0] : tensor<8x4xf32> -> tensor<4x8xf32>
// CHECK: ds.constant dense<1.000000e-07> : tensor<f32>
// CHECK-COUNT-15: ds.matmul
// CHECK-NOT: ds.matmul
// CHECK: ds.transpose %{{.+}} perm = [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
// CHECK: ds.constant dense<1.41421354> : tensor<f32>
// CHECK: ds.assign @h.fc.weight =
// The wide 4x8 weight: iterated as is (its only transposes are X^T in X X^T), scale
// max(1, 4/8) = 1.
// CHECK: ds.get_parameter @"h.proj.weight@grad"
// CHECK-NOT: ds.transpose %{{.+}} perm = [1, 0] : tensor<8x4xf32> -> tensor<4x8xf32>
// CHECK: ds.matmul %{{.+}}, %{{.+}} : tensor<4x8xf32>, tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NOT: ds.transpose %{{.+}} perm = [1, 0] : tensor<8x4xf32> -> tensor<4x8xf32>
// CHECK: ds.assign @h.proj.weight =
// The AdamW group: lerp moments, updated at the auxiliary lr; no fused AdamW op.
// CHECK: ds.assign @"lm_head.weight@exp_avg" =
// CHECK: ds.assign @"lm_head.weight@exp_avg_sq" =
// CHECK: ds.mul %{{.+}}, %[[AUXLR]]
// CHECK: ds.assign @lm_head.weight =
// CHECK-NOT: ds.adamw_update

// OneCycle's cycle_momentum: AdamW's beta1 is the third argument, in the bias correction and
// in each update.
// CYCLE: func.func @optimizer_step(%{{.+}}: tensor<f32>, %[[STEP:[^:]+]]: tensor<f32>, %[[B1:[^:]+]]: tensor<f64>, %{{.+}}: tensor<f32>)
// CYCLE: %[[STEP64:.+]] = ds.convert %[[STEP]]
// CYCLE: ds.pow %[[B1]], %[[STEP64]]
// CYCLE: ds.adamw_update {{.+}} beta1 %[[B1]] beta2 = 0.98999999999999999
module {
  ds.parameter @wte trainable : tensor<10x4xf32>
  ds.parameter @h.fc.weight trainable : tensor<8x4xf32>
  ds.parameter @h.proj.weight trainable : tensor<4x8xf32>
  ds.parameter @lm_head.weight trainable : tensor<10x4xf32>
  ds.parameter @ln.bias trainable : tensor<4xf32>
  ds.state @"wte@grad" of @wte role grad : tensor<10x4xf32>
  ds.state @"h.fc.weight@grad" of @h.fc.weight role grad : tensor<8x4xf32>
  ds.state @"h.proj.weight@grad" of @h.proj.weight role grad : tensor<4x8xf32>
  ds.state @"lm_head.weight@grad" of @lm_head.weight role grad : tensor<10x4xf32>
  ds.state @"ln.bias@grad" of @ln.bias role grad : tensor<4xf32>
  func.func @micro_step(%idx: tensor<2xi64>) -> tensor<f32> {
    %w = ds.get_parameter @wte : tensor<10x4xf32>
    %e = ds.embedding %w[%idx] : (tensor<10x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
    %s = ds.sum %e dims = [0, 1] : tensor<2x4xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}
