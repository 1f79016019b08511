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

// Attention's backward: the gradients of q, k and v leave their products through transposes
// and reshapes into one concat (the fused QKV projection's dy), which is rounded. Rounding
// each part before the concat gives the same values (as PyTorch, whose three bf16 gradients
// are concatenated), so the concat and its parts run in bf16 and the products narrow.
// CHECK-LABEL: func.func @concat
// CHECK: %[[P:.+]] = ds.matmul %arg0, %arg1 : tensor<4x8xbf16>, tensor<8x4xbf16> -> tensor<4x4xbf16>
// CHECK: %[[Q:.+]] = ds.matmul %arg1, %arg0 : tensor<8x4xbf16>, tensor<4x8xbf16> -> tensor<8x8xbf16>
// CHECK: %[[QR:.+]] = ds.reshape %[[Q]] : tensor<8x8xbf16> -> tensor<4x16xbf16>
// CHECK: %[[C:.+]] = ds.concat %[[P]], %[[QR]] dim = 1 : (tensor<4x4xbf16>, tensor<4x16xbf16>) -> tensor<4x20xbf16>
// CHECK: return %[[C]]
// CHECK-NOT: f32
func.func @concat(%a: tensor<4x8xbf16>, %b: tensor<8x4xbf16>) -> tensor<4x20xbf16> {
  %a32 = ds.convert %a : tensor<4x8xbf16> -> tensor<4x8xf32>
  %b32 = ds.convert %b : tensor<8x4xbf16> -> tensor<8x4xf32>
  %p = ds.matmul %a32, %b32 : tensor<4x8xf32>, tensor<8x4xf32> -> tensor<4x4xf32>
  %q = ds.matmul %b32, %a32 : tensor<8x4xf32>, tensor<4x8xf32> -> tensor<8x8xf32>
  %qr = ds.reshape %q : tensor<8x8xf32> -> tensor<4x16xf32>
  %c = ds.concat %p, %qr dim = 1 : (tensor<4x4xf32>, tensor<4x16xf32>) -> tensor<4x20xf32>
  %r = ds.convert %c : tensor<4x20xf32> -> tensor<4x20xbf16>
  return %r : tensor<4x20xbf16>
}

// A concat whose result is also read in f32 stays in f32, and so do its products.
// CHECK-LABEL: func.func @concat_kept
// CHECK: ds.matmul %{{.+}}, %{{.+}} : tensor<4x8xf32>, tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK: ds.concat %{{.+}}, %{{.+}} dim = 1 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x8xf32>
func.func @concat_kept(%a: tensor<4x8xbf16>, %b: tensor<8x4xbf16>)
    -> (tensor<4x8xbf16>, tensor<4x8xf32>) {
  %a32 = ds.convert %a : tensor<4x8xbf16> -> tensor<4x8xf32>
  %b32 = ds.convert %b : tensor<8x4xbf16> -> tensor<8x4xf32>
  %p = ds.matmul %a32, %b32 : tensor<4x8xf32>, tensor<8x4xf32> -> tensor<4x4xf32>
  %c = ds.concat %p, %p dim = 1 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x8xf32>
  %r = ds.convert %c : tensor<4x8xf32> -> tensor<4x8xbf16>
  return %r, %c : tensor<4x8xbf16>, tensor<4x8xf32>
}

