// RUN: ds-opt %s --ds-fuse-swiglu --split-input-file | FileCheck %s

// HF's MoE experts: the fused gate-and-up product chunked in two, silu (x * sigmoid(x)) of the
// gate times the up projection, through the reshapes HF's batched_mm leaves. One ds.swiglu on
// the product's rows, told its ids; the slices, sigmoid and products are gone.
// CHECK-LABEL: func.func @experts
// CHECK: %[[H:.+]] = ds.expert_linear %arg0, %arg1[%arg2]
// CHECK-NEXT: %[[Y:.+]] = ds.swiglu %[[H]] rows[%arg2] : (tensor<6x16xf32>, tensor<6xi64>) -> tensor<6x8xf32>
// CHECK-NEXT: return %[[Y]]
func.func @experts(%x: tensor<6x4xf32>, %w: tensor<3x16x4xf32>, %ids: tensor<6xi64>) -> tensor<6x8xf32> {
  %h = ds.expert_linear %x, %w[%ids] : (tensor<6x4xf32>, tensor<3x16x4xf32>, tensor<6xi64>) -> tensor<6x16xf32>
  %h3 = ds.reshape %h : tensor<6x16xf32> -> tensor<6x16x1xf32>
  %h2 = ds.reshape %h3 : tensor<6x16x1xf32> -> tensor<6x16xf32>
  %g = ds.slice %h2 dim = 1[0 : 8] : tensor<6x16xf32> -> tensor<6x8xf32>
  %s = ds.sigmoid %g : tensor<6x8xf32>
  %a = ds.mul %g, %s : tensor<6x8xf32>, tensor<6x8xf32> -> tensor<6x8xf32>
  %u = ds.slice %h2 dim = 1[8 : 16] : tensor<6x16xf32> -> tensor<6x8xf32>
  %y = ds.mul %a, %u : tensor<6x8xf32>, tensor<6x8xf32> -> tensor<6x8xf32>
  return %y : tensor<6x8xf32>
}

// -----

// The products in the other order (up times silu, sigmoid times gate) fold too.
// CHECK-LABEL: func.func @commuted
// CHECK: ds.swiglu %{{.+}} rows[%arg2]
// CHECK-NOT: ds.sigmoid
func.func @commuted(%x: tensor<6x4xf32>, %w: tensor<3x16x4xf32>, %ids: tensor<6xi64>) -> tensor<6x8xf32> {
  %h = ds.expert_linear %x, %w[%ids] : (tensor<6x4xf32>, tensor<3x16x4xf32>, tensor<6xi64>) -> tensor<6x16xf32>
  %g = ds.slice %h dim = 1[0 : 8] : tensor<6x16xf32> -> tensor<6x8xf32>
  %s = ds.sigmoid %g : tensor<6x8xf32>
  %a = ds.mul %s, %g : tensor<6x8xf32>, tensor<6x8xf32> -> tensor<6x8xf32>
  %u = ds.slice %h dim = 1[8 : 16] : tensor<6x16xf32> -> tensor<6x8xf32>
  %y = ds.mul %u, %a : tensor<6x8xf32>, tensor<6x8xf32> -> tensor<6x8xf32>
  return %y : tensor<6x8xf32>
}

// -----

// The gate read elsewhere too (here returned): the SwiGLU folds, the gate's slice stays for
// its other reader.
// CHECK-LABEL: func.func @gate_kept
// CHECK: %[[G:.+]] = ds.slice
// CHECK-NEXT: %[[Y:.+]] = ds.swiglu
// CHECK-NEXT: return %[[Y]], %[[G]]
func.func @gate_kept(%x: tensor<6x4xf32>, %w: tensor<3x16x4xf32>, %ids: tensor<6xi64>) -> (tensor<6x8xf32>, tensor<6x8xf32>) {
  %h = ds.expert_linear %x, %w[%ids] : (tensor<6x4xf32>, tensor<3x16x4xf32>, tensor<6xi64>) -> tensor<6x16xf32>
  %g = ds.slice %h dim = 1[0 : 8] : tensor<6x16xf32> -> tensor<6x8xf32>
  %s = ds.sigmoid %g : tensor<6x8xf32>
  %a = ds.mul %g, %s : tensor<6x8xf32>, tensor<6x8xf32> -> tensor<6x8xf32>
  %u = ds.slice %h dim = 1[8 : 16] : tensor<6x16xf32> -> tensor<6x8xf32>
  %y = ds.mul %a, %u : tensor<6x8xf32>, tensor<6x8xf32> -> tensor<6x8xf32>
  return %y, %g : tensor<6x8xf32>, tensor<6x8xf32>
}

