// RUN: ds-opt %s --ds-widen-16bit | FileCheck %s

// ds-widen-16bit leaves the elementwise and row ops on 16-bit values in 16 bits: every
// device's unary, binary, cmp, where, softmax (and its gradient) and layer norm kernels take
// bf16 and f16 operands, compute in f32 and round each result once (PyTorch's 16-bit
// kernels), so no f32 copy of an operand or result is made.

// CHECK-LABEL: func.func @chain
// CHECK-NOT: ds.convert
// CHECK: %[[S:.+]] = ds.add %arg0, %arg1 : tensor<4x8xbf16>, tensor<4x8xbf16> -> tensor<4x8xbf16>
// CHECK: %[[G:.+]] = ds.gelu %[[S]] approximate = tanh : tensor<4x8xbf16>
// CHECK: %[[M:.+]] = ds.mul %[[G]], %arg2 : tensor<4x8xbf16>, tensor<bf16> -> tensor<4x8xbf16>
// CHECK: %[[C:.+]] = ds.cmp gt, %[[M]], %arg2 : tensor<4x8xbf16>, tensor<bf16> -> tensor<4x8xi1>
// CHECK: %[[W:.+]] = ds.where %[[C]], %[[M]], %arg2 : (tensor<4x8xi1>, tensor<4x8xbf16>, tensor<bf16>) -> tensor<4x8xbf16>
// CHECK: %[[D:.+]] = ds.gelu_grad %[[W]], %arg0 : tensor<4x8xbf16>
// CHECK: %[[E:.+]] = ds.exp %[[D]] : tensor<4x8xbf16>
// CHECK-NOT: ds.convert
// CHECK: return %[[E]]
func.func @chain(%a: tensor<4x8xbf16>, %b: tensor<4x8xbf16>, %s: tensor<bf16>) -> tensor<4x8xbf16> {
  %0 = ds.add %a, %b : tensor<4x8xbf16>, tensor<4x8xbf16> -> tensor<4x8xbf16>
  %1 = ds.gelu %0 approximate = tanh : tensor<4x8xbf16>
  %2 = ds.mul %1, %s : tensor<4x8xbf16>, tensor<bf16> -> tensor<4x8xbf16>
  %3 = ds.cmp gt, %2, %s : tensor<4x8xbf16>, tensor<bf16> -> tensor<4x8xi1>
  %4 = ds.where %3, %2, %s : (tensor<4x8xi1>, tensor<4x8xbf16>, tensor<bf16>) -> tensor<4x8xbf16>
  %5 = ds.gelu_grad %4, %a : tensor<4x8xbf16>
  %6 = ds.exp %5 : tensor<4x8xbf16>
  return %6 : tensor<4x8xbf16>
}

// f16 as bf16.
// CHECK-LABEL: func.func @f16
// CHECK-NOT: ds.convert
// CHECK: ds.sub %arg0, %arg1 : tensor<8xf16>, tensor<8xf16> -> tensor<8xf16>
func.func @f16(%a: tensor<8xf16>, %b: tensor<8xf16>) -> tensor<8xf16> {
  %0 = ds.sub %a, %b : tensor<8xf16>, tensor<8xf16> -> tensor<8xf16>
  return %0 : tensor<8xf16>
}

