// RUN: ds-opt %s --ds-tile-sequence=mlp-tiles=3 --split-input-file --verify-diagnostics | FileCheck %s
// RUN: not ds-opt %s --ds-tile-sequence=mlp-tiles=-1 --split-input-file 2>&1 | FileCheck %s --check-prefix=NEG
// NEG: ds-tile-sequence: loss-tiles and mlp-tiles are counts (0: auto)

// A Llama MLP (gate, up, SiLU written out, down) over [2, 7, 8]: three tiles of the
// sequence (3, 3 and 1 rows), each a slice of the input with the region's ops cloned on it
// and marked with its tile; the tiles' results concatenated feed the residual add.
// CHECK-LABEL: func.func @forward
// CHECK: %[[X0:.+]] = ds.slice %[[X:.+]] dim = 1[0 : 3] {ds.tile = 0 : i64} : tensor<2x7x8xf32> -> tensor<2x3x8xf32>
// CHECK: %[[G0:.+]] = ds.linear %[[X0]], %{{.+}} {ds.tile = 0 : i64} : (tensor<2x3x8xf32>, tensor<16x8xf32>) -> tensor<2x3x16xf32>
// CHECK: %[[Y0:.+]] = ds.linear %{{.+}}, %{{.+}} {ds.tile = 0 : i64} : (tensor<2x3x16xf32>, tensor<8x16xf32>) -> tensor<2x3x8xf32>
// CHECK: ds.slice %[[X]] dim = 1[3 : 6] {ds.tile = 1 : i64}
// CHECK: ds.slice %[[X]] dim = 1[6 : 7] {ds.tile = 2 : i64} : tensor<2x7x8xf32> -> tensor<2x1x8xf32>
// CHECK: %[[Y2:.+]] = ds.linear %{{.+}}, %{{.+}} {ds.tile = 2 : i64} : (tensor<2x1x16xf32>, tensor<8x16xf32>) -> tensor<2x1x8xf32>
// CHECK: %[[Y:.+]] = ds.concat %[[Y0]], %{{.+}}, %[[Y2]] dim = 1
// CHECK: ds.add %arg0, %[[Y]]
// CHECK-NOT: ds.tile
module {
  ds.parameter @gate trainable : tensor<16x8xf32>
  ds.parameter @up trainable : tensor<16x8xf32>
  ds.parameter @down trainable : tensor<8x16xf32>
  ds.parameter @norm trainable : tensor<8xf32>
  func.func @forward(%h: tensor<2x7x8xf32>) -> tensor<2x7x8xf32> {
    %n = ds.get_parameter @norm : tensor<8xf32>
    %wg = ds.get_parameter @gate : tensor<16x8xf32>
    %wu = ds.get_parameter @up : tensor<16x8xf32>
    %wd = ds.get_parameter @down : tensor<8x16xf32>
    %x = ds.mul %h, %n : tensor<2x7x8xf32>, tensor<8xf32> -> tensor<2x7x8xf32>
    %g = ds.linear %x, %wg : (tensor<2x7x8xf32>, tensor<16x8xf32>) -> tensor<2x7x16xf32>
    %s = ds.sigmoid %g : tensor<2x7x16xf32>
    %a = ds.mul %g, %s : tensor<2x7x16xf32>, tensor<2x7x16xf32> -> tensor<2x7x16xf32>
    %u = ds.linear %x, %wu : (tensor<2x7x8xf32>, tensor<16x8xf32>) -> tensor<2x7x16xf32>
    %m = ds.mul %a, %u : tensor<2x7x16xf32>, tensor<2x7x16xf32> -> tensor<2x7x16xf32>
    %y = ds.linear %m, %wd : (tensor<2x7x16xf32>, tensor<8x16xf32>) -> tensor<2x7x8xf32>
    %r = ds.add %h, %y : tensor<2x7x8xf32>, tensor<2x7x8xf32> -> tensor<2x7x8xf32>
    return %r : tensor<2x7x8xf32>
  }
}

// -----

// GPT-2's MLP on rows (a bias, GELU with constants, a matmul by a transposed weight).
// CHECK-LABEL: func.func @forward
// CHECK: ds.slice %arg0 dim = 0[0 : 2] {ds.tile = 0 : i64} : tensor<6x8xf32> -> tensor<2x8xf32>
// CHECK: ds.matmul %{{.+}}, %{{.+}} {ds.tile = 2 : i64} : tensor<2x32xf32>, tensor<32x8xf32> -> tensor<2x8xf32>
// CHECK: ds.concat
module {
  ds.parameter @fc trainable : tensor<32x8xf32>
  ds.parameter @fcb trainable : tensor<32xf32>
  ds.parameter @proj trainable : tensor<8x32xf32>
  func.func @forward(%x: tensor<6x8xf32>) -> tensor<6x8xf32> {
    %w = ds.get_parameter @fc : tensor<32x8xf32>
    %b = ds.get_parameter @fcb : tensor<32xf32>
    %p = ds.get_parameter @proj : tensor<8x32xf32>
    %pt = ds.transpose %p perm = [1, 0] : tensor<8x32xf32> -> tensor<32x8xf32>
    %h = ds.linear %x, %w, %b : (tensor<6x8xf32>, tensor<32x8xf32>, tensor<32xf32>) -> tensor<6x32xf32>
    %c = ds.constant dense<0.5> : tensor<f32>
    %t = ds.tanh %h : tensor<6x32xf32>
    %g = ds.mul %t, %c : tensor<6x32xf32>, tensor<f32> -> tensor<6x32xf32>
    %y = ds.matmul %g, %pt : tensor<6x32xf32>, tensor<32x8xf32> -> tensor<6x8xf32>
    return %y : tensor<6x8xf32>
  }
}

// -----

// A widening layer whose values also leave the region elsewhere (two results), and an LM
// head (its logits are its widest value): no MLP, an error that names the key.
module {
  ds.parameter @up trainable : tensor<16x8xf32>
  ds.parameter @down trainable : tensor<8x16xf32>
  // expected-error @+1 {{ds-tile-sequence: sequence_tiling.mlp_tiles is 3 but no MLP was found}}
  func.func @forward(%x: tensor<6x8xf32>) -> (tensor<6x8xf32>, tensor<6x16xf32>) {
    %wu = ds.get_parameter @up : tensor<16x8xf32>
    %wd = ds.get_parameter @down : tensor<8x16xf32>
    %u = ds.linear %x, %wu : (tensor<6x8xf32>, tensor<16x8xf32>) -> tensor<6x16xf32>
    %y = ds.linear %u, %wd : (tensor<6x16xf32>, tensor<8x16xf32>) -> tensor<6x8xf32>
    return %y, %u : tensor<6x8xf32>, tensor<6x16xf32>
  }
}

// -----

module {
  ds.parameter @head trainable : tensor<64x8xf32>
  // expected-error @+1 {{ds-tile-sequence: sequence_tiling.mlp_tiles is 3 but no MLP was found}}
  func.func @forward(%x: tensor<2x6x8xf32>) -> tensor<2x6x64xf32> {
    %w = ds.get_parameter @head : tensor<64x8xf32>
    %l = ds.linear %x, %w : (tensor<2x6x8xf32>, tensor<64x8xf32>) -> tensor<2x6x64xf32>
    return %l : tensor<2x6x64xf32>
  }
}
