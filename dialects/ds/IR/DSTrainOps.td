//===- DSTrainOps.td - training state and gradient ops of ds --------------===//
//
// Ops that the training passes create: optimizer and gradient state, assignment of persistent
// tensors, random masks, and the gradient kernels that are not compositions of forward ops.
//
//===----------------------------------------------------------------------===//
#ifndef DS_TRAIN_OPS_TD
#define DS_TRAIN_OPS_TD

def DS_StateOp : DS_Op<"state", [Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "Persistent training state of a parameter: its gradient or optimizer moments.";
  let description = [{
    Created by `ds-autodiff` (the accumulated gradient) and `ds-optimizer` (moments). Starts
    at zero; read with `ds.get_parameter`, written with `ds.assign`. Not in the state_dict.
    ```mlir
    ds.state @"fc.weight.grad" of @"fc.weight" role grad : tensor<32x16xf32>
    ds.state @loss_scale role loss_scale : tensor<f32>
    ```
    A state of no parameter is a scalar of the training loop that the compiled step shares
    with the driver: role `loss_scale` (fp16's dynamic loss scale, set by the driver before a
    step) or `found_inf` (1 when the step's gradients overflowed, set by `@optimizer_step`);
    or generation's key/value cache, role `kv_cache` (`[pages, heads, page size, width]`,
    kept between a generation program's calls; see `ds.cache_write`).

    **Constraints:** the symbol name is not empty; the role is a state's (`grad`,
    `exp_avg`, `exp_avg_sq`, `momentum_buffer`, `master`, `loss_scale`, `found_inf`,
    `param_shard`, `grad_shard`, `kv_cache`); `of` names a trainable `ds.parameter` (or, for
    a ZeRO shard, the `ds.flat_buffer` it partitions); without `of`, the role is `loss_scale`
    or `found_inf` and the type an f32 scalar, or `kv_cache` and the type a float tensor of
    rank 4 (a cache takes no `of`).
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, OptionalAttr<FlatSymbolRefAttr>:$of,
                       DS_SlotRoleAttr:$role, TypeAttrOf<AnyStaticShapeTensor>:$type);
  let assemblyFormat = "$sym_name (`of` $of^)? `role` `` $role `:` $type attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
  }];
}

def DS_FlatBufferOp : DS_Op<"flat_buffer", [Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "One flat, padded buffer that holds parameters or states back to back (ZeRO).";
  let description = [{
    Created by `ds-zero` for stages 1-3: the members (each a `ds.parameter` or `ds.state`)
    become views of this buffer, laid out in order from offset 0 with no gaps; the rest, up to
    the buffer's size, is zero padding. The data-parallel ranks partition the buffer into equal
    contiguous shards (the size is a multiple of the ranks times the alignment), as DeepSpeed
    partitions its flat parameter and gradient buffers. Read and written like a state.
    ```mlir
    ds.flat_buffer @zero.params role params members [@w, @b] : tensor<32xf32>
    ```
    **Constraints:** the symbol name is not empty; the role is `params`, `grads` or
    `params_sharded`; members exist, are distinct, share the buffer's element type, and their
    elements fit in the buffer.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, DS_SlotRoleAttr:$role,
                       FlatSymbolRefArrayAttr:$members,
                       TypeAttrOf<AnyStaticShapeTensor>:$type);
  let assemblyFormat = "$sym_name `role` `` $role `members` $members `:` $type attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
  }];
}

def DS_AssignOp : DS_Op<"assign", [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Overwrites a parameter or training state with a new value (optimizer updates).";
  let description = [{
    ```mlir
    ds.assign @"fc.weight" = %new : tensor<32x16xf32>
    ```
    **Constraints:** the symbol names a `ds.parameter` or `ds.state` of the value's type.
  }];
  let arguments = (ins FlatSymbolRefAttr:$name, AnyStaticShapeTensor:$value);
  let assemblyFormat = "$name `=` $value attr-dict `:` type($value)";
}

