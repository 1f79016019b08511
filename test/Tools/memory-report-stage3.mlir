// RUN: ds-opt %s --ds-zero="stage=3 data-parallel-size=2 param-persistence-threshold=0" --ds-optimizer | ds-opt --memory-report | FileCheck %s

// Stage 3 at 2 ranks: the 6 parameters live only as a 16-element shard of their bucket (64
// bytes; a parameter has no storage of its own), the gradient shard likewise, and two f32
// moments of the shard (128): the same categories as the log's measured ones.
// CHECK: memory plan per rank (bytes; ZeRO stage 3, 2 ranks, peak in
// CHECK-NEXT: rank parameters gradients optimizer activations inputs communication peak buffers
// CHECK-NEXT: 0 64 64 128 {{[0-9]+}} {{[0-9]+}} {{[0-9]+}} {{[0-9]+}} 0
// CHECK-NEXT: 1 64 64 128 {{[0-9]+}} {{[0-9]+}} {{[0-9]+}} {{[0-9]+}} 0
module attributes {ds.run = #ds.run<train_batch_size = 8, micro_batch_size = 4, gradient_accumulation_steps = 1, data_parallel_size = 2, steps_per_print = 10, seed = 1234, precision = fp32, zero_stage = 3, param_persistence_threshold = 100000, optimizer = AdamW, lr = 1.0e-3, aux_lr = 1.0e-3, beta1 = 0.9, schedule = <kind = constant>, deepspeed = "{}", numbers = "{}">} {
  ds.parameter @w trainable : tensor<2x3xf32>
  ds.state @"w@grad" of @w role grad : tensor<2x3xf32>
  func.func @micro_step(%x: tensor<2x3xf32> {ds.input_name = "x"}) -> tensor<f32> {
    %w = ds.get_parameter @w : tensor<2x3xf32>
    %y = ds.mul %x, %w : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
    %s = ds.sum %y dims = [0, 1] : tensor<2x3xf32> -> tensor<f32>
    %o = ds.get_parameter @"w@grad" : tensor<2x3xf32>
    %n = ds.add %o, %x : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
    ds.assign @"w@grad" = %n : tensor<2x3xf32>
    return %s : tensor<f32>
  }
}
