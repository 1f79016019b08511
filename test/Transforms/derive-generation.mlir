// RUN: ds-opt %s --ds-derive-generation='name=decode pages=16 page-size=4 max-pages=5' | FileCheck %s
// RUN: ds-opt %s --ds-derive-generation='name=decode pages=16 page-size=4 max-pages=5' --ds-lower-to-runtime | FileCheck %s --check-prefix=LOWER
// RUN: not ds-opt %s --ds-derive-generation='name=train pages=16 page-size=4 max-pages=5' 2>&1 | FileCheck %s --check-prefix=BADNAME
// RUN: not ds-opt %s --ds-derive-generation='name=decode pages=16 page-size=4' 2>&1 | FileCheck %s --check-prefix=NOPAGES
// BADNAME: ds-derive-generation: name=train is not a generation program's: prefill or decode
// NOPAGES: ds-derive-generation: needs pages, page-size and max-pages > 0 (the cache's pages, the positions per page and the pages one sequence can hold)

// A causal LM's forward (tied embeddings, learned positions read by position_ids, a first
// attention over grouped heads repeated as HF's repeat_kv under HF's causal-and-padding mask,
// a second one causal over all heads) as a decode program: each attention's keys and values,
// before the repeat, go to its layer's cache; it attends against the cache; the mask and
// attention_mask go; the last real token's logits are kept and its token chosen.

