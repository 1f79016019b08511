//===- Passes.td - passes of the ds dialect --------------------------------===//
#ifndef DS_TRANSFORMS_PASSES_TD
#define DS_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def DSPrintParameterTable : Pass<"ds-print-parameter-table", "::mlir::ModuleOp"> {
  let summary = "Prints the model's parameters and buffers as a table.";
  let description = [{
    Writes one row per `ds.parameter` (state_dict key, shape, dtype, kind, element count,
    bytes, tied names) and totals to standard output; the IR is unchanged.

    ```
    $ ds-opt model.mlir --ds-print-parameter-table -o /dev/null
    name              shape      dtype  kind       elements  bytes
    fc.weight         [32, 16]   f32    parameter       512   2048
    ...
    ```
  }];
}


def DSFuseAttention : Pass<"ds-fuse-attention", "::mlir::ModuleOp"> {
  let summary = "Folds attention written out as products, mask and softmax into ds.attention.";
  let description = [{
    Finds `matmul(softmax(matmul(q, transpose(k)) [* c | / c] [+ mask | where(keep, ., -inf)],
    dim 3), v)` over rank-4 `[batch, heads, length, width]` operands of f32, bf16 or f16, whose
    intermediate values have no other use, and replaces it with one `ds.attention` (scale `c`
    or `1/c`, the float mask added or the boolean one kept), so the step keeps no score or
    probability tensor for its backward: HF models with `attn_implementation="eager"`,
    attention written with `masked_fill`, TorchScript exports and core-ATen decompositions of
    `scaled_dot_product_attention`. A chain with dropout between the softmax and the product, a
    mask that a trainable parameter reaches (a learned bias: the fused op gives the mask no
    gradient) or another shape stays decomposed. Then each `ds.attention` whose mask is a
    constant that keeps exactly the keys `j <= i` (HF's causal mask, which `torch.export`
    folds to a constant) drops it for `causal`, and each `ds.attention` without a mask whose
    keys and values repeat their heads for the query heads (HF's `repeat_kv`: reshape,
    broadcast, reshape) reads the heads themselves, as grouped-query attention: HF passes
    SDPA the heads themselves when it has no mask (`enable_gqa`), whose kernels sum each
    key/value head's gradient over its query heads before rounding it, and no repeated copy is
    kept. First in the training pipeline; the importer
    already emits `ds.attention` for `scaled_dot_product_attention` where it fits. In bf16
    and fp16 training the written-out chains stay (`written-out=false`): PyTorch rounds each
    of their ops to 16 bits, which the fused kernel (f32 inside) does not.
  }];
  let dependentDialects = ["::mlir::ds::DSDialect"];
  let options = [
    Option<"writtenOut", "written-out", "bool", "true",
           "Fold written-out attention (false: only constant causal masks become `causal`)">,
  ];
}

def DSFuseExperts : Pass<"ds-fuse-experts", "::mlir::ModuleOp"> {
  let summary = "Folds experts' products over gathered weights (HF's batched_mm) into ds.expert_linear.";
  let description = [{
    Finds `matmul(reshape(embedding(reshape(w), ids)), x)` where `w` is `[E, out, in]`, `ids`
    `[N]` and `x` `[N, in, 1]` (and the transposed `matmul(x [N, 1, in], w_rows [N, in, out])`),
    which is how HF's `batched_mm` experts (`bmm(weight[expert_ids], x[..., None])`) import,
    and replaces it with `ds.expert_linear(x, w, ids)`, so no `[N, out, in]` copy of the
    weights exists in the forward or in the backward; a gather used elsewhere stays.
    ```mlir
    %t = ds.reshape %w : tensor<4x96x32xf32> -> tensor<4x3072xf32>
    %g = ds.embedding %t[%ids] : (tensor<4x3072xf32>, tensor<128xi64>) -> tensor<128x3072xf32>
    %r = ds.reshape %g : tensor<128x3072xf32> -> tensor<128x96x32xf32>
    %y = ds.matmul %r, %x : tensor<128x96x32xf32>, tensor<128x32x1xf32> -> tensor<128x96x1xf32>
    // becomes
    %x2 = ds.reshape %x : tensor<128x32x1xf32> -> tensor<128x32xf32>
    %e = ds.expert_linear %x2, %w[%ids] : (...) -> tensor<128x96xf32>
    %y = ds.reshape %e : tensor<128x96xf32> -> tensor<128x96x1xf32>
    ```
    In the training pipeline after `ds-fuse-attention`.
  }];
  let dependentDialects = ["::mlir::ds::DSDialect"];
}

