// RUN: not ds-opt %s --ds-mixed-precision 2>&1 | FileCheck %s

// A model whose trainable parameters are f32 and bf16 mixed: neither program form.
// CHECK: error: ds-mixed-precision: trainable parameter 'b' is 'bf16' but 'a' is 'f32'; export the model with every parameter in one dtype (model.float() or model.to(torch.bfloat16) before torch.export)
module {
  ds.parameter @a trainable : tensor<4xf32>
  ds.parameter @b trainable : tensor<4xbf16>
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
    %a = ds.get_parameter @a : tensor<4xf32>
    %y = ds.mul %x, %a : tensor<2x4xf32>, tensor<4xf32> -> tensor<2x4xf32>
    %s = ds.sum %y dims = [0, 1] : tensor<2x4xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}
