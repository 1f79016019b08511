// RUN: ds-opt %s --ds-zero="stage=1 data-parallel-size=2" --verify-diagnostics

// expected-error @below {{ds-zero: stage 1 is not implemented yet; use stage 0 (data parallelism)}}
module {
  func.func @optimizer_step(%lr: tensor<f32>, %step: tensor<f32>, %beta1: tensor<f64>,
                            %aux_lr: tensor<f32>) { return }
}
