// RUN: ds-opt %s --ds-zero="stage=1 data-parallel-size=2" --verify-diagnostics

// expected-error @below {{ds-zero: no gradient states; run ds-autodiff first}}
module {
  ds.parameter @w trainable : tensor<3xf32>
}
