// RUN: ds-opt %s --ds-fuse-attention --split-input-file | FileCheck %s

// nanoGPT's masked_fill form: the scale a product, the dropped keys `bias == 0`: one
// ds.attention that keeps the keys where `bias != 0`.
// CHECK-LABEL: func.func @masked_fill
// CHECK: %[[KEEP:.+]] = ds.cmp ne, %[[BIAS:.+]], %{{.+}} : tensor<1x1x8x8xf32>
// CHECK: %[[O:.+]], %{{.+}} = ds.attention %arg0, %arg1, %arg2 mask %[[KEEP]] scale = 2.500000e-01 :
// CHECK-NOT: ds.softmax
// CHECK: return %[[O]]
func.func @masked_fill(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>, %bias: tensor<1x1x8x8xf32>) -> tensor<2x4x8x16xf32> {
  %kt = ds.transpose %k perm = [0, 1, 3, 2] : tensor<2x4x8x16xf32> -> tensor<2x4x16x8xf32>
  %s = ds.matmul %q, %kt : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x8x8xf32>
  %c = ds.constant dense<0.25> : tensor<f32>
  %x = ds.mul %s, %c : tensor<2x4x8x8xf32>, tensor<f32> -> tensor<2x4x8x8xf32>
  %zero = ds.constant dense<0.0> : tensor<f32>
  %drop = ds.cmp eq, %bias, %zero : tensor<1x1x8x8xf32>, tensor<f32> -> tensor<1x1x8x8xi1>
  %inf = ds.constant dense<0xFF800000> : tensor<f32>
  %m = ds.where %drop, %inf, %x : (tensor<1x1x8x8xi1>, tensor<f32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %p = ds.softmax %m dim = 3 : tensor<2x4x8x8xf32>
  %o = ds.matmul %p, %v : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// HF's eager attention: a quotient's scale and an added float mask of rank 2 (made rank 4).
// CHECK-LABEL: func.func @eager
// CHECK: %[[M:.+]] = ds.reshape %arg3 : tensor<8x6xf32> -> tensor<1x1x8x6xf32>
// CHECK: ds.attention %arg0, %arg1, %arg2 mask %[[M]] scale = 1.250000e-01 :
// CHECK-NOT: ds.softmax
func.func @eager(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x6x16xf32>, %v: tensor<2x4x6x8xf32>, %mask: tensor<8x6xf32>) -> tensor<2x4x8x8xf32> {
  %kt = ds.transpose %k perm = [0, 1, 3, 2] : tensor<2x4x6x16xf32> -> tensor<2x4x16x6xf32>
  %s = ds.matmul %q, %kt : tensor<2x4x8x16xf32>, tensor<2x4x16x6xf32> -> tensor<2x4x8x6xf32>
  %c = ds.constant dense<8.0> : tensor<f32>
  %x = ds.div %s, %c : tensor<2x4x8x6xf32>, tensor<f32> -> tensor<2x4x8x6xf32>
  %m = ds.add %x, %mask : tensor<2x4x8x6xf32>, tensor<8x6xf32> -> tensor<2x4x8x6xf32>
  %p = ds.softmax %m dim = 3 : tensor<2x4x8x6xf32>
  %o = ds.matmul %p, %v : tensor<2x4x8x6xf32>, tensor<2x4x6x8xf32> -> tensor<2x4x8x8xf32>
  return %o : tensor<2x4x8x8xf32>
}

// -----

// Not fused: dropout on the probabilities, a learned bias (a trainable parameter reaches the
// mask), and scores that are also returned.
// CHECK-LABEL: func.func @dropout
// CHECK-NOT: ds.attention
// CHECK: ds.softmax
func.func @dropout(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %kt = ds.transpose %k perm = [0, 1, 3, 2] : tensor<2x4x8x16xf32> -> tensor<2x4x16x8xf32>
  %s = ds.matmul %q, %kt : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x8x8xf32>
  %p = ds.softmax %s dim = 3 : tensor<2x4x8x8xf32>
  %d = ds.dropout %p p = 1.000000e-01 : tensor<2x4x8x8xf32>
  %o = ds.matmul %d, %v : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

module {
  ds.parameter @bias trainable : tensor<8x8xf32>
  // CHECK-LABEL: func.func @learned_bias
  // CHECK-NOT: ds.attention
  // CHECK: ds.softmax
  func.func @learned_bias(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
    %b = ds.get_parameter @bias : tensor<8x8xf32>
    %kt = ds.transpose %k perm = [0, 1, 3, 2] : tensor<2x4x8x16xf32> -> tensor<2x4x16x8xf32>
    %s = ds.matmul %q, %kt : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x8x8xf32>
    %m = ds.add %s, %b : tensor<2x4x8x8xf32>, tensor<8x8xf32> -> tensor<2x4x8x8xf32>
    %p = ds.softmax %m dim = 3 : tensor<2x4x8x8xf32>
    %o = ds.matmul %p, %v : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
    return %o : tensor<2x4x8x16xf32>
  }
}

// -----

// CHECK-LABEL: func.func @scores_used
// CHECK-NOT: ds.attention
func.func @scores_used(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8x8xf32>) {
  %kt = ds.transpose %k perm = [0, 1, 3, 2] : tensor<2x4x8x16xf32> -> tensor<2x4x16x8xf32>
  %s = ds.matmul %q, %kt : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x8x8xf32>
  %p = ds.softmax %s dim = 3 : tensor<2x4x8x8xf32>
  %o = ds.matmul %p, %v : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  return %o, %p : tensor<2x4x8x16xf32>, tensor<2x4x8x8xf32>
}

// -----

// HF's causal mask folded to a constant by torch.export: the causal attribute instead; a
// constant that is not lower-triangular stays.
// CHECK-LABEL: func.func @causal_constant
// CHECK: ds.attention %arg0, %arg0, %arg0 scale = 5.000000e-01 causal :
// CHECK: ds.attention %arg0, %arg0, %arg0 mask %{{.+}} scale = 5.000000e-01 :
func.func @causal_constant(%q: tensor<2x1x3x4xf32>) -> (tensor<2x1x3x4xf32>, tensor<2x1x3x4xf32>) {
  %tril = ds.constant dense<[[[[true, false, false], [true, true, false], [true, true, true]]], [[[true, false, false], [true, true, false], [true, true, true]]]]> : tensor<2x1x3x3xi1>
  %band = ds.constant dense<[[[[true, false, false], [true, true, false], [false, true, true]]]]> : tensor<1x1x3x3xi1>
  %a:2 = ds.attention %q, %q, %q mask %tril scale = 0.5 : (tensor<2x1x3x4xf32>, tensor<2x1x3x4xf32>, tensor<2x1x3x4xf32>, tensor<2x1x3x3xi1>) -> (tensor<2x1x3x4xf32>, tensor<2x1x3xf32>)
  %b:2 = ds.attention %q, %q, %q mask %band scale = 0.5 : (tensor<2x1x3x4xf32>, tensor<2x1x3x4xf32>, tensor<2x1x3x4xf32>, tensor<1x1x3x3xi1>) -> (tensor<2x1x3x4xf32>, tensor<2x1x3xf32>)
  return %a#0, %b#0 : tensor<2x1x3x4xf32>, tensor<2x1x3x4xf32>
}

// -----

// HF's repeat_kv (each key/value head reshaped, broadcast over its query heads, reshaped back)
// under a causal mask: the attention reads the heads themselves (grouped-query attention, as
// HF asks SDPA for it when it passes no mask), and the repeated copies go. Under a padding
// mask HF repeats the heads itself, and so the repeat stays.
// CHECK-LABEL: func.func @repeat_kv
// CHECK-NOT: ds.broadcast_to
// CHECK: ds.attention %arg0, %arg1, %arg2 scale = 5.000000e-01 causal : (tensor<2x4x3x8xf32>, tensor<2x2x3x8xf32>, tensor<2x2x3x8xf32>)
// CHECK: ds.broadcast_to
// CHECK: ds.broadcast_to
// CHECK: ds.attention %arg0, %{{.+}}, %{{.+}} mask %arg3 scale = 5.000000e-01 : (tensor<2x4x3x8xf32>, tensor<2x4x3x8xf32>, tensor<2x4x3x8xf32>, tensor<2x1x3x3xi1>)
func.func @repeat_kv(%q: tensor<2x4x3x8xf32>, %k: tensor<2x2x3x8xf32>, %v: tensor<2x2x3x8xf32>, %pad: tensor<2x1x3x3xi1>) -> (tensor<2x4x3x8xf32>, tensor<2x4x3x8xf32>) {
  %k1 = ds.reshape %k : tensor<2x2x3x8xf32> -> tensor<2x2x1x3x8xf32>
  %k2 = ds.broadcast_to %k1 : tensor<2x2x1x3x8xf32> -> tensor<2x2x2x3x8xf32>
  %k3 = ds.reshape %k2 : tensor<2x2x2x3x8xf32> -> tensor<2x4x3x8xf32>
  %v1 = ds.reshape %v : tensor<2x2x3x8xf32> -> tensor<2x2x1x3x8xf32>
  %v2 = ds.broadcast_to %v1 : tensor<2x2x1x3x8xf32> -> tensor<2x2x2x3x8xf32>
  %v3 = ds.reshape %v2 : tensor<2x2x2x3x8xf32> -> tensor<2x4x3x8xf32>
  %a:2 = ds.attention %q, %k3, %v3 scale = 0.5 causal : (tensor<2x4x3x8xf32>, tensor<2x4x3x8xf32>, tensor<2x4x3x8xf32>) -> (tensor<2x4x3x8xf32>, tensor<2x4x3xf32>)
  %p1 = ds.reshape %k : tensor<2x2x3x8xf32> -> tensor<2x2x1x3x8xf32>
  %p2 = ds.broadcast_to %p1 : tensor<2x2x1x3x8xf32> -> tensor<2x2x2x3x8xf32>
  %p3 = ds.reshape %p2 : tensor<2x2x2x3x8xf32> -> tensor<2x4x3x8xf32>
  %w1 = ds.reshape %v : tensor<2x2x3x8xf32> -> tensor<2x2x1x3x8xf32>
  %w2 = ds.broadcast_to %w1 : tensor<2x2x1x3x8xf32> -> tensor<2x2x2x3x8xf32>
  %w3 = ds.reshape %w2 : tensor<2x2x2x3x8xf32> -> tensor<2x4x3x8xf32>
  %b:2 = ds.attention %q, %p3, %w3 mask %pad scale = 0.5 : (tensor<2x4x3x8xf32>, tensor<2x4x3x8xf32>, tensor<2x4x3x8xf32>, tensor<2x1x3x3xi1>) -> (tensor<2x4x3x8xf32>, tensor<2x4x3xf32>)
  return %a#0, %b#0 : tensor<2x4x3x8xf32>, tensor<2x4x3x8xf32>
}

// -----

// One repeated tensor as both keys and values: folded once, erased once.
// CHECK-LABEL: func.func @repeat_kv_shared
// CHECK-NOT: ds.broadcast_to
// CHECK: ds.attention %arg0, %arg1, %arg1 scale = 5.000000e-01 causal : (tensor<2x4x3x8xf32>, tensor<2x2x3x8xf32>, tensor<2x2x3x8xf32>)
func.func @repeat_kv_shared(%q: tensor<2x4x3x8xf32>, %k: tensor<2x2x3x8xf32>) -> tensor<2x4x3x8xf32> {
  %k1 = ds.reshape %k : tensor<2x2x3x8xf32> -> tensor<2x2x1x3x8xf32>
  %k2 = ds.broadcast_to %k1 : tensor<2x2x1x3x8xf32> -> tensor<2x2x2x3x8xf32>
  %k3 = ds.reshape %k2 : tensor<2x2x2x3x8xf32> -> tensor<2x4x3x8xf32>
  %a:2 = ds.attention %q, %k3, %k3 scale = 0.5 causal : (tensor<2x4x3x8xf32>, tensor<2x4x3x8xf32>, tensor<2x4x3x8xf32>) -> (tensor<2x4x3x8xf32>, tensor<2x4x3xf32>)
  return %a#0 : tensor<2x4x3x8xf32>
}
