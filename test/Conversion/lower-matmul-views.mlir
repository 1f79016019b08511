// RUN: ds-opt %s --ds-lower-to-runtime | FileCheck %s

// Attention's heads split out of a fused QKV projection [B=2, T=4, 3 x (H=2 x D=2)] and merged
// back: the slices, reshapes and transposes are index arithmetic that dsrt_matmul_view takes
// (b0, b1, M, N, K, then {offset, s0, s1, rows, columns} for lhs, rhs and the result), so none
// is lowered and no copy of q, k or v is made. The plan's peak: the input qkv (384 bytes), att
// 2x2x4x4 f32 (256) and the merged result 2x4x4 (128), 768; copies of q, k, v, k^T and y would
// add 640.
// q @ k^T: q from column 0 (strides b 48, h 2, t 12, d 1), k^T from column 4 read transposed
// (rows d stride 1, columns t stride 12); att contiguous.
// CHECK-DAG: llvm.mlir.global internal constant @[[V1G:__ds_i64_[0-9]+]](dense<[2, 2, 4, 4, 2, 0, 48, 2, 12, 1, 4, 48, 2, 1, 12, 0, 32, 16, 4, 1]> : tensor<20xi64>)
// att @ v: v from column 8; the result written into the merged heads [2, 4, 4] (b 16, h 2,
// t 4, d 1).
// CHECK-DAG: llvm.mlir.global internal constant @[[V2G:__ds_i64_[0-9]+]](dense<[2, 2, 4, 2, 4, 0, 32, 16, 4, 1, 8, 48, 2, 12, 1, 0, 16, 2, 4, 1]> : tensor<20xi64>)
// CHECK-LABEL: llvm.func @ds_micro_step
// CHECK-NOT: @dsrt_slice
// CHECK-NOT: @dsrt_transpose
// CHECK: %[[ATT:.+]] = llvm.call @dsrt_tensor_alloc
// CHECK: %[[V1:.+]] = llvm.mlir.addressof @[[V1G]]
// CHECK: llvm.call @dsrt_matmul_view(%{{.+}}, %[[ATT]], %[[QKV:.+]], %[[QKV]], %[[V1]])
// CHECK-NOT: @dsrt_slice
// CHECK-NOT: @dsrt_transpose
// CHECK: %[[Y:.+]] = llvm.call @dsrt_tensor_alloc
// CHECK: %[[V2:.+]] = llvm.mlir.addressof @[[V2G]]
// CHECK: llvm.call @dsrt_matmul_view(%{{.+}}, %[[Y]], %[[ATT]], %[[QKV]], %[[V2]])
// CHECK-NEXT: llvm.call @dsrt_tensor_free(%{{.+}}, %[[ATT]])
// CHECK-NOT: @dsrt_transpose
// CHECK: llvm.call @dsrt_reduce
// CHECK: \22micro_step_peak_bytes\22:768,
module attributes {ds.config = "{\"train_batch_size\":2}"} {
  func.func @micro_step(%qkv: tensor<2x4x12xf32> {ds.input_name = "qkv"}) -> tensor<f32> {
    %q0 = ds.slice %qkv dim = 2[0 : 4] : tensor<2x4x12xf32> -> tensor<2x4x4xf32>
    %k0 = ds.slice %qkv dim = 2[4 : 8] : tensor<2x4x12xf32> -> tensor<2x4x4xf32>
    %v0 = ds.slice %qkv dim = 2[8 : 12] : tensor<2x4x12xf32> -> tensor<2x4x4xf32>
    %q1 = ds.reshape %q0 : tensor<2x4x4xf32> -> tensor<2x4x2x2xf32>
    %q = ds.transpose %q1 perm = [0, 2, 1, 3] : tensor<2x4x2x2xf32> -> tensor<2x2x4x2xf32>
    %k1 = ds.reshape %k0 : tensor<2x4x4xf32> -> tensor<2x4x2x2xf32>
    %k = ds.transpose %k1 perm = [0, 2, 1, 3] : tensor<2x4x2x2xf32> -> tensor<2x2x4x2xf32>
    %v1 = ds.reshape %v0 : tensor<2x4x4xf32> -> tensor<2x4x2x2xf32>
    %v = ds.transpose %v1 perm = [0, 2, 1, 3] : tensor<2x4x2x2xf32> -> tensor<2x2x4x2xf32>
    %kt = ds.transpose %k perm = [0, 1, 3, 2] : tensor<2x2x4x2xf32> -> tensor<2x2x2x4xf32>
    %att = ds.matmul %q, %kt : tensor<2x2x4x2xf32>, tensor<2x2x2x4xf32> -> tensor<2x2x4x4xf32>
    %y = ds.matmul %att, %v : tensor<2x2x4x4xf32>, tensor<2x2x4x2xf32> -> tensor<2x2x4x2xf32>
    %yt = ds.transpose %y perm = [0, 2, 1, 3] : tensor<2x2x4x2xf32> -> tensor<2x4x2x2xf32>
    %ym = ds.reshape %yt : tensor<2x4x2x2xf32> -> tensor<2x4x4xf32>
    %s = ds.sum %ym dims = [0, 1, 2] : tensor<2x4x4xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
  func.func @optimizer_step(%lr: tensor<f32>, %step: tensor<f32>, %beta1: tensor<f64>,
                            %aux_lr: tensor<f32>) {
    return
  }
}
