// RUN: ds-opt %s --ds-widen-16bit | FileCheck %s

// ds-widen-16bit narrows a product between roundings to the 16-bit product even where element
// moves (reshape, transpose, slice) stand between the widening and the product, or between the
// product and its rounding: the moves run on the 16-bit values (exact on any type), so the
// product reads and writes bf16 and no f32 copy of its operands or result is made. These are
// the backward's input-gradient products (dy reshaped to rows) and attention's (heads split
// out of the fused QKV projection by slice, reshape and transpose).

// CHECK-LABEL: func.func @moves
// CHECK-DAG: %[[A:.+]] = ds.reshape %arg0 : tensor<2x4x8xbf16> -> tensor<8x8xbf16>
// CHECK-DAG: %[[S:.+]] = ds.slice %arg1 dim = 1[0 : 4] : tensor<8x12xbf16> -> tensor<8x4xbf16>
// CHECK: %[[P:.+]] = ds.matmul %[[A]], %[[S]] : tensor<8x8xbf16>, tensor<8x4xbf16> -> tensor<8x4xbf16>
// CHECK: %[[R:.+]] = ds.reshape %[[P]] : tensor<8x4xbf16> -> tensor<2x4x4xbf16>
// CHECK: return %[[R]]
func.func @moves(%a: tensor<2x4x8xbf16>, %b: tensor<8x12xbf16>) -> tensor<2x4x4xbf16> {
  %a32 = ds.convert %a : tensor<2x4x8xbf16> -> tensor<2x4x8xf32>
  %ar = ds.reshape %a32 : tensor<2x4x8xf32> -> tensor<8x8xf32>
  %b32 = ds.convert %b : tensor<8x12xbf16> -> tensor<8x12xf32>
  %bs = ds.slice %b32 dim = 1[0 : 4] : tensor<8x12xf32> -> tensor<8x4xf32>
  %p = ds.matmul %ar, %bs : tensor<8x8xf32>, tensor<8x4xf32> -> tensor<8x4xf32>
  %pr = ds.reshape %p : tensor<8x4xf32> -> tensor<2x4x4xf32>
  %r = ds.convert %pr : tensor<2x4x4xf32> -> tensor<2x4x4xbf16>
  return %r : tensor<2x4x4xbf16>
}

// Attention's scores: both operands transposed out of a widened bf16 tensor.
// CHECK-LABEL: func.func @heads
// CHECK: %[[Q:.+]] = ds.transpose %arg0 perm = [0, 2, 1, 3] : tensor<2x4x2x8xbf16> -> tensor<2x2x4x8xbf16>
// CHECK: %[[K:.+]] = ds.transpose %[[Q]] perm = [0, 1, 3, 2] : tensor<2x2x4x8xbf16> -> tensor<2x2x8x4xbf16>
// CHECK: ds.matmul %[[Q]], %[[K]] : tensor<2x2x4x8xbf16>, tensor<2x2x8x4xbf16> -> tensor<2x2x4x4xbf16>
// CHECK-NOT: f32
func.func @heads(%x: tensor<2x4x2x8xbf16>) -> tensor<2x2x4x4xbf16> {
  %x32 = ds.convert %x : tensor<2x4x2x8xbf16> -> tensor<2x4x2x8xf32>
  %q = ds.transpose %x32 perm = [0, 2, 1, 3] : tensor<2x4x2x8xf32> -> tensor<2x2x4x8xf32>
  %k = ds.transpose %q perm = [0, 1, 3, 2] : tensor<2x2x4x8xf32> -> tensor<2x2x8x4xf32>
  %s = ds.matmul %q, %k : tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32> -> tensor<2x2x4x4xf32>
  %r = ds.convert %s : tensor<2x2x4x4xf32> -> tensor<2x2x4x4xbf16>
  return %r : tensor<2x2x4x4xbf16>
}

// Not between roundings: an operand that no widening reaches (f32 data), or a result read in
// f32 (through a move too), keeps the product in f32.
// CHECK-LABEL: func.func @kept
// CHECK: ds.matmul %{{.+}}, %{{.+}} : tensor<8x8xf32>, tensor<8x4xf32> -> tensor<8x4xf32>
// CHECK: ds.matmul %{{.+}}, %{{.+}} : tensor<8x8xf32>, tensor<8x4xf32> -> tensor<8x4xf32>
func.func @kept(%a: tensor<8x8xbf16>, %b: tensor<8x4xbf16>, %f: tensor<8x4xf32>)
    -> (tensor<8x4xbf16>, tensor<2x16xf32>) {
  %a32 = ds.convert %a : tensor<8x8xbf16> -> tensor<8x8xf32>
  %p = ds.matmul %a32, %f : tensor<8x8xf32>, tensor<8x4xf32> -> tensor<8x4xf32>
  %r = ds.convert %p : tensor<8x4xf32> -> tensor<8x4xbf16>
  %b32 = ds.convert %b : tensor<8x4xbf16> -> tensor<8x4xf32>
  %q = ds.matmul %a32, %b32 : tensor<8x8xf32>, tensor<8x4xf32> -> tensor<8x4xf32>
  %qr = ds.reshape %q : tensor<8x4xf32> -> tensor<2x16xf32>
  return %r, %qr : tensor<8x4xbf16>, tensor<2x16xf32>
}
