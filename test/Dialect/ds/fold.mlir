// RUN: ds-opt %s --canonicalize | FileCheck %s

// Folds of the ds ops that canonicalize (first in the runtime lowering) applies.

// A transpose that a later transpose undoes is no copy at all (autodiff writes such pairs:
// the gradient of attention's k^T is transposed back).
// CHECK-LABEL: func.func @transpose_pair
// CHECK-NEXT: return %arg0
func.func @transpose_pair(%x: tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32> {
  %a = ds.transpose %x perm = [0, 2, 1, 3] : tensor<2x3x4x5xf32> -> tensor<2x4x3x5xf32>
  %b = ds.transpose %a perm = [0, 2, 1, 3] : tensor<2x4x3x5xf32> -> tensor<2x3x4x5xf32>
  return %b : tensor<2x3x4x5xf32>
}

// The identity permutation is no copy either.
// CHECK-LABEL: func.func @identity
// CHECK-NEXT: return %arg0
func.func @identity(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %a = ds.transpose %x perm = [0, 1] : tensor<2x3xf32> -> tensor<2x3xf32>
  return %a : tensor<2x3xf32>
}

// Two transposes that compose to another permutation stay: each may fold into a matmul's
// transpose flag in the lowering, their composition may not.
// CHECK-LABEL: func.func @kept
// CHECK: ds.transpose %arg0 perm = [0, 2, 1, 3]
// CHECK: ds.transpose %{{.+}} perm = [0, 1, 3, 2]
func.func @kept(%x: tensor<2x3x4x5xf32>) -> tensor<2x4x5x3xf32> {
  %a = ds.transpose %x perm = [0, 2, 1, 3] : tensor<2x3x4x5xf32> -> tensor<2x4x3x5xf32>
  %b = ds.transpose %a perm = [0, 1, 3, 2] : tensor<2x4x3x5xf32> -> tensor<2x4x5x3xf32>
  return %b : tensor<2x4x5x3xf32>
}
