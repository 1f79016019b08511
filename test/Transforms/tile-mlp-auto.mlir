// RUN: ds-opt %s --ds-tile-sequence=mlp-tiles=0 --split-input-file | FileCheck %s

// "auto": ALST's count, ceil(sequence / hidden): 40 positions of hidden 8 in 5 tiles of 8.
// CHECK-LABEL: func.func @forward(%arg0: tensor<1x40x8xf32>
// CHECK: ds.slice %arg0 dim = 1[32 : 40] {ds.tile = 4 : i64}
// CHECK-NOT: ds.tile = 5
module {
  ds.parameter @up trainable : tensor<32x8xf32>
  ds.parameter @down trainable : tensor<8x32xf32>
  func.func @forward(%x: tensor<1x40x8xf32>) -> tensor<1x40x8xf32> {
    %wu = ds.get_parameter @up : tensor<32x8xf32>
    %wd = ds.get_parameter @down : tensor<8x32xf32>
    %u = ds.linear %x, %wu : (tensor<1x40x8xf32>, tensor<32x8xf32>) -> tensor<1x40x32xf32>
    %t = ds.relu %u : tensor<1x40x32xf32>
    %y = ds.linear %t, %wd : (tensor<1x40x32xf32>, tensor<8x32xf32>) -> tensor<1x40x8xf32>
    return %y : tensor<1x40x8xf32>
  }
}

// -----

// A sequence no longer than the hidden size is one tile: left whole, without an error.
// CHECK-LABEL: func.func @forward(%arg0: tensor<1x8x8xf32>
// CHECK-NOT: ds.slice
module {
  ds.parameter @up trainable : tensor<32x8xf32>
  ds.parameter @down trainable : tensor<8x32xf32>
  func.func @forward(%x: tensor<1x8x8xf32>) -> tensor<1x8x8xf32> {
    %wu = ds.get_parameter @up : tensor<32x8xf32>
    %wd = ds.get_parameter @down : tensor<8x32xf32>
    %u = ds.linear %x, %wu : (tensor<1x8x8xf32>, tensor<32x8xf32>) -> tensor<1x8x32xf32>
    %t = ds.relu %u : tensor<1x8x32xf32>
    %y = ds.linear %t, %wd : (tensor<1x8x32xf32>, tensor<8x32xf32>) -> tensor<1x8x8xf32>
    return %y : tensor<1x8x8xf32>
  }
}