def DS_MoveOp : DS_Op<"move", [SameOperandsAndResultType]> {
  let summary = "Copies a tensor to another memory space (ZeRO-Offload's transfers).";
  let description = [{
    Created by `ds-offload` where an op reads a value that lives in the other space: a
    gradient streamed to the host optimizer, a parameter shard brought back before its
    all-gather, an updated value returned to a device state. Runs on the transfer stream; the
    compute stream waits for it at the result's first use, so placing the op early (a
    prefetch) overlaps the copy with the compute in between.
    ```mlir
    %h = ds.move %g to host : tensor<1024xf32>
    ```
    Not pure: two moves of one value at different points are different transfers (CSE
    must not merge a backward's prefetch into the forward's).

    **Constraints:** `to` is `device` or `host` (NVMe is reached through states).
  }];
  let arguments = (ins AnyStaticShapeTensor:$input, DS_MemorySpaceAttr:$to);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$input `to` `` $to attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def DS_DropoutMaskOp : DS_Op<"dropout_mask", []> {
  let summary = "A random dropout scale: 0 with probability p, else 1 / (1 - p).";
  let description = [{
    `ds-autodiff` rewrites `ds.dropout(x)` to `x * ds.dropout_mask`, so that the backward
    reuses the mask.
    **Constraints:** 0 < p < 1.
  }];
  let arguments = (ins F64Attr:$p);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = "`p` `=` $p attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def DS_GeluGradOp : DS_Op<"gelu_grad", [Pure, SameOperandsAndResultType, DS_WritesOverOperand]> {
  let summary = "`dy * gelu'(x)`.";
  let arguments = (ins DS_FloatTensor:$input, DS_FloatTensor:$result_grad,
                       DefaultValuedAttr<DS_GeluApproximateAttr,
                                         "::mlir::ds::GeluApproximate::none">:$approximate);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $result_grad (`approximate` `=` `` $approximate^)? attr-dict `:` type($input)
  }];
}

def DS_SoftmaxGradOp : DS_Op<"softmax_grad", [Pure, SameOperandsAndResultType]> {
  let summary = "Input gradient of softmax (or log-softmax) from its output and output gradient.";
  let description = [{
    softmax: `y * (dy - sum(dy * y))`; log-softmax: `dy - exp(y) * sum(dy)`, sums along `dim`.
    **Constraints:** 0 <= dim < rank.
  }];
  let arguments = (ins DS_FloatTensor:$output, DS_FloatTensor:$result_grad, I64Attr:$dim,
                       UnitAttr:$log);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $output `,` $result_grad `dim` `=` $dim (`log` $log^)? attr-dict `:` type($output)
  }];
  let hasVerifier = 1;
}

