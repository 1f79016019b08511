// RUN: ds-opt %s --ds-mixed-precision | FileCheck %s
// RUN: ds-opt %s --ds-mixed-precision --ds-autodiff | FileCheck %s --check-prefix=GRAD

// silu as the importer writes it (x * sigmoid(x), the sigmoid marked ds.fused): in bf16 one
// rounding, of the product, as PyTorch's silu; and both steps read one widening of x, so
// that its gradient (dy s + dy x s (1 - s)) is summed in f32 and rounded once, as PyTorch's
// silu_backward rounds it.
// CHECK-LABEL: func.func @forward
// CHECK: ds.linear
// CHECK-NEXT: ds.convert %{{.+}} : tensor<2x4xf32> -> tensor<2x4xbf16>
// CHECK-NEXT: %[[X:.+]] = ds.convert %{{.+}} : tensor<2x4xbf16> -> tensor<2x4xf32>
// CHECK-NEXT: %[[S:.+]] = ds.sigmoid %[[X]] {ds.fused} : tensor<2x4xf32>
// CHECK-NEXT: %[[Y:.+]] = ds.mul %[[X]], %[[S]] : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT: ds.convert %[[Y]] : tensor<2x4xf32> -> tensor<2x4xbf16>
// The sigmoid's gradient and the product's meet in f32, then round.
// GRAD-LABEL: func.func @micro_step
// GRAD: ds.sub
// GRAD: %[[SUM:.+]] = ds.add %{{.+}}, %{{.+}} : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
// GRAD-NEXT: ds.convert %[[SUM]] : tensor<2x4xf32> -> tensor<2x4xbf16>
module {
  ds.parameter @w trainable : tensor<4x4xf32>
  func.func @forward(%x: tensor<2x4xf32>, %t: tensor<2xi64>) -> tensor<f32> {
    %w = ds.get_parameter @w : tensor<4x4xf32>
    %h = ds.linear %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %s = ds.sigmoid %h {ds.fused} : tensor<2x4xf32>
    %y = ds.mul %h, %s : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
    %l = ds.cross_entropy %y, %t : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
