// RUN: ds-opt %s --ds-tile-sequence=loss-tiles=0 --split-input-file | FileCheck %s

// "auto": 4096 rows of 8192 f32 logits are 128 MiB, two tiles of at most 64 MiB.
// CHECK-LABEL: func.func @forward(%arg0: tensor<4096x8xf32>
// CHECK: ds.linear_cross_entropy %arg0, %{{.+}} target %arg1 tiles = 2 : (tensor<4096x8xf32>, tensor<8192x8xf32>, tensor<4096xi64>) -> (tensor<f32>, tensor<16777217xf32>)
module {
  ds.parameter @head trainable : tensor<8192x8xf32>
  func.func @forward(%x: tensor<4096x8xf32>, %t: tensor<4096xi64>) -> tensor<f32> {
    %w = ds.get_parameter @head : tensor<8192x8xf32>
    %l = ds.linear %x, %w : (tensor<4096x8xf32>, tensor<8192x8xf32>) -> tensor<4096x8192xf32>
    %loss = ds.cross_entropy %l, %t : (tensor<4096x8192xf32>, tensor<4096xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// Logits that fit one tile stay whole, without an error.
// CHECK-LABEL: func.func @forward(%arg0: tensor<12x8xf32>
// CHECK-NOT: ds.linear_cross_entropy
// CHECK: ds.cross_entropy
module {
  ds.parameter @head trainable : tensor<64x8xf32>
  func.func @forward(%x: tensor<12x8xf32>, %t: tensor<12xi64>) -> tensor<f32> {
    %w = ds.get_parameter @head : tensor<64x8xf32>
    %l = ds.linear %x, %w : (tensor<12x8xf32>, tensor<64x8xf32>) -> tensor<12x64xf32>
    %loss = ds.cross_entropy %l, %t : (tensor<12x64xf32>, tensor<12xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
