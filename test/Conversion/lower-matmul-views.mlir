// RUN: ds-opt %s --split-input-file --ds-lower-to-runtime | FileCheck %s
// RUN: ds-opt %s --split-input-file --canonicalize --ds-lower-to-runtime | FileCheck %s --check-prefix=GRAD

// Attention's heads split out of a fused QKV projection [B=2, T=4, 3 x (H=2 x D=2)] and merged
// back: the slices, reshapes and transposes are index arithmetic that dsrt_matmul_view takes
// (b0, b1, M, N, K, then {offset, s0, s1, rows, columns} for lhs, rhs and the result), so none
// is lowered and no copy of q, k or v is made; the scores' scaling by 1/8 (a power of two) is
// the product's alpha, exact, and is not lowered either. The plan's peak: the input qkv (384 bytes), att
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
// CHECK-NEXT: %[[EIGHTH:.+]] = llvm.mlir.constant(1.250000e-01 : f64) : f64
// CHECK-NEXT: llvm.call @dsrt_matmul_view(%{{.+}}, %[[ATT]], %[[QKV:.+]], %[[QKV]], %[[V1]], %[[EIGHTH]])
// CHECK-NOT: @dsrt_binary
// CHECK-NOT: @dsrt_fill
// CHECK-NOT: @dsrt_slice
// CHECK-NOT: @dsrt_transpose
// CHECK: %[[Y:.+]] = llvm.call @dsrt_tensor_alloc
// CHECK: %[[V2:.+]] = llvm.mlir.addressof @[[V2G]]
// CHECK-NEXT: %[[ONE:.+]] = llvm.mlir.constant(1.000000e+00 : f64) : f64
// CHECK-NEXT: llvm.call @dsrt_matmul_view(%{{.+}}, %[[Y]], %[[ATT]], %[[QKV]], %[[V2]], %[[ONE]])
// CHECK-NEXT: llvm.call @dsrt_tensor_free(%{{.+}}, %[[ATT]])
// CHECK-NOT: @dsrt_transpose
// CHECK: llvm.call @dsrt_reduce
// CHECK: \22micro_step_peak_bytes\22:768,

