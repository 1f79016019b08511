// RUN: ds-opt %s --ds-tile-sequence=loss-tiles=4 --split-input-file --verify-diagnostics | FileCheck %s

// The LM head's logits only feed the loss (through a reshape to rows): one tiled op over 4
// tiles of 3 rows (a workspace of 3 x 64 + 1), the mean the sum over the count of targets
// that are not ignore_index.
// CHECK-LABEL: func.func @forward
// CHECK: %[[X:.+]] = ds.reshape %arg0 : tensor<2x6x8xf32> -> tensor<12x8xf32>
// CHECK: %[[L:.+]], %{{.+}} = ds.linear_cross_entropy %[[X]], %{{.+}} target %arg1 tiles = 4 {ignore_index = 7 : i64} : (tensor<12x8xf32>, tensor<64x8xf32>, tensor<12xi64>) -> (tensor<f32>, tensor<193xf32>)
// CHECK: %[[V:.+]] = ds.cmp  ne, %arg1, %{{.+}} : tensor<12xi64>, tensor<i64> -> tensor<12xi1>
// CHECK: %[[N:.+]] = ds.sum %{{.+}} dims = [0]
// CHECK: %[[M:.+]] = ds.div %[[L]], %[[N]]
// CHECK: return %[[M]]
module {
  ds.parameter @head trainable : tensor<64x8xf32>
  func.func @forward(%x: tensor<2x6x8xf32>, %t: tensor<12xi64>) -> tensor<f32> {
    %w = ds.get_parameter @head : tensor<64x8xf32>
    %l = ds.linear %x, %w : (tensor<2x6x8xf32>, tensor<64x8xf32>) -> tensor<2x6x64xf32>
    %r = ds.reshape %l : tensor<2x6x64xf32> -> tensor<12x64xf32>
    %loss = ds.cross_entropy %r, %t {ignore_index = 7 : i64} : (tensor<12x64xf32>, tensor<12xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// Logits used elsewhere too stay whole: nothing to tile is an error that names the key.
module {
  ds.parameter @head trainable : tensor<64x8xf32>
  // expected-error @+1 {{ds-tile-sequence: sequence_tiling.loss_tiles is 4 but no f32 cross-entropy reads a linear layer's logits alone}}
  func.func @forward(%x: tensor<12x8xf32>, %t: tensor<12xi64>) -> (tensor<f32>, tensor<12x64xf32>) {
    %w = ds.get_parameter @head : tensor<64x8xf32>
    %l = ds.linear %x, %w : (tensor<12x8xf32>, tensor<64x8xf32>) -> tensor<12x64xf32>
    %loss = ds.cross_entropy %l, %t : (tensor<12x64xf32>, tensor<12xi64>) -> tensor<f32>
    return %loss, %l : tensor<f32>, tensor<12x64xf32>
  }
}