// -----

// Not a SwiGLU of an expert product's halves: a dense product's rows (their ids unknown), the
// halves swapped (silu of the second half), a strided slice, a sigmoid of another value.
// CHECK-LABEL: func.func @not_folded
// CHECK-NOT: ds.swiglu
// CHECK-COUNT-4: ds.sigmoid
func.func @not_folded(%x: tensor<6x4xf32>, %w: tensor<3x16x4xf32>, %ids: tensor<6xi64>, %d: tensor<16x4xf32>) -> (tensor<6x8xf32>, tensor<6x8xf32>, tensor<6x8xf32>, tensor<6x8xf32>) {
  %dense = ds.linear %x, %d : (tensor<6x4xf32>, tensor<16x4xf32>) -> tensor<6x16xf32>
  %g0 = ds.slice %dense dim = 1[0 : 8] : tensor<6x16xf32> -> tensor<6x8xf32>
  %s0 = ds.sigmoid %g0 : tensor<6x8xf32>
  %a0 = ds.mul %g0, %s0 : tensor<6x8xf32>, tensor<6x8xf32> -> tensor<6x8xf32>
  %u0 = ds.slice %dense dim = 1[8 : 16] : tensor<6x16xf32> -> tensor<6x8xf32>
  %y0 = ds.mul %a0, %u0 : tensor<6x8xf32>, tensor<6x8xf32> -> tensor<6x8xf32>
  %h = ds.expert_linear %x, %w[%ids] : (tensor<6x4xf32>, tensor<3x16x4xf32>, tensor<6xi64>) -> tensor<6x16xf32>
  %g1 = ds.slice %h dim = 1[8 : 16] : tensor<6x16xf32> -> tensor<6x8xf32>
  %s1 = ds.sigmoid %g1 : tensor<6x8xf32>
  %a1 = ds.mul %g1, %s1 : tensor<6x8xf32>, tensor<6x8xf32> -> tensor<6x8xf32>
  %u1 = ds.slice %h dim = 1[0 : 8] : tensor<6x16xf32> -> tensor<6x8xf32>
  %y1 = ds.mul %a1, %u1 : tensor<6x8xf32>, tensor<6x8xf32> -> tensor<6x8xf32>
  %g2 = ds.slice %h dim = 1[0 : 16 : 2] : tensor<6x16xf32> -> tensor<6x8xf32>
  %s2 = ds.sigmoid %g2 : tensor<6x8xf32>
  %a2 = ds.mul %g2, %s2 : tensor<6x8xf32>, tensor<6x8xf32> -> tensor<6x8xf32>
  %u2 = ds.slice %h dim = 1[8 : 16] : tensor<6x16xf32> -> tensor<6x8xf32>
  %y2 = ds.mul %a2, %u2 : tensor<6x8xf32>, tensor<6x8xf32> -> tensor<6x8xf32>
  %g3 = ds.slice %h dim = 1[0 : 8] : tensor<6x16xf32> -> tensor<6x8xf32>
  %s3 = ds.sigmoid %u2 : tensor<6x8xf32>
  %a3 = ds.mul %g3, %s3 : tensor<6x8xf32>, tensor<6x8xf32> -> tensor<6x8xf32>
  %y3 = ds.mul %a3, %u2 : tensor<6x8xf32>, tensor<6x8xf32> -> tensor<6x8xf32>
  return %y0, %y1, %y2, %y3 : tensor<6x8xf32>, tensor<6x8xf32>, tensor<6x8xf32>, tensor<6x8xf32>
}
