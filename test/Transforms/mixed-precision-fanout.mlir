// RUN: ds-opt %s --ds-mixed-precision | FileCheck %s
// RUN: ds-opt %s --ds-mixed-precision --ds-autodiff --ds-optimizer --canonicalize --cse --ds-widen-16bit | FileCheck %s --check-prefix=WIDE

// A 16-bit value read by several ops (a residual stream, a tied weight): PyTorch rounds each
// op's gradient with respect to it to 16 bits and sums those 16-bit gradients. So every read
// widens on its own: ds-autodiff then rounds each read's gradient before the sum (one f32 sum
// of all reads, rounded once, is not PyTorch's number), and the sum is a 16-bit add.
// CHECK-LABEL: func.func @forward
// The weight, read by both linear layers (a tied head), widens once per read, each right
// before its read.
// CHECK: %[[W16:.+]] = ds.get_parameter @w : tensor<4x4xbf16>
// CHECK: %[[W1:.+]] = ds.convert %[[W16]] : tensor<4x4xbf16> -> tensor<4x4xf32>
// CHECK-NEXT: %[[Y:.+]] = ds.linear %{{.+}}, %[[W1]]
// The rounded activation, read by the GELU and the residual add, too.
// CHECK-NEXT: %[[Y16:.+]] = ds.convert %[[Y]] : tensor<2x4xf32> -> tensor<2x4xbf16>
// CHECK-NEXT: %[[Y1:.+]] = ds.convert %[[Y16]] : tensor<2x4xbf16> -> tensor<2x4xf32>
// CHECK-NEXT: ds.gelu %[[Y1]]
// CHECK: %[[Y2:.+]] = ds.convert %[[Y16]] : tensor<2x4xbf16> -> tensor<2x4xf32>
// CHECK: ds.add %[[Y2]], %{{.+}}
// CHECK: %[[W2:.+]] = ds.convert %[[W16]] : tensor<4x4xbf16> -> tensor<4x4xf32>
// CHECK: ds.linear %{{.+}}, %[[W2]]

// The backward sums the rounded gradients in bf16: no f32 add of two gradients.
// WIDE-LABEL: func.func @micro_step
// WIDE-NOT: ds.add {{.*}}tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
// WIDE: ds.gelu_grad %{{.+}}, %{{.+}} : tensor<2x4xbf16>
// WIDE-NEXT: ds.add %{{.+}}, %{{.+}} : tensor<2x4xbf16>, tensor<2x4xbf16> -> tensor<2x4xbf16>
// WIDE-NOT: ds.add {{.*}}tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
// WIDE-LABEL: func.func @optimizer_step
module {
  ds.parameter @w trainable : tensor<4x4xf32>
  func.func @forward(%x: tensor<2x4xf32>, %t: tensor<2xi64>) -> tensor<f32> {
    %w = ds.get_parameter @w : tensor<4x4xf32>
    %y = ds.linear %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %g = ds.gelu %y : tensor<2x4xf32>
    %r = ds.add %y, %g : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
    %z = ds.linear %r, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %l = ds.cross_entropy %z, %t : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