// Each head product writes its piece of the [2, 4, 12] gradient (strides b 48, h 2, t 12,
// d 1; dq from column 0, dk 4, dv 8): one allocation, no fill, no transpose, no copy. dq and
// dk read the gradient scaled by 1/4 (alpha; the scaling is not lowered), dv unscaled.
// GRAD: {{^//[ ]-----}}
// GRAD-DAG: llvm.mlir.global internal constant @[[DQ:__ds_i64_[0-9]+]](dense<[2, 2, 4, 2, 4, 0, 32, 16, 4, 1, 0, 16, 8, 2, 1, 0, 48, 2, 12, 1]> : tensor<20xi64>)
// GRAD-DAG: llvm.mlir.global internal constant @[[DK:__ds_i64_[0-9]+]](dense<[2, 2, 4, 2, 4, 0, 32, 16, 4, 1, 0, 16, 8, 2, 1, 4, 48, 2, 12, 1]> : tensor<20xi64>)
// GRAD-DAG: llvm.mlir.global internal constant @[[DV:__ds_i64_[0-9]+]](dense<[2, 2, 4, 2, 4, 0, 32, 16, 4, 1, 0, 16, 8, 2, 1, 8, 48, 2, 12, 1]> : tensor<20xi64>)
// GRAD: llvm.func @ds_micro_step
// GRAD: %[[G:.+]] = llvm.call @dsrt_tensor_alloc
// GRAD-NOT: @dsrt_tensor_alloc
// GRAD-NOT: @dsrt_binary
// GRAD: llvm.mlir.addressof @[[DQ]]
// GRAD: %[[A1:.+]] = llvm.mlir.constant(2.500000e-01 : f64) : f64
// GRAD: llvm.call @dsrt_matmul_view(%{{.+}}, %[[G]], %{{.+}}, %{{.+}}, %{{.+}}, %[[A1]])
// GRAD: llvm.mlir.addressof @[[DK]]
// GRAD: %[[A2:.+]] = llvm.mlir.constant(2.500000e-01 : f64) : f64
// GRAD: llvm.call @dsrt_matmul_view(%{{.+}}, %[[G]], %{{.+}}, %{{.+}}, %{{.+}}, %[[A2]])
// GRAD: llvm.mlir.addressof @[[DV]]
// GRAD: %[[A3:.+]] = llvm.mlir.constant(1.000000e+00 : f64) : f64
// GRAD: llvm.call @dsrt_matmul_view(%{{.+}}, %[[G]], %{{.+}}, %{{.+}}, %{{.+}}, %[[A3]])
// GRAD-NOT: @dsrt_fill
// GRAD-NOT: @dsrt_transpose
// GRAD-NOT: @dsrt_insert_slice
// GRAD: llvm.call @dsrt_reduce(%{{.+}}, %{{.+}}, %{{.+}}, %[[G]],
module attributes {ds.run = #ds.run<train_batch_size = 2, micro_batch_size = 2, gradient_accumulation_steps = 1, data_parallel_size = 1, steps_per_print = 10, seed = 1234, precision = fp32, zero_stage = 0, param_persistence_threshold = 100000, optimizer = AdamW, lr = 1.0e-3, aux_lr = 1.0e-3, beta1 = 0.9, schedule = <kind = constant>, deepspeed = "{}", numbers = "{}">} {
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
    %scores = ds.matmul %q, %kt : tensor<2x2x4x2xf32>, tensor<2x2x2x4xf32> -> tensor<2x2x4x4xf32>
    %eighth = ds.constant dense<0.125> : tensor<f32>
    %att = ds.mul %scores, %eighth : tensor<2x2x4x4xf32>, tensor<f32> -> tensor<2x2x4x4xf32>
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

// -----

module attributes {ds.run = #ds.run<train_batch_size = 2, micro_batch_size = 2, gradient_accumulation_steps = 1, data_parallel_size = 1, steps_per_print = 10, seed = 1234, precision = fp32, zero_stage = 0, param_persistence_threshold = 100000, optimizer = AdamW, lr = 1.0e-3, aux_lr = 1.0e-3, beta1 = 0.9, schedule = <kind = constant>, deepspeed = "{}", numbers = "{}">} {
  // The way back: three head products merged and inserted into the zeros of a [2, 4, 12]
  // gradient, which canonicalize makes a concatenation that the products write in place.
  func.func @micro_step(%att: tensor<2x2x4x4xf32> {ds.input_name = "att"},
                        %q: tensor<2x2x4x2xf32> {ds.input_name = "q"},
                        %k: tensor<2x2x4x2xf32> {ds.input_name = "k"},
                        %v: tensor<2x2x4x2xf32> {ds.input_name = "v"}) -> tensor<f32> {
    %z = ds.constant dense<0.0> : tensor<2x4x12xf32>
    %quarter = ds.constant dense<0.25> : tensor<f32>
    %ds = ds.mul %quarter, %att : tensor<f32>, tensor<2x2x4x4xf32> -> tensor<2x2x4x4xf32>
    %dq = ds.matmul %ds, %q : tensor<2x2x4x4xf32>, tensor<2x2x4x2xf32> -> tensor<2x2x4x2xf32>
    %dk = ds.matmul %ds, %k : tensor<2x2x4x4xf32>, tensor<2x2x4x2xf32> -> tensor<2x2x4x2xf32>
    %dv = ds.matmul %att, %v : tensor<2x2x4x4xf32>, tensor<2x2x4x2xf32> -> tensor<2x2x4x2xf32>
    %tq = ds.transpose %dq perm = [0, 2, 1, 3] : tensor<2x2x4x2xf32> -> tensor<2x4x2x2xf32>
    %rq = ds.reshape %tq : tensor<2x4x2x2xf32> -> tensor<2x4x4xf32>
    %tk = ds.transpose %dk perm = [0, 2, 1, 3] : tensor<2x2x4x2xf32> -> tensor<2x4x2x2xf32>
    %rk = ds.reshape %tk : tensor<2x4x2x2xf32> -> tensor<2x4x4xf32>
    %tv = ds.transpose %dv perm = [0, 2, 1, 3] : tensor<2x2x4x2xf32> -> tensor<2x4x2x2xf32>
    %rv = ds.reshape %tv : tensor<2x4x2x2xf32> -> tensor<2x4x4xf32>
    %0 = ds.insert_slice %rv into %z dim = 2[8] : tensor<2x4x4xf32> into tensor<2x4x12xf32>
    %1 = ds.insert_slice %rk into %0 dim = 2[4] : tensor<2x4x4xf32> into tensor<2x4x12xf32>
    %2 = ds.insert_slice %rq into %1 dim = 2[0] : tensor<2x4x4xf32> into tensor<2x4x12xf32>
    %s = ds.sum %2 dims = [0, 1, 2] : tensor<2x4x12xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
  func.func @optimizer_step(%lr: tensor<f32>, %step: tensor<f32>, %beta1: tensor<f64>,
                            %aux_lr: tensor<f32>) {
    return
  }
}

// -----

// Scalings that do not become alpha: by 0.1 (not a power of two: a rounding of its own), and by
// 1/2 where the scaled scores have another use (the sum): both multiplications are lowered.
// CHECK-LABEL: llvm.func @ds_micro_step
// CHECK: llvm.call @dsrt_matmul(
// CHECK: llvm.call @dsrt_binary(
// CHECK: llvm.call @dsrt_binary(
// CHECK: %[[HALF:.+]] = llvm.mlir.constant(5.000000e-01 : f64) : f64
// CHECK-NEXT: llvm.call @dsrt_matmul_view({{.+}}, %[[HALF]])
module attributes {ds.run = #ds.run<train_batch_size = 2, micro_batch_size = 2, gradient_accumulation_steps = 1, data_parallel_size = 1, steps_per_print = 10, seed = 1234, precision = fp32, zero_stage = 0, param_persistence_threshold = 100000, optimizer = AdamW, lr = 1.0e-3, aux_lr = 1.0e-3, beta1 = 0.9, schedule = <kind = constant>, deepspeed = "{}", numbers = "{}">} {
  func.func @micro_step(%q: tensor<2x2x4x2xf32> {ds.input_name = "q"},
                        %k: tensor<2x2x4x2xf32> {ds.input_name = "k"}) -> tensor<f32> {
    %tenth = ds.constant dense<0.1> : tensor<f32>
    %half = ds.constant dense<0.5> : tensor<f32>
    %kt = ds.transpose %k perm = [0, 1, 3, 2] : tensor<2x2x4x2xf32> -> tensor<2x2x2x4xf32>
    %a = ds.matmul %q, %kt : tensor<2x2x4x2xf32>, tensor<2x2x2x4xf32> -> tensor<2x2x4x4xf32>
    %a1 = ds.mul %a, %tenth : tensor<2x2x4x4xf32>, tensor<f32> -> tensor<2x2x4x4xf32>
    %h = ds.mul %a1, %half : tensor<2x2x4x4xf32>, tensor<f32> -> tensor<2x2x4x4xf32>
    %b = ds.matmul %h, %q : tensor<2x2x4x4xf32>, tensor<2x2x4x2xf32> -> tensor<2x2x4x2xf32>
    %s1 = ds.sum %b dims = [0, 1, 2, 3] : tensor<2x2x4x2xf32> -> tensor<f32>
    %s2 = ds.sum %h dims = [0, 1, 2, 3] : tensor<2x2x4x4xf32> -> tensor<f32>
    %s = ds.add %s1, %s2 : tensor<f32>, tensor<f32> -> tensor<f32>
    return %s : tensor<f32>
  }
  func.func @optimizer_step(%lr: tensor<f32>, %step: tensor<f32>, %beta1: tensor<f64>,
                            %aux_lr: tensor<f32>) {
    return
  }
}