def DSFuseSwiglu : Pass<"ds-fuse-swiglu", "::mlir::ModuleOp"> {
  let summary = "Folds the experts' SwiGLU (slices, sigmoid, products) into ds.swiglu.";
  let description = [{
    Finds `(g * sigmoid(g)) * u` where `g` and `u` are the two halves of the last dimension of
    an expert product's rows (`ds.expert_linear`, through reshapes back to its shape), which
    is how the activation of HF's MoE experts (`act(gate) * up` after `chunk(2, -1)`)
    imports, and replaces it with one `ds.swiglu` told the product's expert ids: its kernels
    read the rows once and skip those no expert took (under expert parallelism most of a
    rank's receive buffer), and its gradient is one `ds.swiglu_grad` where the chain's
    was seven ops. The result is the chain's on every row.
    ```mlir
    %h = ds.expert_linear %x, %w[%ids] : (...) -> tensor<128x64xf32>
    %g = ds.slice %h dim = 1[0 : 32] : tensor<128x64xf32> -> tensor<128x32xf32>
    %s = ds.sigmoid %g : tensor<128x32xf32>
    %a = ds.mul %g, %s : tensor<128x32xf32>, tensor<128x32xf32> -> tensor<128x32xf32>
    %u = ds.slice %h dim = 1[32 : 64] : tensor<128x64xf32> -> tensor<128x32xf32>
    %y = ds.mul %a, %u : tensor<128x32xf32>, tensor<128x32xf32> -> tensor<128x32xf32>
    // becomes
    %y = ds.swiglu %h rows[%ids] : (tensor<128x64xf32>, tensor<128xi64>) -> tensor<128x32xf32>
    ```
    In the training pipeline after `ds-fuse-experts` and `ds-expert-capacity` (the ids it
    takes are the ones the products keep), in f32 training only: PyTorch rounds each op of the
    chain in 16 bits, which one op would not.
  }];
  let dependentDialects = ["::mlir::ds::DSDialect"];
}

def DSExpertCapacity : Pass<"ds-expert-capacity", "::mlir::ModuleOp"> {
  let summary = "Capacity-based token dropping: each expert takes at most its capacity of a micro-batch's routed rows, as DeepSpeed-MoE.";
  let description = [{
    Runs on `@forward` after `ds-fuse-experts`, before `ds-expert-parallel`. The routing
    stays the model's; only what DeepSpeed-MoE's capacity adds changes: each expert takes at
    most `C = max(ceil(T / E * capacity-factor * k), min-capacity)` of the T tokens' k choices
    that the rank routes in one micro-batch (DeepSpeed's `_capacity`, in f32 as it computes
    it), the first choices in token order before the second ones (`top2gating`); the rest are
    dropped: their rows give zeros (the token goes on through the residual) and, under
    expert parallelism, are sent nowhere, so each rank receives at most E C rows. The kept
    rows keep the weights the model's router gave them (DeepSpeed's own gate renormalises
    over the kept ones; an HF model's router defines its normalisation, which ds keeps).
    ```mlir
    %ids = ds.reshape %indices : tensor<64x2xi64> -> tensor<128xi64>
    %y = ds.expert_linear %x, %w[%ids] : (tensor<128x32xf32>, tensor<4x96x32xf32>, tensor<128xi64>) -> tensor<128x96xf32>
    // at capacity-factor 0.75 becomes (C = ceil(64 / 4 * 0.75 * 2) = 24)
    %kept = ds.expert_capacity %ids experts = 4 choices = 2 capacity = 24 : tensor<128xi64>
    %y = ds.expert_linear %x, %w[%kept] : ...
    ```
    The choices are found where HF's `batched_mm` experts take them: a router's
    `ds.top_k` indices `[T, k]` flattened (through the wrap of negative ids), k <= 2 (for
    more, DeepSpeed's `topkgating` drops by probability, which ds does not do). The config's
    `moe` block (`capacity_factor`, `min_capacity`, `drop_tokens`) sets it.
  }];
  let dependentDialects = ["::mlir::ds::DSDialect"];
  let options = [
    Option<"capacityFactor", "capacity-factor", "double", "::mlir::ds::deepspeed::kCapacityFactor",
           "Each expert's share of the routed rows, times (DeepSpeed-MoE's capacity_factor)">,
    Option<"minCapacity", "min-capacity", "int64_t", "::mlir::ds::deepspeed::kMinCapacity",
           "The least capacity whatever the micro-batch (DeepSpeed-MoE's min_capacity)">,
  ];
}

def DSExpertParallel : Pass<"ds-expert-parallel", "::mlir::ModuleOp"> {
  let summary = "Expert parallelism: the routed experts split over the mesh's ep ranks, their rows exchanged by all-to-all.";
  let description = [{
    Runs on `@forward` after `ds-fuse-experts`, before `ds-autodiff`. Every parameter that
    only `ds.expert_linear` reads as its weight (`[E, ...]`, one matrix per expert) is split
    along its experts over the mesh's `ep` axis, the expert-parallel ranks within the
    data-parallel ones: rank r holds experts `[r E/G, (r+1) E/G)` (`#ds.sharding<[["ep"], [],
    []]>`, the state_dict name kept), so no rank holds every expert. Each product becomes an
    exchange around the local experts: the rows go to the rank of their expert and come back,
    with counts decided at run time.
    ```mlir
    %y = ds.expert_linear %x, %w[%ids] : (tensor<128x32xf32>, tensor<4x96x32xf32>, tensor<128xi64>) -> tensor<128x96xf32>
    // at ep = 2 (mesh dp x ep) becomes
    %plan, %local = ds.expert_route %ids experts = 4 on @mesh grid_axes = [1] : (tensor<128xi64>) -> (tensor<132xi64>, tensor<256xi64>)
    %r = ds.expert_dispatch %x along %plan on @mesh grid_axes = [1] : (tensor<128x32xf32>, tensor<132xi64>) -> tensor<256x32xf32>
    %e = ds.expert_linear %r, %w[%local] : (tensor<256x32xf32>, tensor<2x96x32xf32>, tensor<256xi64>) -> tensor<256x96xf32>
    %y = ds.expert_combine %e along %plan on @mesh grid_axes = [1] : (tensor<256x96xf32>, tensor<132xi64>) -> tensor<128x96xf32>
    ```
    One route per ids value (merged by CSE first: HF recomputes them per product) serves all
    its products, and what lies between two products row by row (the experts' `ds.swiglu`,
    told the received rows' ids, or a SwiGLU's slices, activation and product) runs on the
    experts' rank on the received rows: one dispatch
    before a layer's first product and one combine after its last. The receive buffers have
    the dropless
    worst case's rows (every rank's rows at one rank), or where `ds-expert-capacity` ran
    first, E C (C rows of each expert from each rank), whichever is fewer. An expert's gradient already sums its
    ep group's rows: ds-optimizer sums it over the dp axis only (the expert-data-parallel
    group), and its share of the gradient norm over ep; ds-zero keeps the experts outside its
    buffers. Standalone, the pass sets a mesh of `dp=1 x ep=expert-parallel-size`; in the
    training pipeline the config's (`expert_parallel.autoep_size`) must have that many ep
    ranks.
  }];
  let dependentDialects = ["::mlir::ds::DSDialect", "::mlir::shard::ShardDialect"];
  let options = [
    Option<"expertParallelSize", "expert-parallel-size", "int64_t", "1",
           "Ranks the experts split over (DeepSpeed's expert_parallel.autoep_size); 1: none">,
  ];
}

