// RUN: ds-opt %s --ds-tile-sequence=mlp-tiles=2 --ds-autodiff --canonicalize --cse --ds-activation-checkpoint --canonicalize --cse | FileCheck %s

// Tiles inside checkpointed blocks. The loss's gradient reads the last block's output, so
// the backward first recomputes that block's MLP whole (both tiles, for their
// concatenation); each tile is then recomputed again, in a round of its own, right before
// its gradient, instead of living from the first recomputation on (the last tile
// recomputed, 3, is still the latest when its gradient comes). CSE keeps the rounds apart.
// CHECK-LABEL: func.func @micro_step
// CHECK: ds.mean
// CHECK: ds.tanh %{{.+}} {ds.recompute = [[A:[0-9]+]] : i64, ds.tile = 2 : i64}
// CHECK: %[[R3:.+]] = ds.tanh %{{.+}} {ds.recompute = [[B:[0-9]+]] : i64, ds.tile = 3 : i64}
// CHECK: ds.concat
// CHECK: ds.linear_grad_weight %[[R3]]
// CHECK: %[[R2:.+]] = ds.tanh %{{.+}} {ds.recompute = {{[0-9]+}} : i64, ds.tile = 2 : i64}
// CHECK-NEXT: ds.linear_grad_weight %[[R2]]
module {
  ds.parameter @"h.0.up" trainable : tensor<16x8xf32>
  ds.parameter @"h.0.down" trainable : tensor<8x16xf32>
  ds.parameter @"h.1.up" trainable : tensor<16x8xf32>
  ds.parameter @"h.1.down" trainable : tensor<8x16xf32>
  ds.parameter @"h.0.norm" trainable : tensor<8xf32>
  ds.parameter @"h.1.norm" trainable : tensor<8xf32>
  func.func @forward(%x: tensor<4x8xf32>) -> tensor<f32> {
    %u0 = ds.get_parameter @"h.0.up" : tensor<16x8xf32>
    %d0 = ds.get_parameter @"h.0.down" : tensor<8x16xf32>
    %u1 = ds.get_parameter @"h.1.up" : tensor<16x8xf32>
    %d1 = ds.get_parameter @"h.1.down" : tensor<8x16xf32>
    %n0 = ds.get_parameter @"h.0.norm" : tensor<8xf32>
    %n1 = ds.get_parameter @"h.1.norm" : tensor<8xf32>
    %x0 = ds.mul %x, %n0 : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
    %a0 = ds.linear %x0, %u0 : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
    %t0 = ds.tanh %a0 : tensor<4x16xf32>
    %y0 = ds.linear %t0, %d0 : (tensor<4x16xf32>, tensor<8x16xf32>) -> tensor<4x8xf32>
    %h0 = ds.add %x, %y0 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
    %x1 = ds.mul %h0, %n1 : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
    %a1 = ds.linear %x1, %u1 : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
    %t1 = ds.tanh %a1 : tensor<4x16xf32>
    %y1 = ds.linear %t1, %d1 : (tensor<4x16xf32>, tensor<8x16xf32>) -> tensor<4x8xf32>
    %h1 = ds.add %h0, %y1 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
    %sq = ds.mul %h1, %h1 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
    %l = ds.mean %sq dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
