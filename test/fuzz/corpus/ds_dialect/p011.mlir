module {
  ds.parameter @w trainable : tensor<3xf32>
}
