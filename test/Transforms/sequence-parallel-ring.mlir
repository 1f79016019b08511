// RUN: ds-opt %s --split-input-file --ds-sequence-parallel="sequence-parallel-size=2 mode=ring" --verify-diagnostics | FileCheck %s --check-prefix=RING
// RUN: ds-opt %s --split-input-file --ds-sequence-parallel="sequence-parallel-size=2" --verify-diagnostics | FileCheck %s --check-prefix=AUTO

// Grouped-query attention over [1, 8] positions at sp 2: 2 query heads over 1 key/value
// head, which sp does not divide. Ring mode keeps the sequence blocks (4 positions) and
// makes the attention a ds.ring_attention on them (workspace: two blocks of keys and
// values, a partial result and three log-sum-exp rows: 2 * (8 + 8) + 16 + 3 * 8 = 72); auto
// takes the ring too, as Ulysses cannot split one key/value head.
// RING-LABEL: func.func @forward
// RING-NOT: shard.all_to_all
// RING: ds.ring_attention %{{.+}}, %{{.+}}, %{{.+}} scale = 5.000000e-01 causal on @mesh grid_axes = [1] : (tensor<1x2x4x2xf32>, tensor<1x1x4x2xf32>, tensor<1x1x4x2xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4xf32>, tensor<72xf32>)
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
