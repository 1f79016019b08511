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

// Insertions that tile their destination, each piece once, are a concatenation (the gradient
// of q, k, v split from one projection): no zero fill, no read of the destination.
// CHECK-LABEL: func.func @insert_slices_tile
// CHECK-NEXT: %[[C:.+]] = ds.concat %arg2, %arg1, %arg0 dim = 2
// CHECK-NEXT: return %[[C]]
func.func @insert_slices_tile(%a: tensor<2x3x4xf32>, %b: tensor<2x3x4xf32>,
                              %c: tensor<2x3x4xf32>) -> tensor<2x3x12xf32> {
  %z = ds.constant dense<0.0> : tensor<2x3x12xf32>
  %0 = ds.insert_slice %a into %z dim = 2[8] : tensor<2x3x4xf32> into tensor<2x3x12xf32>
  %1 = ds.insert_slice %b into %0 dim = 2[4] : tensor<2x3x4xf32> into tensor<2x3x12xf32>
  %2 = ds.insert_slice %c into %1 dim = 2[0] : tensor<2x3x4xf32> into tensor<2x3x12xf32>
  return %2 : tensor<2x3x12xf32>
}

// A gap (the destination's zeros show) or an overlap keeps the insertions.
// CHECK-LABEL: func.func @insert_slices_gap
// CHECK-NOT: ds.concat
// CHECK-COUNT-2: ds.insert_slice
// CHECK-LABEL: func.func @insert_slices_overlap
// CHECK-NOT: ds.concat
// CHECK-COUNT-2: ds.insert_slice
func.func @insert_slices_gap(%a: tensor<2x3x4xf32>, %b: tensor<2x3x4xf32>) -> tensor<2x3x12xf32> {
  %z = ds.constant dense<0.0> : tensor<2x3x12xf32>
  %0 = ds.insert_slice %a into %z dim = 2[8] : tensor<2x3x4xf32> into tensor<2x3x12xf32>
  %1 = ds.insert_slice %b into %0 dim = 2[0] : tensor<2x3x4xf32> into tensor<2x3x12xf32>
  return %1 : tensor<2x3x12xf32>
}
func.func @insert_slices_overlap(%a: tensor<2x3x8xf32>, %b: tensor<2x3x8xf32>) -> tensor<2x3x12xf32> {
  %z = ds.constant dense<0.0> : tensor<2x3x12xf32>
  %0 = ds.insert_slice %a into %z dim = 2[4] : tensor<2x3x8xf32> into tensor<2x3x12xf32>
  %1 = ds.insert_slice %b into %0 dim = 2[0] : tensor<2x3x8xf32> into tensor<2x3x12xf32>
  return %1 : tensor<2x3x12xf32>
}

