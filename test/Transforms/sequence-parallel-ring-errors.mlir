// RUN: ds-opt %s --split-input-file --ds-sequence-parallel="sequence-parallel-size=2 mode=ring" --verify-diagnostics

// Ring attention takes causal or unmasked attention: a mask is refused by name, with the
// mode that takes it.
module {
  func.func @forward(%x: tensor<1x8x4xf32>) -> tensor<f32> {
    %r = ds.reshape %x : tensor<1x8x4xf32> -> tensor<1x8x2x2xf32>
    %q = ds.transpose %r perm = [0, 2, 1, 3] : tensor<1x8x2x2xf32> -> tensor<1x2x8x2xf32>
    %m = ds.constant dense<true> : tensor<1x1x8x8xi1>
    // expected-error @below {{ds-sequence-parallel: 'ds.attention' has a mask; ring attention takes a causal or an unmasked attention (sequence_parallel_mode "ulysses" exchanges it whole)}}
    %a:2 = ds.attention %q, %q, %q mask %m scale = 0.5 : (tensor<1x2x8x2xf32>, tensor<1x2x8x2xf32>, tensor<1x2x8x2xf32>, tensor<1x1x8x8xi1>) -> (tensor<1x2x8x2xf32>, tensor<1x2x8xf32>)
    %s = ds.sum %a#0 dims = [0, 1, 2, 3] : tensor<1x2x8x2xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// The sequence rules for ds.concat (rotary's halves join along another dimension): along
// the split sequence itself, or with a piece that is not split alike, is refused by name.
module {
  func.func @forward(%x: tensor<2x4x3xf32>) -> tensor<f32> {
    // expected-error @below {{ds-sequence-parallel: 'ds.concat' concatenates along the split sequence dimension}}
    %c = ds.concat %x, %x dim = 1 : (tensor<2x4x3xf32>, tensor<2x4x3xf32>) -> tensor<2x8x3xf32>
    %s = ds.sum %c dims = [0, 1, 2] : tensor<2x8x3xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// A shift along the sequence (concatenated there, sliced back to its length) of a value the
// model computes, not of an input: refused, with the fix.
module {
  func.func @forward(%x: tensor<2x4x3xf32>) -> tensor<f32> {
    %e = ds.exp %x : tensor<2x4x3xf32>
    %p = ds.constant dense<0.0> : tensor<2x1x3xf32>
    // expected-error @below {{ds-sequence-parallel: 'ds.concat' concatenates along the split sequence dimension a value computed in the model (only an input shifted along the sequence splits; shift it in the data, as DeepSpeed's ALST does with shift_labels)}}
    %c = ds.concat %e, %p dim = 1 : (tensor<2x4x3xf32>, tensor<2x1x3xf32>) -> tensor<2x5x3xf32>
    %l = ds.slice %c dim = 1[1 : 5] : tensor<2x5x3xf32> -> tensor<2x4x3xf32>
    %s = ds.sum %l dims = [0, 1, 2] : tensor<2x4x3xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

module {
  func.func @forward(%x: tensor<2x4x3xf32>) -> tensor<f32> {
    %w = ds.constant dense<1.0> : tensor<2x4x3xf32>
    // expected-error @below {{ds-sequence-parallel: 'ds.concat' concatenates pieces that are not split alike}}
    %c = ds.concat %x, %w dim = 2 : (tensor<2x4x3xf32>, tensor<2x4x3xf32>) -> tensor<2x4x6xf32>
    %s = ds.sum %c dims = [0, 1, 2] : tensor<2x4x6xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}