def DS_AttentionGradOp : DS_Op<"attention_grad", [Pure]> {
  let summary = "Gradients of ds.attention (query, key, value), recomputing its probabilities.";
  let description = [{
    From the forward's operands, its `result` and `lse`, and the result's gradient: the
    flash-attention backward, tile by tile (`dq`, and `dk`, `dv` summed over the query heads
    that share a key/value head). The mask receives no gradient.

    **Constraints:** the operands and attributes of a valid ds.attention with these `result`
    and `lse`; `result_grad` of the result's type; `dq`, `dk`, `dv` of the query's, key's and
    value's types.
  }];
  let arguments = (ins DS_FloatTensor:$query, DS_FloatTensor:$key, DS_FloatTensor:$value,
                       Optional<DS_Tensor>:$mask, DS_FloatTensor:$result, DS_FloatTensor:$lse,
                       DS_FloatTensor:$result_grad, F64Attr:$scale, UnitAttr:$causal);
  let results = (outs DS_FloatTensor:$dq, DS_FloatTensor:$dk, DS_FloatTensor:$dv);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`mask` $mask^)? `result` $result `,` $lse `grad` $result_grad
    `scale` `=` $scale (`causal` $causal^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_RingAttentionOp : DS_Op<"ring_attention", [Pure, DeclareOpInterfaceMethods<DS_GradientOpInterface>]> {
  let summary = "ds.attention over a sequence split in blocks along mesh axes: the keys and values go round the ring.";
  let description = [{
    Context parallelism (ring attention), made by `ds-sequence-parallel` in ring mode. Each
    rank of the group along `grid_axes` (the sp ranks, in rank order) holds block r of the
    sequence: its queries, keys and values `[B, H, L/sp, E]`. In sp steps every rank computes
    its queries against one block of keys and values while it passes that block on to the
    next rank and receives the previous rank's (one exchange, overlapped with the kernel),
    merging the partial results by their log-sum-exp. `causal` is over the whole sequence:
    the block a rank holds is causal, earlier blocks are whole, later blocks are skipped.
    With `striped` (causal only; Striped Attention's load balance), rank r holds positions
    r, r + sp, r + 2 sp, ... instead of a contiguous block: the blocks of ranks up to r are
    causal and those of later ranks strictly causal, so every rank does the same work at
    every step (in sequence order, the last rank does sp blocks while the first does one).
    `lse` is the whole row's. `workspace` holds two blocks of keys and values, a partial
    result and its log-sum-exp; nothing reads it.

    **Constraints:** those of ds.attention (no mask) with local shapes; f32; the workspace f32
    of `2 * (numel(key) + numel(value)) + numel(result) + 3 * numel(lse)` elements.
  }];
  let arguments = (ins DS_FloatTensor:$query, DS_FloatTensor:$key, DS_FloatTensor:$value,
                       F64Attr:$scale, UnitAttr:$causal, UnitAttr:$striped,
                       FlatSymbolRefAttr:$grid, DenseI16ArrayAttr:$grid_axes);
  let results = (outs DS_FloatTensor:$result, DS_FloatTensor:$lse,
                      DS_FloatTensor:$workspace);
  let assemblyFormat = [{
    $query `,` $key `,` $value `scale` `=` $scale (`causal` $causal^)? (`striped` $striped^)?
    `on` $grid `grid_axes` `=` $grid_axes attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_RingAttentionGradOp : DS_Op<"ring_attention_grad", [Pure]> {
  let summary = "Gradients of ds.ring_attention: the key and value gradients go round the ring with their blocks.";
  let description = [{
    In sp steps each rank takes the flash-attention backward of its queries against one
    block of keys and values (with the whole rows' `result` and `lse`, which make each
    block's share exact), adds it to `dq` and to the gradients that travel with the block,
    and passes block and gradients on; after sp exchanges every block is home with its
    gradients summed over all the queries. `workspace` holds two blocks of keys, values and
    their gradients and one block's partial gradients; nothing reads it.

    **Constraints:** the operands of a valid ds.ring_attention with these `result` and `lse`;
    `result_grad` of the result's type; `dq`, `dk`, `dv` of the query's, key's and value's
    types; the workspace f32 of `5 * (numel(key) + numel(value)) + numel(query)` elements.
  }];
  let arguments = (ins DS_FloatTensor:$query, DS_FloatTensor:$key, DS_FloatTensor:$value,
                       DS_FloatTensor:$result, DS_FloatTensor:$lse, DS_FloatTensor:$result_grad,
                       F64Attr:$scale, UnitAttr:$causal, UnitAttr:$striped,
                       FlatSymbolRefAttr:$grid, DenseI16ArrayAttr:$grid_axes);
  let results = (outs DS_FloatTensor:$dq, DS_FloatTensor:$dk, DS_FloatTensor:$dv,
                      DS_FloatTensor:$workspace);
  let assemblyFormat = [{
    $query `,` $key `,` $value `result` $result `,` $lse `grad` $result_grad `scale` `=` $scale
    (`causal` $causal^)? (`striped` $striped^)? `on` $grid `grid_axes` `=` $grid_axes
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_LinearCrossEntropyGradOp : DS_Op<"linear_cross_entropy_grad", [Pure]> {
  let summary = "Gradients of ds.linear_cross_entropy (input, weight, bias), tile by tile.";
  let description = [{
    For each tile of rows: the logits recomputed, their gradient `result_grad * (softmax -
    one-hot)` (label smoothing as the loss's), `dx` of the tile and the weight's and bias's
    sums over the tiles. `workspace` holds one tile's logits and their gradient, a weight-sized
    and a bias-sized partial; nothing reads it.

    **Constraints:** the operands of a valid ds.linear_cross_entropy; `result_grad` a scalar;
    `dx`, `dweight`, `dbias` of the input's, weight's and `[V]` types; the workspace f32 of
    `2 * ceil(N / tiles) * V + V * D + V` elements.
  }];
  let arguments = (ins DS_FloatTensor:$input, DS_FloatTensor:$weight,
                       Optional<DS_FloatTensor>:$bias, DS_IndexTensor:$target,
                       DS_FloatTensor:$result_grad, I64Attr:$tiles,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index,
                       DefaultValuedAttr<F64Attr, "0.0">:$label_smoothing);
  let results = (outs DS_FloatTensor:$dx, DS_FloatTensor:$dweight, DS_FloatTensor:$dbias,
                      DS_FloatTensor:$workspace);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? `target` $target `grad` $result_grad `tiles` `=` $tiles
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_LayerNormGradOp : DS_Op<"layer_norm_grad", [Pure, DS_OptionalGradients]> {
  let summary = "Gradients of layer norm (input, weight, bias), recomputing its statistics.";
  let description = [{
    **Constraints:** `dx` has the input's type; `dweight` and `dbias` have `normalized_shape`;
    the output gradient has the input's type.
  }];
  let arguments = (ins DS_FloatTensor:$input, DS_FloatTensor:$result_grad,
                       Optional<DS_FloatTensor>:$weight, DenseI64ArrayAttr:$normalized_shape,
                       F64Attr:$eps);
  let results = (outs DS_FloatTensor:$dx, DS_FloatTensor:$dweight, DS_FloatTensor:$dbias);
  let assemblyFormat = [{
    $input `,` $result_grad (`weight` $weight^)? `normalized_shape` `=` $normalized_shape
    `eps` `=` $eps attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_BatchNormGradOp : DS_Op<"batch_norm_grad", [Pure]> {
  let summary = "Gradients of training batch norm (input, weight, bias).";
  let description = [{
    Uses the batch `mean` and biased `var` that `ds.batch_norm` returned.
    **Constraints:** `dx` has the input's type; `dweight`, `dbias`, mean and var are `[C]`.
  }];
  let arguments = (ins DS_FloatTensor:$input, DS_FloatTensor:$result_grad,
                       DS_FloatTensor:$mean, DS_FloatTensor:$var,
                       Optional<DS_FloatTensor>:$weight, F64Attr:$eps);
  let results = (outs DS_FloatTensor:$dx, DS_FloatTensor:$dweight, DS_FloatTensor:$dbias);
  let assemblyFormat = [{
    $input `,` $result_grad `stats` $mean `,` $var (`weight` $weight^)? `eps` `=` $eps attr-dict
    `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_LinearGradWeightOp : DS_Op<"linear_grad_weight", [Pure, DS_OptionalGradients]> {
  let summary = "Weight and bias gradients of `ds.linear`: `dy^T x` and the sums of `dy`.";
  let description = [{
    **Constraints:** `x` is `[..., in]`, `dy` is `[..., out]` with the same leading dims;
    `dweight` is `[out, in]` and `dbias` `[out]`.
  }];
  let arguments = (ins DS_FloatTensor:$input, DS_FloatTensor:$result_grad);
  let results = (outs DS_FloatTensor:$dweight, DS_FloatTensor:$dbias);
  let assemblyFormat = "$input `,` $result_grad attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def DS_ExpertLinearGradWeightOp : DS_Op<"expert_linear_grad_weight", [Pure]> {
  let summary = "Weight gradient of `ds.expert_linear`: each expert's `dy^T x` over its rows.";
  let description = [{
    `dweight[e] = sum over the rows n with ids[n] = e of dy[n]^T input[n]` (with `transposed`,
    `input[n]^T dy[n]`, the weight's `[E, in, out]` layout); an expert with no rows gets zeros.

    **Constraints:** as `ds.expert_linear` with `result_grad` in the result's place and the
    result of the weight's type.
  }];
  let arguments = (ins DS_FloatTensor:$input, DS_FloatTensor:$result_grad,
                       DS_IndexTensor:$expert_ids, UnitAttr:$transposed);
  let results = (outs DS_FloatTensor:$dweight);
  let assemblyFormat = [{
    $input `,` $result_grad `[` $expert_ids `]` (`transposed` $transposed^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_SwigluGradOp : DS_Op<"swiglu_grad", [Pure]> {
  let summary = "Input gradient of `ds.swiglu`: the gate's and the up projection's, side by side.";
  let description = [{
    With `s = sigmoid(g)`: `result[..., j] = dy * u * s * (1 + g (1 - s))` (the gate's, as
    PyTorch's silu backward) and `result[..., F + j] = dy * g * s` (the up projection's).
    With `rows`, a row whose id is negative is zeros, its operands not read (undefined, not
    written, with `unrouted_undefined`, as `ds.swiglu`'s).

    **Constraints:** `input` as `ds.swiglu`'s, `result_grad` of `ds.swiglu`'s result shape,
    the result of the input's type.
  }];
  let arguments = (ins DS_FloatTensor:$input, DS_FloatTensor:$result_grad,
                       Optional<DS_IndexTensor>:$rows, UnitAttr:$unrouted_undefined);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $result_grad (`rows` `[` $rows^ `]`)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_ExpertRouteOp : DS_Op<"expert_route", [Pure]> {
  let summary = "Expert parallelism: where each routed row goes, and the ids of the rows this rank receives.";
  let description = [{
    Made by `ds-expert-parallel`. The G ranks of the group along `grid_axes` hold `experts`
    experts in equal consecutive parts (rank q: `[q E/G, (q+1) E/G)`). Each row n, routed to
    expert `expert_ids[n]`, goes to the rank that holds it; an id outside `[0, experts)` is a
    row no expert takes. The counts are decided at run time: the route exchanges them (an
    all-to-all of G counts), then the ids. `plan` records the exchange for
    `ds.expert_dispatch` and `ds.expert_combine` (each row's place in the send order, the rows
    sent to and received from each rank); `local_ids` are the received rows' experts
    numbered from this rank's first, -1 past the rows received. A rank receives the rows of
    each sender in turn, each sender's sorted by expert (stably), so the experts' products
    take most of them where they lie. Every rank routes N rows, so a
    rank receives at most N G (the dropless worst case); with `ds.expert_capacity` before the
    route, at most E C (C rows per expert from each of the G ranks, E / G experts here): the
    receive buffers have R rows, the smaller bound.

    **Constraints:** `expert_ids` `[N]`; `local_ids` `[R]` of the ids' type, 1 <= R <= N G;
    `plan` i64 `[N + 2 G]`; `experts` a positive multiple of G; the grid a `shard.grid`.
  }];
  let arguments = (ins DS_IndexTensor:$expert_ids, I64Attr:$experts, FlatSymbolRefAttr:$grid,
                       DenseI16ArrayAttr:$grid_axes);
  let results = (outs DS_IndexTensor:$plan, DS_IndexTensor:$local_ids);
  let assemblyFormat = [{
    $expert_ids `experts` `=` $experts `on` $grid `grid_axes` `=` $grid_axes attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_ExpertDispatchOp : DS_Op<"expert_dispatch", [Pure, DeclareOpInterfaceMethods<DS_GradientOpInterface>]> {
  let summary = "Expert parallelism: each row sent to the rank of its expert, along a route's plan.";
  let description = [{
    `result` holds the rows this rank receives, in the order of the sending ranks, then zeros
    up to its R rows (the route's receive rows). Its gradient is `ds.expert_combine` of the result's gradient along the
    same plan (combine is dispatch's adjoint).

    **Constraints:** `input` `[N, ...]`; `plan` from a `ds.expert_route` of N rows on the same
    grid axes; `result` `[R, ...]` of the input's element type, 1 <= R <= N G.
  }];
  let arguments = (ins DS_FloatTensor:$input, DS_IndexTensor:$plan, FlatSymbolRefAttr:$grid,
                       DenseI16ArrayAttr:$grid_axes);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $input `along` $plan `on` $grid `grid_axes` `=` $grid_axes attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_ExpertCombineOp : DS_Op<"expert_combine", [Pure, DeclareOpInterfaceMethods<DS_GradientOpInterface>]> {
  let summary = "Expert parallelism: the experts' rows sent back to the rows they came from.";
  let description = [{
    The inverse exchange of `ds.expert_dispatch` along the same plan: row n of `result` is
    the row that its expert's rank computed for it, zeros for a row no expert took. Its
    gradient is `ds.expert_dispatch` of the result's gradient.

    **Constraints:** `input` `[R, ...]`, 1 <= R <= N G; `plan` from a `ds.expert_route` of N
    rows on the same grid axes; `result` `[N, ...]` of the input's element type.
  }];
  let arguments = (ins DS_FloatTensor:$input, DS_IndexTensor:$plan, FlatSymbolRefAttr:$grid,
                       DenseI16ArrayAttr:$grid_axes);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $input `along` $plan `on` $grid `grid_axes` `=` $grid_axes attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_EmbeddingGradOp : DS_Op<"embedding_grad", [Pure]> {
  let summary = "Weight gradient of `ds.embedding`: rows of dy scattered and summed.";
  let description = [{
    **Constraints:** the result is `[V, D]`; dy is the indices' shape followed by D.
  }];
  let arguments = (ins DS_FloatTensor:$result_grad, DS_IndexTensor:$indices,
                       OptionalAttr<I64Attr>:$padding_idx);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = "$result_grad `[` $indices `]` attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def DS_CrossEntropyGradOp : DS_Op<"cross_entropy_grad", [Pure]> {
  let summary = "Logits gradient of `ds.cross_entropy`.";
  let description = [{
    **Constraints:** the result has the logits' type; `result_grad` has the loss's type.
  }];
  let arguments = (ins DS_FloatTensor:$logits, DS_IndexTensor:$target,
                       DS_FloatTensor:$result_grad,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index,
                       DefaultValuedAttr<DS_ReductionAttr, "::mlir::ds::Reduction::mean">:$reduction,
                       DefaultValuedAttr<F64Attr, "0.0">:$label_smoothing);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $target `,` $result_grad attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_InsertSliceOp : DS_Op<"insert_slice", [Pure, AllTypesMatch<["dest", "result"]>]> {
  let summary = "`dest` with a strided slice along one dimension replaced by `source`.";
  let description = [{
    The gradient of `ds.slice` (into zeros) and of `ds.concat`'s pieces.
    **Constraints:** source and dest share rank and element type; along `dim`, `start +
    step * (source size - 1) < dest size`; other dims equal; the result has dest's type.
  }];
  let arguments = (ins DS_Tensor:$source, DS_Tensor:$dest, I64Attr:$dim, I64Attr:$start,
                       DefaultValuedAttr<I64Attr, "1">:$step);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = [{
    $source `into` $dest `dim` `=` $dim `[` $start (`:` $step^)? `]` attr-dict
    `:` type($source) `into` type($dest)
  }];
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
}

def DS_Conv2dGradInputOp : DS_Op<"conv2d_grad_input", [Pure]> {
  let summary = "Input gradient of `ds.conv2d` (a transposed convolution of dy).";
  let description = [{
    **Constraints:** as `ds.conv2d` with the result as its input and `result_grad` as its
    output.
  }];
  let arguments = (ins DS_FloatTensor:$result_grad, DS_FloatTensor:$weight, DS_Dims2:$stride,
                       DS_Dims2:$padding, DS_Dims2:$dilation,
                       DefaultValuedAttr<I64Attr, "1">:$groups);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $result_grad `,` $weight `stride` `=` $stride `padding` `=` $padding
    `dilation` `=` $dilation attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_Conv2dGradWeightOp : DS_Op<"conv2d_grad_weight", [Pure, DS_OptionalGradients]> {
  let summary = "Weight and bias gradients of `ds.conv2d`.";
  let description = [{
    **Constraints:** as `ds.conv2d` with `dweight` as its weight; `dbias` is `[O]`.
  }];
  let arguments = (ins DS_FloatTensor:$input, DS_FloatTensor:$result_grad, DS_Dims2:$stride,
                       DS_Dims2:$padding, DS_Dims2:$dilation,
                       DefaultValuedAttr<I64Attr, "1">:$groups);
  let results = (outs DS_FloatTensor:$dweight, DS_FloatTensor:$dbias);
  let assemblyFormat = [{
    $input `,` $result_grad `stride` `=` $stride `padding` `=` $padding
    `dilation` `=` $dilation attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_MaxPool2dGradOp : DS_Op<"max_pool2d_grad", [Pure]> {
  let summary = "Input gradient of `ds.max_pool2d`: dy routed to each window's first maximum.";
  let description = [{
    **Constraints:** `max_pool2d(input)` with these attributes has `result_grad`'s type; the
    result has the input's type.
  }];
  let arguments = (ins DS_FloatTensor:$input, DS_FloatTensor:$result_grad,
                       DS_Dims2:$kernel_size, DS_Dims2:$stride, DS_Dims2:$padding,
                       DS_Dims2:$dilation, UnitAttr:$ceil_mode);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $result_grad `kernel` `=` $kernel_size `stride` `=` $stride `padding` `=` $padding
    `dilation` `=` $dilation (`ceil_mode` $ceil_mode^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_AvgPool2dGradOp : DS_Op<"avg_pool2d_grad", [Pure]> {
  let summary = "Input gradient of `ds.avg_pool2d`.";
  let description = [{
    **Constraints:** `avg_pool2d` of the result type with these attributes has
    `result_grad`'s type.
  }];
  let arguments = (ins DS_FloatTensor:$result_grad, DS_Dims2:$kernel_size, DS_Dims2:$stride,
                       DS_Dims2:$padding, UnitAttr:$ceil_mode, UnitAttr:$count_include_pad);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $result_grad `kernel` `=` $kernel_size `stride` `=` $stride `padding` `=` $padding
    (`ceil_mode` $ceil_mode^)? (`count_include_pad` $count_include_pad^)? attr-dict
    `:` type($result_grad) `->` type($result)
  }];
  let hasVerifier = 1;
}

def DS_AdaptiveAvgPool2dGradOp : DS_Op<"adaptive_avg_pool2d_grad", [Pure]> {
  let summary = "Input gradient of `ds.adaptive_avg_pool2d`.";
  let description = [{
    **Constraints:** same rank and leading dims; element types match.
  }];
  let arguments = (ins DS_FloatTensor:$result_grad);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = "$result_grad attr-dict `:` type($result_grad) `->` type($result)";
  let hasVerifier = 1;
}

def DS_AdamWUpdateOp : DS_Op<"adamw_update", [Pure,
    AllTypesMatch<["param", "grad", "exp_avg", "exp_avg_sq", "new_param", "new_exp_avg",
                   "new_exp_avg_sq"]>,
    AllTypesMatch<["step_size", "bias_correction2_sqrt", "decay"]>]> {
  let summary = "One AdamW update of a parameter and its moments (torch.optim.AdamW's math).";
  let description = [{
    In one pass over the elements, with `step_size = lr / (1 - beta1^t)`,
    `bias_correction2_sqrt = sqrt(1 - beta2^t)` and `decay = 1 - lr * weight_decay` given as
    f32 scalars (computed once per step by the surrounding IR), and `beta1` an f64 scalar
    operand (a schedule such as OneCycle's `cycle_momentum` changes it every step):
    ```
    p  = param * decay
    m  = exp_avg * beta1 + grad * (1 - beta1)
    v  = exp_avg_sq * beta2 + grad * grad * (1 - beta2)
    new_param = p - step_size * m / (sqrt(v) / bias_correction2_sqrt + eps)
    ```
    `ds-optimizer` emits one per trainable parameter, so the update stays a single memory
    pass (as DeepSpeed's fused Adam) instead of a dozen elementwise ops.
    **Constraints:** parameter, gradient, moments and results share one float tensor type;
    the three scalars are rank-0 f32; `beta1` is rank-0 f64.
  }];
  let arguments = (ins DS_FloatTensor:$param, DS_FloatTensor:$grad, DS_FloatTensor:$exp_avg,
                       DS_FloatTensor:$exp_avg_sq, 0DTensorOf<[F32]>:$step_size,
                       0DTensorOf<[F32]>:$bias_correction2_sqrt, 0DTensorOf<[F32]>:$decay,
                       0DTensorOf<[F64]>:$beta1, F64Attr:$beta2, F64Attr:$eps);
  let results = (outs DS_FloatTensor:$new_param, DS_FloatTensor:$new_exp_avg,
                      DS_FloatTensor:$new_exp_avg_sq);
  let assemblyFormat = [{
    $param `,` $grad `,` $exp_avg `,` $exp_avg_sq `step_size` $step_size
    `bias_correction2_sqrt` $bias_correction2_sqrt `decay` $decay `beta1` $beta1
    `beta2` `=` $beta2 `eps` `=` $eps attr-dict `:` type($param) `,` type($step_size) `,`
    type($beta1)
  }];
}

#endif // DS_TRAIN_OPS_TD