// Softmax, its gradient and layer norm stay in 16 bits too; the ops whose kernels are f32 only
// (a sum) widen as before.
// CHECK-LABEL: func.func @rows
// CHECK: %[[N:.+]] = ds.layer_norm %arg0 weight %arg1 bias %arg1 normalized_shape = [8] eps = 1.000000e-05 : (tensor<2x8xbf16>, tensor<8xbf16>, tensor<8xbf16>) -> tensor<2x8xbf16>
// CHECK: %[[S:.+]] = ds.softmax %[[N]] dim = 1 : tensor<2x8xbf16>
// CHECK: ds.softmax_grad %[[S]], %arg0 dim = 1 : tensor<2x8xbf16>
// CHECK: %[[W:.+]] = ds.convert %[[S]] : tensor<2x8xbf16> -> tensor<2x8xf32>
// CHECK: %[[R:.+]] = ds.sum %[[W]] dims = [0] : tensor<2x8xf32> -> tensor<8xf32>
// CHECK: ds.convert %[[R]] : tensor<8xf32> -> tensor<8xbf16>
func.func @rows(%x: tensor<2x8xbf16>, %w: tensor<8xbf16>)
    -> (tensor<2x8xbf16>, tensor<8xbf16>) {
  %0 = ds.layer_norm %x weight %w bias %w normalized_shape = [8] eps = 1.0e-05 : (tensor<2x8xbf16>, tensor<8xbf16>, tensor<8xbf16>) -> tensor<2x8xbf16>
  %1 = ds.softmax %0 dim = 1 : tensor<2x8xbf16>
  %2 = ds.softmax_grad %1, %x dim = 1 : tensor<2x8xbf16>
  %3 = ds.sum %1 dims = [0] : tensor<2x8xbf16> -> tensor<8xbf16>
  return %2, %3 : tensor<2x8xbf16>, tensor<8xbf16>
}

