module {
  ds.parameter @w trainable : tensor<3xf32>
  ds.state @"w@grad" of @w role "grad" : tensor<3xf32>
}
