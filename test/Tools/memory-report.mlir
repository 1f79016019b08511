// RUN: ds-opt %s --ds-zero="stage=1 data-parallel-size=2" --ds-optimizer | ds-opt --memory-report | FileCheck %s
// RUN: not ds-opt %s --memory-report 2>&1 | FileCheck %s --check-prefix=NOSTEP

// Stage 1 at 2 ranks: the flat parameter and gradient buffers (9 elements padded to 32, 128
// bytes each) and shard-sized moments (2 x 16 x 4). The peak is in @optimizer_step: the step
// scalars and their f64 products (52: one product is written over an 8-byte factor that dies
// there) and the reduce-scattered 16-element gradient shard (64); the update and the all-gather
// run in place in the flat buffer. One row per rank.
// CHECK: memory plan per rank (bytes; ZeRO stage 1, 2 ranks, peak in optimizer_step)
// CHECK-NEXT: rank parameters gradients optimizer activations inputs communication peak buffers
// CHECK-NEXT: 0 128 128 128 52 0 64 500 0
// CHECK-NEXT: 1 128 128 128 52 0 64 500 0

// NOSTEP: --memory-report needs a training step (@micro_step and @optimizer_step): pass --config to a TorchScript input
module attributes {ds.run = #ds.run<train_batch_size = 8, micro_batch_size = 4, gradient_accumulation_steps = 1, data_parallel_size = 2, steps_per_print = 10, seed = 1234, precision = fp32, zero_stage = 1, param_persistence_threshold = 100000, optimizer = AdamW, lr = 1.0e-3, aux_lr = 1.0e-3, beta1 = 0.9, schedule = <kind = constant>, deepspeed = "{}", numbers = "{}">} {
  ds.parameter @w trainable : tensor<2x3xf32>
  ds.parameter @b trainable : tensor<3xf32>
  ds.state @"w@grad" of @w role grad : tensor<2x3xf32>
  ds.state @"b@grad" of @b role grad : tensor<3xf32>
  func.func @micro_step(%x: tensor<2x3xf32> {ds.input_name = "x"}) -> tensor<f32> {
    %s = ds.sum %x dims = [0, 1] : tensor<2x3xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}
