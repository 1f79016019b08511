// RUN: ds-opt %s --ds-sequence-parallel=sequence-parallel-size=2 --split-input-file --verify-diagnostics

// The sequence length must divide by sp.
module {
  // expected-error @below {{ds-sequence-parallel: the sequence length 3 does not divide by sequence_parallel_size 2; pick a length that does or another size}}
  func.func @forward(%idx: tensor<2x3xi64>) -> tensor<f32> {
    %c = ds.constant dense<0.0> : tensor<f32>
    return %c : tensor<f32>
  }
}

// -----

// An op that needs the whole of dimension 1 outside an attention is refused by name (here a
// linear whose features are dimension 1 of a [batch, features] input).
module {
  ds.parameter @w trainable : tensor<4x4xf32>
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
    %w = ds.get_parameter @w : tensor<4x4xf32>
    // expected-error @below {{ds-sequence-parallel: 'ds.linear' contracts the split dimension}}
    %y = ds.linear %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %s = ds.sum %y dims = [0, 1] : tensor<2x4xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// No input has a sequence dimension.
// expected-error @below {{ds-sequence-parallel: no input has a sequence dimension (dimension 1 of a [batch, sequence, ...] input)}}
func.func @forward(%x: tensor<4xf32>) -> tensor<f32> {
  %s = ds.sum %x dims = [0] : tensor<4xf32> -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// @forward must return what is whole (the loss), not a block of the sequence.
func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @below {{ds-sequence-parallel: 'func.return' returns a value split along the sequence; return the loss (a sum or mean over it)}}
  return %x : tensor<2x4xf32>
}

// -----

// The mesh decides the sp size.
// expected-error @below {{ds-sequence-parallel: sequence-parallel-size 2 disagrees with the module's mesh dp=1 x sp=4 (drop the option; the mesh decides)}}
module attributes {ds.mesh = #ds.mesh<axes = ["dp", "sp"], shape = [1, 4]>} {
}

// -----

// Fused bf16 attention whose heads (3) and batch (1) do not divide by sp: Ulysses has
// nothing to exchange the sequence for, and ring attention (which auto takes in f32) computes
// in f32 only.
module {
  func.func @forward(%x: tensor<1x4x6xbf16>) -> tensor<bf16> {
    %r = ds.reshape %x : tensor<1x4x6xbf16> -> tensor<1x4x3x2xbf16>
    %q = ds.transpose %r perm = [0, 2, 1, 3] : tensor<1x4x3x2xbf16> -> tensor<1x3x4x2xbf16>
    // expected-error @below {{ds-sequence-parallel: 'ds.attention' has 3 query and 3 key/value heads and a batch of 1, none of which divides by sp to exchange the sequence for}}
    %a:2 = ds.attention %q, %q, %q scale = 0.5 causal : (tensor<1x3x4x2xbf16>, tensor<1x3x4x2xbf16>, tensor<1x3x4x2xbf16>) -> (tensor<1x3x4x2xbf16>, tensor<1x3x4xf32>)
    %s = ds.sum %a#0 dims = [0, 1, 2, 3] : tensor<1x3x4x2xbf16> -> tensor<bf16>
    return %s : tensor<bf16>
  }
}
