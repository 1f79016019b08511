// RUN: ds-opt %s --ds-tensor-parallel=autotp-size=2 --split-input-file | FileCheck %s
// The split is found in the graph, not by names: the rotary attention with its projections
// renamed splits the same.
// RUN: sed 's/q_proj/alpha/g; s/k_proj/beta/g; s/v_proj/gamma/g; s/o_proj/delta/g' %s | ds-opt --ds-tensor-parallel=autotp-size=2 --split-input-file | FileCheck %s --check-prefix=RENAMED
// RENAMED: ds.parameter @alpha.weight trainable : tensor<4x8xf32> sharding <{{\[}}["tp"], []]>
// RENAMED: ds.parameter @beta.weight trainable : tensor<2x8xf32> sharding <{{\[}}["tp"], []]>
// RENAMED: ds.parameter @gamma.weight trainable : tensor<2x8xf32> sharding <{{\[}}["tp"], []]>
// RENAMED: ds.parameter @delta.weight trainable : tensor<8x4xf32> sharding <{{\[}}[], ["tp"]]>

// An MLP: the first linear column-parallel, the second row-parallel, its bias after the sum.
// CHECK-LABEL: module attributes {ds.mesh = #ds.mesh<axes = ["dp", "tp"], shape = [1, 2]>}
// CHECK: shard.grid @mesh(shape = 1x2)
// CHECK: ds.parameter @fc1.weight trainable : tensor<8x4xf32> sharding <{{\[}}["tp"], []]>
// CHECK: ds.parameter @fc1.bias trainable : tensor<8xf32> sharding <{{\[}}["tp"]]>
// CHECK: ds.parameter @fc2.weight trainable : tensor<4x8xf32> sharding <{{\[}}[], ["tp"]]>
// CHECK: ds.parameter @fc2.bias trainable : tensor<4xf32>{{$}}
// CHECK: func.func @forward(%[[X:.+]]: tensor<2x4xf32>)
// CHECK: %[[C:.+]] = ds.parallel_copy %[[X]] on @mesh grid_axes = [1] : tensor<2x4xf32>
// CHECK: %[[H:.+]] = ds.linear %[[C]], %{{.+}}, %{{.+}} : (tensor<2x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<2x8xf32>
// CHECK: %[[G:.+]] = ds.gelu %[[H]] : tensor<2x8xf32>
// CHECK: %[[B:.+]] = ds.get_parameter @fc2.bias
// CHECK: %[[P:.+]] = ds.linear %[[G]], %{{.+}} : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
// CHECK: %[[S:.+]] = ds.parallel_sum %[[P]] on @mesh grid_axes = [1] : tensor<2x4xf32>
// CHECK: ds.add %[[S]], %[[B]] : tensor<2x4xf32>, tensor<4xf32> -> tensor<2x4xf32>
module {
  ds.parameter @fc1.weight trainable : tensor<16x4xf32>
  ds.parameter @fc1.bias trainable : tensor<16xf32>
  ds.parameter @fc2.weight trainable : tensor<4x16xf32>
  ds.parameter @fc2.bias trainable : tensor<4xf32>
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
    %w1 = ds.get_parameter @fc1.weight : tensor<16x4xf32>
    %b1 = ds.get_parameter @fc1.bias : tensor<16xf32>
    %h = ds.linear %x, %w1, %b1 : (tensor<2x4xf32>, tensor<16x4xf32>, tensor<16xf32>) -> tensor<2x16xf32>
    %g = ds.gelu %h : tensor<2x16xf32>
    %w2 = ds.get_parameter @fc2.weight : tensor<4x16xf32>
    %b2 = ds.get_parameter @fc2.bias : tensor<4xf32>
    %y = ds.linear %g, %w2, %b2 : (tensor<2x16xf32>, tensor<4x16xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %s = ds.sum %y dims = [0, 1] : tensor<2x4xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// GPT's attention: a fused q/k/v projection sliced into three segments; each rank keeps its
// head of every segment (rows 0-3, 8-11 and 16-19 of c_attn on rank 0), the head
// dimension of the reshapes halves, and the causal mask broadcasts over the heads.
// CHECK-LABEL: module
// CHECK: ds.parameter @c_attn.weight trainable : tensor<12x8xf32> sharding <{{\[}}["tp"], []], segments = [3, 1]>
// CHECK: ds.parameter @c_attn.bias trainable : tensor<12xf32> sharding <{{\[}}["tp"]], segments = [3]>
// CHECK: ds.parameter @c_proj.weight trainable : tensor<8x4xf32> sharding <{{\[}}[], ["tp"]]>
// CHECK: ds.parallel_copy
// CHECK: ds.linear {{.*}} -> tensor<2x4x12xf32>
// CHECK: %[[Q:.+]] = ds.slice %{{.+}} dim = 2[0 : 4] : tensor<2x4x12xf32> -> tensor<2x4x4xf32>
// CHECK: %[[K:.+]] = ds.slice %{{.+}} dim = 2[4 : 8] : tensor<2x4x12xf32> -> tensor<2x4x4xf32>
// CHECK: %[[V:.+]] = ds.slice %{{.+}} dim = 2[8 : 12] : tensor<2x4x12xf32> -> tensor<2x4x4xf32>
// CHECK: ds.reshape %[[K]] : tensor<2x4x4xf32> -> tensor<2x4x1x4xf32>
// CHECK: ds.matmul {{.*}} : tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32> -> tensor<2x1x4x4xf32>
// CHECK: ds.where {{.*}} : (tensor<1x1x4x4xi1>, tensor<f32>, tensor<2x1x4x4xf32>) -> tensor<2x1x4x4xf32>
// CHECK: ds.softmax {{.*}} dim = 3 : tensor<2x1x4x4xf32>
// CHECK: ds.reshape {{.*}} : tensor<2x4x1x4xf32> -> tensor<2x4x4xf32>
// CHECK: ds.linear {{.*}} : (tensor<2x4x4xf32>, tensor<8x4xf32>) -> tensor<2x4x8xf32>
// CHECK: ds.parallel_sum
module {
  ds.parameter @mask : tensor<1x1x4x4xf32>
  ds.parameter @c_attn.weight trainable : tensor<24x8xf32>
  ds.parameter @c_attn.bias trainable : tensor<24xf32>
  ds.parameter @c_proj.weight trainable : tensor<8x8xf32>
  ds.parameter @c_proj.bias trainable : tensor<8xf32>
  func.func @forward(%x: tensor<2x4x8xf32>) -> tensor<f32> {
    %w = ds.get_parameter @c_attn.weight : tensor<24x8xf32>
    %b = ds.get_parameter @c_attn.bias : tensor<24xf32>
    %qkv = ds.linear %x, %w, %b : (tensor<2x4x8xf32>, tensor<24x8xf32>, tensor<24xf32>) -> tensor<2x4x24xf32>
    %q0 = ds.slice %qkv dim = 2[0 : 8] : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
    %k0 = ds.slice %qkv dim = 2[8 : 16] : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
    %v0 = ds.slice %qkv dim = 2[16 : 24] : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
    %k1 = ds.reshape %k0 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %k = ds.transpose %k1 perm = [0, 2, 1, 3] : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
    %q1 = ds.reshape %q0 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %q = ds.transpose %q1 perm = [0, 2, 1, 3] : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
    %v1 = ds.reshape %v0 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %v = ds.transpose %v1 perm = [0, 2, 1, 3] : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
    %kt = ds.transpose %k perm = [0, 1, 3, 2] : tensor<2x2x4x4xf32> -> tensor<2x2x4x4xf32>
    %att0 = ds.matmul %q, %kt : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32> -> tensor<2x2x4x4xf32>
    %scale = ds.constant dense<5.000000e-01> : tensor<f32>
    %att1 = ds.mul %att0, %scale : tensor<2x2x4x4xf32>, tensor<f32> -> tensor<2x2x4x4xf32>
    %m = ds.get_parameter @mask : tensor<1x1x4x4xf32>
    %zero = ds.constant dense<0.000000e+00> : tensor<f32>
    %keep = ds.cmp eq, %m, %zero : tensor<1x1x4x4xf32>, tensor<f32> -> tensor<1x1x4x4xi1>
    %ninf = ds.constant dense<0xFF800000> : tensor<f32>
    %att2 = ds.where %keep, %ninf, %att1 : (tensor<1x1x4x4xi1>, tensor<f32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
    %p = ds.softmax %att2 dim = 3 : tensor<2x2x4x4xf32>
    %o = ds.matmul %p, %v : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32> -> tensor<2x2x4x4xf32>
    %o1 = ds.transpose %o perm = [0, 2, 1, 3] : tensor<2x2x4x4xf32> -> tensor<2x4x2x4xf32>
    %o2 = ds.reshape %o1 : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
    %wp = ds.get_parameter @c_proj.weight : tensor<8x8xf32>
    %bp = ds.get_parameter @c_proj.bias : tensor<8xf32>
    %y = ds.linear %o2, %wp, %bp : (tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    %s = ds.sum %y dims = [0, 1, 2] : tensor<2x4x8xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// nn.MultiheadAttention (sequence first): the packed in_proj's heads fold into the batch
// dimension, so each rank's heads are every other row of the (batch x heads) dimension
// (segments of the reshape, not contiguous rows); the output projection reads them back.
// CHECK-LABEL: module
// CHECK: ds.parameter @in_proj_weight trainable : tensor<12x8xf32> sharding <{{\[}}["tp"], []], segments = [3, 1]>
// CHECK: ds.parameter @out_proj.weight trainable : tensor<8x4xf32> sharding <{{\[}}[], ["tp"]]>
// CHECK: ds.reshape {{.*}} : tensor<4x2x4xf32> -> tensor<4x2x4xf32>
// CHECK: ds.matmul {{.*}} : tensor<2x4x4xf32>, tensor<2x4x4xf32> -> tensor<2x4x4xf32>
// CHECK: ds.reshape {{.*}} : tensor<4x2x4xf32> -> tensor<8x4xf32>
// CHECK: ds.linear {{.*}} : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x8xf32>
// CHECK: ds.parallel_sum {{.*}} : tensor<8x8xf32>
module {
  ds.parameter @in_proj_weight trainable : tensor<24x8xf32>
  ds.parameter @out_proj.weight trainable : tensor<8x8xf32>
  func.func @forward(%x: tensor<4x2x8xf32>) -> tensor<f32> {
    %w = ds.get_parameter @in_proj_weight : tensor<24x8xf32>
    %qkv = ds.linear %x, %w : (tensor<4x2x8xf32>, tensor<24x8xf32>) -> tensor<4x2x24xf32>
    %q0 = ds.slice %qkv dim = 2[0 : 8] : tensor<4x2x24xf32> -> tensor<4x2x8xf32>
    %k0 = ds.slice %qkv dim = 2[8 : 16] : tensor<4x2x24xf32> -> tensor<4x2x8xf32>
    %v0 = ds.slice %qkv dim = 2[16 : 24] : tensor<4x2x24xf32> -> tensor<4x2x8xf32>
    %q1 = ds.reshape %q0 : tensor<4x2x8xf32> -> tensor<4x4x4xf32>
    %q = ds.transpose %q1 perm = [1, 0, 2] : tensor<4x4x4xf32> -> tensor<4x4x4xf32>
    %k1 = ds.reshape %k0 : tensor<4x2x8xf32> -> tensor<4x4x4xf32>
    %k = ds.transpose %k1 perm = [1, 2, 0] : tensor<4x4x4xf32> -> tensor<4x4x4xf32>
    %v1 = ds.reshape %v0 : tensor<4x2x8xf32> -> tensor<4x4x4xf32>
    %v = ds.transpose %v1 perm = [1, 0, 2] : tensor<4x4x4xf32> -> tensor<4x4x4xf32>
    %a = ds.matmul %q, %k : tensor<4x4x4xf32>, tensor<4x4x4xf32> -> tensor<4x4x4xf32>
    %p = ds.softmax %a dim = 2 : tensor<4x4x4xf32>
    %o = ds.matmul %p, %v : tensor<4x4x4xf32>, tensor<4x4x4xf32> -> tensor<4x4x4xf32>
    %o1 = ds.transpose %o perm = [1, 0, 2] : tensor<4x4x4xf32> -> tensor<4x4x4xf32>
    %o2 = ds.reshape %o1 : tensor<4x4x4xf32> -> tensor<8x8xf32>
    %wo = ds.get_parameter @out_proj.weight : tensor<8x8xf32>
    %y = ds.linear %o2, %wo : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    %s = ds.sum %y dims = [0, 1] : tensor<8x8xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// Tied weights (an embedding shared with the LM head) stay whole, and so does the linear
// they would feed.
// CHECK-LABEL: module
// CHECK-NOT: sharding
// CHECK-NOT: parallel_
module {
  ds.parameter @wte trainable : tensor<8x4xf32> aliases ["lm_head.weight"]
  ds.parameter @fc2.weight trainable : tensor<4x8xf32>
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
    %w1 = ds.get_parameter @wte : tensor<8x4xf32>
    %h = ds.linear %x, %w1 : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
    %w2 = ds.get_parameter @fc2.weight : tensor<4x8xf32>
    %y = ds.linear %h, %w2 : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
    %s = ds.sum %y dims = [0, 1] : tensor<2x4xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// A vocabulary tied to the LM head: each rank holds half of its rows. The lookup keeps the
// indices in this rank's rows (zero for the others) and sums over tp; the head computes its
// half of the logits; the cross-entropy combines the halves' maxima (no gradient), sums of
// exponentials and target logits. Its inner steps are one fused f32 computation.
// CHECK-LABEL: module
// CHECK: ds.parameter @wte trainable : tensor<4x4xf32> aliases ["lm_head.weight"] sharding <{{\[}}["tp"], []]>
// CHECK: func.func @forward(%[[IDX:.+]]: tensor<2x3xi64>, %[[T:.+]]: tensor<6xi64>)
// CHECK: %[[R:.+]] = ds.mesh_coordinate on @mesh grid_axis = 1 : tensor<i64>
// CHECK: %[[FIRST:.+]] = ds.mul %[[R]], %{{.+}} : tensor<i64>, tensor<i64> -> tensor<i64>
// CHECK: %[[LOCAL:.+]] = ds.sub %[[IDX]], %[[FIRST]]
// CHECK: %[[E:.+]] = ds.embedding %{{.+}}[%{{.+}}] : (tensor<4x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
// CHECK: %[[KEPT:.+]] = ds.where %{{.+}}, %[[E]], %{{.+}} : (tensor<2x3x1xi1>, tensor<2x3x4xf32>, tensor<f32>) -> tensor<2x3x4xf32>
// CHECK: %[[EMB:.+]] = ds.parallel_sum %[[KEPT]] on @mesh grid_axes = [1] : tensor<2x3x4xf32>
// CHECK: %[[IN:.+]] = ds.parallel_copy %[[EMB]] on @mesh grid_axes = [1] : tensor<2x3x4xf32>
// CHECK: ds.linear %[[IN]], %{{.+}} : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
// CHECK: %[[LOGITS:.+]] = ds.reshape %{{.+}} : tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK: %[[M:.+]] = ds.amax %[[LOGITS]] dims = [1] {ds.fused}
// CHECK: ds.parallel_max %[[M]] on @mesh grid_axes = [1] {ds.fused} : tensor<6xf32>
// CHECK: ds.parallel_sum %{{.+}} on @mesh grid_axes = [1] {ds.fused} : tensor<6xf32>
// CHECK: ds.cmp eq, %{{.+}}, %{{.+}} : tensor<1x4xi64>, tensor<6x1xi64> -> tensor<6x4xi1>
// CHECK: ds.parallel_sum %{{.+}} on @mesh grid_axes = [1] {ds.fused} : tensor<6xf32>
// CHECK: %[[IGNORE:.+]] = ds.constant dense<-100> : tensor<i64>
// CHECK: ds.cmp ne, %{{.+}}, %[[IGNORE]]
// CHECK: ds.div
// CHECK-NOT: ds.cross_entropy
module {
  ds.parameter @wte trainable : tensor<8x4xf32> aliases ["lm_head.weight"]
  func.func @forward(%idx: tensor<2x3xi64>, %t: tensor<6xi64>) -> tensor<f32> {
    %w = ds.get_parameter @wte : tensor<8x4xf32>
    %e = ds.embedding %w[%idx] : (tensor<8x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
    %l = ds.linear %e, %w : (tensor<2x3x4xf32>, tensor<8x4xf32>) -> tensor<2x3x8xf32>
    %l2 = ds.reshape %l : tensor<2x3x8xf32> -> tensor<6x8xf32>
    %loss = ds.cross_entropy %l2, %t : (tensor<6x8xf32>, tensor<6xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// Llama's attention with rotary embeddings and grouped-query heads (4 query heads, 2 key/value
// heads): rotate_half's slices and concat act within each head, repeat_kv's broadcast adds a
// dimension beside the heads, so each rank takes 2 query heads and the key/value head they
// share; cos and sin broadcast over the heads.
// CHECK-LABEL: module
// CHECK: ds.parameter @q_proj.weight trainable : tensor<4x8xf32> sharding <{{\[}}["tp"], []]>
// CHECK: ds.parameter @k_proj.weight trainable : tensor<2x8xf32> sharding <{{\[}}["tp"], []]>
// CHECK: ds.parameter @v_proj.weight trainable : tensor<2x8xf32> sharding <{{\[}}["tp"], []]>
// CHECK: ds.parameter @o_proj.weight trainable : tensor<8x4xf32> sharding <{{\[}}[], ["tp"]]>
// CHECK: ds.concat {{.*}} dim = 3 : (tensor<1x2x4x1xf32>, tensor<1x2x4x1xf32>) -> tensor<1x2x4x2xf32>
// CHECK: ds.concat {{.*}} dim = 3 : (tensor<1x1x4x1xf32>, tensor<1x1x4x1xf32>) -> tensor<1x1x4x2xf32>
// CHECK: ds.broadcast_to {{.*}} : tensor<1x1x1x4x2xf32> -> tensor<1x1x2x4x2xf32>
// CHECK: ds.reshape {{.*}} : tensor<1x1x2x4x2xf32> -> tensor<1x2x4x2xf32>
// CHECK: ds.matmul {{.*}} : tensor<1x2x4x2xf32>, tensor<1x2x2x4xf32> -> tensor<1x2x4x4xf32>
// CHECK: ds.linear {{.*}} : (tensor<1x4x4xf32>, tensor<8x4xf32>) -> tensor<1x4x8xf32>
// CHECK: ds.parallel_sum
module {
  ds.parameter @cos : tensor<1x1x4x2xf32>
  ds.parameter @sin : tensor<1x1x4x2xf32>
  ds.parameter @q_proj.weight trainable : tensor<8x8xf32>
  ds.parameter @k_proj.weight trainable : tensor<4x8xf32>
  ds.parameter @v_proj.weight trainable : tensor<4x8xf32>
  ds.parameter @o_proj.weight trainable : tensor<8x8xf32>
  func.func @forward(%x: tensor<1x4x8xf32>) -> tensor<f32> {
    %cos = ds.get_parameter @cos : tensor<1x1x4x2xf32>
    %sin = ds.get_parameter @sin : tensor<1x1x4x2xf32>
    %wq = ds.get_parameter @q_proj.weight : tensor<8x8xf32>
    %q0 = ds.linear %x, %wq : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
    %q1 = ds.reshape %q0 : tensor<1x4x8xf32> -> tensor<1x4x4x2xf32>
    %q = ds.transpose %q1 perm = [0, 2, 1, 3] : tensor<1x4x4x2xf32> -> tensor<1x4x4x2xf32>
    %wk = ds.get_parameter @k_proj.weight : tensor<4x8xf32>
    %k0 = ds.linear %x, %wk : (tensor<1x4x8xf32>, tensor<4x8xf32>) -> tensor<1x4x4xf32>
    %k1 = ds.reshape %k0 : tensor<1x4x4xf32> -> tensor<1x4x2x2xf32>
    %k = ds.transpose %k1 perm = [0, 2, 1, 3] : tensor<1x4x2x2xf32> -> tensor<1x2x4x2xf32>
    %wv = ds.get_parameter @v_proj.weight : tensor<4x8xf32>
    %v0 = ds.linear %x, %wv : (tensor<1x4x8xf32>, tensor<4x8xf32>) -> tensor<1x4x4xf32>
    %v1 = ds.reshape %v0 : tensor<1x4x4xf32> -> tensor<1x4x2x2xf32>
    %v = ds.transpose %v1 perm = [0, 2, 1, 3] : tensor<1x4x2x2xf32> -> tensor<1x2x4x2xf32>
    %qc = ds.mul %q, %cos : tensor<1x4x4x2xf32>, tensor<1x1x4x2xf32> -> tensor<1x4x4x2xf32>
    %qa = ds.slice %q dim = 3[0 : 1] : tensor<1x4x4x2xf32> -> tensor<1x4x4x1xf32>
    %qb = ds.slice %q dim = 3[1 : 2] : tensor<1x4x4x2xf32> -> tensor<1x4x4x1xf32>
    %qn = ds.neg %qb : tensor<1x4x4x1xf32>
    %qr = ds.concat %qn, %qa dim = 3 : (tensor<1x4x4x1xf32>, tensor<1x4x4x1xf32>) -> tensor<1x4x4x2xf32>
    %qs = ds.mul %qr, %sin : tensor<1x4x4x2xf32>, tensor<1x1x4x2xf32> -> tensor<1x4x4x2xf32>
    %qe = ds.add %qc, %qs : tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32> -> tensor<1x4x4x2xf32>
    %kc = ds.mul %k, %cos : tensor<1x2x4x2xf32>, tensor<1x1x4x2xf32> -> tensor<1x2x4x2xf32>
    %ka = ds.slice %k dim = 3[0 : 1] : tensor<1x2x4x2xf32> -> tensor<1x2x4x1xf32>
    %kb = ds.slice %k dim = 3[1 : 2] : tensor<1x2x4x2xf32> -> tensor<1x2x4x1xf32>
    %kn = ds.neg %kb : tensor<1x2x4x1xf32>
    %kr = ds.concat %kn, %ka dim = 3 : (tensor<1x2x4x1xf32>, tensor<1x2x4x1xf32>) -> tensor<1x2x4x2xf32>
    %ks = ds.mul %kr, %sin : tensor<1x2x4x2xf32>, tensor<1x1x4x2xf32> -> tensor<1x2x4x2xf32>
    %ke = ds.add %kc, %ks : tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32> -> tensor<1x2x4x2xf32>
    %k5 = ds.reshape %ke : tensor<1x2x4x2xf32> -> tensor<1x2x1x4x2xf32>
    %kx = ds.broadcast_to %k5 : tensor<1x2x1x4x2xf32> -> tensor<1x2x2x4x2xf32>
    %kg = ds.reshape %kx : tensor<1x2x2x4x2xf32> -> tensor<1x4x4x2xf32>
    %v5 = ds.reshape %v : tensor<1x2x4x2xf32> -> tensor<1x2x1x4x2xf32>
    %vx = ds.broadcast_to %v5 : tensor<1x2x1x4x2xf32> -> tensor<1x2x2x4x2xf32>
    %vg = ds.reshape %vx : tensor<1x2x2x4x2xf32> -> tensor<1x4x4x2xf32>
    %kt = ds.transpose %kg perm = [0, 1, 3, 2] : tensor<1x4x4x2xf32> -> tensor<1x4x2x4xf32>
    %a = ds.matmul %qe, %kt : tensor<1x4x4x2xf32>, tensor<1x4x2x4xf32> -> tensor<1x4x4x4xf32>
    %p = ds.softmax %a dim = 3 : tensor<1x4x4x4xf32>
    %o = ds.matmul %p, %vg : tensor<1x4x4x4xf32>, tensor<1x4x4x2xf32> -> tensor<1x4x4x2xf32>
    %o1 = ds.transpose %o perm = [0, 2, 1, 3] : tensor<1x4x4x2xf32> -> tensor<1x4x4x2xf32>
    %o2 = ds.reshape %o1 : tensor<1x4x4x2xf32> -> tensor<1x4x8xf32>
    %wo = ds.get_parameter @o_proj.weight : tensor<8x8xf32>
    %y = ds.linear %o2, %wo : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
    %s = ds.sum %y dims = [0, 1, 2] : tensor<1x4x8xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// A vocabulary with a padding_idx (Phi3's, OPT's, BERT's): the row is global, held by one rank,
// so the local lookup has none; the padding tokens' lookups pass no gradient on any rank.
// CHECK-LABEL: module
// CHECK: ds.parameter @embed.weight trainable : tensor<4x4xf32> sharding <{{\[}}["tp"], []]>
// CHECK: %[[E:.+]] = ds.embedding %{{.+}}[%{{.+}}] : (tensor<4x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
// CHECK: %[[KEPT:.+]] = ds.where %{{.+}}, %[[E]], %{{.+}} : (tensor<2x3x1xi1>, tensor<2x3x4xf32>, tensor<f32>) -> tensor<2x3x4xf32>
// CHECK: %[[PAD:.+]] = ds.constant dense<5> : tensor<i64>
// CHECK: ds.cmp eq, %{{.+}}, %[[PAD]] : tensor<2x3xi64>, tensor<i64> -> tensor<2x3xi1>
// CHECK: %[[STOP:.+]] = ds.stop_gradient %[[KEPT]] : tensor<2x3x4xf32>
// CHECK: %[[SEL:.+]] = ds.where %{{.+}}, %[[STOP]], %[[KEPT]]
// CHECK: ds.parallel_sum %[[SEL]]
module {
  ds.parameter @embed.weight trainable : tensor<8x4xf32>
  func.func @forward(%idx: tensor<2x3xi64>) -> tensor<f32> {
    %w = ds.get_parameter @embed.weight : tensor<8x4xf32>
    %e = ds.embedding %w[%idx] {padding_idx = 5 : i64} : (tensor<8x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
    %s = ds.sum %e dims = [0, 1, 2] : tensor<2x3x4xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// Phi3's fused qkv_proj with grouped-query heads (4 query heads of 2, 2 key/value heads): its
// slices tile the output in unequal segments (8, 4, 4), so the weight splits in those
// segments (each rank: 2 query heads' rows, then its key head's and value head's) and each
// slice takes this rank's part of its segment.
// CHECK-LABEL: module
// CHECK: ds.parameter @qkv_proj.weight trainable : tensor<8x8xf32> sharding <{{\[}}["tp"], []], segments = [3, 1], sizes = [8, 4, 4]>
// CHECK: ds.parameter @o_proj.weight trainable : tensor<8x4xf32> sharding <{{\[}}[], ["tp"]]>
// CHECK: ds.linear {{.*}} -> tensor<1x4x8xf32>
// CHECK: ds.slice %{{.+}} dim = 2[0 : 4] : tensor<1x4x8xf32> -> tensor<1x4x4xf32>
// CHECK: ds.slice %{{.+}} dim = 2[4 : 6] : tensor<1x4x8xf32> -> tensor<1x4x2xf32>
// CHECK: ds.slice %{{.+}} dim = 2[6 : 8] : tensor<1x4x8xf32> -> tensor<1x4x2xf32>
// CHECK: ds.parallel_sum
module {
  ds.parameter @qkv_proj.weight trainable : tensor<16x8xf32>
  ds.parameter @o_proj.weight trainable : tensor<8x8xf32>
  func.func @forward(%x: tensor<1x4x8xf32>) -> tensor<f32> {
    %w = ds.get_parameter @qkv_proj.weight : tensor<16x8xf32>
    %qkv = ds.linear %x, %w : (tensor<1x4x8xf32>, tensor<16x8xf32>) -> tensor<1x4x16xf32>
    %q0 = ds.slice %qkv dim = 2[0 : 8] : tensor<1x4x16xf32> -> tensor<1x4x8xf32>
    %k0 = ds.slice %qkv dim = 2[8 : 12] : tensor<1x4x16xf32> -> tensor<1x4x4xf32>
    %v0 = ds.slice %qkv dim = 2[12 : 16] : tensor<1x4x16xf32> -> tensor<1x4x4xf32>
    %q1 = ds.reshape %q0 : tensor<1x4x8xf32> -> tensor<1x4x4x2xf32>
    %q = ds.transpose %q1 perm = [0, 2, 1, 3] : tensor<1x4x4x2xf32> -> tensor<1x4x4x2xf32>
    %k1 = ds.reshape %k0 : tensor<1x4x4xf32> -> tensor<1x4x2x2xf32>
    %k = ds.transpose %k1 perm = [0, 2, 1, 3] : tensor<1x4x2x2xf32> -> tensor<1x2x4x2xf32>
    %v1 = ds.reshape %v0 : tensor<1x4x4xf32> -> tensor<1x4x2x2xf32>
    %v = ds.transpose %v1 perm = [0, 2, 1, 3] : tensor<1x4x2x2xf32> -> tensor<1x2x4x2xf32>
    %k5 = ds.reshape %k : tensor<1x2x4x2xf32> -> tensor<1x2x1x4x2xf32>
    %kx = ds.broadcast_to %k5 : tensor<1x2x1x4x2xf32> -> tensor<1x2x2x4x2xf32>
    %kg = ds.reshape %kx : tensor<1x2x2x4x2xf32> -> tensor<1x4x4x2xf32>
    %v5 = ds.reshape %v : tensor<1x2x4x2xf32> -> tensor<1x2x1x4x2xf32>
    %vx = ds.broadcast_to %v5 : tensor<1x2x1x4x2xf32> -> tensor<1x2x2x4x2xf32>
    %vg = ds.reshape %vx : tensor<1x2x2x4x2xf32> -> tensor<1x4x4x2xf32>
    %kt = ds.transpose %kg perm = [0, 1, 3, 2] : tensor<1x4x4x2xf32> -> tensor<1x4x2x4xf32>
    %a = ds.matmul %q, %kt : tensor<1x4x4x2xf32>, tensor<1x4x2x4xf32> -> tensor<1x4x4x4xf32>
    %p = ds.softmax %a dim = 3 : tensor<1x4x4x4xf32>
    %o = ds.matmul %p, %vg : tensor<1x4x4x4xf32>, tensor<1x4x4x2xf32> -> tensor<1x4x4x2xf32>
    %o1 = ds.transpose %o perm = [0, 2, 1, 3] : tensor<1x4x4x2xf32> -> tensor<1x4x4x2xf32>
    %o2 = ds.reshape %o1 : tensor<1x4x4x2xf32> -> tensor<1x4x8xf32>
    %wo = ds.get_parameter @o_proj.weight : tensor<8x8xf32>
    %y = ds.linear %o2, %wo : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
    %s = ds.sum %y dims = [0, 1, 2] : tensor<1x4x8xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// Gemma2's LM head: its logits soft-capped (divided, tanh, multiplied back) before the loss,
// each logit alone, so the vocabulary splits and those ops compute on this rank's logits.
// CHECK-LABEL: module
// CHECK: ds.parameter @embed.weight trainable : tensor<4x4xf32> aliases ["lm_head.weight"] sharding <{{\[}}["tp"], []]>
// CHECK: ds.linear {{.*}} : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
// CHECK: ds.div {{.*}} : tensor<6x4xf32>, tensor<f32> -> tensor<6x4xf32>
// CHECK: ds.tanh {{.*}} : tensor<6x4xf32>
// CHECK: ds.mul {{.*}} : tensor<6x4xf32>, tensor<f32> -> tensor<6x4xf32>
// CHECK: ds.parallel_max
// CHECK-NOT: ds.cross_entropy
module {
  ds.parameter @embed.weight trainable : tensor<8x4xf32> aliases ["lm_head.weight"]
  func.func @forward(%idx: tensor<6xi64>, %t: tensor<6xi64>) -> tensor<f32> {
    %w = ds.get_parameter @embed.weight : tensor<8x4xf32>
    %e = ds.embedding %w[%idx] : (tensor<8x4xf32>, tensor<6xi64>) -> tensor<6x4xf32>
    %l = ds.linear %e, %w : (tensor<6x4xf32>, tensor<8x4xf32>) -> tensor<6x8xf32>
    %cap = ds.constant dense<3.000000e+01> : tensor<f32>
    %d = ds.div %l, %cap : tensor<6x8xf32>, tensor<f32> -> tensor<6x8xf32>
    %th = ds.tanh %d : tensor<6x8xf32>
    %c = ds.mul %th, %cap : tensor<6x8xf32>, tensor<f32> -> tensor<6x8xf32>
    %loss = ds.cross_entropy %c, %t : (tensor<6x8xf32>, tensor<6xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
