// RUN: ds-opt %s --ds-zero="stage=2 data-parallel-size=2" --split-input-file --verify-diagnostics

// ds-zero runs once.
// expected-error @below {{ds-zero: the module is already partitioned (ZeRO stage 2); run ds-zero once}}
module attributes {ds.zero = #ds.zero<stage = 2>} {
}

// -----

// The mesh decides the data-parallel size; an option that disagrees is refused.
// expected-error @below {{ds-zero: data-parallel-size 2 disagrees with the module's mesh dp=4 (drop the option; the mesh decides)}}
module attributes {ds.mesh = #ds.mesh<axes = ["dp"], shape = [4]>} {
}

// -----

// The grid mirrors the mesh.
module attributes {ds.mesh = #ds.mesh<axes = ["dp", "tp"], shape = [2, 2]>} {
  // expected-error @below {{ds-zero: grid @mesh does not match the module's mesh dp=2 x tp=2}}
  shard.grid @mesh(shape = 2)
}

// -----

// @mesh is the grid's name.
// expected-error @below {{ds-zero: the symbol @mesh is taken by something other than the mesh's grid}}
module {
  ds.parameter @mesh trainable : tensor<3xf32>
}

// -----

// Stage 2 rewrites ds-autodiff's gradient accumulation (get, add, assign); other writes of a
// gradient are refused.
module {
  ds.parameter @w trainable : tensor<3xf32>
  ds.state @"w@grad" of @w role grad : tensor<3xf32>
  func.func @micro_step(%x: tensor<3xf32>) -> tensor<f32> {
    // expected-error @below {{ds-zero: stage 2 expects ds-autodiff's accumulation (get, add, assign) of 'w@grad'}}
    ds.assign @"w@grad" = %x : tensor<3xf32>
    %s = ds.sum %x dims = [0] : tensor<3xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// expected-error @below {{ds-zero: no gradient accumulations in @micro_step; run ds-autodiff first}}
module {
  func.func @micro_step(%x: tensor<3xf32>) -> tensor<f32> {
    %s = ds.sum %x dims = [0] : tensor<3xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}
