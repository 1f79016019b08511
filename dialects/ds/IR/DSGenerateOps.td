//===- DSGenerateOps.td - generation's key/value cache and token choice ----===//
//
// The ops of generation programs (prefill and decode, derived from a model's forward by
// ds-derive-generation): the paged key/value cache, attention against it, and the choice of
// the next token. The cache is a `ds.state` of role `kv_cache`, read with `ds.get_parameter`
// and written back with `ds.assign`; `ds.cache_write` is functional like `ds.adamw_update`,
// and the memory plan updates the cache in place where the new value only goes back to the
// state it was read from.
//
#ifndef DS_GENERATE_OPS_TD
#define DS_GENERATE_OPS_TD

def DS_CacheWriteOp : DS_Op<"cache_write", [Pure,
    AllTypesMatch<["k_cache", "new_k_cache"]>, AllTypesMatch<["v_cache", "new_v_cache"]>]> {
  let summary = "New tokens' keys and values written into the paged key/value cache.";
  let description = [{
    vLLM's paged layout: `k_cache [N, Hk, P, E]` and `v_cache [N, Hk, P, Ev]` hold N pages
    of P positions. The keys `[B, Hk, T, E]` and values `[B, Hk, T, Ev]` of T new tokens of
    B sequences (as the attention computes them: after the rotary embedding, before any
    repeat of grouped heads) go to their slots: `slots [B, T]` holds `page * P + offset` for
    each token, or a negative number for a padding token, which is not written. The results
    are the caches with the tokens written; the rest of each cache is its operand's.
    ```mlir
    %k1, %v1 = ds.cache_write %k0, %v0, %k, %v, %slots
        : tensor<64x2x16x8xf32>, tensor<64x2x16x8xf32>, tensor<4x2x1x8xf32>,
          tensor<4x2x1x8xf32>, tensor<4x1xi64>
    ```
    A slot past the cache ends the job (the runtime checks each one).

    **Constraints:** caches of rank 4 with equal pages, heads and page size; k and v of
    rank 4 with the caches' heads and widths and equal batch and tokens; slots i64 `[B, T]`;
    one element type for caches, k and v.
  }];
  let arguments = (ins DS_FloatTensor:$k_cache, DS_FloatTensor:$v_cache, DS_FloatTensor:$key,
                       DS_FloatTensor:$value, TensorOf<[I64]>:$slots);
  let results = (outs DS_FloatTensor:$new_k_cache, DS_FloatTensor:$new_v_cache);
  let assemblyFormat = [{
    $k_cache `,` $v_cache `,` $key `,` $value `,` $slots attr-dict `:` type($k_cache) `,`
    type($v_cache) `,` type($key) `,` type($value) `,` type($slots)
  }];
  let hasVerifier = 1;
}

def DS_PagedAttentionOp : DS_Op<"paged_attention", [Pure]> {
  let summary = "Causal attention of new tokens against the paged key/value cache.";
  let description = [{
    Query `[B, Hq, T, E]` holds up to T new tokens of each of B sequences, the first
    `q_lens[b]` real (the rest padding, whose result rows are zeros). Sequence b's cache
    holds `context_lens[b]` positions, its new tokens included (written by `ds.cache_write`
    first); position j is in page `pages[b, j / P]` at offset `j % P`. New token t sits at
    position `context_lens[b] - q_lens[b] + t` and attends to positions 0 to its own:
    `softmax(q k^T * scale) v`, computed in f32 (16-bit operands widened, the result rounded
    once). Grouped-query heads: query head h reads key/value head `h / (Hq / Hk)`. Decoding is
    T = 1; a prompt's chunk on top of its cached prefix is T > 1.
    ```mlir
    %o = ds.paged_attention %q, %k1, %v1, %pages, %context_lens, %q_lens scale = 0.125
        : (tensor<4x4x1x8xf32>, tensor<64x2x16x8xf32>, tensor<64x2x16x8xf32>,
           tensor<4x8xi64>, tensor<4xi64>, tensor<4xi64>) -> tensor<4x4x1x8xf32>
    ```
    Bad pages and lengths end the job (the runtime names the sequence).

    **Constraints:** the caches as `ds.cache_write`'s; query of rank 4 with the caches' width
    E and a head count that Hk divides; pages i64 `[B, maxPages]`, context_lens and q_lens
    i64 `[B]`; the result `[B, Hq, T, Ev]`; one element type for query, caches and result;
    a nonzero scale.
  }];
  let arguments = (ins DS_FloatTensor:$query, DS_FloatTensor:$k_cache,
                       DS_FloatTensor:$v_cache, TensorOf<[I64]>:$pages,
                       TensorOf<[I64]>:$context_lens, TensorOf<[I64]>:$q_lens, F64Attr:$scale);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $k_cache `,` $v_cache `,` $pages `,` $context_lens `,` $q_lens `scale` `=` $scale
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_SampleOp : DS_Op<"sample", [Pure]> {
  let summary = "The next token of each sequence, as HF's `generate` chooses it.";
  let description = [{
    From logits `[B, V]`: greedy (the first largest logit, as `torch.argmax`) where
    `temperature[b]` is 0; otherwise a draw from the softmax of `logits / temperature[b]` over
    the tokens HF's warpers keep, in HF's order: `top_k[b]` (0: all) keeps the logits at least
    the k-th largest, then `top_p[b]` (1: all) drops the smallest whose probabilities, summed
    from the smallest up, stay within `1 - top_p`, keeping at least the largest. The draw's
    uniform number comes from `(seeds[b], steps[b])` alone, so a request draws the same tokens
    whatever else shares its batch.
    ```mlir
    %t = ds.sample %logits, %temperature, %top_k, %top_p, %seeds, %steps
        : (tensor<4x64xf32>, tensor<4xf32>, tensor<4xi64>, tensor<4xf32>, tensor<4xi64>,
           tensor<4xi64>) -> tensor<4xi64>
    ```
    A negative temperature or top_k, or a top_p outside (0, 1], ends the job.

    **Constraints:** logits `[B, V]`; temperature and top_p f32 `[B]`; top_k, seeds and steps
    i64 `[B]`; the result i64 `[B]`.
  }];
  let arguments = (ins DS_FloatTensor:$logits, TensorOf<[F32]>:$temperature,
                       TensorOf<[I64]>:$top_k, TensorOf<[F32]>:$top_p, TensorOf<[I64]>:$seeds,
                       TensorOf<[I64]>:$steps);
  let results = (outs TensorOf<[I64]>:$tokens);
  let assemblyFormat = [{
    $logits `,` $temperature `,` $top_k `,` $top_p `,` $seeds `,` $steps attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif // DS_GENERATE_OPS_TD
