// RUN: ds-opt %s --ds-expert-capacity --split-input-file --verify-diagnostics
// RUN: not ds-opt %s --ds-expert-capacity=capacity-factor=0 --split-input-file 2>&1 | FileCheck %s --check-prefix=FACTOR
// FACTOR: ds-expert-capacity: capacity-factor must be > 0 and min-capacity >= 0, got 0.000000e+00 and 4

// The router picks 3 experts: DeepSpeed drops those by probability, which ds does not do.
module {
  ds.parameter @experts.up trainable : tensor<4x16x8xf32>
  func.func @forward(%x: tensor<6x8xf32>, %p: tensor<6x4xf32>) -> tensor<18x16xf32> {
    // expected-error @+1 {{ds-expert-capacity: the router picks 3 experts per token; DeepSpeed-MoE drops top-1 and top-2 rows in choice order, which ds follows, but drops by probability beyond (topkgating), which ds does not do: set moe.drop_tokens to false (dropless)}}
    %v, %i = ds.top_k %p k = 3 : (tensor<6x4xf32>) -> (tensor<6x3xf32>, tensor<6x3xi64>)
    %ids = ds.reshape %i : tensor<6x3xi64> -> tensor<18xi64>
    %xr = ds.reshape %x : tensor<6x8xf32> -> tensor<6x1x8xf32>
    %xb = ds.broadcast_to %xr : tensor<6x1x8xf32> -> tensor<6x3x8xf32>
    %rows = ds.reshape %xb : tensor<6x3x8xf32> -> tensor<18x8xf32>
    %up = ds.get_parameter @experts.up : tensor<4x16x8xf32>
    %h = ds.expert_linear %rows, %up[%ids] : (tensor<18x8xf32>, tensor<4x16x8xf32>, tensor<18xi64>) -> tensor<18x16xf32>
    return %h : tensor<18x16xf32>
  }
}

// -----

// Ids that are not a router's choices in token order (HF's grouped_mm form sorts them).
module {
  ds.parameter @experts.up trainable : tensor<4x16x8xf32>
  func.func @forward(%x: tensor<12x8xf32>, %ids: tensor<12xi64>) -> tensor<12x16xf32> {
    %up = ds.get_parameter @experts.up : tensor<4x16x8xf32>
    // expected-error @+1 {{ds-expert-capacity: this product's expert ids are not a router's top-k indices in token order, so the tokens' choices cannot be queued as DeepSpeed-MoE does; export the model with HF's experts_implementation="batched_mm" (the grouped_mm form sorts the rows by expert first)}}
    %h = ds.expert_linear %x, %up[%ids] : (tensor<12x8xf32>, tensor<4x16x8xf32>, tensor<12xi64>) -> tensor<12x16xf32>
    return %h : tensor<12x16xf32>
  }
}

// -----

// expected-error @+1 {{ds-expert-capacity: @forward has no routed experts (ds.expert_linear) to drop tokens from; moe.drop_tokens needs a mixture-of-experts model}}
module {
  func.func @forward(%x: tensor<6x8xf32>) -> tensor<6x8xf32> {
    return %x : tensor<6x8xf32>
  }
}

// -----

// A select over the router's choices that is not HF's wrap of negative ids (ids > 0 moved):
// not the choices in token order.
module {
  ds.parameter @experts.up trainable : tensor<4x16x8xf32>
  func.func @forward(%x: tensor<12x8xf32>, %p: tensor<6x4xf32>) -> tensor<12x16xf32> {
    %v, %i = ds.top_k %p k = 2 : (tensor<6x4xf32>) -> (tensor<6x2xf32>, tensor<6x2xi64>)
    %flat = ds.reshape %i : tensor<6x2xi64> -> tensor<12xi64>
    %zero = ds.constant dense<0> : tensor<i64>
    %e = ds.constant dense<4> : tensor<i64>
    %pos = ds.cmp gt, %flat, %zero : tensor<12xi64>, tensor<i64> -> tensor<12xi1>
    %moved = ds.add %flat, %e : tensor<12xi64>, tensor<i64> -> tensor<12xi64>
    %ids = ds.where %pos, %moved, %flat : (tensor<12xi1>, tensor<12xi64>, tensor<12xi64>) -> tensor<12xi64>
    %up = ds.get_parameter @experts.up : tensor<4x16x8xf32>
    // expected-error @+1 {{ds-expert-capacity: this product's expert ids are not a router's top-k indices in token order}}
    %h = ds.expert_linear %x, %up[%ids] : (tensor<12x8xf32>, tensor<4x16x8xf32>, tensor<12xi64>) -> tensor<12x16xf32>
    return %h : tensor<12x16xf32>
  }
}
