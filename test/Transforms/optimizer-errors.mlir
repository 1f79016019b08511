// RUN: ds-opt %s --ds-optimizer="type=Lamb" --verify-diagnostics --split-input-file

// expected-error @below {{ds-optimizer: type 'Lamb' is not implemented yet; use AdamW, Adam, SGD or Muon}}
module {
  ds.parameter @w trainable : tensor<3xf32>
  ds.state @"w@grad" of @w role grad : tensor<3xf32>
}

// -----

// expected-error @below {{ds-optimizer: no gradient states; run ds-autodiff first}}
module {
  ds.parameter @w trainable : tensor<3xf32>
}
