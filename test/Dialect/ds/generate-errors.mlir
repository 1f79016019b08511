// RUN: ds-opt %s -split-input-file -verify-diagnostics

// One case per error branch of generation's verifiers (DSGenerateOps.cpp) and of a
// kv_cache state (DSTrainOps.cpp).

ds.parameter @w trainable : tensor<8x2x4x16xf32>
// expected-error @+1 {{'ds.state' op a kv_cache belongs to no parameter: drop `of`}}
ds.state @c of @w role kv_cache : tensor<8x2x4x16xf32>

// -----

// expected-error @+1 {{'ds.state' op a kv_cache is a float tensor of rank 4 [pages, heads, page size, width], not 'tensor<8x2x64xf32>'}}
ds.state @c role kv_cache : tensor<8x2x64xf32>

// -----

// expected-error @+1 {{'ds.flat_buffer' op role 'kv_cache' is not a flat buffer's}}
ds.flat_buffer @f role kv_cache members [] : tensor<16xf32>

// -----

func.func @caches_rank(%kc: tensor<8x2x64xf32>, %vc: tensor<8x2x64xf32>, %k: tensor<3x2x1x16xf32>, %s: tensor<3x1xi64>) {
  // expected-error @+1 {{'ds.cache_write' op caches must be of rank 4 [pages, heads, page size, width], not [8, 2, 64] and [8, 2, 64]}}
  %0:2 = ds.cache_write %kc, %vc, %k, %k, %s : tensor<8x2x64xf32>, tensor<8x2x64xf32>, tensor<3x2x1x16xf32>, tensor<3x2x1x16xf32>, tensor<3x1xi64>
  return
}

// -----

func.func @caches_pages(%kc: tensor<8x2x4x16xf32>, %vc: tensor<9x2x4x16xf32>, %k: tensor<3x2x1x16xf32>, %s: tensor<3x1xi64>) {
  // expected-error @+1 {{'ds.cache_write' op the key cache [8, 2, 4, 16] and the value cache [9, 2, 4, 16] differ in pages, heads or page size}}
  %0:2 = ds.cache_write %kc, %vc, %k, %k, %s : tensor<8x2x4x16xf32>, tensor<9x2x4x16xf32>, tensor<3x2x1x16xf32>, tensor<3x2x1x16xf32>, tensor<3x1xi64>
  return
}

// -----

func.func @caches_types(%kc: tensor<8x2x4x16xf32>, %vc: tensor<8x2x4x16xbf16>, %k: tensor<3x2x1x16xf32>, %v: tensor<3x2x1x16xbf16>, %s: tensor<3x1xi64>) {
  // expected-error @+1 {{'ds.cache_write' op the caches differ in element type: 'f32' and 'bf16'}}
  %0:2 = ds.cache_write %kc, %vc, %k, %v, %s : tensor<8x2x4x16xf32>, tensor<8x2x4x16xbf16>, tensor<3x2x1x16xf32>, tensor<3x2x1x16xbf16>, tensor<3x1xi64>
  return
}

// -----

func.func @write_key_rank(%kc: tensor<8x2x4x16xf32>, %k: tensor<3x2x16xf32>, %s: tensor<3x1xi64>) {
  // expected-error @+1 {{'ds.cache_write' op key must be of rank 4 [batch, heads, tokens, width], not [3, 2, 16]}}
  %0:2 = ds.cache_write %kc, %kc, %k, %k, %s : tensor<8x2x4x16xf32>, tensor<8x2x4x16xf32>, tensor<3x2x16xf32>, tensor<3x2x16xf32>, tensor<3x1xi64>
  return
}

// -----

func.func @write_key_heads(%kc: tensor<8x2x4x16xf32>, %k: tensor<3x4x1x16xf32>, %s: tensor<3x1xi64>) {
  // expected-error @+1 {{'ds.cache_write' op key has shape [3, 4, 1, 16], expected [3, 2, 1, 16]}}
  %0:2 = ds.cache_write %kc, %kc, %k, %k, %s : tensor<8x2x4x16xf32>, tensor<8x2x4x16xf32>, tensor<3x4x1x16xf32>, tensor<3x4x1x16xf32>, tensor<3x1xi64>
  return
}

// -----

func.func @write_value_width(%kc: tensor<8x2x4x16xf32>, %vc: tensor<8x2x4x8xf32>, %k: tensor<3x2x1x16xf32>, %s: tensor<3x1xi64>) {
  // expected-error @+1 {{'ds.cache_write' op value has shape [3, 2, 1, 16], expected [3, 2, 1, 8]}}
  %0:2 = ds.cache_write %kc, %vc, %k, %k, %s : tensor<8x2x4x16xf32>, tensor<8x2x4x8xf32>, tensor<3x2x1x16xf32>, tensor<3x2x1x16xf32>, tensor<3x1xi64>
  return
}

