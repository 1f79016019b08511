// RUN: ds-opt %s --ds-optimizer="weight-decay=0.1 gradient-clipping=1.0" | FileCheck %s
// RUN: ds-opt %s --ds-optimizer="type=SGD momentum=0.9 nesterov=true weight-decay=0.1" | FileCheck %s --check-prefix=SGD

// AdamW as IR: moments as ds.state, bias corrections from the step in f64, clipping by the
// global norm (min(clip / (norm + 1e-6), 1)), decoupled decay, then the gradient is zeroed.
// CHECK: ds.state @"w@exp_avg" of @w role exp_avg : tensor<3xf32>
// CHECK: ds.state @"w@exp_avg_sq" of @w role exp_avg_sq : tensor<3xf32>
// CHECK-LABEL: func.func @optimizer_step(%{{.+}}: tensor<f32>, %{{.+}}: tensor<f32>, %{{.+}}: tensor<f64>, %{{.+}}: tensor<f32>)
// CHECK: ds.pow {{.+}} : tensor<f64>, tensor<f64> -> tensor<f64>
// CHECK: %[[NORM:.+]] = ds.sqrt
// CHECK: %[[COEF:.+]] = ds.minimum
// CHECK: %[[G:.+]] = ds.get_parameter @"w@grad"
// CHECK: ds.mul %[[G]], %[[COEF]]
// CHECK: ds.assign @"w@exp_avg" =
// CHECK: ds.assign @"w@exp_avg_sq" =
// CHECK: ds.assign @w =
// CHECK: %[[Z:.+]] = ds.constant dense<0.000000e+00> : tensor<3xf32>
// CHECK: ds.assign @"w@grad" = %[[Z]]
// With type=SGD, a momentum buffer that starts as the first step's gradient (where step ==
// 1), L2 decay added to the gradient, Nesterov's look-ahead, then p - lr d.
// SGD: ds.state @"w@momentum_buffer" of @w role momentum_buffer : tensor<3xf32>
// SGD-NOT: exp_avg
// SGD: func.func @optimizer_step(%[[LR:[^:]+]]: tensor<f32>, %[[STEP:[^:]+]]: tensor<f32>, %{{.+}}: tensor<f64>, %{{.+}}: tensor<f32>)
// SGD: %[[FIRST:.+]] = ds.cmp eq, %[[STEP]]
// SGD: %[[BUF:.+]] = ds.where %[[FIRST]]
// SGD: ds.assign @"w@momentum_buffer" = %[[BUF]]
// SGD: ds.mul %[[BUF]]
// SGD: ds.mul %{{.+}}, %[[LR]]
// SGD: ds.assign @w =
// SGD-NOT: ds.adamw_update
module {
  ds.parameter @w trainable : tensor<3xf32>
  ds.state @"w@grad" of @w role grad : tensor<3xf32>
}
