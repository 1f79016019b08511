// ds-opt --config says what it compiled, on stderr: the mesh, the batch as DeepSpeed's rule
// resolved it, the ZeRO stage, precision, optimizer and clipping, and under tp which trainable
// parameters split (by layer pattern) and which stayed whole, with ds-tensor-parallel's reason.
// A world size that the batch keys leave open is compiled as one rank, with a warning naming
// the keys (DeepSpeed derives it from the ranks launched).
// RUN: echo '{"train_batch_size": 4, "train_micro_batch_size_per_gpu": 2, "tensor_parallel": {"autotp_size": 2}, "gradient_clipping": 1.0, "zero_optimization": {"stage": 1}, "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}' > %t.open.json
// RUN: ds-opt %s --config %t.open.json -o %t.mlir 2>&1 | FileCheck %s --check-prefixes=OPEN,CHECK
// OPEN: warning: {{.*}}open.json: the world size is not stated: train_batch_size 4 with train_micro_batch_size_per_gpu 2 leaves it open, so ds compiles for 1 data-parallel rank (gradient_accumulation_steps 2); DeepSpeed derives it from the ranks it is launched on: for N ranks pass --world-size N, or set train_batch_size, train_micro_batch_size_per_gpu and gradient_accumulation_steps together
// OPEN: ds-opt: compiled for 2 ranks (mesh dp=1 x tp=2): micro-batch 2 x 2 accumulation steps x 1 data-parallel rank = train batch 4; ZeRO stage 1, fp32, AdamW, clipping at 1
// CHECK: ds-opt: tensor parallelism over tp=2: 2 of 6 trainable parameters split, each rank holding its part:
// CHECK-NEXT:  layers.0.fc1.weight: dimension 0
// CHECK-NEXT:  layers.0.fc2.weight: dimension 1
// CHECK-NEXT: ds-opt: 4 stay whole on every tp rank:
// CHECK-NEXT:  layers.*.fc2.bias (2): in no linear pair or vocabulary that ds-tensor-parallel splits (norms, positions, biases added after a tp sum)
// CHECK-NEXT:  layers.1.fc1.weight, layers.1.fc2.weight: 'ds.softmax' normalizes along the split dimension
//
// --world-size fixes it; so do the three keys together (here for 2 data-parallel ranks).
// RUN: ds-opt %s --config %t.open.json --world-size 2 -o %t.mlir 2>&1 | FileCheck %s --check-prefix=DP2 --implicit-check-not=warning
// DP2: ds-opt: compiled for 4 ranks (mesh dp=2 x tp=2): micro-batch 2 x 1 accumulation step x 2 data-parallel ranks = train batch 4; ZeRO stage 1
// DP2-NEXT: ds-opt: tensor parallelism over tp=2: 2 of 6 trainable parameters split
// RUN: echo '{"train_batch_size": 4, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2, "optimizer": {"type": "SGD", "params": {"lr": 1e-3}}}' > %t.three.json
// RUN: ds-opt %s --config %t.three.json -o %t.mlir 2>&1 | FileCheck %s --check-prefix=THREE --implicit-check-not=warning --implicit-check-not=tensor
// THREE: ds-opt: compiled for 1 rank (mesh dp=1): micro-batch 2 x 2 accumulation steps x 1 data-parallel rank = train batch 4; ZeRO stage 0, fp32, SGD
module {
  ds.parameter @layers.0.fc1.weight trainable : tensor<8x4xf32>
  ds.parameter @layers.0.fc2.weight trainable : tensor<4x8xf32>
  ds.parameter @layers.0.fc2.bias trainable : tensor<4xf32>
  ds.parameter @layers.1.fc1.weight trainable : tensor<8x4xf32>
  ds.parameter @layers.1.fc2.weight trainable : tensor<4x8xf32>
  ds.parameter @layers.1.fc2.bias trainable : tensor<4xf32>
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
    %w1 = ds.get_parameter @layers.0.fc1.weight : tensor<8x4xf32>
    %h = ds.linear %x, %w1 : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
    %g = ds.relu %h : tensor<2x8xf32>
    %w2 = ds.get_parameter @layers.0.fc2.weight : tensor<4x8xf32>
    %b2 = ds.get_parameter @layers.0.fc2.bias : tensor<4xf32>
    %y = ds.linear %g, %w2, %b2 : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %w3 = ds.get_parameter @layers.1.fc1.weight : tensor<8x4xf32>
    %h3 = ds.linear %y, %w3 : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
    %g3 = ds.softmax %h3 dim = 1 : tensor<2x8xf32>
    %w4 = ds.get_parameter @layers.1.fc2.weight : tensor<4x8xf32>
    %b4 = ds.get_parameter @layers.1.fc2.bias : tensor<4xf32>
    %y4 = ds.linear %g3, %w4, %b4 : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %s = ds.sum %y4 dims = [0, 1] : tensor<2x4xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}
