// RUN: ds-opt %s --ds-sequence-parallel=sequence-parallel-size=2 | FileCheck %s

// Ulysses on a one-head-pair attention LM: the inputs are sliced to this rank's half of the
// sequence inside the program (a view of a leading sp factor), the position table is looked up
// at the rank's positions, q, k and v exchange their sequence halves for half of the heads
// (an all-to-all between a reshape and transposes), the attention runs on whole sequences,
// its output gets the sequence halves back, and the cross-entropy sums the rank's tokens and
// completes sum and count over sp.
// CHECK-LABEL: module attributes {ds.mesh = #ds.mesh<axes = ["dp", "sp"], shape = [1, 2]>}
// CHECK: func.func @forward(%[[IDX:.+]]: tensor<2x4xi64>, %[[T:.+]]: tensor<2x4xi64>)
// CHECK: %[[R:.+]] = ds.reshape %[[IDX]] : tensor<2x4xi64> -> tensor<2x2x2xi64>
// CHECK: %[[P:.+]] = ds.transpose %[[R]] perm = [1, 0, 2] : tensor<2x2x2xi64> -> tensor<2x2x2xi64>
// CHECK: %[[S:.+]] = shard.all_slice %[[P]] on @mesh grid_axes = [1] slice_axis = 0 : tensor<2x2x2xi64> -> tensor<1x2x2xi64>
// CHECK: %[[LIDX:.+]] = ds.reshape %[[S]] : tensor<1x2x2xi64> -> tensor<2x2xi64>
// CHECK: ds.embedding %{{.+}}[%[[LIDX]]] : (tensor<8x4xf32>, tensor<2x2xi64>) -> tensor<2x2x4xf32>
// The positions: the rank's half of the index constant.
// CHECK: shard.all_slice %{{.+}} on @mesh grid_axes = [1] slice_axis = 0 : tensor<2x2xi64> -> tensor<1x2xi64>
// CHECK: ds.embedding %{{.+}} : (tensor<4x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
// q and k before the scores, v before the product with them.
// CHECK-COUNT-2: shard.all_to_all %{{.+}} on @mesh grid_axes = [1] split_axis = 0 concat_axis = 0 : tensor<2x2x1x2x2xf32>
// CHECK: ds.matmul %{{.+}}, %{{.+}} : tensor<2x1x4x2xf32>, tensor<2x1x2x4xf32> -> tensor<2x1x4x4xf32>
// CHECK: ds.softmax %{{.+}} dim = 3 : tensor<2x1x4x4xf32>
// CHECK: shard.all_to_all
// CHECK: ds.matmul %{{.+}}, %{{.+}} : tensor<2x1x4x4xf32>, tensor<2x1x4x2xf32> -> tensor<2x1x4x2xf32>
// CHECK: shard.all_to_all
// CHECK: ds.linear %{{.+}}, %{{.+}} : (tensor<2x2x4xf32>, tensor<8x4xf32>) -> tensor<2x2x8xf32>
// CHECK: %[[CE:.+]] = ds.cross_entropy %{{.+}}, %{{.+}} {ds.fused, reduction = #ds<reduction sum>} : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<f32>
// CHECK: %[[SUM:.+]] = ds.parallel_sum %[[CE]] on @mesh grid_axes = [1] {ds.fused} : tensor<f32>
// The count leaves out ignore_index (-100) targets.
// CHECK: %[[IGNORE:.+]] = ds.constant dense<-100> : tensor<i64>
// CHECK: ds.cmp ne, %{{.+}}, %[[IGNORE]] : tensor<4xi64>, tensor<i64> -> tensor<4xi1>
// CHECK: %[[N:.+]] = ds.parallel_sum %{{.+}} on @mesh grid_axes = [1] {ds.fused} : tensor<f32>
// CHECK: %[[L:.+]] = ds.div %[[SUM]], %[[N]]
// CHECK: return %[[L]]
module {
  ds.parameter @wte trainable : tensor<8x4xf32>
  ds.parameter @wpe trainable : tensor<4x4xf32>
  ds.parameter @q trainable : tensor<4x4xf32>
  ds.parameter @k trainable : tensor<4x4xf32>
  ds.parameter @v trainable : tensor<4x4xf32>
  ds.parameter @head trainable : tensor<8x4xf32>
  func.func @forward(%idx: tensor<2x4xi64>, %t: tensor<2x4xi64>) -> tensor<f32> {
    %pos = ds.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
    %wte = ds.get_parameter @wte : tensor<8x4xf32>
    %tok = ds.embedding %wte[%idx] : (tensor<8x4xf32>, tensor<2x4xi64>) -> tensor<2x4x4xf32>
    %wpe = ds.get_parameter @wpe : tensor<4x4xf32>
    %pe = ds.embedding %wpe[%pos] : (tensor<4x4xf32>, tensor<4xi64>) -> tensor<4x4xf32>
    %x = ds.add %tok, %pe : tensor<2x4x4xf32>, tensor<4x4xf32> -> tensor<2x4x4xf32>
    %wq = ds.get_parameter @q : tensor<4x4xf32>
    %wk = ds.get_parameter @k : tensor<4x4xf32>
    %wv = ds.get_parameter @v : tensor<4x4xf32>
    %q0 = ds.linear %x, %wq : (tensor<2x4x4xf32>, tensor<4x4xf32>) -> tensor<2x4x4xf32>
    %k0 = ds.linear %x, %wk : (tensor<2x4x4xf32>, tensor<4x4xf32>) -> tensor<2x4x4xf32>
    %v0 = ds.linear %x, %wv : (tensor<2x4x4xf32>, tensor<4x4xf32>) -> tensor<2x4x4xf32>
    %q1 = ds.reshape %q0 : tensor<2x4x4xf32> -> tensor<2x4x2x2xf32>
    %q = ds.transpose %q1 perm = [0, 2, 1, 3] : tensor<2x4x2x2xf32> -> tensor<2x2x4x2xf32>
    %k1 = ds.reshape %k0 : tensor<2x4x4xf32> -> tensor<2x4x2x2xf32>
    %k = ds.transpose %k1 perm = [0, 2, 3, 1] : tensor<2x4x2x2xf32> -> tensor<2x2x2x4xf32>
    %v1 = ds.reshape %v0 : tensor<2x4x4xf32> -> tensor<2x4x2x2xf32>
    %v = ds.transpose %v1 perm = [0, 2, 1, 3] : tensor<2x4x2x2xf32> -> tensor<2x2x4x2xf32>
    %a = ds.matmul %q, %k : tensor<2x2x4x2xf32>, tensor<2x2x2x4xf32> -> tensor<2x2x4x4xf32>
    %p = ds.softmax %a dim = 3 : tensor<2x2x4x4xf32>
    %o = ds.matmul %p, %v : tensor<2x2x4x4xf32>, tensor<2x2x4x2xf32> -> tensor<2x2x4x2xf32>
    %o1 = ds.transpose %o perm = [0, 2, 1, 3] : tensor<2x2x4x2xf32> -> tensor<2x4x2x2xf32>
    %o2 = ds.reshape %o1 : tensor<2x4x2x2xf32> -> tensor<2x4x4xf32>
    %wh = ds.get_parameter @head : tensor<8x4xf32>
    %logits = ds.linear %o2, %wh : (tensor<2x4x4xf32>, tensor<8x4xf32>) -> tensor<2x4x8xf32>
    %l2 = ds.reshape %logits : tensor<2x4x8xf32> -> tensor<8x8xf32>
    %t2 = ds.reshape %t : tensor<2x4xi64> -> tensor<8xi64>
    %loss = ds.cross_entropy %l2, %t2 : (tensor<8x8xf32>, tensor<8xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
