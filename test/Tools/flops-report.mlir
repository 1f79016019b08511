// RUN: ds-opt %s --flops-report | FileCheck %s
// RUN: echo 'module {}' > %t.empty.mlir
// RUN: not ds-opt %t.empty.mlir --flops-report 2>&1 | FileCheck %s --check-prefix=NOSTEP

// The cost model by hand, per micro-step: the linear 2 x 4 x 16 x 8 = 1024 matrix FLOPs plus
// its bias's 64 additions; the batched matmul 2 x (2 x 4 x 3) x 8 = 384; tanh one per element
// (64); the sum one per input element (64); the reshape, a view, nothing. So 1600 FLOPs, 1408
// of them matrix products. Bytes, every tensor operand and result once: the linear
// 128 + 512 + 64 + 256, the matmul 256 + 192 + 96, tanh 2 x 256, the sum 256 + 4: 2276. The
// step runs it gradient_accumulation_steps = 2 times; its update (a product of 16 elements:
// 16 FLOPs, 3 x 64 bytes) once.
// CHECK: FLOPs per rank and step (2 micro-steps and the update)
// CHECK: micro_step 2 1600 1408 2276
// CHECK: optimizer_step 1 16 0 192
// CHECK: step 1 3216 2816 4744
// CHECK: op calls flops share bytes
// CHECK-NEXT: ds.linear 2 2176 67.7% 1920
// CHECK-NEXT: ds.matmul 2 768 23.9% 1088
// CHECK-NEXT: ds.sum 2 128 4.0% 520
// CHECK-NEXT: ds.tanh 2 128 4.0% 1024
// CHECK-NEXT: ds.mul 1 16 0.5% 192
// CHECK-NOT: ds.reshape
module attributes {ds.run = #ds.run<train_batch_size = 2, micro_batch_size = 1, gradient_accumulation_steps = 2, data_parallel_size = 1, steps_per_print = 10, seed = 1234, precision = fp32, zero_stage = 0, param_persistence_threshold = 100000, optimizer = AdamW, lr = 1.0e-3, aux_lr = 1.0e-3, beta1 = 0.9, schedule = <kind = constant>, deepspeed = "{}", numbers = "{}">} {
  func.func @micro_step(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>,
                        %m: tensor<2x4x8xf32>, %n: tensor<2x8x3xf32>) -> tensor<f32> {
    %y = ds.linear %x, %w, %b : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
    %p = ds.matmul %m, %n : tensor<2x4x8xf32>, tensor<2x8x3xf32> -> tensor<2x4x3xf32>
    %r = ds.reshape %y : tensor<4x16xf32> -> tensor<64xf32>
    %t = ds.tanh %y : tensor<4x16xf32>
    %s = ds.sum %t dims = [0, 1] : tensor<4x16xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
  func.func @optimizer_step(%g: tensor<16xf32>) {
    %h = ds.mul %g, %g : tensor<16xf32>, tensor<16xf32> -> tensor<16xf32>
    return
  }
}


// NOSTEP: --flops-report needs a training step (@micro_step and @optimizer_step, or ds-pipeline's per-rank programs): pass --config to a TorchScript input