// -----

func.func @write_slots(%kc: tensor<8x2x4x16xf32>, %k: tensor<3x2x1x16xf32>, %s: tensor<3x2xi64>) {
  // expected-error @+1 {{'ds.cache_write' op slots has shape [3, 2], expected [3, 1]}}
  %0:2 = ds.cache_write %kc, %kc, %k, %k, %s : tensor<8x2x4x16xf32>, tensor<8x2x4x16xf32>, tensor<3x2x1x16xf32>, tensor<3x2x1x16xf32>, tensor<3x2xi64>
  return
}

// -----

func.func @write_type(%kc: tensor<8x2x4x16xbf16>, %k: tensor<3x2x1x16xf32>, %s: tensor<3x1xi64>) {
  // expected-error @+1 {{'ds.cache_write' op keys and values must be of the caches' element type 'bf16'}}
  %0:2 = ds.cache_write %kc, %kc, %k, %k, %s : tensor<8x2x4x16xbf16>, tensor<8x2x4x16xbf16>, tensor<3x2x1x16xf32>, tensor<3x2x1x16xf32>, tensor<3x1xi64>
  return
}

// -----

func.func @write_slots_type(%kc: tensor<8x2x4x16xf32>, %k: tensor<3x2x1x16xf32>, %s: tensor<3x1xi32>) {
  // expected-error @+1 {{'ds.cache_write' op operand #4 must be tensor of 64-bit signless integer values}}
  %0:2 = ds.cache_write %kc, %kc, %k, %k, %s : tensor<8x2x4x16xf32>, tensor<8x2x4x16xf32>, tensor<3x2x1x16xf32>, tensor<3x2x1x16xf32>, tensor<3x1xi32>
  return
}

// -----

func.func @paged_scale(%q: tensor<3x4x1x16xf32>, %kc: tensor<8x2x4x16xf32>, %p: tensor<3x5xi64>, %l: tensor<3xi64>) {
  // expected-error @+1 {{'ds.paged_attention' op scale must be nonzero}}
  %0 = ds.paged_attention %q, %kc, %kc, %p, %l, %l scale = 0.0 : (tensor<3x4x1x16xf32>, tensor<8x2x4x16xf32>, tensor<8x2x4x16xf32>, tensor<3x5xi64>, tensor<3xi64>, tensor<3xi64>) -> tensor<3x4x1x16xf32>
  return
}

// -----

func.func @paged_query_rank(%q: tensor<3x4x16xf32>, %kc: tensor<8x2x4x16xf32>, %p: tensor<3x5xi64>, %l: tensor<3xi64>) {
  // expected-error @+1 {{'ds.paged_attention' op query must be of rank 4 [batch, heads, tokens, width], not [3, 4, 16]}}
  %0 = ds.paged_attention %q, %kc, %kc, %p, %l, %l scale = 0.25 : (tensor<3x4x16xf32>, tensor<8x2x4x16xf32>, tensor<8x2x4x16xf32>, tensor<3x5xi64>, tensor<3xi64>, tensor<3xi64>) -> tensor<3x4x1x16xf32>
  return
}

// -----

func.func @paged_width(%q: tensor<3x4x1x8xf32>, %kc: tensor<8x2x4x16xf32>, %p: tensor<3x5xi64>, %l: tensor<3xi64>) {
  // expected-error @+1 {{'ds.paged_attention' op query width 8 differs from the key cache's 16}}
  %0 = ds.paged_attention %q, %kc, %kc, %p, %l, %l scale = 0.25 : (tensor<3x4x1x8xf32>, tensor<8x2x4x16xf32>, tensor<8x2x4x16xf32>, tensor<3x5xi64>, tensor<3xi64>, tensor<3xi64>) -> tensor<3x4x1x16xf32>
  return
}

// -----

func.func @paged_heads(%q: tensor<3x3x1x16xf32>, %kc: tensor<8x2x4x16xf32>, %p: tensor<3x5xi64>, %l: tensor<3xi64>) {
  // expected-error @+1 {{'ds.paged_attention' op the cache's 2 key/value heads do not divide the 3 query heads}}
  %0 = ds.paged_attention %q, %kc, %kc, %p, %l, %l scale = 0.25 : (tensor<3x3x1x16xf32>, tensor<8x2x4x16xf32>, tensor<8x2x4x16xf32>, tensor<3x5xi64>, tensor<3xi64>, tensor<3xi64>) -> tensor<3x3x1x16xf32>
  return
}

// -----

