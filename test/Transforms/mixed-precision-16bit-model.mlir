// RUN: ds-opt %s --ds-mixed-precision | FileCheck %s
// RUN: ds-opt %s --ds-mixed-precision --ds-autodiff | FileCheck %s --check-prefix=GRAD
// RUN: not ds-opt %s --ds-mixed-precision=dtype=fp16 2>&1 | FileCheck %s --check-prefix=OTHER

// A model exported in bf16, its input bf16 too (HF's RMSNorm: the input cast to f32,
// normalized in f32, cast back and scaled by the bf16 weight). Its bf16 ops compute in f32 and
// round; its f32 ops stay f32, unrounded; its cast to f32 goes (the widening made for the read
// is that cast) and its cast back is the rounding, marked ds.model_cast (ds-autodiff keeps the
// f32 value it rounds for the backward, as PyTorch saves it). Parameters stay bf16.
// CHECK: module attributes {ds.mixed_precision}
// CHECK: ds.parameter @w trainable : tensor<4xbf16>
// CHECK-LABEL: func.func @forward
// CHECK: %[[X:.+]] = ds.convert %arg0 : tensor<2x4xbf16> -> tensor<2x4xf32>
// CHECK-NEXT: %[[SQ:.+]] = ds.mul %[[X]], %[[X]] : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT: %[[M:.+]] = ds.mean %[[SQ]]
// CHECK-NEXT: %[[R:.+]] = ds.rsqrt %[[M]]
// CHECK-NEXT: %[[N:.+]] = ds.mul %[[X]], %[[R]]
// CHECK-NEXT: %[[N16:.+]] = ds.convert %[[N]] {ds.model_cast} : tensor<2x4xf32> -> tensor<2x4xbf16>
// CHECK-NEXT: %[[W16:.+]] = ds.get_parameter @w : tensor<4xbf16>
// CHECK-NEXT: %[[N1:.+]] = ds.convert %[[N16]] : tensor<2x4xbf16> -> tensor<2x4xf32>
// CHECK-NEXT: %[[W:.+]] = ds.convert %[[W16]] : tensor<4xbf16> -> tensor<4xf32>
// CHECK-NEXT: %[[Y:.+]] = ds.mul %[[W]], %[[N1]] : tensor<4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT: %[[Y16:.+]] = ds.convert %[[Y]] : tensor<2x4xf32> -> tensor<2x4xbf16>
// An element move rounds too (exact), so that its gradient rounds where PyTorch's does.
// CHECK: %[[T:.+]] = ds.transpose %{{.+}} perm = [1, 0] : tensor<2x4xf32> -> tensor<4x2xf32>
// CHECK-NEXT: ds.convert %[[T]] : tensor<4x2xf32> -> tensor<4x2xbf16>
// The loss, f32 as the model wrote it, is returned as it is.
// CHECK: %[[L:.+]] = ds.cross_entropy
// CHECK-NEXT: return %[[L]] : tensor<f32>

// The weight's gradient: PyTorch computes the product's gradient at the broadcast shape in
// bf16, then sums it; so the gradient is rounded before the sum.
// GRAD-LABEL: func.func @micro_step
// GRAD: ds.convert %{{.+}} {rematerialized} : tensor<2x4xbf16> -> tensor<2x4xf32>
// GRAD-NEXT: %[[P:.+]] = ds.mul
// GRAD-NEXT: %[[P16:.+]] = ds.convert %[[P]] : tensor<2x4xf32> -> tensor<2x4xbf16>
// GRAD-NEXT: %[[P1:.+]] = ds.convert %[[P16]] : tensor<2x4xbf16> -> tensor<2x4xf32>
// GRAD-NEXT: ds.sum %[[P1]] dims = [0] : tensor<2x4xf32> -> tensor<4xf32>

// OTHER: error: ds-mixed-precision: trainable parameter 'w' is 'bf16', but the config's 16-bit mode is 'f16'; export the model in f32 or in 'f16', or enable the config's section for 'bf16'
module {
  ds.parameter @w trainable : tensor<4xbf16>
  func.func @forward(%x: tensor<2x4xbf16>, %t: tensor<4xi64>) -> tensor<f32> {
    %xf = ds.convert %x : tensor<2x4xbf16> -> tensor<2x4xf32>
    %sq = ds.mul %xf, %xf : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
    %m = ds.mean %sq dims = [1] keepdim : tensor<2x4xf32> -> tensor<2x1xf32>
    %r = ds.rsqrt %m : tensor<2x1xf32>
    %n = ds.mul %xf, %r : tensor<2x4xf32>, tensor<2x1xf32> -> tensor<2x4xf32>
    %n16 = ds.convert %n : tensor<2x4xf32> -> tensor<2x4xbf16>
    %w = ds.get_parameter @w : tensor<4xbf16>
    %y = ds.mul %w, %n16 : tensor<4xbf16>, tensor<2x4xbf16> -> tensor<2x4xbf16>
    %yt = ds.transpose %y perm = [1, 0] : tensor<2x4xbf16> -> tensor<4x2xbf16>
    %yf = ds.convert %yt : tensor<4x2xbf16> -> tensor<4x2xf32>
    %l = ds.cross_entropy %yf, %t : (tensor<4x2xf32>, tensor<4xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

