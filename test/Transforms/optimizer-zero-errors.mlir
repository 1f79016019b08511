// RUN: ds-opt %s --ds-optimizer --verify-diagnostics --split-input-file

// ds-zero's record without a mesh.
// expected-error @below {{ds-optimizer: the module has no 'ds.mesh' attribute, so no dp axis}}
module attributes {ds.zero = #ds.zero<stage = 0>} {
  ds.parameter @w trainable : tensor<3xf32>
  ds.state @"w@grad" of @w role grad : tensor<3xf32>
}

// -----

// expected-error @below {{ds-optimizer: ZeRO stage 1 needs ds-zero's flat parameter buffers}}
module attributes {ds.mesh = #ds.mesh<axes = ["dp"], shape = [2]>, ds.zero = #ds.zero<stage = 1>} {
  shard.grid @mesh(shape = 2)
  ds.parameter @w trainable : tensor<3xf32>
  ds.state @"w@grad" of @w role grad : tensor<3xf32>
}

// -----

module attributes {ds.mesh = #ds.mesh<axes = ["dp"], shape = [2]>, ds.zero = #ds.zero<stage = 2>} {
  shard.grid @mesh(shape = 2)
  ds.parameter @w trainable : tensor<3xf32>
  // expected-error @below {{ds-optimizer: ZeRO stage 2: @zero.params.0 has neither a flat gradient buffer nor a gradient shard}}
  ds.flat_buffer @zero.params.0 role params members [@w] : tensor<32xf32>
}

// -----

// The mesh has no data-parallel axis.
// expected-error @below {{ds-optimizer: the module's mesh tp=2 has no dp axis}}
module attributes {ds.mesh = #ds.mesh<axes = ["tp"], shape = [2]>, ds.zero = #ds.zero<stage = 0>} {
  ds.parameter @w trainable : tensor<3xf32>
  ds.state @"w@grad" of @w role grad : tensor<3xf32>
}
