// RUN: ds-opt %s --ds-mixed-precision | FileCheck %s
// RUN: ds-opt %s --ds-mixed-precision --ds-autodiff --ds-optimizer --canonicalize --cse --ds-widen-16bit | FileCheck %s --check-prefix=WIDE

// The reads of a 16-bit value that only move elements (views in PyTorch: attention's q, k, v
// slices of the fused projection) share one widening, whereas computing reads get one each
// (mixed-precision-fanout.mlir): PyTorch assembles a view's gradients without rounding, so
// the slices' gradients meet in one concat, rounded once, and the products stay in bf16.
// CHECK-LABEL: func.func @forward
// CHECK: %[[L:.+]] = ds.linear
// CHECK-NEXT: %[[Y16:.+]] = ds.convert %[[L]] : tensor<2x4xf32> -> tensor<2x4xbf16>
// CHECK-NEXT: %[[Y:.+]] = ds.convert %[[Y16]] : tensor<2x4xbf16> -> tensor<2x4xf32>
// CHECK-NEXT: ds.slice %[[Y]] dim = 1[0 : 2]
// CHECK-NEXT: ds.slice %[[Y]] dim = 1[2 : 4]

// WIDE-LABEL: func.func @micro_step
// WIDE: ds.cross_entropy_grad
// WIDE: %[[A:.+]] = ds.mul %{{.+}}, %{{.+}} : tensor<2x2xbf16>, tensor<2x2xbf16> -> tensor<2x2xbf16>
// WIDE: %[[B:.+]] = ds.mul %{{.+}}, %{{.+}} : tensor<2x2xbf16>, tensor<2x2xbf16> -> tensor<2x2xbf16>
// WIDE-NEXT: %[[C:.+]] = ds.concat %[[A]], %[[B]] dim = 1 : (tensor<2x2xbf16>, tensor<2x2xbf16>) -> tensor<2x4xbf16>
// WIDE-NEXT: ds.linear_grad_weight %{{.+}}, %[[C]] : (tensor<2x4xbf16>, tensor<2x4xbf16>) -> (tensor<4x4xbf16>, tensor<4xbf16>)
// WIDE-NOT: insert_slice
// WIDE-LABEL: func.func @optimizer_step
module {
  ds.parameter @w trainable : tensor<4x4xf32>
  func.func @forward(%x: tensor<2x4xf32>, %t: tensor<2xi64>) -> tensor<f32> {
    %w = ds.get_parameter @w : tensor<4x4xf32>
    %y = ds.linear %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %q = ds.slice %y dim = 1[0 : 2] : tensor<2x4xf32> -> tensor<2x2xf32>
    %k = ds.slice %y dim = 1[2 : 4] : tensor<2x4xf32> -> tensor<2x2xf32>
    %m = ds.mul %q, %k : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
    %l = ds.cross_entropy %m, %t : (tensor<2x2xf32>, tensor<2xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
