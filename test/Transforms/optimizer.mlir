// RUN: ds-opt %s --ds-optimizer="weight-decay=0.1 gradient-clipping=1.0" | FileCheck %s
// RUN: ds-opt %s --ds-optimizer="type=SGD" --verify-diagnostics --split-input-file

// AdamW as IR: moments as ds.state, bias corrections from the step in f64, clipping by the
// global norm (min(clip / (norm + 1e-6), 1)), decoupled decay, then the gradient is zeroed.
// CHECK: ds.state @"w@exp_avg" of @w role "exp_avg" : tensor<3xf32>
// CHECK: ds.state @"w@exp_avg_sq" of @w role "exp_avg_sq" : tensor<3xf32>
// CHECK-LABEL: func.func @optimizer_step(%{{.+}}: tensor<f32>, %{{.+}}: tensor<f32>)
// CHECK: ds.pow {{.+}} : tensor<f64>, tensor<f64> -> tensor<f64>
// CHECK: %[[NORM:.+]] = ds.sqrt
// CHECK: %[[COEF:.+]] = ds.minimum
// CHECK: %[[G:.+]] = ds.get_parameter @"w@grad"
// CHECK: ds.mul %[[G]], %[[COEF]]
// CHECK: ds.assign @w =
// CHECK: ds.assign @"w@exp_avg" =
// CHECK: ds.assign @"w@exp_avg_sq" =
// CHECK: %[[Z:.+]] = ds.constant dense<0.000000e+00> : tensor<3xf32>
// CHECK: ds.assign @"w@grad" = %[[Z]]
// expected-error @below {{ds-optimizer: type 'SGD' is not implemented yet; use AdamW}}
module {
  ds.parameter @w trainable : tensor<3xf32>
  ds.state @"w@grad" of @w role "grad" : tensor<3xf32>
}
