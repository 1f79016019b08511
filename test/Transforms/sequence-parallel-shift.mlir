// RUN: ds-opt %s --ds-sequence-parallel=sequence-parallel-size=2 | FileCheck %s

// HF's causal-LM loss shifts the labels inside the model: pad with -100 along the sequence,
// drop the first position. Rank r's shifted block needs the first label of rank r + 1's
// block, so the shift runs on the whole labels (an input: every rank holds it), and the
// rank's block is sliced from the shifted labels, not from the input.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[IDS:[^:]+]]: tensor<2x8xi64>, %[[LABELS:[^:]+]]: tensor<2x8xi64>)
// CHECK: %[[PAD:.+]] = ds.constant dense<-100> : tensor<2x1xi64>
// CHECK-NEXT: %[[CAT:.+]] = ds.concat %[[LABELS]], %[[PAD]] dim = 1 : (tensor<2x8xi64>, tensor<2x1xi64>) -> tensor<2x9xi64>
// CHECK-NEXT: %[[SHIFT:.+]] = ds.slice %[[CAT]] dim = 1[1 : 9] : tensor<2x9xi64> -> tensor<2x8xi64>
// CHECK-NEXT: %[[R:.+]] = ds.reshape %[[SHIFT]] : tensor<2x8xi64> -> tensor<2x2x4xi64>
// CHECK-NEXT: %[[T:.+]] = ds.transpose %[[R]] perm = [1, 0, 2]
// CHECK-NEXT: %[[MINE:.+]] = shard.all_slice %[[T]] on @mesh grid_axes = [1] slice_axis = 0
// CHECK-NEXT: %[[BLOCK:.+]] = ds.reshape %[[MINE]] : tensor<1x2x4xi64> -> tensor<2x4xi64>
// CHECK: ds.reshape %[[BLOCK]] : tensor<2x4xi64> -> tensor<8xi64>
// CHECK: ds.cross_entropy {{.+}} : (tensor<8x5xf32>, tensor<8xi64>)
module {
  ds.parameter @wte trainable : tensor<5x4xf32>
  ds.parameter @head trainable : tensor<5x4xf32>
  func.func @forward(%idx: tensor<2x8xi64>, %labels: tensor<2x8xi64>) -> tensor<f32> {
    %wte = ds.get_parameter @wte : tensor<5x4xf32>
    %x = ds.embedding %wte[%idx] : (tensor<5x4xf32>, tensor<2x8xi64>) -> tensor<2x8x4xf32>
    %wh = ds.get_parameter @head : tensor<5x4xf32>
    %logits = ds.linear %x, %wh : (tensor<2x8x4xf32>, tensor<5x4xf32>) -> tensor<2x8x5xf32>
    %pad = ds.constant dense<-100> : tensor<2x1xi64>
    %cat = ds.concat %labels, %pad dim = 1 : (tensor<2x8xi64>, tensor<2x1xi64>) -> tensor<2x9xi64>
    %shift = ds.slice %cat dim = 1[1 : 9] : tensor<2x9xi64> -> tensor<2x8xi64>
    %l2 = ds.reshape %logits : tensor<2x8x5xf32> -> tensor<16x5xf32>
    %t2 = ds.reshape %shift : tensor<2x8xi64> -> tensor<16xi64>
    %loss = ds.cross_entropy %l2, %t2 : (tensor<16x5xf32>, tensor<16xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
