// RUN: ds-opt %s -split-input-file -verify-diagnostics --ds-derive-generation='name=decode pages=8 page-size=4 max-pages=2'

// Each refusal of ds-derive-generation names what to change.

// expected-error @+1 {{ds-derive-generation: needs @forward, a causal LM's forward as ds-opt imports it}}
module {
  func.func @f() {
    return
  }
}

// -----

module {
  // expected-error @+1 {{@forward must return the logits [batch, tokens, vocabulary] alone (export the model's logits, not a loss or a tuple)}}
  func.func @forward(%x: tensor<2x3xi64> {ds.input_name = "input_ids"}) -> tensor<f32> {
    %c = ds.constant dense<0.0> : tensor<f32>
    return %c : tensor<f32>
  }
}

// -----

module {
  // expected-error @+1 {{input 'labels' is not one a generation program takes (input_ids, position_ids and attention_mask)}}
  func.func @forward(%x: tensor<2x3xi64> {ds.input_name = "input_ids"}, %y: tensor<2x3xi64> {ds.input_name = "labels"}) -> tensor<2x3x4xf32> {
    %c = ds.constant dense<0.0> : tensor<2x3x4xf32>
    return %c : tensor<2x3x4xf32>
  }
}

// -----

module {
  // expected-error @+1 {{input 'position_ids' must be i64 [2, 3], as the logits' batch and tokens}}
  func.func @forward(%x: tensor<2x3xi64> {ds.input_name = "input_ids"}, %p: tensor<2x4xi64> {ds.input_name = "position_ids"}) -> tensor<2x3x4xf32> {
    %c = ds.constant dense<0.0> : tensor<2x3x4xf32>
    return %c : tensor<2x3x4xf32>
  }
}

// -----

module {
  // expected-error @+1 {{@forward takes no position_ids: export the model with them as an input (model(input_ids, attention_mask=..., position_ids=...)), so that each token's position comes from the program's caller}}
  func.func @forward(%x: tensor<2x3xi64> {ds.input_name = "input_ids"}) -> tensor<2x3x4xf32> {
    %c = ds.constant dense<0.0> : tensor<2x3x4xf32>
    return %c : tensor<2x3x4xf32>
  }
}

// -----

module {
  // expected-error @+1 {{@forward has no ds.attention to cache}}
  func.func @forward(%x: tensor<2x3xi64> {ds.input_name = "input_ids"}, %p: tensor<2x3xi64> {ds.input_name = "position_ids"}) -> tensor<2x3x4xf32> {
    %c = ds.constant dense<0.0> : tensor<2x3x4xf32>
    return %c : tensor<2x3x4xf32>
  }
}

// -----

module {
  func.func @forward(%x: tensor<2x3xi64> {ds.input_name = "input_ids"}, %p: tensor<2x3xi64> {ds.input_name = "position_ids"}) -> tensor<2x3x4xf32> {
    %q = ds.constant dense<1.0> : tensor<2x2x3x4xf32>
    // expected-error @+1 {{attention without a causal mask (bidirectional) cannot generate token by token}}
    %a, %l = ds.attention %q, %q, %q scale = 0.5 : (tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>) -> (tensor<2x2x3x4xf32>, tensor<2x2x3xf32>)
    %r = ds.reshape %a : tensor<2x2x3x4xf32> -> tensor<2x3x8xf32>
    %s = ds.slice %r dim = 2 [0 : 4] : tensor<2x3x8xf32> -> tensor<2x3x4xf32>
    return %s : tensor<2x3x4xf32>
  }
}

// -----

module {
  func.func @forward(%x: tensor<2x3xi64> {ds.input_name = "input_ids"}, %p: tensor<2x3xi64> {ds.input_name = "position_ids"}) -> tensor<2x3x4xf32> {
    %q = ds.constant dense<1.0> : tensor<2x2x3x4xf32>
    // expected-error @+1 {{the attention's log-sum-exp is read (a training step, not a forward)}}
    %a, %l = ds.attention %q, %q, %q scale = 0.5 causal : (tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>) -> (tensor<2x2x3x4xf32>, tensor<2x2x3xf32>)
    %r = ds.reshape %l : tensor<2x2x3xf32> -> tensor<2x3x2xf32>
    %s = ds.concat %r, %r dim = 2 : (tensor<2x3x2xf32>, tensor<2x3x2xf32>) -> tensor<2x3x4xf32>
    return %s : tensor<2x3x4xf32>
  }
}

// -----

module {
  ds.state @cache.0.key role kv_cache : tensor<9x2x4x4xf32>
  func.func @forward(%x: tensor<2x3xi64> {ds.input_name = "input_ids"}, %p: tensor<2x3xi64> {ds.input_name = "position_ids"}) -> tensor<2x3x4xf32> {
    %q = ds.constant dense<1.0> : tensor<2x2x3x4xf32>
    // expected-error @+1 {{the module's state @"cache.0.key" is not the cache this program needs, 'tensor<8x2x4x4xf32>' (derive the programs with the same pages and page size)}}
    %a, %l = ds.attention %q, %q, %q scale = 0.5 causal : (tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>) -> (tensor<2x2x3x4xf32>, tensor<2x2x3xf32>)
    %r = ds.reshape %a : tensor<2x2x3x4xf32> -> tensor<2x3x8xf32>
    %s = ds.slice %r dim = 2 [0 : 4] : tensor<2x3x8xf32> -> tensor<2x3x4xf32>
    return %s : tensor<2x3x4xf32>
  }
}