// The gradient of a masked softmax, masked again: where the forward filled -inf the softmax is
// exactly 0, so its gradient there is already 0 (y * (dy - sum(dy * y)) with y = 0) and
// autodiff's where(mask, 0, dx) selects nothing new (GPT's masked_fill before F.softmax).
// Either polarity of the mask.
// CHECK-LABEL: func.func @masked_softmax_grad
// CHECK: %[[FWD:.+]] = ds.where %arg0
// CHECK-NEXT: %[[Y:.+]] = ds.softmax %[[FWD]]
// CHECK-NEXT: %[[DX:.+]] = ds.softmax_grad %[[Y]], %arg2
// CHECK-NEXT: return %[[Y]], %[[DX]]
// CHECK-LABEL: func.func @masked_softmax_grad_kept_mask
// CHECK: %[[FWD:.+]] = ds.where %arg0
// CHECK-NEXT: %[[Y:.+]] = ds.softmax %[[FWD]]
// CHECK-NEXT: %[[DX:.+]] = ds.softmax_grad %[[Y]], %arg2
// CHECK-NEXT: return %[[Y]], %[[DX]]
func.func @masked_softmax_grad(%mask: tensor<1x4x4xi1>, %x: tensor<2x4x4xf32>,
                               %dy: tensor<2x4x4xf32>) -> (tensor<2x4x4xf32>, tensor<2x4x4xf32>) {
  %ninf = ds.constant dense<0xFF800000> : tensor<f32>
  %zero = ds.constant dense<0.0> : tensor<f32>
  %m = ds.where %mask, %ninf, %x : (tensor<1x4x4xi1>, tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %y = ds.softmax %m dim = 2 : tensor<2x4x4xf32>
  %g = ds.softmax_grad %y, %dy dim = 2 : tensor<2x4x4xf32>
  %dx = ds.where %mask, %zero, %g : (tensor<1x4x4xi1>, tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  return %y, %dx : tensor<2x4x4xf32>, tensor<2x4x4xf32>
}
func.func @masked_softmax_grad_kept_mask(%keep: tensor<1x4x4xi1>, %x: tensor<2x4x4xf32>,
                                         %dy: tensor<2x4x4xf32>) -> (tensor<2x4x4xf32>, tensor<2x4x4xf32>) {
  %ninf = ds.constant dense<0xFF800000> : tensor<f32>
  %zero = ds.constant dense<0.0> : tensor<2x4x4xf32>
  %m = ds.where %keep, %x, %ninf : (tensor<1x4x4xi1>, tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  %y = ds.softmax %m dim = 2 : tensor<2x4x4xf32>
  %g = ds.softmax_grad %y, %dy dim = 2 : tensor<2x4x4xf32>
  %dx = ds.where %keep, %g, %zero : (tensor<1x4x4xi1>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  return %y, %dx : tensor<2x4x4xf32>, tensor<2x4x4xf32>
}

// Kept: another mask, the other polarity (zeros where the forward kept x), a log-softmax (its
// output is -inf there, its gradient not 0), or a fill that is not -inf.
// CHECK-LABEL: func.func @masked_softmax_grad_other_mask
// CHECK-COUNT-2: ds.where
// CHECK-LABEL: func.func @masked_softmax_grad_polarity
// CHECK-COUNT-2: ds.where
// CHECK-LABEL: func.func @masked_log_softmax_grad
// CHECK-COUNT-2: ds.where
// CHECK-LABEL: func.func @masked_softmax_grad_finite_fill
// CHECK-COUNT-2: ds.where
func.func @masked_softmax_grad_other_mask(%mask: tensor<1x4x4xi1>, %other: tensor<1x4x4xi1>,
                                          %x: tensor<2x4x4xf32>, %dy: tensor<2x4x4xf32>) -> tensor<2x4x4xf32> {
  %ninf = ds.constant dense<0xFF800000> : tensor<f32>
  %zero = ds.constant dense<0.0> : tensor<f32>
  %m = ds.where %mask, %ninf, %x : (tensor<1x4x4xi1>, tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %y = ds.softmax %m dim = 2 : tensor<2x4x4xf32>
  %g = ds.softmax_grad %y, %dy dim = 2 : tensor<2x4x4xf32>
  %dx = ds.where %other, %zero, %g : (tensor<1x4x4xi1>, tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  return %dx : tensor<2x4x4xf32>
}
func.func @masked_softmax_grad_polarity(%mask: tensor<1x4x4xi1>, %x: tensor<2x4x4xf32>,
                                        %dy: tensor<2x4x4xf32>) -> tensor<2x4x4xf32> {
  %ninf = ds.constant dense<0xFF800000> : tensor<f32>
  %zero = ds.constant dense<0.0> : tensor<f32>
  %m = ds.where %mask, %ninf, %x : (tensor<1x4x4xi1>, tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %y = ds.softmax %m dim = 2 : tensor<2x4x4xf32>
  %g = ds.softmax_grad %y, %dy dim = 2 : tensor<2x4x4xf32>
  %dx = ds.where %mask, %g, %zero : (tensor<1x4x4xi1>, tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  return %dx : tensor<2x4x4xf32>
}
func.func @masked_log_softmax_grad(%mask: tensor<1x4x4xi1>, %x: tensor<2x4x4xf32>,
                                   %dy: tensor<2x4x4xf32>) -> tensor<2x4x4xf32> {
  %ninf = ds.constant dense<0xFF800000> : tensor<f32>
  %zero = ds.constant dense<0.0> : tensor<f32>
  %m = ds.where %mask, %ninf, %x : (tensor<1x4x4xi1>, tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %y = ds.log_softmax %m dim = 2 : tensor<2x4x4xf32>
  %g = ds.softmax_grad %y, %dy dim = 2 log : tensor<2x4x4xf32>
  %dx = ds.where %mask, %zero, %g : (tensor<1x4x4xi1>, tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  return %dx : tensor<2x4x4xf32>
}
func.func @masked_softmax_grad_finite_fill(%mask: tensor<1x4x4xi1>, %x: tensor<2x4x4xf32>,
                                           %dy: tensor<2x4x4xf32>) -> tensor<2x4x4xf32> {
  %big = ds.constant dense<-1.0e9> : tensor<f32>
  %zero = ds.constant dense<0.0> : tensor<f32>
  %m = ds.where %mask, %big, %x : (tensor<1x4x4xi1>, tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %y = ds.softmax %m dim = 2 : tensor<2x4x4xf32>
  %g = ds.softmax_grad %y, %dy dim = 2 : tensor<2x4x4xf32>
  %dx = ds.where %mask, %zero, %g : (tensor<1x4x4xi1>, tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  return %dx : tensor<2x4x4xf32>
}