// CHECK: ds.state @cache.0.key role kv_cache : tensor<16x1x4x4xf32>
// CHECK: ds.state @cache.0.value role kv_cache : tensor<16x1x4x4xf32>
// CHECK: ds.state @cache.1.key role kv_cache : tensor<16x2x4x4xf32>
// CHECK: ds.state @cache.1.value role kv_cache : tensor<16x2x4x4xf32>
// CHECK-LABEL: func.func @decode(
// CHECK-SAME: %[[IDS:[^:]+]]: tensor<2x3xi64> {ds.input_name = "input_ids"}
// CHECK-SAME: %[[POS:[^:]+]]: tensor<2x3xi64> {ds.input_name = "position_ids"}
// CHECK-SAME: %[[SLOTS:[^:]+]]: tensor<2x3xi64> {ds.input_name = "slots"}
// CHECK-SAME: %[[PAGES:[^:]+]]: tensor<2x5xi64> {ds.input_name = "pages"}
// CHECK-SAME: %[[LENS:[^:]+]]: tensor<2xi64> {ds.input_name = "context_lens"}
// CHECK-SAME: %[[QLENS:[^:]+]]: tensor<2xi64> {ds.input_name = "q_lens"}
// CHECK-SAME: %[[T:[^:]+]]: tensor<2xf32> {ds.input_name = "temperature"}
// CHECK-SAME: %[[TOPK:[^:]+]]: tensor<2xi64> {ds.input_name = "top_k"}
// CHECK-SAME: %[[TOPP:[^:]+]]: tensor<2xf32> {ds.input_name = "top_p"}
// CHECK-SAME: %[[SEEDS:[^:]+]]: tensor<2xi64> {ds.input_name = "seeds"}
// CHECK-SAME: %[[STEPS:[^:]+]]: tensor<2xi64> {ds.input_name = "steps"}
// CHECK-SAME: -> (tensor<2xi64>, tensor<2x16xf32>)
// CHECK-NOT: attention_mask
// CHECK-NOT: ds.attention
// CHECK-NOT: ds.broadcast_to
// CHECK-NOT: ds.where
// CHECK: ds.embedding %{{.+}}[%[[POS]]]
// CHECK: %[[K0:.+]] = ds.transpose %{{.+}} perm = [0, 2, 1, 3] : tensor<2x3x1x4xf32> -> tensor<2x1x3x4xf32>
// CHECK: %[[V0:.+]] = ds.transpose %{{.+}} perm = [0, 2, 1, 3] : tensor<2x3x1x4xf32> -> tensor<2x1x3x4xf32>
// CHECK: %[[KC0:.+]] = ds.get_parameter @cache.0.key
// CHECK: %[[VC0:.+]] = ds.get_parameter @cache.0.value
// CHECK: %[[NK0:[^,]+]], %[[NV0:[^ ]+]] = ds.cache_write %[[KC0]], %[[VC0]], %[[K0]], %[[V0]], %[[SLOTS]]
// CHECK: ds.assign @cache.0.key = %[[NK0]]
// CHECK: ds.assign @cache.0.value = %[[NV0]]
// CHECK: ds.paged_attention %{{.+}}, %[[NK0]], %[[NV0]], %[[PAGES]], %[[LENS]], %[[QLENS]] scale = 5.000000e-01 : (tensor<2x2x3x4xf32>, tensor<16x1x4x4xf32>, tensor<16x1x4x4xf32>, tensor<2x5xi64>, tensor<2xi64>, tensor<2xi64>) -> tensor<2x2x3x4xf32>
// CHECK: ds.cache_write %{{.+}} : tensor<16x2x4x4xf32>, tensor<16x2x4x4xf32>, tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>, tensor<2x3xi64>
// CHECK: ds.assign @cache.1.key
// CHECK: ds.assign @cache.1.value
// CHECK: ds.paged_attention %{{.+}} scale = 2.500000e-01
// CHECK: %[[FINAL:[^ ]+]] = ds.reshape %{{.+}} : tensor<2x3x2x4xf32> -> tensor<2x3x8xf32>
// CHECK-NOT: ds.linear
// Row b * 3 + max(q_lens[b] - 1, 0) of the [6, 8] hidden states, then the LM head on those
// rows alone (HF's logits_to_keep).
// CHECK: %[[ONE:.+]] = ds.constant dense<1> : tensor<i64>
// CHECK: %[[LAST:.+]] = ds.sub %[[QLENS]], %[[ONE]] : tensor<2xi64>, tensor<i64> -> tensor<2xi64>
// CHECK: %[[ZERO:.+]] = ds.constant dense<0> : tensor<i64>
// CHECK: %[[CLAMPED:.+]] = ds.maximum %[[LAST]], %[[ZERO]] : tensor<2xi64>, tensor<i64> -> tensor<2xi64>
// CHECK: %[[STARTS:.+]] = ds.constant dense<[0, 3]> : tensor<2xi64>
// CHECK: %[[ROWS:.+]] = ds.add %[[STARTS]], %[[CLAMPED]]
// CHECK: %[[TABLE:.+]] = ds.reshape %[[FINAL]] : tensor<2x3x8xf32> -> tensor<6x8xf32>
// CHECK: %[[HID:.+]] = ds.embedding %[[TABLE]][%[[ROWS]]] : (tensor<6x8xf32>, tensor<2xi64>) -> tensor<2x8xf32>
// CHECK: %[[KEPT:.+]] = ds.linear %[[HID]], %{{.+}} : (tensor<2x8xf32>, tensor<16x8xf32>) -> tensor<2x16xf32>
// CHECK: %[[TOK:.+]] = ds.sample %[[KEPT]], %[[T]], %[[TOPK]], %[[TOPP]], %[[SEEDS]], %[[STEPS]]
// CHECK: return %[[TOK]], %[[KEPT]] : tensor<2xi64>, tensor<2x16xf32>

// The program lowers: the caches are slots written in place.
// LOWER: llvm.func @ds_decode(
// LOWER-NOT: llvm.call @dsrt_copy
// LOWER: llvm.call @dsrt_cache_write
// LOWER: llvm.call @dsrt_paged_attention
// LOWER: llvm.call @dsrt_sample
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
    %logits = ds.linear %y, %e : (tensor<2x3x8xf32>, tensor<16x8xf32>) -> tensor<2x3x16xf32>
    return %logits : tensor<2x3x16xf32>
  }
}
