// RUN: ds-opt %s --ds-derive-generation='name=prefill pages=16 page-size=4 max-pages=5' | FileCheck %s

// Logits that are not the LM head's linear alone (here scaled, as Cohere's logit_scale): the
// kept rows are taken from the logits, after the head has run on every row.
// CHECK-LABEL: func.func @prefill
// CHECK: %[[HEAD:[^ ]+]] = ds.linear %{{.+}} : (tensor<2x3x8xf32>, tensor<16x8xf32>) -> tensor<2x3x16xf32>
// CHECK: %[[LOGITS:[^ ]+]] = ds.mul %[[HEAD]], %{{.+}} : tensor<2x3x16xf32>, tensor<f32> -> tensor<2x3x16xf32>
// CHECK: %[[TABLE:.+]] = ds.reshape %[[LOGITS]] : tensor<2x3x16xf32> -> tensor<6x16xf32>
// CHECK: %[[KEPT:.+]] = ds.embedding %[[TABLE]][%{{.+}}] : (tensor<6x16xf32>, tensor<2xi64>) -> tensor<2x16xf32>
// CHECK: return %{{.+}}, %[[KEPT]] : tensor<2xi64>, tensor<2x16xf32>
module {
  ds.parameter @emb trainable : tensor<16x8xf32>
  ds.parameter @wpe trainable : tensor<32x8xf32>
  ds.parameter @wq trainable : tensor<8x8xf32>
  ds.parameter @wk trainable : tensor<4x8xf32>
  ds.parameter @wv trainable : tensor<4x8xf32>
  ds.parameter @wk1 trainable : tensor<8x8xf32>
  func.func @forward(%ids: tensor<2x3xi64> {ds.input_name = "input_ids"},
                     %mask: tensor<2x3xi64> {ds.input_name = "attention_mask"},
                     %pos: tensor<2x3xi64> {ds.input_name = "position_ids"})
      -> tensor<2x3x16xf32> {
    %e = ds.get_parameter @emb : tensor<16x8xf32>
    %x = ds.embedding %e[%ids] : (tensor<16x8xf32>, tensor<2x3xi64>) -> tensor<2x3x8xf32>
    %pe = ds.get_parameter @wpe : tensor<32x8xf32>
    %p = ds.embedding %pe[%pos] : (tensor<32x8xf32>, tensor<2x3xi64>) -> tensor<2x3x8xf32>
    %h = ds.add %x, %p : tensor<2x3x8xf32>, tensor<2x3x8xf32> -> tensor<2x3x8xf32>
    // Layer 0: two query heads over one key/value head, repeated; HF's mask.
    %wq = ds.get_parameter @wq : tensor<8x8xf32>
    %q0 = ds.linear %h, %wq : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
    %q1 = ds.reshape %q0 : tensor<2x3x8xf32> -> tensor<2x3x2x4xf32>
    %q = ds.transpose %q1 perm = [0, 2, 1, 3] : tensor<2x3x2x4xf32> -> tensor<2x2x3x4xf32>
    %wk = ds.get_parameter @wk : tensor<4x8xf32>
    %k0 = ds.linear %h, %wk : (tensor<2x3x8xf32>, tensor<4x8xf32>) -> tensor<2x3x4xf32>
    %k1 = ds.reshape %k0 : tensor<2x3x4xf32> -> tensor<2x3x1x4xf32>
    %k = ds.transpose %k1 perm = [0, 2, 1, 3] : tensor<2x3x1x4xf32> -> tensor<2x1x3x4xf32>
    %wv = ds.get_parameter @wv : tensor<4x8xf32>
    %v0 = ds.linear %h, %wv : (tensor<2x3x8xf32>, tensor<4x8xf32>) -> tensor<2x3x4xf32>
    %v1 = ds.reshape %v0 : tensor<2x3x4xf32> -> tensor<2x3x1x4xf32>
    %v = ds.transpose %v1 perm = [0, 2, 1, 3] : tensor<2x3x1x4xf32> -> tensor<2x1x3x4xf32>
    %kr0 = ds.reshape %k : tensor<2x1x3x4xf32> -> tensor<2x1x1x3x4xf32>
    %kr1 = ds.broadcast_to %kr0 : tensor<2x1x1x3x4xf32> -> tensor<2x1x2x3x4xf32>
    %kr = ds.reshape %kr1 : tensor<2x1x2x3x4xf32> -> tensor<2x2x3x4xf32>
    %vr0 = ds.reshape %v : tensor<2x1x3x4xf32> -> tensor<2x1x1x3x4xf32>
    %vr1 = ds.broadcast_to %vr0 : tensor<2x1x1x3x4xf32> -> tensor<2x1x2x3x4xf32>
    %vr = ds.reshape %vr1 : tensor<2x1x2x3x4xf32> -> tensor<2x2x3x4xf32>
    %keep = ds.convert %mask : tensor<2x3xi64> -> tensor<2x3xi1>
    %keep4 = ds.reshape %keep : tensor<2x3xi1> -> tensor<2x1x1x3xi1>
    %causal = ds.constant dense<[[[[true, false, false], [true, true, false], [true, true, true]]]]> : tensor<1x1x3x3xi1>
    %no = ds.constant dense<false> : tensor<i1>
    %m = ds.where %causal, %keep4, %no : (tensor<1x1x3x3xi1>, tensor<2x1x1x3xi1>, tensor<i1>) -> tensor<2x1x3x3xi1>
    %a0, %lse0 = ds.attention %q, %kr, %vr mask %m scale = 0.5 : (tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>, tensor<2x1x3x3xi1>) -> (tensor<2x2x3x4xf32>, tensor<2x2x3xf32>)
    %o0 = ds.transpose %a0 perm = [0, 2, 1, 3] : tensor<2x2x3x4xf32> -> tensor<2x3x2x4xf32>
    %o = ds.reshape %o0 : tensor<2x3x2x4xf32> -> tensor<2x3x8xf32>
    // Layer 1: causal, its keys and values one projection (all heads).
    %wk1 = ds.get_parameter @wk1 : tensor<8x8xf32>
    %kv0 = ds.linear %o, %wk1 : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
    %kv1 = ds.reshape %kv0 : tensor<2x3x8xf32> -> tensor<2x3x2x4xf32>
    %kv = ds.transpose %kv1 perm = [0, 2, 1, 3] : tensor<2x3x2x4xf32> -> tensor<2x2x3x4xf32>
    %a1, %lse1 = ds.attention %kv, %kv, %kv scale = 0.25 causal : (tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>) -> (tensor<2x2x3x4xf32>, tensor<2x2x3xf32>)
    %y0 = ds.transpose %a1 perm = [0, 2, 1, 3] : tensor<2x2x3x4xf32> -> tensor<2x3x2x4xf32>
    %y = ds.reshape %y0 : tensor<2x3x2x4xf32> -> tensor<2x3x8xf32>
    %head = ds.linear %y, %e : (tensor<2x3x8xf32>, tensor<16x8xf32>) -> tensor<2x3x16xf32>
    %scale = ds.constant dense<5.000000e-01> : tensor<f32>
    %logits = ds.mul %head, %scale : tensor<2x3x16xf32>, tensor<f32> -> tensor<2x3x16xf32>
    return %logits : tensor<2x3x16xf32>
  }
}
