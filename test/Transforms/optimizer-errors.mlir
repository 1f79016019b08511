// RUN: not ds-opt %s --ds-optimizer="type=Lamb" 2>&1 | FileCheck %s --check-prefix=TYPE
// RUN: ds-opt %s --ds-optimizer --verify-diagnostics --split-input-file

// The type is one of the optimizers ds implements (OptimizerKind), by DeepSpeed's names.
// TYPE: for the --type option: Cannot find option named 'Lamb'!
module {
  ds.parameter @w trainable : tensor<3xf32>
  ds.state @"w@grad" of @w role grad : tensor<3xf32>
}

// -----

// expected-error @below {{ds-optimizer: no gradient states; run ds-autodiff first}}
module {
  ds.parameter @w trainable : tensor<3xf32>
}
