// RUN: ds-opt %s --ds-mixed-precision | FileCheck %s
// RUN: ds-opt %s --ds-mixed-precision="dtype=fp16 loss-scaling=true" --ds-autodiff | FileCheck %s --check-prefix=AD
// RUN: ds-opt %s --ds-mixed-precision --ds-autodiff --ds-optimizer --canonicalize --cse --ds-widen-16bit | FileCheck %s --check-prefix=WIDE
// RUN: ds-opt %s --ds-mixed-precision="dtype=fp16 loss-scaling=true" --ds-autodiff --ds-optimizer | FileCheck %s --check-prefix=FP16
// RUN: not ds-opt %s --ds-mixed-precision="dtype=f8" 2>&1 | FileCheck %s --check-prefix=BADTYPE
// RUN: not ds-opt %s --ds-autodiff --ds-mixed-precision 2>&1 | FileCheck %s --check-prefix=ORDER
// RUN: not ds-opt %s --ds-mixed-precision --ds-mixed-precision 2>&1 | FileCheck %s --check-prefix=TWICE

// A 16-bit model: the trainable parameter is stored in bf16 and widened right before each
// read; the linear layer's and the GELU's results are rounded through bf16; the reshape only
// moves elements (no rounding); the input is rounded; the buffer stays f32; the loss stays f32.
// CHECK: ds.parameter @w trainable : tensor<4x8xbf16>
// CHECK: ds.parameter @scale : tensor<4xf32>
// CHECK-LABEL: func.func @forward
// CHECK: %[[X16:.+]] = ds.convert %arg0 : tensor<2x8xf32> -> tensor<2x8xbf16>
// CHECK: %[[W16:.+]] = ds.get_parameter @w : tensor<4x8xbf16>
// CHECK: %[[X:.+]] = ds.convert %[[X16]] : tensor<2x8xbf16> -> tensor<2x8xf32>
// CHECK: %[[W:.+]] = ds.convert %[[W16]] : tensor<4x8xbf16> -> tensor<4x8xf32>
// CHECK: %[[Y:.+]] = ds.linear %[[X]], %[[W]]
// CHECK: %[[Y16:.+]] = ds.convert %[[Y]] : tensor<2x4xf32> -> tensor<2x4xbf16>
// CHECK: %[[Y1:.+]] = ds.convert %[[Y16]] : tensor<2x4xbf16> -> tensor<2x4xf32>
// CHECK: %[[G:.+]] = ds.gelu %[[Y1]]
// CHECK: ds.convert %[[G]] : tensor<2x4xf32> -> tensor<2x4xbf16>
// CHECK: %[[S:.+]] = ds.get_parameter @scale : tensor<4xf32>
// CHECK: ds.reshape
// CHECK-NOT: tensor<8xbf16>
// CHECK: %[[L:.+]] = ds.cross_entropy
// CHECK-NEXT: return %[[L]] : tensor<f32>

// fp16 with loss scaling: the seed is 1 times the loss-scale state; the backward reads the
// rounded activations again (rematerialized widenings), and the parameter's gradient state is
// f16.
// AD: ds.state @loss_scale role loss_scale : tensor<f32>
// AD: ds.state @"w@grad" of @w role grad : tensor<4x8xf16>
// AD-LABEL: func.func @micro_step
// AD: %[[L:.+]] = ds.cross_entropy
// AD: %[[SCALE:.+]] = ds.get_parameter @loss_scale : tensor<f32>
// AD: %[[SEED:.+]] = ds.mul %{{.+}}, %[[SCALE]]
// AD: ds.convert %{{.+}} {rematerialized} : tensor<2x4xf16> -> tensor<2x4xf32>
// AD: ds.cross_entropy_grad %{{.+}}, %{{.+}}, %[[SEED]]
// AD: ds.convert %{{.+}} {rematerialized} : tensor<2x8xf16> -> tensor<2x8xf32>
// AD: ds.linear_grad_weight
// AD: ds.assign @"w@grad" = %{{.+}} : tensor<4x8xf16>

