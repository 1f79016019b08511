// RUN: ds-opt %s --ds-fuse-experts --split-input-file | FileCheck %s

// HF's batched_mm experts: each pair's weights gathered, then bmm with the row as a column.
// One ds.expert_linear on the weight itself; the gather is gone.
// CHECK-LABEL: func.func @batched_mm
// CHECK: %[[X:.+]] = ds.reshape %arg1 : tensor<6x8x1xf32> -> tensor<6x8xf32>
// CHECK: %[[Y:.+]] = ds.expert_linear %[[X]], %arg0[%arg2] : (tensor<6x8xf32>, tensor<4x10x8xf32>, tensor<6xi64>) -> tensor<6x10xf32>
// CHECK: %[[R:.+]] = ds.reshape %[[Y]] : tensor<6x10xf32> -> tensor<6x10x1xf32>
// CHECK-NOT: ds.embedding
// CHECK-NOT: ds.matmul
// CHECK: return %[[R]]
func.func @batched_mm(%w: tensor<4x10x8xf32>, %x: tensor<6x8x1xf32>, %ids: tensor<6xi64>) -> tensor<6x10x1xf32> {
  %t = ds.reshape %w : tensor<4x10x8xf32> -> tensor<4x80xf32>
  %g = ds.embedding %t[%ids] : (tensor<4x80xf32>, tensor<6xi64>) -> tensor<6x80xf32>
  %r = ds.reshape %g : tensor<6x80xf32> -> tensor<6x10x8xf32>
  %y = ds.matmul %r, %x : tensor<6x10x8xf32>, tensor<6x8x1xf32> -> tensor<6x10x1xf32>
  return %y : tensor<6x10x1xf32>
}

// -----

// HF's transposed experts ([E, in, out]): bmm(x[:, None, :], weight[ids]).
// CHECK-LABEL: func.func @transposed
// CHECK: %[[X:.+]] = ds.reshape %arg1 : tensor<6x1x8xf32> -> tensor<6x8xf32>
// CHECK: ds.expert_linear %[[X]], %arg0[%arg2] transposed : (tensor<6x8xf32>, tensor<4x8x10xf32>, tensor<6xi64>) -> tensor<6x10xf32>
// CHECK-NOT: ds.embedding
func.func @transposed(%w: tensor<4x8x10xf32>, %x: tensor<6x1x8xf32>, %ids: tensor<6xi64>) -> tensor<6x1x10xf32> {
  %t = ds.reshape %w : tensor<4x8x10xf32> -> tensor<4x80xf32>
  %g = ds.embedding %t[%ids] : (tensor<4x80xf32>, tensor<6xi64>) -> tensor<6x80xf32>
  %r = ds.reshape %g : tensor<6x80xf32> -> tensor<6x8x10xf32>
  %y = ds.matmul %x, %r : tensor<6x1x8xf32>, tensor<6x8x10xf32> -> tensor<6x1x10xf32>
  return %y : tensor<6x1x10xf32>
}

// -----

// The gathered weights read elsewhere too: the product folds, the gather stays for the other
// reader.
// CHECK-LABEL: func.func @gather_kept
// CHECK: ds.embedding
// CHECK: ds.expert_linear
// CHECK-NOT: ds.matmul
func.func @gather_kept(%w: tensor<4x10x8xf32>, %x: tensor<6x8x1xf32>, %ids: tensor<6xi64>) -> (tensor<6x10x1xf32>, tensor<6x10x8xf32>) {
  %t = ds.reshape %w : tensor<4x10x8xf32> -> tensor<4x80xf32>
  %g = ds.embedding %t[%ids] : (tensor<4x80xf32>, tensor<6xi64>) -> tensor<6x80xf32>
  %r = ds.reshape %g : tensor<6x80xf32> -> tensor<6x10x8xf32>
  %y = ds.matmul %r, %x : tensor<6x10x8xf32>, tensor<6x8x1xf32> -> tensor<6x10x1xf32>
  return %y, %r : tensor<6x10x1xf32>, tensor<6x10x8xf32>
}

// -----

// Not a per-row product: a shared [8, 1] right-hand side (a plain batched product over
// gathered matrices with more than one column) stays.
// CHECK-LABEL: func.func @wide_rhs
// CHECK: ds.embedding
// CHECK: ds.matmul
// CHECK-NOT: ds.expert_linear
func.func @wide_rhs(%w: tensor<4x10x8xf32>, %x: tensor<6x8x3xf32>, %ids: tensor<6xi64>) -> tensor<6x10x3xf32> {
  %t = ds.reshape %w : tensor<4x10x8xf32> -> tensor<4x80xf32>
  %g = ds.embedding %t[%ids] : (tensor<4x80xf32>, tensor<6xi64>) -> tensor<6x80xf32>
  %r = ds.reshape %g : tensor<6x80xf32> -> tensor<6x10x8xf32>
  %y = ds.matmul %r, %x : tensor<6x10x8xf32>, tensor<6x8x3xf32> -> tensor<6x10x3xf32>
  return %y : tensor<6x10x3xf32>
}
