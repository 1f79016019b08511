// RUN: ds-opt %s --ds-autodiff=gradient-accumulation-steps=2 --split-input-file | FileCheck %s

// A linear layer, a GELU and a cross-entropy: the backward uses the saved forward values, the
// seed is 1/2 (two micro-batches), gradients accumulate into ds.state symbols, and the input
// (not a parameter) gets no gradient.
// CHECK: ds.state @"fc.weight@grad" of @fc.weight role grad : tensor<4x16xf32>
// CHECK: ds.state @"fc.bias@grad" of @fc.bias role grad : tensor<4xf32>
// CHECK-NOT: ds.state @buf
// CHECK-LABEL: func.func @micro_step
// CHECK: %[[W:.+]] = ds.get_parameter @fc.weight
// CHECK: %[[Y:.+]] = ds.linear %[[X:[^,]+]], %[[W]]
// CHECK: %[[G:.+]] = ds.gelu %[[Y]]
// CHECK: %[[L:.+]] = ds.cross_entropy %[[G]]
// CHECK: %[[SEED:.+]] = ds.constant dense<5.000000e-01> : tensor<f32>
// CHECK: %[[DG:.+]] = ds.cross_entropy_grad %[[G]], %{{.+}}, %[[SEED]]
// CHECK: %[[DY:.+]] = ds.gelu_grad %[[Y]], %[[DG]]
// CHECK-NOT: ds.matmul
// Each gradient is accumulated right after the op that completes it (so that it dies there).
// CHECK: %[[DW:.+]], %[[DB:.+]] = ds.linear_grad_weight %[[X]], %[[DY]]
// CHECK-DAG: ds.assign @"fc.bias@grad"
// CHECK-DAG: %[[ACC:.+]] = ds.get_parameter @"fc.weight@grad"
// CHECK-DAG: %[[SUM:.+]] = ds.add %[[ACC]], %[[DW]]
// CHECK-DAG: ds.assign @"fc.weight@grad" = %[[SUM]]
// CHECK-NEXT: return %[[L]]
module {
  ds.parameter @fc.weight trainable : tensor<4x16xf32>
  ds.parameter @fc.bias trainable : tensor<4xf32>
  ds.parameter @buf : tensor<4xf32>
  func.func @forward(%x: tensor<8x16xf32>, %y: tensor<8xi64>) -> tensor<f32> {
    %w = ds.get_parameter @fc.weight : tensor<4x16xf32>
    %b = ds.get_parameter @fc.bias : tensor<4xf32>
    %h = ds.linear %x, %w, %b : (tensor<8x16xf32>, tensor<4x16xf32>, tensor<4xf32>) -> tensor<8x4xf32>
    %g = ds.gelu %h : tensor<8x4xf32>
    %l = ds.cross_entropy %g, %y : (tensor<8x4xf32>, tensor<8xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Dropout becomes a mask multiply whose mask the backward reuses; a weight used twice gets the
// sum of both gradients.
// CHECK-LABEL: func.func @micro_step
// CHECK: %[[M:.+]] = ds.dropout_mask p = 1.000000e-01 : tensor<2x3xf32>
// CHECK: ds.mul %{{.+}}, %[[M]]
// CHECK: ds.mul %{{.+}}, %[[M]]
// CHECK: %[[A:.+]] = ds.add
// CHECK: ds.get_parameter @"w@grad"
module {
  ds.parameter @w trainable : tensor<2x3xf32>
  func.func @forward(%x: tensor<2x3xf32>) -> tensor<f32> {
    %w = ds.get_parameter @w : tensor<2x3xf32>
    %d = ds.dropout %w p = 1.000000e-01 : tensor<2x3xf32>
    %p = ds.mul %d, %w : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
    %s = ds.sum %p dims = [0, 1] : tensor<2x3xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// x.detach(): the forward reads the value, the backward passes nothing through it (the
// weight's gradient is the second product's alone), and the op is gone once the backward
// is built.
// CHECK-LABEL: func.func @micro_step
// CHECK-NOT: ds.stop_gradient
// CHECK: %[[W:.+]] = ds.get_parameter @w
// CHECK: %[[A:.+]] = ds.mul %[[W]], %[[W]]
// CHECK: %[[B:.+]] = ds.mul %[[A]], %[[W]]
// CHECK: ds.mul %{{.+}}, %[[A]]
// CHECK-NOT: ds.mul %{{.+}}, %[[W]] :
// CHECK: ds.assign @"w@grad"
module {
  ds.parameter @w trainable : tensor<4xf32>
  func.func @forward() -> tensor<f32> {
    %w = ds.get_parameter @w : tensor<4xf32>
    %a = ds.mul %w, %w : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    %d = ds.stop_gradient %a : tensor<4xf32>
    %b = ds.mul %d, %w : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    %s = ds.sum %b dims = [0] : tensor<4xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// A running sum's gradient is the running sum of the output's gradient from the other end.
// CHECK-LABEL: func.func @micro_step
// CHECK: %[[C:.+]] = ds.cumsum %{{.+}} dim = 1 : tensor<2x4xf32>
// CHECK: ds.cumsum %{{.+}} dim = 1 reverse : tensor<2x4xf32>
module {
  ds.parameter @w trainable : tensor<2x4xf32>
  func.func @forward() -> tensor<f32> {
    %w = ds.get_parameter @w : tensor<2x4xf32>
    %c = ds.cumsum %w dim = 1 : tensor<2x4xf32>
    %p = ds.mul %c, %c : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
    %s = ds.sum %p dims = [0, 1] : tensor<2x4xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// Attention's gradient is one ds.attention_grad from the forward's operands, its result and
// log-sum-exp (no probabilities saved).
// CHECK-LABEL: func.func @micro_step
// CHECK: %[[O:[^,]+]], %[[L:[^ ]+]] = ds.attention %{{.+}}, %{{.+}}, %{{.+}} scale = 5.000000e-01 causal
// CHECK: ds.attention_grad %{{.+}}, %{{.+}}, %{{.+}} result %[[O]], %[[L]] grad %{{.+}} scale = 5.000000e-01 causal
module {
  ds.parameter @q trainable : tensor<1x2x4x8xf32>
  ds.parameter @kv trainable : tensor<1x1x4x8xf32>
  func.func @forward() -> tensor<f32> {
    %q = ds.get_parameter @q : tensor<1x2x4x8xf32>
    %kv = ds.get_parameter @kv : tensor<1x1x4x8xf32>
    %a:2 = ds.attention %q, %kv, %kv scale = 0.5 causal : (tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
    %p = ds.mul %a#0, %a#0 : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
    %s = ds.sum %p dims = [0, 1, 2, 3] : tensor<1x2x4x8xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}