def DSTileSequence : Pass<"ds-tile-sequence", "::mlir::ModuleOp"> {
  let summary = "The MLPs, and the LM head with its cross-entropy, in tiles of rows (ALST's TiledMLP and tiled logits loss).";
  let description = [{
    With `mlp-tiles` > 1 (the config's `sequence_tiling.mlp_tiles`), every position-wise
    region of `@forward` that widens its input (an MLP: from a value `x` read by a linear
    layer with more outputs than inputs, through linear layers, matrix products by
    parameters, elementwise ops and conversions, to the one value that leaves it) runs in
    that many tiles along `x`'s second-to-last dimension (the sequence): each tile a slice of
    `x`, the region's ops cloned on it (marked `ds.tile`), the tiles' results concatenated.
    `ds-activation-checkpoint` then recomputes each tile's values right before that tile's
    backward, so a tile's intermediates (`tokens/tiles x 4d` of an MLP) are all that exists
    of them, forward and backward, whether or not `activation_checkpointing` is on; the
    weights' gradients are the tiles' sums. `mlp-tiles=0` (the config's `"auto"`) takes
    ALST's count, `ceil(sequence / hidden)`. Dropout ends a region (its random stream is the
    model's, untiled).

    With `loss-tiles` > 1 (the config's `sequence_tiling.loss_tiles`), every f32
    `ds.cross_entropy` of `@forward` whose logits come only from a `ds.linear` (through a
    reshape to rows) becomes one `ds.linear_cross_entropy` of that many tiles of rows: its
    kernels compute one tile's logits at a time, and its gradient recomputes each tile's before
    taking its gradient, so the `[tokens, vocab]` logits never exist whole; a mean is the
    tiled sum divided by the count of targets that are not `ignore_index`. `loss-tiles=0`
    (the config's `"auto"`) picks tiles of at most 64 MiB of f32 logits, and leaves a loss
    whose logits are smaller whole (and a model without such a loss). A config that asks
    for tiles where no such loss exists (a vocabulary-parallel head under tp, a bf16 or fp16
    model) is refused by name. Runs after ds-tensor-parallel, ds-sequence-parallel and
    ds-mixed-precision, before ds-autodiff.
  }];
  let dependentDialects = ["::mlir::ds::DSDialect"];
  let options = [
    Option<"lossTiles", "loss-tiles", "int64_t", "1",
           "Tiles of rows of the LM head's loss (1: none; 0: auto, tiles of at most 64 MiB "
           "of logits)">,
    Option<"mlpTiles", "mlp-tiles", "int64_t", "1",
           "Tiles of rows of each MLP (1: none; 0: auto, ceil(sequence / hidden))">,
  ];
}

def DSMixedPrecision : Pass<"ds-mixed-precision", "::mlir::ModuleOp"> {
  let summary = "Makes @forward a 16-bit (bf16 or fp16) model that computes in f32.";
  let description = [{
    Runs before `ds-autodiff` for DeepSpeed's `bf16` and `fp16` modes. Trainable parameters
    become 16-bit (`ds-optimizer` keeps fp32 masters of them) and are widened where read;
    every f32 result of a computing op (not of reshapes, slices and other ops that only move
    elements, not the returned loss) is rounded through the 16-bit type right after it, as a
    16-bit PyTorch model rounds each kernel's output. Buffers stay f32. Each computing op
    reads a widening of its own (ops that only move elements share one): `ds-autodiff` then
    rounds the backward at the same points, each op's gradient with respect to a 16-bit value
    before the gradients of its several readers are summed (in 16 bits, as PyTorch's autograd
    sums them: a residual stream, a tied weight), and the parameter gradients are 16-bit.
    With `loss-scaling` (fp16) it declares `ds.state @loss_scale role loss_scale`, which
    `ds-autodiff` multiplies into the loss gradient's seed and `ds-optimizer` divides out.
    The steps of one fused computation (`ds.fused`: an imported silu's sigmoid) are not
    rounded and share one widening of what they read, so that the computation and its
    gradient round once, as the PyTorch kernel they stand for.

    A model exported in 16 bits (cast to bf16 before `torch.export`, as HF users load it) has
    16-bit parameters already, and its author's casts to f32 and back (HF's RMSNorm, rotary
    tables and loss, computed in f32): each op it wrote in 16 bits then computes in f32 and
    is rounded as above (element moves too, so that their gradients round where PyTorch's
    do), and what it wrote in f32 stays f32 between its casts. Parameters of f32 and of the
    16-bit type mixed, or of the other 16-bit type, are errors. The module is marked
    `ds.mixed_precision`; a second run is an error. With `dtype=fp32` (the training pipeline
    of an fp32 config) the pass only refuses a model with 16-bit parameters, naming the
    config section that trains it.

    ```mlir
    // before
    ds.parameter @w trainable : tensor<4x16xf32>
    %w = ds.get_parameter @w : tensor<4x16xf32>
    %y = ds.matmul %x, %w : ...
    // after
    ds.parameter @w trainable : tensor<4x16xbf16>
    %w16 = ds.get_parameter @w : tensor<4x16xbf16>
    %w = ds.convert %w16 : tensor<4x16xbf16> -> tensor<4x16xf32>
    %y = ds.matmul %x, %w : ...
    %y16 = ds.convert %y : tensor<8x4xf32> -> tensor<8x4xbf16>
    %y1 = ds.convert %y16 : tensor<8x4xbf16> -> tensor<8x4xf32>
    ```
  }];
  let dependentDialects = ["::mlir::ds::DSDialect"];
  let options = [
    Option<"dtype", "dtype", "::mlir::ds::Precision", "::mlir::ds::Precision::bf16",
           "The 16-bit precision: bf16 or fp16 (DeepSpeed's bf16 / fp16 sections)",
           [{::mlir::ds::EnumOptionValues<::mlir::ds::Precision, ::mlir::ds::getMaxEnumValForPrecision, ::mlir::ds::symbolizePrecision>()}]>,
    Option<"lossScaling", "loss-scaling", "bool", "false",
           "Declare the loss-scale state (fp16's dynamic or static loss scaling)">,
  ];
}

def DSWiden16Bit : Pass<"ds-widen-16bit", "::mlir::ModuleOp"> {
  let summary = "Products and elementwise ops in 16 bits, the rest of the arithmetic on 16-bit tensors in f32.";
  let description = [{
    Every device runs matmul, linear and linear_grad_weight on bf16 or f16 operands (f32
    accumulation, rounded once, as PyTorch's 16-bit kernels; the CPU on its bf16 units through
    oneDNN where they outrun its f32 FMAs, widened to f32 elsewhere), and its unary, binary,
    cmp, where, softmax, layer norm kernels and their gradients too (each element widened to
    f32, computed, and rounded once: the arithmetic, GELU and its gradient, the transcendental
    functions, masks, rows); it stores, copies, fills, converts, moves (reshape, transpose,
    broadcast, slices, embedding rows) and communicates 16-bit tensors, but computes the rest
    (batch norm, reductions, losses, optimizers) in f32. This pass first rewrites an f32
    concat whose every use rounds it into the concat of its rounded parts (attention's q, k
    and v gradients meeting in the fused projection's), then narrows each product and
    elementwise op that ds-mixed-precision left between roundings (16-bit operands widened,
    every result rounded back, with reshapes, transposes, slices and embedding lookups on
    either side, as the backward's, attention's and the token embeddings' ops have) to the op
    on the 16-bit values, the moves then on 16-bit values too; it leaves every
    elementwise op whose floating-point operands and results have one 16-bit type as it is;
    then it rewrites every other op that has a 16-bit float operand or result into
    the same op on f32 operands, with conversions before and after, so the training step
    lowers; a rounding of a widening back to its own 16-bit type folds away. Last in the
    training pipeline.
  }];
  let dependentDialects = ["::mlir::ds::DSDialect"];
}

def DSAutodiff : Pass<"ds-autodiff", "::mlir::ModuleOp"> {
  let summary = "Builds forward + backward of one micro-batch by reverse-mode differentiation.";
  let description = [{
    Turns `func.func @forward(inputs) -> loss` into `func.func @micro_step(inputs) -> loss`
    that also accumulates the gradient of every trainable parameter into a `ds.state` of role
    `grad`. The loss gradient is seeded with 1 / (gradient_accumulation_steps x
    data_parallel_size), so the accumulated gradient is the mean over a step's micro-batches;
    with a `ds.state` of role `loss_scale` (fp16) the seed is multiplied by it. A widening
    `ds.convert` (16-bit to f32) that the backward reads, or a reshape, transpose, slice or
    broadcast of one, is recomputed in the backward (the conversion marked
    `rematerialized`), so the 16-bit value, not the f32 one, is what stays alive between
    forward and backward.
    Each op's backward comes from its `GradientOpInterface`; only values that depend on a
    trainable parameter are differentiated. `ds.dropout` becomes `x * ds.dropout_mask` so the
    backward reuses the mask.

    ```mlir
    // before
    func.func @forward(%x: tensor<8x16xf32>) -> tensor<f32> {
      %w = ds.get_parameter @"fc.weight" : tensor<4x16xf32>
      ...
    }
    // after
    ds.state @"fc.weight@grad" of @"fc.weight" role grad : tensor<4x16xf32>
    func.func @micro_step(%x: tensor<8x16xf32>) -> tensor<f32> {
      ... forward ...
      %dw, %db = ds.linear_grad_weight %x, %dy : ...
      %acc = ds.get_parameter @"fc.weight@grad" : tensor<4x16xf32>
      %sum = ds.add %acc, %dw : ...
      ds.assign @"fc.weight@grad" = %sum : tensor<4x16xf32>
      return %loss : tensor<f32>
    }
    ```
  }];
  let dependentDialects = ["::mlir::ds::DSDialect", "::mlir::func::FuncDialect",
                           "::mlir::shard::ShardDialect"];
  let options = [
    Option<"gradientAccumulationSteps", "gradient-accumulation-steps", "int64_t", "1",
           "Micro-batches per optimizer step (DeepSpeed's gradient_accumulation_steps)">,
    Option<"dataParallelSize", "data-parallel-size", "int64_t", "1",
           "Data-parallel ranks whose gradients are averaged">,
  ];
}

def DSOptimizer : Pass<"ds-optimizer", "::mlir::ModuleOp"> {
  let summary = "Adds the optimizer update of every trainable parameter as IR.";
  let description = [{
    Creates `func.func @optimizer_step(%lr: tensor<f32>, %step: tensor<f32>,
    %beta1: tensor<f64>, %aux_lr: tensor<f32>)`: optional global-norm gradient clipping (as
    `torch.nn.utils.clip_grad_norm_`), then the update of each trainable parameter from its
    accumulated gradient (`ds.state` role `grad`, created by `ds-autodiff`) with the
    optimizer's state as new `ds.state` symbols, and finally zeroes the gradients.
    `%beta1` is read only with `scheduled-beta1` (OneCycle's `cycle_momentum`), `%aux_lr`
    only by Muon.

    - `AdamW` follows `torch.optim.AdamW`: decoupled weight decay `p *= 1 - lr wd`, then
      `p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)`, one `ds.adamw_update`
      per parameter. `Adam` with `adam-w-mode=false` adds `weight_decay * p` to the gradient
      instead (as `torch.optim.Adam`).
    - `SGD` follows `torch.optim.SGD`: L2 weight decay, momentum whose buffer starts as the
      first step's gradient, dampening, Nesterov.
    - `Muon` follows DeepSpeed's `MuonWithAuxAdam`: every parameter of rank >= 2 whose name
      and aliases contain neither "embed" nor "lm_head" and that no `ds.embedding` reads
      takes the Nesterov momentum (`momentum`) of its gradient, orthogonalized by 5 quintic
      Newton-Schulz iterations (3.4445, -4.7750, 2.0315) in f32 and scaled by
      `max(1, rows/cols)^0.5`, with decoupled decay at `%lr`; the others take its AdamW
      (`beta1`, `beta2`, `eps`, lerp moments) at `%aux_lr`.
  }];
  let dependentDialects = ["::mlir::ds::DSDialect", "::mlir::func::FuncDialect"];
  let options = [
    Option<"type", "type", "::mlir::ds::OptimizerKind", "::mlir::ds::OptimizerKind::adamw",
           "Optimizer (DeepSpeed's optimizer.type): AdamW, Adam, SGD or Muon",
           [{::mlir::ds::EnumOptionValues<::mlir::ds::OptimizerKind, ::mlir::ds::getMaxEnumValForOptimizerKind, ::mlir::ds::symbolizeOptimizerKind>()}]>,
    Option<"beta1", "beta1", "double", "::mlir::ds::deepspeed::kAdamBeta1",
           "First-moment decay">,
    Option<"beta2", "beta2", "double", "::mlir::ds::deepspeed::kAdamBeta2",
           "Second-moment decay">,
    Option<"eps", "eps", "double", "::mlir::ds::deepspeed::kAdamEps", "Denominator term">,
    Option<"weightDecay", "weight-decay", "double", "0.0", "Decoupled weight decay">,
    Option<"gradientClipping", "gradient-clipping", "double", "0.0",
           "Global gradient-norm limit; 0 = off (DeepSpeed's gradient_clipping)">,
    Option<"adamWMode", "adam-w-mode", "bool", "true",
           "Adam: decoupled weight decay (true, AdamW) or L2 added to the gradient (false)">,
    Option<"momentum", "momentum", "double", "0.0", "SGD or Muon momentum">,
    Option<"dampening", "dampening", "double", "0.0", "SGD dampening">,
    Option<"nesterov", "nesterov", "bool", "false", "SGD Nesterov momentum">,
    Option<"scheduledBeta1", "scheduled-beta1", "bool", "false",
           "Adam's beta1 is @optimizer_step's %beta1 argument (OneCycle's cycle_momentum)">,
  ];
}

def DSActivationCheckpoint : Pass<"ds-activation-checkpoint", "::mlir::ModuleOp"> {
  let summary = "Activation checkpointing chosen by the compiler: the backward recomputes each repeated block's activations from the block's input.";
  let description = [{
    Runs on `@micro_step` after `ds-autodiff` (before `ds-zero`). Finds the repeated blocks
    of the model in its parameters' names (`PREFIX.N.rest`: the prefix with the most
    distinct N, such as `transformer.h`), and cuts the forward into `segments` segments at
    the blocks' first ops (0: one per block; DeepSpeed's `number_checkpoints`): each cut
    moves back from a block's first parameter read to where the fewest bytes cross it, so a
    pre-norm block's statistics go with it and only the residual stream is kept. Every value a
    segment computes that the backward reads is recomputed instead of kept: right before
    the first backward op that needs it, the segment's ops that produce it are cloned
    (marked `ds.recompute`, so that CSE keeps them apart) from the segment's inputs, which are
    the values kept: the checkpoints. Dropout masks, parameter reads, constants and
    collectives are never cloned (their values are kept), so the recomputed values are the
    same bits and the losses do not change. Sequence parallelism's all-to-alls are the
    exception: they move activations as large as the block's own, so they are recomputed
    with their block (every sp rank exchanges them again in the backward, as DeepSpeed's
    checkpointed DistributedAttention does). With `cpu` (DeepSpeed's `cpu_checkpointing`),
    each checkpoint goes to host memory after its last forward use and comes back before its
    first backward use. A module without repeated blocks is left as it is, with a warning.

    Ops that `ds-tile-sequence` marked `ds.tile` (an MLP in tiles of rows) are recomputed
    the same way, one segment per tile, whether or not blocks are (`blocks=false`: only
    tiles, as the pipeline runs it for `mlp_tiles` without `activation_checkpointing`).
  }];
  let dependentDialects = ["::mlir::ds::DSDialect", "::mlir::func::FuncDialect"];
  let options = [
    Option<"segments", "segments", "int64_t", "0",
           "Segments (0: one per repeated block; DeepSpeed's number_checkpoints)">,
    Option<"cpu", "cpu", "bool", "false",
           "Keep the checkpoints in host memory between forward and backward (cpu_checkpointing)">,
    Option<"blocks", "blocks", "bool", "true",
           "Recompute the repeated blocks (false: only the tiles ds-tile-sequence marked)">,
  ];
}

def DSZero : Pass<"ds-zero", "::mlir::ModuleOp"> {
  let summary = "Data parallelism and ZeRO partitioning over the data-parallel grid.";
  let description = [{
    Runs between `ds-autodiff` and `ds-optimizer`. With N > 1 data-parallel ranks (the `dp`
    axis of the module's `ds.mesh`; without a mesh it sets one of `data-parallel-size` ranks)
    it declares the grid `shard.grid @mesh` that mirrors the mesh and records the stage as the
    module attribute `ds.zero` (`#ds.zero<stage = N>`); `ds-optimizer` then emits the update
    with the stage's collectives:
    - stage 0 (plain data parallelism): every accumulated gradient is summed over the ranks
      (`shard.all_reduce`) at the start of `@optimizer_step`; ds-autodiff already scaled the
      loss by `1 / (gas x N)`, so the sum is DeepSpeed's average.
    - stage 1 (optimizer state partitioning): this pass lays the trainable parameters out in
      one `ds.flat_buffer @zero.params` and their gradients in `@zero.grads`, padded once to a
      multiple of N x 16 elements; each rank owns one contiguous shard. The optimizer
      reduce-scatters the gradients, updates its shard with shard-sized moments, and
      all-gathers the parameters.
    - stage 2 (gradient partitioning): no whole gradients either. The parameters are grouped,
      in the order backward produces their gradients, into buckets of at least
      `reduce-bucket-size` elements, each a `ds.flat_buffer @zero.params.K` with a gradient
      shard state `@zero.params.K@grad` (role `grad_shard`) of 1/N of it. In `@micro_step`
      each bucket is packed and reduce-scattered right after its last gradient is computed,
      and accumulated into its shard once the next bucket has been issued (or at the end), so
      the reduction overlaps the rest of backward with at most two buckets in flight.
    - stage 3 (parameter partitioning): as stage 2, and the buckets of parameters with at least
      `param-persistence-threshold` elements keep only a shard (`@zero.params.K@shard`, role
      `param_shard`; the buffer's role is `params_sharded`). Every use in `@micro_step` reads
      a view of the bucket all-gathered from the shards, once for forward and once for
      backward (split at the loss); the gathered buffer dies after the phase's last use. A
      gather is issued as early as `prefetch-bucket-size` allows: at the first use of the
      earliest bucket from which the buckets after it, up to this one, hold at most that many
      elements (and, with the bucket then computed, at most `max-live-parameters`); with 0, at
      the bucket's own first use. A bucket whose backward first use follows its last forward
      use within fewer than `max-reuse-distance` elements of other buckets' uses is not
      gathered again: the forward gather stays alive until its backward uses (DeepSpeed's
      defaults, 5e7 / 1e9 / 1e9, prefetch and keep every bucket of a small model).
    Experts split over ep by `ds-expert-parallel` stay outside the buffers at every stage,
    whole on their rank, their gradients summed by `ds-optimizer` over the dp axis only (their
    expert-data-parallel group; DeepSpeed also partitions their state over it, ds not yet).
    On a pipeline (after `ds-pipeline`) each stage gets buffers over the parameters it alone
    holds (`@zero.params.ppS`, ...; a parameter that several stages hold stays whole, its
    gradient summed as at stage 0), and the collectives are placed once per step in each
    rank's `@pipeline_step_R`: stage 2 accumulates a bucket's gradients as values over the
    micro-batches and reduce-scatters them after the last; stage 3 gathers a bucket before its
    first use and keeps it to its last (its gradients accumulate whole, reduce-scattered by
    the update as at stage 1).
    With N = 1 the pass changes nothing.
  }];
  let dependentDialects = ["::mlir::ds::DSDialect", "::mlir::shard::ShardDialect"];
  let options = [
    Option<"stage", "stage", "int64_t", "0", "ZeRO stage (0 = data parallelism only)">,
    Option<"dataParallelSize", "data-parallel-size", "int64_t", "1",
           "Number of data-parallel ranks when the module has no ds.mesh (with one, the mesh "
           "decides and a different value is refused)">,
    Option<"reduceBucketSize", "reduce-bucket-size", "int64_t",
           "::mlir::ds::deepspeed::kReduceBucketSize",
           "Stages 2-3: elements per gradient (and stage-3 parameter) bucket (DeepSpeed's "
           "reduce_bucket_size)">,
    Option<"prefetchBucketSize", "prefetch-bucket-size", "int64_t",
           "::mlir::ds::deepspeed::kPrefetchBucketSize",
           "Stage 3: elements of buckets gathered ahead of the compute (DeepSpeed's "
           "stage3_prefetch_bucket_size; 0 = each bucket at its first use)">,
    Option<"maxLiveParameters", "max-live-parameters", "int64_t",
           "::mlir::ds::deepspeed::kMaxLiveParameters",
           "Stage 3: at most this many gathered elements in flight ahead of and at the "
           "compute (DeepSpeed's stage3_max_live_parameters)">,
    Option<"maxReuseDistance", "max-reuse-distance", "int64_t",
           "::mlir::ds::deepspeed::kMaxReuseDistance",
           "Stage 3: a bucket whose backward reuse follows its last forward use within "
           "fewer gathered elements stays gathered (DeepSpeed's stage3_max_reuse_distance)">,
    Option<"persistenceThreshold", "param-persistence-threshold", "int64_t",
           "::mlir::ds::deepspeed::kParamPersistenceThreshold",
           "Stage 3: parameters with fewer elements stay whole (DeepSpeed's "
           "stage3_param_persistence_threshold)">,
  ];
}

def DSTensorParallel : Pass<"ds-tensor-parallel", "::mlir::ModuleOp"> {
  let summary = "Megatron tensor parallelism of the attention blocks and MLPs found in @forward.";
  let description = [{
    Runs on the imported `@forward`, before `ds-autodiff`. Each `ds.linear` whose input is
    computed, through ops that can work on a part of it, from other linears is a candidate
    region: the linears it starts from become column-parallel (their weights split along the
    output rows), the one it ends at row-parallel (its weight split along the input columns),
    and every op in between computes on this rank's part (an attention block's q, k and v
    projections and its heads, an MLP's hidden units). The input of the region goes through
    `ds.parallel_copy` and the row-parallel partial sums through `ds.parallel_sum` on the
    mesh's `tp` axis (the forward and backward all-reduces), and the row-parallel bias is
    added after the sum. A fused projection whose output its slices tile into segments (GPT's
    `c_attn`, `nn.MultiheadAttention`'s packed `in_proj_weight`; Phi3's `qkv_proj` with
    grouped-query heads in unequal ones, `sizes` in the sharding) is split segment by segment,
    so each rank keeps its heads of q, k and v. Rotary embeddings (rotate_half's slices and
    concat within each head) and grouped-query attention's repeat_kv (a broadcast beside the
    heads) compute on the rank's heads.

    ```mlir
    %h = ds.linear %x, %w1, %b1 : (tensor<4x32xf32>, tensor<128x32xf32>, tensor<128xf32>) -> tensor<4x128xf32>
    %g = ds.gelu %h : tensor<4x128xf32>
    %y = ds.linear %g, %w2, %b2 : (tensor<4x128xf32>, tensor<32x128xf32>, tensor<32xf32>) -> tensor<4x32xf32>
    // at tp = 2 becomes
    %x1 = ds.parallel_copy %x on @mesh grid_axes = [1] : tensor<4x32xf32>
    %h = ds.linear %x1, %w1, %b1 : (tensor<4x32xf32>, tensor<64x32xf32>, tensor<64xf32>) -> tensor<4x64xf32>
    %g = ds.gelu %h : tensor<4x64xf32>
    %p = ds.linear %g, %w2 : (tensor<4x64xf32>, tensor<32x64xf32>) -> tensor<4x32xf32>
    %s = ds.parallel_sum %p on @mesh grid_axes = [1] : tensor<4x32xf32>
    %y = ds.add %s, %b2 : tensor<4x32xf32>, tensor<32xf32> -> tensor<4x32xf32>
    ```
    The split parameters keep their state_dict names; their type becomes the local part and
    their `sharding` says how it was cut (`#ds.sharding<[["tp"], []]>`, with `segments` for a
    fused projection). A region whose sizes do not divide by the tp size (a head count, a
    hidden size) or that contains an op that needs the whole tensor stays replicated, and the
    pass says so as a remark naming the linear and the cause. Tied or shared weights stay
    replicated. Sets the module's mesh to `dp=1 x tp=autotp-size` when it has none.

    `layer-specs` overrides what the graph shows, as DeepSpeed's AutoTP
    `partition_config` does: a linear whose weight name a `column` rule matches may only
    start a region, a `row` rule's may only end one, a `skip` rule's (and, with
    `use-default-specs=false`, a linear or vocabulary no rule matches) stays whole. A linear
    that a column or row rule names but no region can split is an error naming it and why.
  }];
  let dependentDialects = ["::mlir::ds::DSDialect", "::mlir::shard::ShardDialect"];
  let options = [
    Option<"autotpSize", "autotp-size", "int64_t", "1",
           "Tensor-parallel ranks when the module has no ds.mesh (DeepSpeed's "
           "tensor_parallel.autotp_size; with a mesh, its tp axis decides)">,
    ListOption<"layerSpecs", "layer-specs", "std::string",
               "Rules ROLE=REGEX (ROLE column, row or skip; REGEX matched from the start of a "
               "linear's weight name), first match wins: DeepSpeed's "
               "tensor_parallel.partition_config layer_specs or an HF tp_plan">,
    Option<"useDefaultSpecs", "use-default-specs", "bool", "true",
           "Split what the graph shows where no rule matches (partition_config's "
           "use_default_specs); false: only the rules' linears split">,
  ];
}

def DSSequenceParallel : Pass<"ds-sequence-parallel", "::mlir::ModuleOp"> {
  let summary = "DeepSpeed-Ulysses sequence parallelism of @forward over the mesh's sp axis.";
  let description = [{
    Runs on the imported `@forward`, after `ds-tensor-parallel` and before `ds-autodiff`.
    Every input of rank 2 or more whose dimension 1 has the sequence length is sliced inside
    the program to this rank's block of the sequence (`--input` types stay whole), and every
    op works on its block. Where an op mixes positions of the sequence (attention's score and
    value products), an all-to-all (`shard.all_to_all` between reshapes and transposes)
    exchanges the sequence blocks for blocks of a batch dimension (the heads where they
    divide by sp, else the batch), the attention runs on whole sequences, and the first op
    after it that is not part of it gets the sequence blocks back through another all-to-all.
    A replicated operand of the sequence's length is sliced to the block (a position table by
    its indices, a parameter by `shard.all_slice`, whose gradient gathers the blocks'); sums
    and means over the sequence, and the cross-entropy's, are completed over sp
    (`ds.parallel_sum`), so the loss is the whole sequence's. An input shifted along the
    sequence (concatenated there and sliced back to its length: HF's causal-LM loss shifts
    its labels so) is shifted whole, then sliced to the block. A sequence length that does
    not divide by sp, or an op that needs the whole sequence outside an attention, is
    refused by name. Sets the module's mesh to `dp=1 x sp=sequence-parallel-size` when it has none.

    `mode` (the config's `sequence_parallel_mode`) chooses how a fused `ds.attention` is
    split: `ulysses` as above; `ring` keeps its queries, keys and values in sequence blocks
    and makes it a `ds.ring_attention`, whose key/value blocks go round the sp ranks (f32,
    causal or unmasked); `auto` (the default) takes Ulysses where the query and key/value
    heads both divide by sp, and the ring elsewhere where it can (else Ulysses over the
    batch). A causal attention in the ring stripes the sequence over the ranks instead of
    blocks (rank r holds positions r, r + sp, ...; the op is `striped`), so that every rank
    does the same work at every step; where Ulysses' exchange is needed too, the blocks stay
    in sequence order.
  }];
  let dependentDialects = ["::mlir::ds::DSDialect", "::mlir::shard::ShardDialect"];
  let options = [
    Option<"sequenceParallelSize", "sequence-parallel-size", "int64_t", "1",
           "Sequence-parallel ranks when the module has no ds.mesh (DeepSpeed's "
           "sequence_parallel_size; with a mesh, its sp axis decides)">,
    Option<"mode", "mode", "::mlir::ds::SequenceParallelMode",
           "::mlir::ds::SequenceParallelMode::automatic", "auto | ulysses | ring",
           [{::mlir::ds::EnumOptionValues<::mlir::ds::SequenceParallelMode, ::mlir::ds::getMaxEnumValForSequenceParallelMode, ::mlir::ds::symbolizeSequenceParallelMode>()}]>,
  ];
}

def DSPipelinePartition : Pass<"ds-pipeline-partition", "::mlir::ModuleOp"> {
  let summary = "Cuts @forward into pipeline stages balanced by the cost model.";
  let description = [{
    Runs on `@forward` before `ds-autodiff` (after the tensor and sequence parallelism
    passes). The forward's ops, in program order, are cut into `stages x virtual-stages`
    contiguous chunks; chunk `c` runs on pipeline rank `c mod stages` (one chunk per rank for
    1F1B; `virtual-stages` chunks per rank, round robin, for the interleaved schedule). A cut
    may fall anywhere in the graph, not only between layers: every value that crosses it is
    sent. The balance is DeepSpeed's `pipeline.partition`:

    - `best` (the default): each op weighs its floating-point operations
      (`CostOpInterface::getFlops`); among the cuts within 5% of the balanced work, the one
      whose crossing values have the fewest bytes is taken.
    - `parameters`: each trainable parameter weighs its elements, at its first read.
    - `uniform`: each op that computes (has FLOPs) weighs 1.
    - `type:REGEX`: each module whose path (a parameter's state_dict name without its last
      component) matches REGEX (searched, as DeepSpeed's `re.search`) weighs 1 at the first
      read of its parameters; a cut falls just before such a read.

    Each op gets `ds.stage = c` (its chunk); a parameter read by several chunks (a tied
    embedding and LM head) gets one `ds.get_parameter` per chunk, so that each chunk
    differentiates its own use. `ds-autodiff` gives each backward op its forward op's chunk.
    The module gets `ds.pipeline = #ds.pipeline<stages = P, virtual_stages = V>` and its mesh a
    `pp` axis (outermost) when it has none. Fewer weighed units than chunks is an error naming
    both counts.

    ```mlir
    %h = ds.linear %x, %w1, %b1 {ds.stage = 0 : i64} : ...
    %g = ds.gelu %h {ds.stage = 0 : i64} : ...
    %y = ds.linear %g, %w2, %b2 {ds.stage = 1 : i64} : ...
    ```
  }];
  let dependentDialects = ["::mlir::ds::DSDialect"];
  let options = [
    Option<"stages", "stages", "int64_t", "2", "Pipeline ranks (DeepSpeed's pipeline.stages)">,
    Option<"virtualStages", "virtual-stages", "int64_t", "1",
           "Model chunks per pipeline rank (interleaved schedule)">,
    Option<"partition", "partition", "std::string", "\"best\"",
           "best | parameters | uniform | type:REGEX (DeepSpeed's pipeline.partition)">,
  ];
}

def DSPipeline : Pass<"ds-pipeline", "::mlir::ModuleOp"> {
  let summary = "Each pipeline rank's whole step as straight-line code, with its sends and receives.";
  let description = [{
    Runs on `@micro_step` after `ds-autodiff` (and canonicalization), on a module that
    `ds-pipeline-partition` cut. Each op belongs to a phase: the forward (F) or the backward
    (B) of its chunk (`ds.stage`, and `ds.backward` on the ops ds-autodiff built); a
    constant or parameter read is copied into each phase that uses it, and an op without a
    chunk (made by canonicalization) joins the latest phase of its operands. For each pipeline
    rank the pass emits `func.func @pipeline_step_R` that runs the rank's phases of all
    `micro-batches` micro-batches in the schedule's order:

    - `1f1b` (PipeDream-Flush, DeepSpeed's `TrainSchedule`, Megatron's): rank r runs
      min(p - r - 1, m) warm-up forwards, then alternates one forward and one backward, then
      the remaining backwards.
    - `interleaved` (Megatron's, v chunks per rank): the forwards of each chunk go in groups
      of p micro-batches, rank r warms up with (p - r - 1) x 2 + (v - 1) x p of them; m must
      be a multiple of p (the pass refuses other counts, naming the nearest valid ones).

    A value that one rank produces and another uses is sent once (`shard.send` /
    `shard.recv` on the mesh's `pp` axis; scalars as one-element tensors). The sends and
    receives are placed by simulating the ranks in rounds (each rank runs its next phase when
    what it receives has arrived; then the round's transfers go in one global order), so that
    every pair of ranks issues them in the same order and no rank waits on a transfer that
    comes later in another's: the programs cannot hang. A schedule the simulation cannot
    finish is a compile error. Micro-batch i of the step reads arguments [i x n, (i + 1) x n)
    (n: @micro_step's inputs); each function returns the m losses (zeros except on the rank
    that computes the loss) and carries `ds.schedule`, its order as text (`F0.1`: chunk 0's
    forward of micro-batch 1; `>1` / `<1`: a send to / receive from pipeline rank 1). Every
    parameter and state gets `ds.stages`, the pipeline ranks that use it.
  }];
  let dependentDialects = ["::mlir::ds::DSDialect", "::mlir::shard::ShardDialect",
                           "::mlir::func::FuncDialect"];
  let options = [
    Option<"schedule", "schedule", "::mlir::ds::PipelineSchedule",
           "::mlir::ds::PipelineSchedule::one_f_one_b", "1f1b | interleaved",
           [{::mlir::ds::EnumOptionValues<::mlir::ds::PipelineSchedule, ::mlir::ds::getMaxEnumValForPipelineSchedule, ::mlir::ds::symbolizePipelineSchedule>()}]>,
    Option<"microBatches", "micro-batches", "int64_t", "2",
           "Micro-batches per step (gradient_accumulation_steps)">,
  ];
}

def DSOffload : Pass<"ds-offload", "::mlir::ModuleOp"> {
  let summary = "ZeRO-Offload and ZeRO-Infinity: optimizer state and parameters in host memory or on NVMe, moved by a static schedule.";
  let description = [{
    Runs after `ds-optimizer`. Puts states in memory spaces (`ds.memory_space`) and the ops
    that update them on the host (`ds.on_host`), then inserts a `ds.move` wherever an op reads
    a value from the other space, and issues each parameter's move ahead of its use:
    - `optimizer=cpu|nvme` (DeepSpeed's `offload_optimizer.device`): the optimizer state
      (moments, masters) lives in host memory or the NVMe swap file, and every op of
      `@optimizer_step` but the collectives runs on the host (DeepSpeed's CPU Adam). The
      gradient accumulators (`grad` states not in a flat buffer, stage 2-3 `grad_shard`s)
      live in host memory: each gradient is moved to the host as backward produces it (or
      as its reduce-scatter completes) and accumulated there. An updated value that goes back
      to a device state, or into a collective, is moved to the device.
    - `param=cpu|nvme` (`offload_param.device`, stage 3): the parameter shards
      (`param_shard` states; with one rank, the trainable parameters of at least
      `persistence-threshold` elements) live in host memory or the swap file. Each read on
      the device gets its own move per phase (forward, backward: split at the loss), so a
      parameter is on the device only from its move to its phase's last use.
    - Prefetch: a move of a state read (and an NVMe read) is issued `prefetch` consumers
      ahead: at the first use of the transfer whose consumer comes that many consumers
      earlier (0: right before its own use).
    NVMe states are read into host buffers and written back by the lowering (`dsrt_slot_fetch`,
    `dsrt_slot_store`). Records `ds.offload = {optimizer, param}` on the module. Refuses a
    pipeline module (not implemented).
  }];
  let dependentDialects = ["::mlir::ds::DSDialect", "::mlir::func::FuncDialect"];
  let options = [
    Option<"optimizer", "optimizer", "::mlir::ds::OffloadDevice",
           "::mlir::ds::OffloadDevice::none", "none | cpu | nvme",
           [{::mlir::ds::EnumOptionValues<::mlir::ds::OffloadDevice, ::mlir::ds::getMaxEnumValForOffloadDevice, ::mlir::ds::symbolizeOffloadDevice>()}]>,
    Option<"param", "param", "::mlir::ds::OffloadDevice", "::mlir::ds::OffloadDevice::none",
           "none | cpu | nvme", [{::mlir::ds::EnumOptionValues<::mlir::ds::OffloadDevice, ::mlir::ds::getMaxEnumValForOffloadDevice, ::mlir::ds::symbolizeOffloadDevice>()}]>,
    Option<"persistenceThreshold", "persistence-threshold", "int64_t",
           "::mlir::ds::deepspeed::kParamPersistenceThreshold",
           "With one rank: parameters under this many elements stay on the device (DeepSpeed's stage3_param_persistence_threshold)">,
    Option<"prefetch", "prefetch", "int64_t", "1",
           "Consumers ahead that a state's move is issued (0: at its use)">,
  ];
}

def DSVerifyCollectives : Pass<"ds-verify-collectives", "::mlir::ModuleOp"> {
  let summary = "Fails when ranks could issue different collectives (a hang at run time).";
  let description = [{
    For every rank of the module's grid, lists the `shard` collectives each function issues in
    program order, following `scf.if`, `scf.index_switch` and `scf.for` whose conditions and
    bounds it can evaluate for that rank (from `shard.process_linear_index` or
    `process_multi_index`, constants and integer `arith`), and through `func.call`. A collective
    runs in the group of its grid axes (the ranks that share the other axes' indices, as the
    runtime's groups, each with its own queue): within every group, each member's list of the
    group's collectives must equal the first member's in kind, attributes, operand and result
    types, and order; the order between groups is free. Control
    flow whose condition is not known at compile time (it may differ between ranks) must issue
    the same collectives on every path. Errors name the function, the group, the ranks, the
    position and both ops with their locations. Part of the training pipeline after `ds-zero`.
  }];
  let dependentDialects = ["::mlir::shard::ShardDialect"];
}

def DSDeriveGeneration : Pass<"ds-derive-generation", "::mlir::ModuleOp"> {
  let summary = "A causal LM's forward as a generation program over a paged key/value cache.";
  let description = [{
    Input: `@forward` of a causal language model, as imported from its export: inputs
    `input_ids` and `position_ids` `[B, T]` (i64) and optionally `attention_mask` `[B, T]`,
    one result, the logits `[B, T, V]`, and causal `ds.attention`s (the `causal` attribute or
    a mask: the model's own causal and padding mask, which this pass drops). Output: the same
    function as `@<name>` (`prefill` for a prompt's chunk of up to T tokens, `decode` for
    T = 1) taking `input_ids`, `position_ids`, `slots [B, T]`, `pages [B, max-pages]`,
    `context_lens [B]`, `q_lens [B]` and the sampling parameters `temperature`, `top_k`,
    `top_p`, `seeds`, `steps [B]`, and returning each sequence's next token `[B]` (i64) and
    the logits of its last real token `[B, V]`. Each attention, in program order the cache's
    layer L, writes its keys and values to the states `@"cache.L.key"` and `@"cache.L.value"`
    (role `kv_cache`, `[pages, Hk, page-size, E]`; created once, shared by the module's
    programs) with `ds.cache_write` and attends with `ds.paged_attention`; keys and values
    that repeat their heads for grouped-query attention (HF's `repeat_kv`) are cached before
    the repeat. The rotary tables and learned positions come from `position_ids` as the
    forward computes them. An `attention_mask` input is dropped: padding is `q_lens` and the
    page table. Refuses, naming the fix, a forward without `position_ids`, with another input,
    with a second result or logits of another shape, with a bidirectional attention, or whose
    attention's log-sum-exp is read.
  }];
  let dependentDialects = ["::mlir::ds::DSDialect"];
  let options = [
    Option<"name", "name", "std::string", "\"decode\"",
           "The program's name: prefill or decode">,
    Option<"pages", "pages", "int64_t", "0", "Pages of the cache (every layer's)">,
    Option<"pageSize", "page-size", "int64_t", "16", "Positions per page">,
    Option<"maxPages", "max-pages", "int64_t", "0",
           "Pages one sequence can hold (the page table's width)">,
  ];
}

def DSLowerToRuntime : Pass<"ds-lower-to-runtime", "::mlir::ModuleOp"> {
  let summary = "Lowers a training step to LLVM dialect calls of the dsrt runtime's C API.";
  let description = [{
    Input: a module with `@micro_step` and `@optimizer_step` (from `ds-autodiff` and
    `ds-optimizer`), or generation's `@prefill` and `@decode` (`ds-derive-generation`). Output:
    LLVM dialect functions `ds_init_slots`, `ds_micro_step`, `ds_optimizer_step` (or
    `ds_prefill` and `ds_decode`, `void (ctx, inputs, results)`) and a `ds_metadata` JSON
    string (inputs, persistent slots, config, memory plan), matching `dsrt_program` in
    `runtime/include/dsrt/dsrt.h`. Every tensor is a
    `dsrt_tensor *`: results are allocated from the device arena before their kernel and freed
    after their last use, reshapes and parameter reads are views, and the peak bytes of that
    schedule are computed here, exactly, into the plan that the runtime checks against its
    budget before the first step.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

#endif // DS_TRANSFORMS_PASSES_TD
