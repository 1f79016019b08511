// RUN: ds-opt %s --split-input-file --ds-lower-to-runtime | FileCheck %s

// The 16-bit step's attention: the same views in bf16 (2 bytes an element; the views count
// elements, so the descriptors are the f32 case's), the scaling by 1/8 the product's alpha as
// in f32. Nothing copied, nothing scaled on its own.
// CHECK-DAG: llvm.mlir.global internal constant @[[B1G:__ds_i64_[0-9]+]](dense<[2, 2, 4, 4, 2, 0, 48, 2, 12, 1, 4, 48, 2, 1, 12, 0, 32, 16, 4, 1]> : tensor<20xi64>)
// CHECK-DAG: llvm.mlir.global internal constant @[[B2G:__ds_i64_[0-9]+]](dense<[2, 2, 4, 2, 4, 0, 32, 16, 4, 1, 8, 48, 2, 12, 1, 0, 16, 2, 4, 1]> : tensor<20xi64>)
// CHECK-LABEL: llvm.func @ds_micro_step
// CHECK-NOT: @dsrt_slice
// CHECK-NOT: @dsrt_transpose
// CHECK: llvm.mlir.addressof @[[B1G]]
// CHECK-NEXT: %[[E16:.+]] = llvm.mlir.constant(1.250000e-01 : f64) : f64
// CHECK-NEXT: llvm.call @dsrt_matmul_view({{.+}}, %[[E16]])
// CHECK-NOT: @dsrt_binary
// CHECK-NOT: @dsrt_transpose
// CHECK: llvm.mlir.addressof @[[B2G]]
// CHECK-NEXT: llvm.mlir.constant(1.000000e+00 : f64) : f64
// CHECK-NEXT: llvm.call @dsrt_matmul_view(
// CHECK-NOT: @dsrt_transpose
// CHECK: llvm.call @dsrt_reduce
// CHECK: \22micro_step_peak_bytes\22:384,
module attributes {ds.run = #ds.run<train_batch_size = 2, micro_batch_size = 2, gradient_accumulation_steps = 1, data_parallel_size = 1, steps_per_print = 10, seed = 1234, precision = fp32, zero_stage = 0, param_persistence_threshold = 100000, optimizer = AdamW, lr = 1.0e-3, aux_lr = 1.0e-3, beta1 = 0.9, schedule = <kind = constant>, deepspeed = "{}", numbers = "{}">} {
  func.func @micro_step(%qkv: tensor<2x4x12xbf16> {ds.input_name = "qkv"}) -> tensor<bf16> {
    %q0 = ds.slice %qkv dim = 2[0 : 4] : tensor<2x4x12xbf16> -> tensor<2x4x4xbf16>
    %k0 = ds.slice %qkv dim = 2[4 : 8] : tensor<2x4x12xbf16> -> tensor<2x4x4xbf16>
    %v0 = ds.slice %qkv dim = 2[8 : 12] : tensor<2x4x12xbf16> -> tensor<2x4x4xbf16>
    %q1 = ds.reshape %q0 : tensor<2x4x4xbf16> -> tensor<2x4x2x2xbf16>
    %q = ds.transpose %q1 perm = [0, 2, 1, 3] : tensor<2x4x2x2xbf16> -> tensor<2x2x4x2xbf16>
    %k1 = ds.reshape %k0 : tensor<2x4x4xbf16> -> tensor<2x4x2x2xbf16>
    %k = ds.transpose %k1 perm = [0, 2, 1, 3] : tensor<2x4x2x2xbf16> -> tensor<2x2x4x2xbf16>
    %v1 = ds.reshape %v0 : tensor<2x4x4xbf16> -> tensor<2x4x2x2xbf16>
    %v = ds.transpose %v1 perm = [0, 2, 1, 3] : tensor<2x4x2x2xbf16> -> tensor<2x2x4x2xbf16>
    %kt = ds.transpose %k perm = [0, 1, 3, 2] : tensor<2x2x4x2xbf16> -> tensor<2x2x2x4xbf16>
    %scores = ds.matmul %q, %kt : tensor<2x2x4x2xbf16>, tensor<2x2x2x4xbf16> -> tensor<2x2x4x4xbf16>
    %eighth = ds.constant dense<0.125> : tensor<bf16>
    %att = ds.mul %scores, %eighth : tensor<2x2x4x4xbf16>, tensor<bf16> -> tensor<2x2x4x4xbf16>
    %y = ds.matmul %att, %v : tensor<2x2x4x4xbf16>, tensor<2x2x4x2xbf16> -> tensor<2x2x4x2xbf16>
    %yt = ds.transpose %y perm = [0, 2, 1, 3] : tensor<2x2x4x2xbf16> -> tensor<2x4x2x2xbf16>
    %ym = ds.reshape %yt : tensor<2x4x2x2xbf16> -> tensor<2x4x4xbf16>
    %s = ds.sum %ym dims = [0, 1, 2] : tensor<2x4x4xbf16> -> tensor<bf16>
    return %s : tensor<bf16>
  }
  func.func @optimizer_step(%lr: tensor<f32>, %step: tensor<f32>, %beta1: tensor<f64>,
                            %aux_lr: tensor<f32>) {
    return
  }
}

// -----

// In f16 the scaling by 1/8 stays a multiplication of its own (k^T is the product's transposed
// operand, as in f32): f16's subnormals begin at 6.1e-5, where rounding the product and then
// scaling it (PyTorch's two roundings) is not scaling the sum and rounding once.
// CHECK-LABEL: llvm.func @ds_micro_step
// CHECK-NOT: @dsrt_transpose
// CHECK: %[[TB:.+]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: llvm.call @dsrt_matmul({{.+}}, %[[TB]])
// CHECK: %[[E:.+]] = llvm.mlir.constant(1.250000e-01 : f64) : f64
// CHECK-NEXT: llvm.call @dsrt_fill({{.+}}, %[[E]])
// CHECK: llvm.call @dsrt_binary(
// CHECK-NOT: @dsrt_transpose
// CHECK: llvm.call @dsrt_reduce
module attributes {ds.run = #ds.run<train_batch_size = 2, micro_batch_size = 2, gradient_accumulation_steps = 1, data_parallel_size = 1, steps_per_print = 10, seed = 1234, precision = fp32, zero_stage = 0, param_persistence_threshold = 100000, optimizer = AdamW, lr = 1.0e-3, aux_lr = 1.0e-3, beta1 = 0.9, schedule = <kind = constant>, deepspeed = "{}", numbers = "{}">} {
  func.func @micro_step(%q: tensor<2x2x4x2xf16> {ds.input_name = "q"},
                        %k: tensor<2x2x4x2xf16> {ds.input_name = "k"}) -> tensor<f16> {
    %kt = ds.transpose %k perm = [0, 1, 3, 2] : tensor<2x2x4x2xf16> -> tensor<2x2x2x4xf16>
    %scores = ds.matmul %q, %kt : tensor<2x2x4x2xf16>, tensor<2x2x2x4xf16> -> tensor<2x2x4x4xf16>
    %eighth = ds.constant dense<0.125> : tensor<f16>
    %att = ds.mul %scores, %eighth : tensor<2x2x4x4xf16>, tensor<f16> -> tensor<2x2x4x4xf16>
    %s = ds.sum %att dims = [0, 1, 2, 3] : tensor<2x2x4x4xf16> -> tensor<f16>
    return %s : tensor<f16>
  }
  func.func @optimizer_step(%lr: tensor<f32>, %step: tensor<f32>, %beta1: tensor<f64>,
                            %aux_lr: tensor<f32>) {
    return
  }
}
