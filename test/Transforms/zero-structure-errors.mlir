// RUN: ds-opt %s --ds-zero="stage=2 data-parallel-size=2" --split-input-file --verify-diagnostics

// ds-zero runs once.
// expected-error @below {{ds-zero: the module already has a symbol @dp (run ds-zero once)}}
module {
  shard.grid @dp(shape = 2)
}

// -----

// Stage 2 rewrites ds-autodiff's gradient accumulation (get, add, assign); other writes of a
// gradient are refused.
module {
  ds.parameter @w trainable : tensor<3xf32>
  ds.state @"w@grad" of @w role "grad" : tensor<3xf32>
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