// An embedding moves rows of its table: the sum of the token and position rows (a GPT's
// input) reads them from the 16-bit tables, with no f32 copy of either table.
// CHECK-LABEL: func.func @embedding
// CHECK-DAG: %[[T:.+]] = ds.embedding %arg0[%arg2] : (tensor<16x4xbf16>, tensor<2x3xi64>) -> tensor<2x3x4xbf16>
// CHECK-DAG: %[[P:.+]] = ds.embedding %arg1[%arg3] : (tensor<8x4xbf16>, tensor<3xi64>) -> tensor<3x4xbf16>
// CHECK: %[[S:.+]] = ds.add %[[T]], %[[P]] : tensor<2x3x4xbf16>, tensor<3x4xbf16> -> tensor<2x3x4xbf16>
// CHECK: return %[[S]]
// CHECK-NOT: f32
func.func @embedding(%tok: tensor<16x4xbf16>, %pos: tensor<8x4xbf16>, %idx: tensor<2x3xi64>,
                     %at: tensor<3xi64>) -> tensor<2x3x4xbf16> {
  %t32 = ds.convert %tok : tensor<16x4xbf16> -> tensor<16x4xf32>
  %t = ds.embedding %t32[%idx] : (tensor<16x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %p32 = ds.convert %pos : tensor<8x4xbf16> -> tensor<8x4xf32>
  %p = ds.embedding %p32[%at] : (tensor<8x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
  %s = ds.add %t, %p : tensor<2x3x4xf32>, tensor<3x4xf32> -> tensor<2x3x4xf32>
  %r = ds.convert %s : tensor<2x3x4xf32> -> tensor<2x3x4xbf16>
  return %r : tensor<2x3x4xbf16>
}

// Attention and its gradient between roundings run on the 16-bit tensors, their log-sum-exp
// in f32 (neither a widening nor a rounding): the kernels hold 16-bit values where PyTorch's
// 16-bit flash kernel does. An f32 operand that no widening reaches keeps the op in f32.
// CHECK-LABEL: func.func @attention
// CHECK: %[[O:.+]], %[[L:.+]] = ds.attention %arg0, %arg1, %arg2 scale = 5.000000e-01 causal : (tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>) -> (tensor<1x2x4x8xbf16>, tensor<1x2x4xf32>)
// CHECK: ds.attention_grad %arg0, %arg1, %arg2 result %[[O]], %[[L]] grad %arg3 scale = 5.000000e-01 causal : (tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4xf32>, tensor<1x2x4x8xbf16>) -> (tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>)
// CHECK: ds.attention %{{.+}}, %{{.+}}, %{{.+}} scale = 5.000000e-01 : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
func.func @attention(%q: tensor<1x2x4x8xbf16>, %k: tensor<1x2x4x8xbf16>, %v: tensor<1x2x4x8xbf16>,
                     %dy: tensor<1x2x4x8xbf16>, %f: tensor<1x2x4x8xf32>)
    -> (tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>,
        tensor<1x2x4x8xbf16>) {
  %q32 = ds.convert %q : tensor<1x2x4x8xbf16> -> tensor<1x2x4x8xf32>
  %k32 = ds.convert %k : tensor<1x2x4x8xbf16> -> tensor<1x2x4x8xf32>
  %v32 = ds.convert %v : tensor<1x2x4x8xbf16> -> tensor<1x2x4x8xf32>
  %o, %lse = ds.attention %q32, %k32, %v32 scale = 5.000000e-01 causal : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
  %or = ds.convert %o : tensor<1x2x4x8xf32> -> tensor<1x2x4x8xbf16>
  %o32 = ds.convert %or : tensor<1x2x4x8xbf16> -> tensor<1x2x4x8xf32>
  %dy32 = ds.convert %dy : tensor<1x2x4x8xbf16> -> tensor<1x2x4x8xf32>
  %dq, %dk, %dv = ds.attention_grad %q32, %k32, %v32 result %o32, %lse grad %dy32 scale = 5.000000e-01 causal : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>)
  %dqr = ds.convert %dq : tensor<1x2x4x8xf32> -> tensor<1x2x4x8xbf16>
  %dkr = ds.convert %dk : tensor<1x2x4x8xf32> -> tensor<1x2x4x8xbf16>
  %dvr = ds.convert %dv : tensor<1x2x4x8xf32> -> tensor<1x2x4x8xbf16>
  %o2, %lse2 = ds.attention %q32, %f, %v32 scale = 5.000000e-01 : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
  %o2r = ds.convert %o2 : tensor<1x2x4x8xf32> -> tensor<1x2x4x8xbf16>
  return %or, %dqr, %dkr, %dvr, %o2r : tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>
}

// The embedding's gradient between a widening and a rounding sums its rows in bf16 (each
// addition rounded, as PyTorch's CPU embedding backward); one whose result is read in f32
// stays f32.
// CHECK-LABEL: func.func @embedding_grad
// CHECK: %[[G:.+]] = ds.embedding_grad %arg0[%arg1] : (tensor<2x3x4xbf16>, tensor<2x3xi64>) -> tensor<5x4xbf16>
// CHECK: ds.embedding_grad %{{.+}}[%arg1] : (tensor<2x3x4xf32>, tensor<2x3xi64>) -> tensor<5x4xf32>
// CHECK: return %[[G]]
func.func @embedding_grad(%dy: tensor<2x3x4xbf16>, %idx: tensor<2x3xi64>) -> (tensor<5x4xbf16>, tensor<5x4xf32>) {
  %dy32 = ds.convert %dy : tensor<2x3x4xbf16> -> tensor<2x3x4xf32>
  %g = ds.embedding_grad %dy32[%idx] : (tensor<2x3x4xf32>, tensor<2x3xi64>) -> tensor<5x4xf32>
  %gr = ds.convert %g : tensor<5x4xf32> -> tensor<5x4xbf16>
  %f = ds.embedding_grad %dy32[%idx] : (tensor<2x3x4xf32>, tensor<2x3xi64>) -> tensor<5x4xf32>
  return %gr, %f : tensor<5x4xbf16>, tensor<5x4xf32>
}