// After ds-widen-16bit the products and the elementwise ops between roundings run on bf16
// values (every device computes them in f32 and rounds once), the rest in f32: the optimizer
// updates the f32 master, which the bf16 parameter rounds.
// WIDE: ds.state @"w@master" of @w role master : tensor<4x8xf32>
// WIDE: ds.state @"w@exp_avg" of @w role exp_avg : tensor<4x8xf32>
// The products between roundings run on the bf16 values (f32 accumulation, rounded once):
// no f32 copy of their operands or results.
// WIDE-LABEL: func.func @micro_step
// WIDE: ds.linear %{{.+}}, %{{.+}} : (tensor<2x8xbf16>, tensor<4x8xbf16>) -> tensor<2x4xbf16>
// The GELU and its gradient between roundings, and the gradient's accumulation, in bf16; the
// multiply by the f32 buffer stays in f32.
// WIDE: ds.gelu %{{.+}} : tensor<2x4xbf16>
// WIDE: ds.mul %{{.+}}, %{{.+}} : tensor<2x4xf32>, tensor<4xf32> -> tensor<2x4xf32>
// WIDE: ds.gelu_grad %{{.+}}, %{{.+}} : tensor<2x4xbf16>
// WIDE: ds.linear_grad_weight %{{.+}}, %{{.+}} : (tensor<2x8xbf16>, tensor<2x4xbf16>) -> (tensor<4x8xbf16>, tensor<4xbf16>)
// WIDE-NOT: ds.linear{{.*}}f32
// WIDE: ds.add %{{.+}}, %{{.+}} : tensor<4x8xbf16>, tensor<4x8xbf16> -> tensor<4x8xbf16>
// WIDE-LABEL: func.func @optimizer_step
// WIDE: %[[G:.+]] = ds.get_parameter @"w@grad" : tensor<4x8xbf16>
// WIDE: %[[G32:.+]] = ds.convert %[[G]] {rematerialized} : tensor<4x8xbf16> -> tensor<4x8xf32>
// WIDE: %[[M:.+]] = ds.get_parameter @"w@master" : tensor<4x8xf32>
// WIDE: ds.adamw_update %[[M]], %[[G32]]
// WIDE: ds.assign @"w@master" =
// WIDE: %[[P:.+]] = ds.convert %{{.+}} : tensor<4x8xf32> -> tensor<4x8xbf16>
// WIDE: ds.assign @w = %[[P]] : tensor<4x8xbf16>
// WIDE: ds.assign @"w@grad" = %{{.+}} : tensor<4x8xbf16>

// fp16's update: the gradient times 1 / loss_scale; found_inf from the sum of g * 0 (NaN when
// a gradient is inf or NaN); every written state keeps its old value on overflow.
// FP16: ds.state @found_inf role found_inf : tensor<f32>
// FP16-LABEL: func.func @optimizer_step
// FP16: %[[S:.+]] = ds.get_parameter @loss_scale
// FP16: %[[INV:.+]] = ds.div %{{.+}}, %[[S]]
// FP16: ds.mul %{{.+}}, %[[INV]]
// FP16: %[[OK:.+]] = ds.cmp eq
// FP16: ds.assign @found_inf =
// FP16: %[[OLD:.+]] = ds.get_parameter @"w@master"
// FP16: %[[NEW:.+]], %{{.+}}, %{{.+}} = ds.adamw_update %[[OLD]]
// FP16: %[[KEPT:.+]] = ds.where %[[OK]], %[[NEW]], %[[OLD]]
// FP16: ds.assign @"w@master" = %[[KEPT]]
// FP16: ds.assign @w = %{{.+}} : tensor<4x8xf16>

// BADTYPE: for the --dtype option: Cannot find option named 'f8'!
// ORDER: ds-mixed-precision runs before ds-autodiff on a func.func @forward
// TWICE: ds-mixed-precision: the module is 16-bit already (the pass ran before); run it once
module {
  ds.parameter @w trainable : tensor<4x8xf32>
  ds.parameter @scale : tensor<4xf32>
  func.func @forward(%x: tensor<2x8xf32>, %t: tensor<2xi64>) -> tensor<f32> {
    %w = ds.get_parameter @w : tensor<4x8xf32>
    %y = ds.linear %x, %w : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
    %g = ds.gelu %y : tensor<2x4xf32>
    %s = ds.get_parameter @scale : tensor<4xf32>
    %m = ds.mul %g, %s : tensor<2x4xf32>, tensor<4xf32> -> tensor<2x4xf32>
    %r = ds.reshape %m : tensor<2x4xf32> -> tensor<8xf32>
    %b = ds.reshape %r : tensor<8xf32> -> tensor<2x4xf32>
    %l = ds.cross_entropy %b, %t : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
