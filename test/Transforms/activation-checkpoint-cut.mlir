// RUN: ds-opt %s --ds-autodiff --canonicalize --cse --ds-activation-checkpoint | FileCheck %s

// Two pre-norm blocks (h.0, h.1): each normalizes its input (x * rsqrt(mean(x^2))) before
// its first parameter read (the norm's weight). The segments begin where the fewest bytes
// cross into them: at the norm's first op, so the residual stream alone is kept between
// blocks and each block's norm statistics are recomputed with it. Cut at the weight, the
// normalized input would be kept beside the residual stream.
// CHECK-LABEL: func.func @micro_step
// CHECK: ds.cross_entropy_grad
// The backward of h.1 recomputes its norm from h.0's output.
// CHECK: %[[S1:.+]] = ds.mul %[[R0:[0-9]+]], %[[R0]] {ds.recompute}
// CHECK-NEXT: ds.mean %[[S1]] {{.+}} {ds.recompute}
// CHECK-NEXT: ds.rsqrt %{{.+}} {ds.recompute}
// The backward of h.0 recomputes its norm from the input.
// CHECK: %[[S0:.+]] = ds.mul %arg0, %arg0 {ds.recompute}
// CHECK-NEXT: ds.mean %[[S0]] {{.+}} {ds.recompute}
// CHECK-NEXT: ds.rsqrt %{{.+}} {ds.recompute}
// CHECK: return
module {
  ds.parameter @h.0.g trainable : tensor<16xf32>
  ds.parameter @h.0.w trainable : tensor<16x16xf32>
  ds.parameter @h.1.g trainable : tensor<16xf32>
  ds.parameter @h.1.w trainable : tensor<16x16xf32>
  ds.parameter @head.w trainable : tensor<4x16xf32>
  func.func @forward(%x: tensor<8x16xf32>, %y: tensor<8xi64>) -> tensor<f32> {
    %s0 = ds.mul %x, %x : tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
    %m0 = ds.mean %s0 dims = [1] keepdim : tensor<8x16xf32> -> tensor<8x1xf32>
    %q0 = ds.rsqrt %m0 : tensor<8x1xf32>
    %n0 = ds.mul %x, %q0 : tensor<8x16xf32>, tensor<8x1xf32> -> tensor<8x16xf32>
    %g0 = ds.get_parameter @h.0.g : tensor<16xf32>
    %h0 = ds.mul %n0, %g0 : tensor<8x16xf32>, tensor<16xf32> -> tensor<8x16xf32>
    %w0 = ds.get_parameter @h.0.w : tensor<16x16xf32>
    %a0 = ds.linear %h0, %w0 : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
    %e0 = ds.gelu %a0 : tensor<8x16xf32>
    %r0 = ds.add %x, %e0 : tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
    %s1 = ds.mul %r0, %r0 : tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
    %m1 = ds.mean %s1 dims = [1] keepdim : tensor<8x16xf32> -> tensor<8x1xf32>
    %q1 = ds.rsqrt %m1 : tensor<8x1xf32>
    %n1 = ds.mul %r0, %q1 : tensor<8x16xf32>, tensor<8x1xf32> -> tensor<8x16xf32>
    %g1 = ds.get_parameter @h.1.g : tensor<16xf32>
    %h1 = ds.mul %n1, %g1 : tensor<8x16xf32>, tensor<16xf32> -> tensor<8x16xf32>
    %w1 = ds.get_parameter @h.1.w : tensor<16x16xf32>
    %a1 = ds.linear %h1, %w1 : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
    %e1 = ds.gelu %a1 : tensor<8x16xf32>
    %r1 = ds.add %r0, %e1 : tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
    %wh = ds.get_parameter @head.w : tensor<4x16xf32>
    %o = ds.linear %r1, %wh : (tensor<8x16xf32>, tensor<4x16xf32>) -> tensor<8x4xf32>
    %l = ds.cross_entropy %o, %y : (tensor<8x4xf32>, tensor<8xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