// ds-mixed-precision's form: f32 ops between roundings. Each becomes the op on the bf16
// values; an f32 splat constant exact in bf16 (-inf, 0.125) becomes a bf16 one, one that is not
// (0.1) keeps its op in f32, as does an op whose result is read unrounded.
// CHECK-LABEL: func.func @between
// CHECK-DAG: %[[NINF:.+]] = ds.constant dense<0xFF80> : tensor<bf16>
// CHECK-DAG: %[[EIGHTH:.+]] = ds.constant dense<1.250000e-01> : tensor<bf16>
// CHECK-DAG: %[[A:.+]] = ds.convert %arg0 : tensor<4x8xbf16> -> tensor<4x8xf32>
// CHECK: %[[M:.+]] = ds.mul %arg0, %[[EIGHTH]] : tensor<4x8xbf16>, tensor<bf16> -> tensor<4x8xbf16>
// CHECK: %[[W:.+]] = ds.where %arg1, %[[NINF]], %[[M]] : (tensor<4x8xi1>, tensor<bf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
// CHECK: %[[T:.+]] = ds.transpose %[[W]] perm = [1, 0] : tensor<4x8xbf16> -> tensor<8x4xbf16>
// CHECK: %[[P:.+]] = ds.mul %[[A]], %{{.+}} : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
// CHECK: ds.convert %[[P]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK: %[[E:.+]] = ds.exp %[[A]] : tensor<4x8xf32>
// CHECK: return %[[T]], %{{.+}}, %[[E]]
func.func @between(%a: tensor<4x8xbf16>, %mask: tensor<4x8xi1>)
    -> (tensor<8x4xbf16>, tensor<4x8xbf16>, tensor<4x8xf32>) {
  %ninf = ds.constant dense<0xFF800000> : tensor<f32>
  %eighth = ds.constant dense<0.125> : tensor<f32>
  %tenth = ds.constant dense<0.1> : tensor<f32>
  %a32 = ds.convert %a : tensor<4x8xbf16> -> tensor<4x8xf32>
  %0 = ds.mul %a32, %eighth : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %1 = ds.convert %0 : tensor<4x8xf32> -> tensor<4x8xbf16>
  %2 = ds.convert %1 : tensor<4x8xbf16> -> tensor<4x8xf32>
  %3 = ds.where %mask, %ninf, %2 : (tensor<4x8xi1>, tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %4 = ds.transpose %3 perm = [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
  %5 = ds.convert %4 : tensor<8x4xf32> -> tensor<8x4xbf16>
  %6 = ds.mul %a32, %tenth : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %7 = ds.convert %6 : tensor<4x8xf32> -> tensor<4x8xbf16>
  %8 = ds.exp %a32 : tensor<4x8xf32>
  return %5, %7, %8 : tensor<8x4xbf16>, tensor<4x8xbf16>, tensor<4x8xf32>
}

// An op whose constant 16 bits cannot hold stays in f32 on its moved operand, and no 16-bit
// copy of the move is left behind for it (the constant is checked before anything is built).
// CHECK-LABEL: func.func @inexact_after_move
// CHECK-NEXT: %[[C:.+]] = ds.constant dense<1.000000e-01> : tensor<f32>
// CHECK-NEXT: %[[A:.+]] = ds.convert %arg0 : tensor<4x8xbf16> -> tensor<4x8xf32>
// CHECK-NEXT: %[[T:.+]] = ds.transpose %[[A]] perm = [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[M:.+]] = ds.mul %[[T]], %[[C]] : tensor<8x4xf32>, tensor<f32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[R:.+]] = ds.convert %[[M]] : tensor<8x4xf32> -> tensor<8x4xbf16>
// CHECK-NEXT: return %[[R]]
func.func @inexact_after_move(%a: tensor<4x8xbf16>) -> tensor<8x4xbf16> {
  %tenth = ds.constant dense<0.1> : tensor<f32>
  %a32 = ds.convert %a : tensor<4x8xbf16> -> tensor<4x8xf32>
  %0 = ds.transpose %a32 perm = [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
  %1 = ds.mul %0, %tenth : tensor<8x4xf32>, tensor<f32> -> tensor<8x4xf32>
  %2 = ds.convert %1 : tensor<8x4xf32> -> tensor<8x4xbf16>
  return %2 : tensor<8x4xbf16>
}

// A rounding of a widening to the same 16-bit type is the value itself: layer norm's backward
// (widened: its kernels read f32) rounds dx, which the next op reads widened again; the pair
// goes, the widening that the backward reads stays.
// CHECK-LABEL: func.func @round_trip
// CHECK: %[[W:.+]] = ds.convert %arg0 : tensor<4x8xbf16> -> tensor<4x8xf32>
// CHECK-NOT: ds.convert
// CHECK: return %arg0, %[[W]], %arg1
func.func @round_trip(%a: tensor<4x8xbf16>, %h: tensor<4x8xf16>)
    -> (tensor<4x8xbf16>, tensor<4x8xf32>, tensor<4x8xf16>) {
  %w = ds.convert %a : tensor<4x8xbf16> -> tensor<4x8xf32>
  %r = ds.convert %w : tensor<4x8xf32> -> tensor<4x8xbf16>
  %hw = ds.convert %h : tensor<4x8xf16> -> tensor<4x8xf32>
  %hr = ds.convert %hw : tensor<4x8xf32> -> tensor<4x8xf16>
  return %r, %w, %hr : tensor<4x8xbf16>, tensor<4x8xf32>, tensor<4x8xf16>
}

// Layer norm's backward on 16-bit operands stays 16-bit: every device's kernel takes them (the
// CPU's in PyTorch's arithmetic: 16-bit statistics, dweight and dbias summed in 16-bit buffers).
// CHECK-LABEL: func.func @layer_norm_grad
// CHECK-NOT: ds.convert
// CHECK: ds.layer_norm_grad %arg0, %arg1 weight %arg2 {{.*}} : (tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<8xbf16>) -> (tensor<4x8xbf16>, tensor<8xbf16>, tensor<8xbf16>)
// CHECK-NOT: ds.convert
func.func @layer_norm_grad(%x: tensor<4x8xbf16>, %dy: tensor<4x8xbf16>, %w: tensor<8xbf16>)
    -> (tensor<4x8xbf16>, tensor<8xbf16>, tensor<8xbf16>) {
  %dx, %dw, %db = ds.layer_norm_grad %x, %dy weight %w normalized_shape = [8] eps = 1.000000e-05 : (tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<8xbf16>) -> (tensor<4x8xbf16>, tensor<8xbf16>, tensor<8xbf16>)
  return %dx, %dw, %db : tensor<4x8xbf16>, tensor<8xbf16>, tensor<8xbf16>
}