func.func @paged_pages(%q: tensor<3x4x1x16xf32>, %kc: tensor<8x2x4x16xf32>, %p: tensor<2x5xi64>, %l: tensor<3xi64>) {
  // expected-error @+1 {{'ds.paged_attention' op pages has shape [2, 5], expected [3, max pages]}}
  %0 = ds.paged_attention %q, %kc, %kc, %p, %l, %l scale = 0.25 : (tensor<3x4x1x16xf32>, tensor<8x2x4x16xf32>, tensor<8x2x4x16xf32>, tensor<2x5xi64>, tensor<3xi64>, tensor<3xi64>) -> tensor<3x4x1x16xf32>
  return
}

// -----

func.func @paged_lens(%q: tensor<3x4x1x16xf32>, %kc: tensor<8x2x4x16xf32>, %p: tensor<3x5xi64>, %l: tensor<3xi64>, %bad: tensor<3x1xi64>) {
  // expected-error @+1 {{'ds.paged_attention' op q_lens has shape [3, 1], expected [3]}}
  %0 = ds.paged_attention %q, %kc, %kc, %p, %l, %bad scale = 0.25 : (tensor<3x4x1x16xf32>, tensor<8x2x4x16xf32>, tensor<8x2x4x16xf32>, tensor<3x5xi64>, tensor<3xi64>, tensor<3x1xi64>) -> tensor<3x4x1x16xf32>
  return
}

// -----

func.func @paged_result(%q: tensor<3x4x1x16xf32>, %kc: tensor<8x2x4x16xf32>, %vc: tensor<8x2x4x8xf32>, %p: tensor<3x5xi64>, %l: tensor<3xi64>) {
  // expected-error @+1 {{'ds.paged_attention' op result has shape [3, 4, 1, 16], expected [3, 4, 1, 8]}}
  %0 = ds.paged_attention %q, %kc, %vc, %p, %l, %l scale = 0.25 : (tensor<3x4x1x16xf32>, tensor<8x2x4x16xf32>, tensor<8x2x4x8xf32>, tensor<3x5xi64>, tensor<3xi64>, tensor<3xi64>) -> tensor<3x4x1x16xf32>
  return
}

// -----

func.func @paged_type(%q: tensor<3x4x1x16xf32>, %kc: tensor<8x2x4x16xbf16>, %p: tensor<3x5xi64>, %l: tensor<3xi64>) {
  // expected-error @+1 {{'ds.paged_attention' op query and result must be of the caches' element type 'bf16'}}
  %0 = ds.paged_attention %q, %kc, %kc, %p, %l, %l scale = 0.25 : (tensor<3x4x1x16xf32>, tensor<8x2x4x16xbf16>, tensor<8x2x4x16xbf16>, tensor<3x5xi64>, tensor<3xi64>, tensor<3xi64>) -> tensor<3x4x1x16xf32>
  return
}

// -----

func.func @sample_rank(%x: tensor<3x2x64xf32>, %t: tensor<3xf32>, %i: tensor<3xi64>) {
  // expected-error @+1 {{'ds.sample' op logits must be of rank 2 [batch, vocabulary], not [3, 2, 64]}}
  %0 = ds.sample %x, %t, %i, %t, %i, %i : (tensor<3x2x64xf32>, tensor<3xf32>, tensor<3xi64>, tensor<3xf32>, tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  return
}

// -----

func.func @sample_batch(%x: tensor<3x64xf32>, %t: tensor<3xf32>, %i: tensor<3xi64>, %s: tensor<4xi64>) {
  // expected-error @+1 {{'ds.sample' op steps has shape [4], expected [3]}}
  %0 = ds.sample %x, %t, %i, %t, %i, %s : (tensor<3x64xf32>, tensor<3xf32>, tensor<3xi64>, tensor<3xf32>, tensor<3xi64>, tensor<4xi64>) -> tensor<3xi64>
  return
}

// -----

func.func @sample_tokens(%x: tensor<3x64xf32>, %t: tensor<3xf32>, %i: tensor<3xi64>) {
  // expected-error @+1 {{'ds.sample' op tokens has shape [3, 1], expected [3]}}
  %0 = ds.sample %x, %t, %i, %t, %i, %i : (tensor<3x64xf32>, tensor<3xf32>, tensor<3xi64>, tensor<3xf32>, tensor<3xi64>, tensor<3xi64>) -> tensor<3x1xi64>
  return
}

// -----

func.func @sample_temperature_type(%x: tensor<3x64xf32>, %t: tensor<3xf64>, %f: tensor<3xf32>, %i: tensor<3xi64>) {
  // expected-error @+1 {{'ds.sample' op operand #1 must be tensor of 32-bit float values}}
  %0 = ds.sample %x, %t, %i, %f, %i, %i : (tensor<3x64xf32>, tensor<3xf64>, tensor<3xi64>, tensor<3xf32>, tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  return
}
