// RUN: ds-opt %s --ds-lower-to-runtime --split-input-file --verify-diagnostics

// expected-error @below {{ds-lower-to-runtime needs @micro_step and @optimizer_step (run ds-autodiff and ds-optimizer first)}}
module {
  func.func @forward() { return }
}

// -----

module {
  // expected-error @below {{ds-lower-to-runtime: unsupported element type 'i8'}}
  ds.parameter @q : tensor<4xi8>
  func.func @micro_step(%x: tensor<2xf32>) -> tensor<f32> {
    %s = ds.sum %x dims = [0] : tensor<2xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
  func.func @optimizer_step(%lr: tensor<f32>, %step: tensor<f32>, %beta1: tensor<f64>,
                            %aux_lr: tensor<f32>) { return }
}

// -----

module {
  ds.parameter @w trainable : tensor<2xf32>
  func.func @micro_step(%x: tensor<2xf32>) -> tensor<f32> {
    %s = ds.sum %x dims = [0] : tensor<2xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
  // expected-error @below {{ds-lower-to-runtime: @optimizer_step must take (lr: tensor<f32>, step: tensor<f32>, beta1: tensor<f64>, aux_lr: tensor<f32>) as ds-optimizer builds it; got '(tensor<f32>, tensor<f32>) -> ()'}}
  func.func @optimizer_step(%lr: tensor<f32>, %step: tensor<f32>) { return }
}

// -----

// Collectives run over groups of the module's mesh: the grid must mirror it.
module attributes {ds.mesh = #ds.mesh<axes = ["dp"], shape = [4]>} {
  shard.grid @mesh(shape = 2x2)
  func.func @micro_step(%x: tensor<4xf32>) -> tensor<f32> {
    // expected-error @below {{ds-lower-to-runtime: collectives need a grid that mirrors the module's ds.mesh (same sizes in the same order; ds-zero and the parallelism passes make one)}}
    %r = shard.all_reduce %x on @mesh grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    %s = ds.sum %r dims = [0] : tensor<4xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
  func.func @optimizer_step(%lr: tensor<f32>, %step: tensor<f32>, %beta1: tensor<f64>,
                            %aux_lr: tensor<f32>) { return }
}

// -----

module attributes {ds.mesh = #ds.mesh<axes = ["dp"], shape = [2]>} {
  shard.grid @mesh(shape = 2)
  func.func @micro_step(%x: tensor<4x2xf32>) -> tensor<f32> {
    // expected-error @below {{ds-lower-to-runtime: all_gather must gather along dimension 0}}
    %r = shard.all_gather %x on @mesh grid_axes = [0] gather_axis = 1 : tensor<4x2xf32> -> tensor<4x4xf32>
    %s = ds.sum %r dims = [0, 1] : tensor<4x4xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
  func.func @optimizer_step(%lr: tensor<f32>, %step: tensor<f32>, %beta1: tensor<f64>,
                            %aux_lr: tensor<f32>) { return }
}

// -----

module attributes {ds.mesh = #ds.mesh<axes = ["dp"], shape = [2]>} {
  shard.grid @mesh(shape = 2)
  func.func @micro_step(%x: tensor<4xf32>) -> tensor<f32> {
    // expected-error @below {{ds-lower-to-runtime: reduce_scatter must be sum, max or min along dimension 0}}
    %r = shard.reduce_scatter %x on @mesh grid_axes = [0] reduction = product scatter_axis = 0 : tensor<4xf32> -> tensor<2xf32>
    %s = ds.sum %r dims = [0] : tensor<2xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
  func.func @optimizer_step(%lr: tensor<f32>, %step: tensor<f32>, %beta1: tensor<f64>,
                            %aux_lr: tensor<f32>) { return }
}

// -----

module attributes {ds.mesh = #ds.mesh<axes = ["dp"], shape = [2]>} {
  shard.grid @mesh(shape = 2)
  func.func @micro_step(%x: tensor<4xf32>) -> tensor<f32> {
    // expected-error @below {{ds-lower-to-runtime: all_reduce must be sum, max or min with the input's type}}
    %r = shard.all_reduce %x on @mesh grid_axes = [0] reduction = product : tensor<4xf32> -> tensor<4xf32>
    %s = ds.sum %r dims = [0] : tensor<4xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
  func.func @optimizer_step(%lr: tensor<f32>, %step: tensor<f32>, %beta1: tensor<f64>,
                            %aux_lr: tensor<f32>) { return }
}

// -----

module attributes {ds.mesh = #ds.mesh<axes = ["dp"], shape = [2]>} {
  shard.grid @mesh(shape = 2)
  func.func @micro_step(%x: tensor<4x2xf32>) -> tensor<f32> {
    // expected-error @below {{ds-lower-to-runtime: all_slice must slice dimension 0}}
    %r = shard.all_slice %x on @mesh grid_axes = [0] slice_axis = 1 : tensor<4x2xf32> -> tensor<4x1xf32>
    %s = ds.sum %r dims = [0, 1] : tensor<4x1xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
  func.func @optimizer_step(%lr: tensor<f32>, %step: tensor<f32>, %beta1: tensor<f64>,
                            %aux_lr: tensor<f32>) { return }
}

// -----

// A ZeRO stage-3 parameter lives only in its shard.
module attributes {ds.mesh = #ds.mesh<axes = ["dp"], shape = [2]>} {
  shard.grid @mesh(shape = 2)
  ds.parameter @w trainable : tensor<4xf32>
  ds.flat_buffer @zero.params.0 role params_sharded members [@w] : tensor<32xf32>
  ds.state @"zero.params.0@shard" of @zero.params.0 role param_shard : tensor<16xf32>
  func.func @micro_step(%x: tensor<4xf32>) -> tensor<f32> {
    // expected-error @below {{ds-lower-to-runtime: 'w' is partitioned (ZeRO stage 3) and has no whole value to read}}
    %w = ds.get_parameter @w : tensor<4xf32>
    %s = ds.sum %w dims = [0] : tensor<4xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
  func.func @optimizer_step(%lr: tensor<f32>, %step: tensor<f32>, %beta1: tensor<f64>,
                            %aux_lr: tensor<f32>) { return }
}

// -----

// An op that no kernel pattern lowers (KernelPatterns.h) is named.
module {
  func.func @micro_step(%x: tensor<2xf32>) -> tensor<f32> {
    // expected-error @below {{ds-lower-to-runtime: no runtime kernel for 'arith.addf'}}
    %y = arith.addf %x, %x : tensor<2xf32>
    %s = ds.sum %y dims = [0] : tensor<2xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
  func.func @optimizer_step(%lr: tensor<f32>, %step: tensor<f32>, %beta1: tensor<f64>,
                            %aux_lr: tensor<f32>) { return }
}

// -----

module attributes {ds.mesh = #ds.mesh<axes = ["dp"], shape = [2]>} {
  shard.grid @mesh(shape = 2)
  func.func @micro_step(%x: tensor<2x4xf32>) -> tensor<f32> {
    // expected-error @below {{ds-lower-to-runtime: all_to_all must split and concatenate along dimension 0 with the input's type (ds-sequence-parallel moves the axes there)}}
    %r = shard.all_to_all %x on @mesh grid_axes = [0] split_axis = 1 concat_axis = 0 : tensor<2x4xf32> -> tensor<4x2xf32>
    %s = ds.sum %r dims = [0, 1] : tensor<4x2xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
  func.func @optimizer_step(%lr: tensor<f32>, %step: tensor<f32>, %beta1: tensor<f64>,
                            %aux_lr: tensor<f32>) { return }
}
