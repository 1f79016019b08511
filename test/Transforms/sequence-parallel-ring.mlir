// RUN: ds-opt %s --split-input-file --ds-sequence-parallel="sequence-parallel-size=2 mode=ring" --verify-diagnostics | FileCheck %s --check-prefix=RING
// RUN: ds-opt %s --split-input-file --ds-sequence-parallel="sequence-parallel-size=2" --verify-diagnostics | FileCheck %s --check-prefix=AUTO

// Grouped-query attention over [1, 8] positions at sp 2: 2 query heads over 1 key/value
// head, which sp does not divide. Ring mode keeps the sequence blocks (4 positions) and
// makes the attention a ds.ring_attention on them (workspace: two blocks of keys and
// values, a partial result and three log-sum-exp rows: 2 * (8 + 8) + 16 + 3 * 8 = 72); auto
// takes the ring too, as Ulysses cannot split one key/value head.
// The attention is causal, so the sequence is striped over the ranks (Striped Attention's
// load balance): rank r holds positions r, r + 2, r + 4, r + 6 ([8] as [4, 2], the rank's
// column), and the ring op says so.
// RING-LABEL: func.func @forward
// RING-NEXT: ds.reshape %arg0 : tensor<1x8x6xf32> -> tensor<1x4x2x6xf32>
// RING-NEXT: ds.transpose %{{.+}} perm = [2, 0, 1, 3] : tensor<1x4x2x6xf32> -> tensor<2x1x4x6xf32>
// RING-NEXT: shard.all_slice %{{.+}} on @mesh grid_axes = [1] slice_axis = 0 : tensor<2x1x4x6xf32> -> tensor<1x1x4x6xf32>
// RING-NOT: shard.all_to_all
// RING: ds.ring_attention %{{.+}}, %{{.+}}, %{{.+}} scale = 5.000000e-01 causal striped on @mesh grid_axes = [1] : (tensor<1x2x4x2xf32>, tensor<1x1x4x2xf32>, tensor<1x1x4x2xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4xf32>, tensor<72xf32>)
// RING-NOT: shard.all_to_all
// AUTO-LABEL: func.func @forward
// AUTO: ds.ring_attention
module {
  func.func @forward(%x: tensor<1x8x6xf32>) -> tensor<f32> {
    %r = ds.reshape %x : tensor<1x8x6xf32> -> tensor<1x8x3x2xf32>
    %t = ds.transpose %r perm = [0, 2, 1, 3] : tensor<1x8x3x2xf32> -> tensor<1x3x8x2xf32>
    %q = ds.slice %t dim = 1[0 : 2] : tensor<1x3x8x2xf32> -> tensor<1x2x8x2xf32>
    %k = ds.slice %t dim = 1[2 : 3] : tensor<1x3x8x2xf32> -> tensor<1x1x8x2xf32>
    %a:2 = ds.attention %q, %k, %k scale = 0.5 causal : (tensor<1x2x8x2xf32>, tensor<1x1x8x2xf32>, tensor<1x1x8x2xf32>) -> (tensor<1x2x8x2xf32>, tensor<1x2x8xf32>)
    %s = ds.sum %a#0 dims = [0, 1, 2, 3] : tensor<1x2x8x2xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// Heads that divide by sp: ring mode still takes the ring; auto exchanges heads (Ulysses).
// RING-LABEL: func.func @forward
// RING: ds.ring_attention
// AUTO-LABEL: func.func @forward
// AUTO: shard.all_to_all
// AUTO: ds.attention %{{.+}} : (tensor<1x1x8x2xf32>
// AUTO-NOT: ds.ring_attention
module {
  func.func @forward(%x: tensor<1x8x4xf32>) -> tensor<f32> {
    %r = ds.reshape %x : tensor<1x8x4xf32> -> tensor<1x8x2x2xf32>
    %q = ds.transpose %r perm = [0, 2, 1, 3] : tensor<1x8x2x2xf32> -> tensor<1x2x8x2xf32>
    %a:2 = ds.attention %q, %q, %q scale = 0.5 causal : (tensor<1x2x8x2xf32>, tensor<1x2x8x2xf32>, tensor<1x2x8x2xf32>) -> (tensor<1x2x8x2xf32>, tensor<1x2x8xf32>)
    %s = ds.sum %a#0 dims = [0, 1, 2, 3] : tensor<1x2x8x2xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// An unmasked attention in the ring: the blocks stay in sequence order (nothing to balance).
// RING-LABEL: func.func @forward
// RING-NEXT: ds.reshape %arg0 : tensor<1x8x4xf32> -> tensor<1x2x4x4xf32>
// RING: ds.ring_attention %{{.+}} scale = 5.000000e-01 on @mesh
// AUTO-LABEL: func.func @forward
// AUTO: shard.all_to_all
module {
  func.func @forward(%x: tensor<1x8x4xf32>) -> tensor<f32> {
    %r = ds.reshape %x : tensor<1x8x4xf32> -> tensor<1x8x2x2xf32>
    %q = ds.transpose %r perm = [0, 2, 1, 3] : tensor<1x8x2x2xf32> -> tensor<1x2x8x2xf32>
    %a:2 = ds.attention %q, %q, %q scale = 0.5 : (tensor<1x2x8x2xf32>, tensor<1x2x8x2xf32>, tensor<1x2x8x2xf32>) -> (tensor<1x2x8x2xf32>, tensor<1x2x8xf32>)
    %s = ds.sum %a#0 dims = [0, 1, 2, 3] : tensor<1x2x8x2xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// Under auto, a causal grouped-query attention takes the ring and a causal attention whose
// heads divide takes Ulysses: Ulysses' exchange needs the blocks in sequence order, so the
// ring keeps them so too (causal, not striped).
// AUTO-LABEL: func.func @forward
// AUTO-NEXT: ds.reshape %arg0 : tensor<1x8x6xf32> -> tensor<1x2x4x6xf32>
// AUTO: ds.ring_attention %{{.+}} scale = 5.000000e-01 causal on @mesh
// AUTO: shard.all_to_all
module {
  func.func @forward(%x: tensor<1x8x6xf32>) -> tensor<f32> {
    %r = ds.reshape %x : tensor<1x8x6xf32> -> tensor<1x8x3x2xf32>
    %t = ds.transpose %r perm = [0, 2, 1, 3] : tensor<1x8x3x2xf32> -> tensor<1x3x8x2xf32>
    %q = ds.slice %t dim = 1[0 : 2] : tensor<1x3x8x2xf32> -> tensor<1x2x8x2xf32>
    %k = ds.slice %t dim = 1[2 : 3] : tensor<1x3x8x2xf32> -> tensor<1x1x8x2xf32>
    %a:2 = ds.attention %q, %k, %k scale = 0.5 causal : (tensor<1x2x8x2xf32>, tensor<1x1x8x2xf32>, tensor<1x1x8x2xf32>) -> (tensor<1x2x8x2xf32>, tensor<1x2x8xf32>)
    %b:2 = ds.attention %a#0, %a#0, %a#0 scale = 0.5 causal : (tensor<1x2x8x2xf32>, tensor<1x2x8x2xf32>, tensor<1x2x8x2xf32>) -> (tensor<1x2x8x2xf32>, tensor<1x2x8xf32>)
    %s = ds.sum %b#0 dims = [0, 1, 2, 3] : tensor<1x2x8x2xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}
