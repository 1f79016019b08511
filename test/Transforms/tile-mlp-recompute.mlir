// RUN: ds-opt %s --ds-tile-sequence=mlp-tiles=2 --ds-autodiff --canonicalize --cse --ds-activation-checkpoint=blocks=false | FileCheck %s

// An MLP in two tiles, without activation checkpointing: the backward recomputes each
// tile's values right before that tile's gradient (tile 1 first), from the whole input, so
// only one tile's intermediates live at a time; the weights' gradients are the tiles' sums.
// CHECK-LABEL: func.func @micro_step
// CHECK: %[[T1:.+]] = ds.tanh %{{.+}} {ds.tile = 1 : i64}
// CHECK: ds.concat
// CHECK: ds.mean
// CHECK-NOT: %[[T1]]
// CHECK: ds.slice %arg0 dim = 0[2 : 4] {ds.recompute = {{[0-9]+}} : i64, ds.tile = 1 : i64}
// CHECK: %[[R1:.+]] = ds.tanh %{{.+}} {ds.recompute = {{[0-9]+}} : i64, ds.tile = 1 : i64}
// CHECK: %[[DW1:.+]], %{{.+}} = ds.linear_grad_weight %[[R1]]
// CHECK-NOT: ds.tile = 1
// CHECK: ds.slice %arg0 dim = 0[0 : 2] {ds.recompute = {{[0-9]+}} : i64, ds.tile = 0 : i64}
// CHECK: %[[R0:.+]] = ds.tanh %{{.+}} {ds.recompute = {{[0-9]+}} : i64, ds.tile = 0 : i64}
// CHECK: %[[DW0:.+]], %{{.+}} = ds.linear_grad_weight %[[R0]]
// CHECK: ds.add %[[DW1]], %[[DW0]]
// CHECK: ds.assign @"down@grad"
module {
  ds.parameter @up trainable : tensor<16x8xf32>
  ds.parameter @down trainable : tensor<8x16xf32>
  func.func @forward(%x: tensor<4x8xf32>) -> tensor<f32> {
    %wu = ds.get_parameter @up : tensor<16x8xf32>
    %wd = ds.get_parameter @down : tensor<8x16xf32>
    %u = ds.linear %x, %wu : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
    %t = ds.tanh %u : tensor<4x16xf32>
    %y = ds.linear %t, %wd : (tensor<4x16xf32>, tensor<8x16xf32>) -> tensor<4x8xf32>
    %l = ds.mean %y dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
