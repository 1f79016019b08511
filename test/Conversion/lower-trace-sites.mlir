// RUN: ds-opt %s --ds-lower-to-runtime | mlir-translate --mlir-to-llvmir | FileCheck %s
// RUN: ds-opt %s --ds-lower-to-runtime | FileCheck %s --check-prefix=META

// ds-run --trace names each runtime call by the ds op that made it and its place in the
// model: before an op's first runtime call the program names its site, an index into the
// metadata's "sites" ("OP FILE:LINE", the file's base name, of the last file location in the
// op's location: the model's line, where the importer fuses it after a torch.nn line), in
// the order they are first named. A site is named once for all the calls of
// its op (the matmul's allocation, kernel and frees) and again only when another op makes
// calls: never for an op that makes none (the transpose folds into the matmul).
// CHECK-LABEL: define ptr @ds_micro_step
// CHECK-NEXT: getelementptr
// CHECK-NEXT: load
// CHECK-NEXT: call void @dsrt_trace_site(ptr %0, i32 0)
// CHECK-NEXT: call ptr @dsrt_slot_get
// CHECK-NEXT: call void @dsrt_trace_site(ptr %0, i32 1)
// CHECK-NEXT: call ptr @dsrt_tensor_alloc
// CHECK-NEXT: call void @dsrt_matmul
// CHECK-NEXT: call void @dsrt_tensor_free
// CHECK-NEXT: call void @dsrt_trace_site(ptr %0, i32 2)
// CHECK-NEXT: call ptr @dsrt_tensor_alloc
// CHECK-NEXT: call void @dsrt_reduce
// CHECK-LABEL: define void @ds_optimizer_step
// CHECK-NEXT: call void @dsrt_trace_site(ptr %0, i32 3)
// CHECK-NEXT: call ptr @dsrt_slot_get
// CHECK-NEXT: call void @dsrt_trace_site(ptr %0, i32 4)
// CHECK-NEXT: call ptr @dsrt_tensor_alloc
// CHECK-NEXT: call void @dsrt_binary
// META: \22sites\22:[\22ds.get_parameter model.py:11\22,\22ds.matmul model.py:12\22,\22ds.sum model.py:13\22,\22ds.get_parameter lower-trace-sites.mlir:{{[0-9]+}}\22,\22ds.mul lower-trace-sites.mlir:{{[0-9]+}}\22,\22ds.assign lower-trace-sites.mlir:{{[0-9]+}}\22]
module attributes {ds.run = #ds.run<train_batch_size = 2, micro_batch_size = 2, gradient_accumulation_steps = 1, data_parallel_size = 1, steps_per_print = 10, seed = 1234, precision = fp32, zero_stage = 0, param_persistence_threshold = 100000, optimizer = AdamW, lr = 1.0e-3, aux_lr = 1.0e-3, beta1 = 0.9, schedule = <kind = constant>, deepspeed = "{}", numbers = "{}">} {
  ds.parameter @w trainable : tensor<2x3xf32>
  ds.state @"w@grad" of @w role grad : tensor<2x3xf32>
  func.func @micro_step(%x: tensor<2x3xf32> {ds.input_name = "x"}) -> tensor<f32> {
    %w = ds.get_parameter @w : tensor<2x3xf32> loc("/home/user/model.py":11:5)
    %t = ds.transpose %w perm = [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32> loc("/home/user/model.py":12:9)
    %y = ds.matmul %x, %t : tensor<2x3xf32>, tensor<3x2xf32> -> tensor<2x2xf32> loc(fused["/usr/lib/torch/nn/functional.py":2100:3, "/home/user/model.py":12:9])
    %s = ds.sum %y dims = [0, 1] : tensor<2x2xf32> -> tensor<f32> loc("/home/user/model.py":13:12)
    return %s : tensor<f32>
  }
  func.func @optimizer_step(%lr: tensor<f32>, %step: tensor<f32>, %beta1: tensor<f64>,
                            %aux_lr: tensor<f32>) {
    %w = ds.get_parameter @w : tensor<2x3xf32>
    %n = ds.mul %w, %lr : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xf32>
    ds.assign @w = %n : tensor<2x3xf32>
    return
  }
}
