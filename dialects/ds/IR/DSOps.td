//===- DSOps.td - ops of the ds dialect ------------------------------------===//
#ifndef DS_OPS_TD
#define DS_OPS_TD

include "ds/IR/DSBase.td"
include "ds/IR/DSAttrs.td"
include "ds/IR/DSInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

// Every shape is static after import.
def DS_Tensor : StaticShapeTensorOf<[AnyType]>;
def DS_FloatTensor : StaticShapeTensorOf<[AnyFloat]>;
def DS_IndexTensor : StaticShapeTensorOf<[I64, I32]>;
def DS_BoolTensor : StaticShapeTensorOf<[I1]>;
def DS_Dims2 : ConfinedAttr<DenseI64ArrayAttr, [DenseArrayCount<2>]>;

//===----------------------------------------------------------------------===//
// State: parameters and buffers
//===----------------------------------------------------------------------===//

def DS_ParameterOp : DS_Op<"parameter", [Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "A parameter or buffer of the model, named by its state_dict key.";
  let description = [{
    Declares one tensor of the model's state. The symbol name is the first `state_dict` key of
    the tensor; `aliases` lists its other keys when weights are tied (one tensor, several
    names). `trainable` marks parameters; without it the tensor is a buffer (BatchNorm running
    statistics, masks), which the program reads with `ds.get_parameter` and may overwrite with
    `ds.assign_buffer`. The values live outside the IR, in the safetensors file beside it.

    ```mlir
    ds.parameter @"transformer.wte.weight" trainable : tensor<64x32xf32>
        aliases ["lm_head.weight"]
    ds.parameter @"bn1.running_mean" : tensor<64xf32>
    ```

    **Constraints:** the symbol name is not empty; aliases are distinct from each other and
    from the symbol name; a `sharding` has the tensor's rank and names only axes of the
    enclosing module's `ds.mesh`.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, TypeAttrOf<AnyStaticShapeTensor>:$type,
                       UnitAttr:$trainable, OptionalAttr<StrArrayAttr>:$aliases,
                       OptionalAttr<DS_ShardingAttr>:$sharding);
  let assemblyFormat = [{
    $sym_name (`trainable` $trainable^)? `:` $type (`aliases` $aliases^)?
    (`sharding` $sharding^)? attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The tensor type of the parameter.
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
    /// All state_dict keys of this tensor: the symbol name, then the aliases.
    ::llvm::SmallVector<::llvm::StringRef> getNames();
    /// Its slot's role: a trainable parameter, or a buffer.
    ::mlir::ds::SlotRole getRole() {
      return getTrainable() ? ::mlir::ds::SlotRole::parameter : ::mlir::ds::SlotRole::buffer;
    }
  }];
}

def DS_GetParameterOp : DS_Op<"get_parameter", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>, MemoryEffects<[MemRead]>]> {
  let summary = "Reads the current value of a parameter or buffer.";
  let description = [{
    ```mlir
    %w = ds.get_parameter @"fc.weight" : tensor<32x16xf32>
    ```

    **Constraints:** the symbol names a `ds.parameter` whose type equals the result type.
  }];
  let arguments = (ins FlatSymbolRefAttr:$name);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

def DS_AssignBufferOp : DS_Op<"assign_buffer", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>, MemoryEffects<[MemWrite]>]> {
  let summary = "Overwrites a buffer with a new value (training-time state).";
  let description = [{
    The functional form of PyTorch's in-place buffer updates during training, e.g. BatchNorm's
    running statistics and `num_batches_tracked`:

    ```mlir
    ds.assign_buffer @"bn1.running_mean" = %new : tensor<64xf32>
    ```

    **Constraints:** the symbol names a `ds.parameter` without `trainable` whose type equals the
    value's type.
  }];
  let arguments = (ins FlatSymbolRefAttr:$name, AnyStaticShapeTensor:$value);
  let assemblyFormat = "$name `=` $value attr-dict `:` type($value)";
}

//===----------------------------------------------------------------------===//
// Constants and conversions
//===----------------------------------------------------------------------===//

def DS_ConstantOp : DS_Op<"constant", [ConstantLike, Pure,
    AllTypesMatch<["value", "result"]>]> {
  let summary = "A constant tensor.";
  let description = [{
    ```mlir
    %c = ds.constant dense<0.5> : tensor<f32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$value attr-dict";
  let hasFolder = 1;
}

def DS_ConvertOp : DS_Op<"convert", [Pure, DeclareOpInterfaceMethods<DS_GradientOpInterface>]> {
  let summary = "Converts the element type of a tensor (PyTorch `.to(dtype)`).";
  let description = [{
    **Constraints:** input and result have the same shape.
  }];
  let arguments = (ins DS_Tensor:$input);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def DS_StopGradientOp : DS_Op<"stop_gradient", [Pure, SameOperandsAndResultType]> {
  let summary = "Its input, through which no gradient flows (torch.Tensor.detach).";
  let description = [{
    The value is the input's; `ds-autodiff` treats the result as a constant and, once the
    backward is built, replaces it with its input (so nothing later sees it). Imported from
    `aten::detach` and `prim::data`; `ds-tensor-parallel` makes the padding row of a split
    vocabulary with it.
  }];
  let arguments = (ins DS_Tensor:$input);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class DS_UnaryOp<string mnemonic, string what> : DS_Op<mnemonic, [Pure, DeclareOpInterfaceMethods<DS_GradientOpInterface>, SameOperandsAndResultType, DS_WritesOverOperand]> {
  let summary = "Elementwise " # what # ".";
  let arguments = (ins DS_FloatTensor:$input);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def DS_NegOp : DS_UnaryOp<"neg", "negation">;
def DS_ExpOp : DS_UnaryOp<"exp", "exponential">;
def DS_LogOp : DS_UnaryOp<"log", "natural logarithm">;
def DS_SqrtOp : DS_UnaryOp<"sqrt", "square root">;
def DS_RsqrtOp : DS_UnaryOp<"rsqrt", "reciprocal square root">;
def DS_TanhOp : DS_UnaryOp<"tanh", "hyperbolic tangent">;
def DS_SigmoidOp : DS_UnaryOp<"sigmoid", "logistic sigmoid">;
def DS_CosOp : DS_UnaryOp<"cos", "cosine">;
def DS_SinOp : DS_UnaryOp<"sin", "sine">;
def DS_ReluOp : DS_UnaryOp<"relu", "max(x, 0)">;

def DS_GeluOp : DS_Op<"gelu", [Pure, DeclareOpInterfaceMethods<DS_GradientOpInterface>, SameOperandsAndResultType, DS_WritesOverOperand]> {
  let summary = "Elementwise GELU, exact (erf) or with PyTorch's tanh approximation.";
  let arguments = (ins DS_FloatTensor:$input,
                       DefaultValuedAttr<DS_GeluApproximateAttr,
                                         "::mlir::ds::GeluApproximate::none">:$approximate);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = "$input (`approximate` `=` `` $approximate^)? attr-dict `:` type($input)";
}

class DS_BinaryOp<string mnemonic, string what> : DS_Op<mnemonic, [Pure, DeclareOpInterfaceMethods<DS_GradientOpInterface>, DS_WritesOverOperand]> {
  let summary = "Elementwise " # what # " with PyTorch broadcasting.";
  let description = [{
    **Constraints:** both operands have the result's element type; the result shape is the
    broadcast of the operand shapes (dimensions aligned from the right, each equal or 1).
  }];
  let arguments = (ins DS_Tensor:$lhs, DS_Tensor:$rhs);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)";
  let hasVerifier = 1;
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::verify() { return verifyBroadcastBinary(*this); }
  }];
}

def DS_AddOp : DS_BinaryOp<"add", "addition">;
def DS_SubOp : DS_BinaryOp<"sub", "subtraction">;
def DS_MulOp : DS_BinaryOp<"mul", "multiplication">;
def DS_DivOp : DS_BinaryOp<"div", "true division">;
def DS_PowOp : DS_BinaryOp<"pow", "power">;
def DS_MaximumOp : DS_BinaryOp<"maximum", "maximum">;
def DS_MinimumOp : DS_BinaryOp<"minimum", "minimum">;

def DS_CmpOp : DS_Op<"cmp", [Pure]> {
  let summary = "Elementwise comparison with PyTorch broadcasting; the result is i1.";
  let description = [{
    ```mlir
    %m = ds.cmp eq, %a, %b : tensor<1x1x16x16xf32>, tensor<f32> -> tensor<1x1x16x16xi1>
    ```

    **Constraints:** operands share an element type; the result has element type i1 and the
    broadcast shape.
  }];
  let arguments = (ins DS_CmpPredicateAttr:$predicate, DS_Tensor:$lhs, DS_Tensor:$rhs);
  let results = (outs DS_BoolTensor:$result);
  let assemblyFormat = [{
    $predicate `,` $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
  let hasVerifier = 1;
}

def DS_WhereOp : DS_Op<"where", [Pure, DeclareOpInterfaceMethods<DS_GradientOpInterface>, DS_WritesOverOperand]> {
  let summary = "Elementwise select: `cond ? on_true : on_false`, with broadcasting.";
  let description = [{
    PyTorch's `torch.where`; `x.masked_fill(mask, v)` imports as `where(mask, v, x)`.
    Canonicalization drops `where(mask, 0, softmax_grad(y, dy))` when `y` is the softmax of
    `where(mask, -inf, x)` (the same mask, on the same side): `y` is exactly 0 there, and so is
    its gradient.

    **Constraints:** `cond` is i1; both values share the result's element type; the result
    shape is the broadcast of all three shapes.
  }];
  let arguments = (ins DS_BoolTensor:$cond, DS_Tensor:$on_true, DS_Tensor:$on_false);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = "$cond `,` $on_true `,` $on_false attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
}

def DS_DropoutOp : DS_Op<"dropout", [SameOperandsAndResultType]> {
  let summary = "Training-time dropout: zero with probability p, scale the rest by 1/(1-p).";
  let description = [{
    Imported only where PyTorch would drop (training mode, p > 0).

    **Constraints:** 0 < p < 1.
  }];
  let arguments = (ins DS_FloatTensor:$input,
                       F64Attr:$p);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = "$input `p` `=` $p attr-dict `:` type($input)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Reductions and normalizations
//===----------------------------------------------------------------------===//

class DS_ReduceOp<string mnemonic, string what> : DS_Op<mnemonic, [Pure, DeclareOpInterfaceMethods<DS_GradientOpInterface>]> {
  let summary = what # " over the given dimensions.";
  let description = [{
    **Constraints:** dimensions are in [0, rank) and distinct; the result drops them, or keeps
    them with size 1 under `keepdim`; element types match.
  }];
  let arguments = (ins DS_Tensor:$input, DenseI64ArrayAttr:$dims, UnitAttr:$keepdim);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = [{
    $input `dims` `=` $dims (`keepdim` $keepdim^)? attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::verify() { return verifyReduce(*this); }
  }];
}

def DS_SumOp : DS_ReduceOp<"sum", "Sum">;
def DS_MeanOp : DS_ReduceOp<"mean", "Mean">;
def DS_AmaxOp : DS_ReduceOp<"amax", "Maximum">;

class DS_SoftmaxLikeOp<string mnemonic, string what> : DS_Op<mnemonic, [Pure, DeclareOpInterfaceMethods<DS_GradientOpInterface>, SameOperandsAndResultType]> {
  let summary = what # " along one dimension.";
  let description = [{
    **Constraints:** 0 <= dim < rank.
  }];
  let arguments = (ins DS_FloatTensor:$input, I64Attr:$dim);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = "$input `dim` `=` $dim attr-dict `:` type($input)";
  let hasVerifier = 1;
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::verify() { return verifyDimInRange(*this, getDim()); }
  }];
}

def DS_SoftmaxOp : DS_SoftmaxLikeOp<"softmax", "Softmax">;
def DS_LogSoftmaxOp : DS_SoftmaxLikeOp<"log_softmax", "Log-softmax">;

def DS_CumsumOp : DS_Op<"cumsum", [Pure, DeclareOpInterfaceMethods<DS_GradientOpInterface>, SameOperandsAndResultType]> {
  let summary = "Running sums along one dimension (torch.cumsum); from its end with `reverse`.";
  let description = [{
    `result[..., i, ...] = sum(input[..., :i+1, ...])` along `dim` (`reverse`: the sum of
    `input[..., i:, ...]`, which is the gradient of the forward sum). Floats accumulate in
    double and round once per element, as ATen's CPU kernel; integers sum in their own type.
    HF models take OPT's position ids from the attention mask's cumsum.

    **Constraints:** 0 <= dim < rank; not a tensor of booleans (the importer converts them to
    i64 first, as torch.cumsum does).
  }];
  let arguments = (ins DS_Tensor:$input, I64Attr:$dim, UnitAttr:$reverse);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = "$input `dim` `=` $dim (`reverse` $reverse^)? attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def DS_TopKOp : DS_Op<"top_k", [Pure, DeclareOpInterfaceMethods<DS_GradientOpInterface>]> {
  let summary = "The k largest (or smallest) elements of each row along the last dimension (torch.topk).";
  let description = [{
    `values, indices = torch.topk(input, k, largest=not smallest)`: in that order; equal
    values keep the lower index first; NaN counts as the largest. A mixture-of-experts router
    picks each token's experts so; with `k` the whole row and `smallest` it is a stable
    ascending sort (`torch.sort`, which HF's grouped_mm experts run on the expert ids). The
    gradient reaches a float input at the chosen positions; the indices have none.

    **Constraints:** input of rank >= 1, f32/bf16/f16 or i64; 1 <= k <= its last dimension;
    `values` of the input's shape with k last and its type, `indices` of that shape and i64.
  }];
  let arguments = (ins DS_Tensor:$input, I64Attr:$k, UnitAttr:$smallest);
  let results = (outs DS_Tensor:$values, DS_IndexTensor:$indices);
  let assemblyFormat = [{
    $input `k` `=` $k (`smallest` $smallest^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_LayerNormOp : DS_Op<"layer_norm", [Pure, DeclareOpInterfaceMethods<DS_GradientOpInterface>, AttrSizedOperandSegments]> {
  let summary = "Layer normalization over the trailing `normalized_shape` dimensions.";
  let description = [{
    `(x - mean) / sqrt(var + eps) * weight + bias` with the biased variance, as
    `torch.nn.functional.layer_norm`.

    **Constraints:** `normalized_shape` equals the input's trailing dimensions; weight and bias,
    when present, have that shape and the input's element type; eps > 0; the result has the
    input's type.
  }];
  let arguments = (ins DS_FloatTensor:$input, Optional<DS_FloatTensor>:$weight,
                       Optional<DS_FloatTensor>:$bias, DenseI64ArrayAttr:$normalized_shape,
                       F64Attr:$eps);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`weight` $weight^)? (`bias` $bias^)? `normalized_shape` `=` $normalized_shape
    `eps` `=` $eps attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_BatchNormOp : DS_Op<"batch_norm", [Pure, DeclareOpInterfaceMethods<DS_GradientOpInterface>, AttrSizedOperandSegments]> {
  let summary = "Training-mode batch normalization over dimension 1 with batch statistics.";
  let description = [{
    Normalizes with the statistics of this batch, as `F.batch_norm(training=True)`, and returns
    them: `mean` and the biased `var` (per channel). The running statistics are updated by
    ordinary ops and `ds.assign_buffer`, so autodiff and sharding see no hidden state.

    **Constraints:** input rank >= 2; weight and bias, when present, are 1-D of size C =
    input dim 1; `mean` and `var` are 1-D of size C; eps > 0.
  }];
  let arguments = (ins DS_FloatTensor:$input, Optional<DS_FloatTensor>:$weight,
                       Optional<DS_FloatTensor>:$bias, F64Attr:$eps);
  let results = (outs DS_FloatTensor:$result, DS_FloatTensor:$mean, DS_FloatTensor:$var);
  let assemblyFormat = [{
    $input (`weight` $weight^)? (`bias` $bias^)? `eps` `=` $eps attr-dict
    `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_BatchNormInferenceOp : DS_Op<"batch_norm_inference", [Pure, DeclareOpInterfaceMethods<DS_GradientOpInterface>, AttrSizedOperandSegments]> {
  let summary = "Eval-mode batch normalization with given running statistics.";
  let description = [{
    **Constraints:** as `ds.batch_norm`; `running_mean` and `running_var` are 1-D of size C.
  }];
  let arguments = (ins DS_FloatTensor:$input, Optional<DS_FloatTensor>:$weight,
                       Optional<DS_FloatTensor>:$bias, DS_FloatTensor:$running_mean,
                       DS_FloatTensor:$running_var, F64Attr:$eps);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`weight` $weight^)? (`bias` $bias^)? `stats` $running_mean `,` $running_var
    `eps` `=` $eps attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Contractions and lookups
//===----------------------------------------------------------------------===//

def DS_MatmulOp : DS_Op<"matmul", [Pure, DeclareOpInterfaceMethods<DS_GradientOpInterface>]> {
  let summary = "Batched matrix product with broadcast batch dimensions (torch.matmul, rank >= 2).";
  let description = [{
    `[..., M, K] x [..., K, N] -> [broadcast(...), M, N]`. One-dimensional operands of
    `torch.matmul` are reshaped by the importer.

    **Constraints:** both operands have rank >= 2 and the result's element type; the
    contraction sizes match; batch dimensions broadcast.
  }];
  let arguments = (ins DS_FloatTensor:$lhs, DS_FloatTensor:$rhs);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)";
  let hasVerifier = 1;
}

def DS_AttentionOp : DS_Op<"attention", [Pure, DeclareOpInterfaceMethods<DS_GradientOpInterface>]> {
  let summary = "Scaled dot-product attention as one op (a fused, flash-attention kernel).";
  let description = [{
    `softmax(query key^T * scale + mask) value` over query `[B, Hq, L, E]`, key `[B, Hk, S, E]`
    and value `[B, Hk, S, Ev]`, as `F.scaled_dot_product_attention`: grouped-query attention
    where Hk divides Hq (query head h reads key/value head h / (Hq / Hk)); `causal` lets query i
    see keys j <= i (aligned to the top left, as PyTorch's `is_causal`); a boolean `mask` keeps
    the keys where it is true, a float one is added to the scores; it broadcasts to
    `[B, Hq, L, S]` (rank 4, each dimension 1 or full). A query row with no key to attend to
    has zero output, as PyTorch's safe softmax. The second result is each row's log-sum-exp of
    the scaled scores (f32), which the gradient reads instead of the probabilities, so no
    `L x S` tensor exists: the kernels work in tiles of queries and keys.

    **Constraints:** query, key and value of rank 4 and one element type, the batch equal,
    Hk dividing Hq, key and value of the same heads and length, query and key of the same
    width E; not both `mask` and `causal`; the result `[B, Hq, L, Ev]` of the query's type and
    `lse` `[B, Hq, L]` of f32.
  }];
  let arguments = (ins DS_FloatTensor:$query, DS_FloatTensor:$key, DS_FloatTensor:$value,
                       Optional<DS_Tensor>:$mask, F64Attr:$scale, UnitAttr:$causal);
  let results = (outs DS_FloatTensor:$result, DS_FloatTensor:$lse);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`mask` $mask^)? `scale` `=` $scale (`causal` $causal^)? attr-dict
    `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_LinearOp : DS_Op<"linear", [Pure, DeclareOpInterfaceMethods<DS_GradientOpInterface>]> {
  let summary = "`x @ weight^T + bias` (torch.nn.functional.linear).";
  let description = [{
    `[..., in] x [out, in] (+ [out]) -> [..., out]`.

    **Constraints:** input rank >= 1; weight is 2-D with `in` columns; bias is 1-D of size
    `out`; one element type throughout.
  }];
  let arguments = (ins DS_FloatTensor:$input, DS_FloatTensor:$weight,
                       Optional<DS_FloatTensor>:$bias);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weight (`,` $bias^)? attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def DS_ExpertLinearOp : DS_Op<"expert_linear", [Pure, DeclareOpInterfaceMethods<DS_GradientOpInterface>]> {
  let summary = "Each row through its expert's linear map: `result[n] = weight[ids[n]] input[n]`.";
  let description = [{
    `[N, in] x [E, out, in] x [N] -> [N, out]` (with `transposed`, the weight is `[E, in, out]`
    and `result[n] = input[n] weight[ids[n]]`, as HF's transposed experts): the routed experts
    of a mixture-of-experts layer, each token-expert pair a row. HF's `batched_mm` experts
    write it as `bmm(weight[ids], input[..., None])`, which gathers an `[N, out, in]` copy of
    the weights; `ds-fuse-experts` folds that into this op, whose kernels multiply each
    expert's rows as one product. A row whose id is outside `[0, E)` gives zeros and receives
    no gradient (a token that another rank's experts take); with `unrouted_undefined`, a row
    of negative id is undefined instead (not written: the lowering sets it where every reader
    of the result skips those rows, as `ds.swiglu` skips them).

    **Constraints:** input `[N, in]`, weight of rank 3 with `in` in place, integer ids `[N]`,
    the result `[N, out]`; one element type for input, weight and result.
  }];
  let arguments = (ins DS_FloatTensor:$input, DS_FloatTensor:$weight,
                       DS_IndexTensor:$expert_ids, UnitAttr:$transposed,
                       UnitAttr:$unrouted_undefined);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `[` $expert_ids `]` (`transposed` $transposed^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_SwigluOp : DS_Op<"swiglu", [Pure, DeclareOpInterfaceMethods<DS_GradientOpInterface>]> {
  let summary = "SwiGLU of a gate-and-up tensor: `silu(input[..., :F]) * input[..., F:]`.";
  let description = [{
    The last dimension of `input` holds 2F values, the gate's F then the up projection's F;
    `result[..., j] = g * sigmoid(g) * u` with `g = input[..., j]`, `u = input[..., F + j]`.
    HF's experts write it as two slices, a sigmoid and two products (silu imports as
    `x * sigmoid(x)`); `ds-fuse-swiglu` folds that into this op when the experts' product
    made its input, so the step reads the rows once and holds no slice of them.

    With `rows`, `input` is `[R, 2F]` and a row whose id is negative is zeros in the result,
    its input not read: the rows an expert product left as zeros (routed to no expert, or past
    the rows an expert-parallel rank received), whose SwiGLU is zeros too. With
    `unrouted_undefined` those rows of the result are undefined (not written), as
    `ds.expert_linear`'s.

    **Constraints:** input of rank >= 1 with an even last dimension; the result the input's
    shape with the last dimension halved, of its element type; `rows` integer `[R]` for a 2-D
    input of R rows.
  }];
  let arguments = (ins DS_FloatTensor:$input, Optional<DS_IndexTensor>:$rows,
                       UnitAttr:$unrouted_undefined);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`rows` `[` $rows^ `]`)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_ExpertCapacityOp : DS_Op<"expert_capacity", [Pure, AllTypesMatch<["expert_ids", "result"]>]> {
  let summary = "Capacity-based token dropping: the routed rows past each expert's capacity get id -1.";
  let description = [{
    `expert_ids` are `[T choices]` rows in token order, each token's choices consecutive (a
    router's `[T, choices]` top-k indices flattened). Taking the rows choice by choice (every
    token's first choice in token order, then every second choice, ...), each expert keeps
    its first `capacity` rows; the later ones become -1, rows that no expert takes (zeros
    from `ds.expert_linear`, sent nowhere by `ds.expert_route`). For one and two choices this
    is DeepSpeed-MoE's rule (`top1gating` without random token selection, `top2gating`:
    the second choices queue behind every first choice). Ids outside `[0, experts)` pass
    unchanged and take no place. Made by `ds-expert-capacity`; it has no gradient (ids).

    **Constraints:** `expert_ids` `[N]`, N a multiple of `choices` >= 1; `experts` >= 1;
    `capacity` >= 0; the result of the ids' type.
  }];
  let arguments = (ins DS_IndexTensor:$expert_ids, I64Attr:$experts, I64Attr:$choices,
                       I64Attr:$capacity);
  let results = (outs DS_IndexTensor:$result);
  let assemblyFormat = [{
    $expert_ids `experts` `=` $experts `choices` `=` $choices `capacity` `=` $capacity attr-dict
    `:` type($expert_ids)
  }];
  let hasVerifier = 1;
}

def DS_EmbeddingOp : DS_Op<"embedding", [Pure, DeclareOpInterfaceMethods<DS_GradientOpInterface>]> {
  let summary = "Row lookup: `weight[indices]` (torch.nn.functional.embedding).";
  let description = [{
    `[V, D] x [...] -> [..., D]`. `padding_idx` rows receive no gradient. A table of integers
    or booleans is a gather of data (the importer's `aten::gather` and `aten::index` on an
    attention mask or token types), which has no gradient.

    **Constraints:** weight is 2-D; indices are integer; result shape is the indices' shape
    followed by D, of the weight's element type.
  }];
  let arguments = (ins DS_Tensor:$weight, DS_IndexTensor:$indices,
                       OptionalAttr<I64Attr>:$padding_idx);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = "$weight `[` $indices `]` attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def DS_CrossEntropyOp : DS_Op<"cross_entropy", [Pure, DeclareOpInterfaceMethods<DS_GradientOpInterface>]> {
  let summary = "Softmax cross-entropy of logits against class indices.";
  let description = [{
    `F.cross_entropy(logits, target, ignore_index=, reduction=, label_smoothing=)` for logits
    `[N, C]` and target `[N]` (or `[C]` and `[]`). With `mean`, the sum is divided by the number
    of targets that are not `ignore_index`.

    **Constraints:** logits are 1-D or 2-D float; target is integer with the logits' leading
    dimension; 0 <= label_smoothing <= 1; the result is a scalar (mean, sum) or `[N]` (none).
  }];
  let arguments = (ins DS_FloatTensor:$logits, DS_IndexTensor:$target,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index,
                       DefaultValuedAttr<DS_ReductionAttr, "::mlir::ds::Reduction::mean">:$reduction,
                       DefaultValuedAttr<F64Attr, "0.0">:$label_smoothing);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = "$logits `,` $target attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def DS_LinearCrossEntropyOp : DS_Op<"linear_cross_entropy", [Pure, DeclareOpInterfaceMethods<DS_GradientOpInterface>]> {
  let summary = "The summed cross-entropy of `x @ weight^T + bias` against targets, in row tiles.";
  let description = [{
    `sum(F.cross_entropy(x @ weight^T + bias, target, ignore_index=, reduction="sum",
    label_smoothing=))` for x `[N, D]`, weight `[V, D]` and target `[N]`, computed `tiles` rows
    tiles at a time so that only one tile's logits (`ceil(N / tiles) x V`) exist: the LM head
    and its loss of `ds-tile-sequence` (ALST's tiled logits loss). `workspace` is that tile
    (and the partial sum), a result so that the memory plan counts it; nothing reads it.

    **Constraints:** x 2-D and weight 2-D of one float type with the same width; bias 1-D of
    V; target integer `[N]`; tiles >= 1; the loss a scalar of x's type; the workspace f32 of
    `ceil(N / tiles) * V + 1` elements.
  }];
  let arguments = (ins DS_FloatTensor:$input, DS_FloatTensor:$weight,
                       Optional<DS_FloatTensor>:$bias, DS_IndexTensor:$target, I64Attr:$tiles,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index,
                       DefaultValuedAttr<F64Attr, "0.0">:$label_smoothing);
  let results = (outs DS_FloatTensor:$result, DS_FloatTensor:$workspace);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? `target` $target `tiles` `=` $tiles attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Shape and layout
//===----------------------------------------------------------------------===//

def DS_ReshapeOp : DS_Op<"reshape", [Pure, DeclareOpInterfaceMethods<DS_GradientOpInterface>]> {
  let summary = "Same elements, new shape (view, reshape, flatten, squeeze, unsqueeze).";
  let description = [{
    **Constraints:** same number of elements and element type.
  }];
  let arguments = (ins DS_Tensor:$input);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def DS_TransposeOp : DS_Op<"transpose", [Pure, DeclareOpInterfaceMethods<DS_GradientOpInterface>]> {
  let summary = "Permutes dimensions: result dim i is input dim permutation[i].";
  let description = [{
    **Constraints:** `permutation` is a permutation of [0, rank); the result shape is permuted
    accordingly; element types match.
  }];
  let arguments = (ins DS_Tensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = "$input `perm` `=` $permutation attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def DS_BroadcastToOp : DS_Op<"broadcast_to", [Pure, DeclareOpInterfaceMethods<DS_GradientOpInterface>]> {
  let summary = "Broadcasts to a larger shape (torch.Tensor.expand).";
  let description = [{
    **Constraints:** the result rank is at least the input rank; aligned from the right, each
    input dimension is 1 or equals the result's; element types match.
  }];
  let arguments = (ins DS_Tensor:$input);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def DS_SliceOp : DS_Op<"slice", [Pure, DeclareOpInterfaceMethods<DS_GradientOpInterface>]> {
  let summary = "Strided slice of one dimension: indices start, start+step, ... < end.";
  let description = [{
    **Constraints:** 0 <= dim < rank; 0 <= start <= end <= size; step >= 1; the result has
    ceil((end - start) / step) elements along `dim` and the input's other dimensions.
  }];
  let arguments = (ins DS_Tensor:$input, I64Attr:$dim, I64Attr:$start, I64Attr:$end,
                       DefaultValuedAttr<I64Attr, "1">:$step);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = [{
    $input `dim` `=` $dim `[` $start `:` $end (`:` $step^)? `]` attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def DS_ConcatOp : DS_Op<"concat", [Pure, DeclareOpInterfaceMethods<DS_GradientOpInterface>]> {
  let summary = "Concatenates tensors along one dimension (torch.cat).";
  let description = [{
    **Constraints:** at least one input; all of one rank and element type; equal sizes except
    along `dim`, where the result's size is the sum.
  }];
  let arguments = (ins Variadic<DS_Tensor>:$inputs, I64Attr:$dim);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = "$inputs `dim` `=` $dim attr-dict `:` functional-type($inputs, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

def DS_Conv2dOp : DS_Op<"conv2d", [Pure, DeclareOpInterfaceMethods<DS_GradientOpInterface>]> {
  let summary = "2-D convolution in NCHW (torch.nn.functional.conv2d).";
  let description = [{
    **Constraints:** input `[N, C, H, W]`, weight `[O, C / groups, KH, KW]`, bias `[O]`; C and
    O divisible by `groups`; strides and dilations >= 1, padding >= 0; the result is
    `[N, O, OH, OW]` with `OH = (H + 2 pad - dil (KH - 1) - 1) / stride + 1` (likewise OW) >= 1.
  }];
  let arguments = (ins DS_FloatTensor:$input, DS_FloatTensor:$weight,
                       Optional<DS_FloatTensor>:$bias, DS_Dims2:$stride, DS_Dims2:$padding,
                       DS_Dims2:$dilation, DefaultValuedAttr<I64Attr, "1">:$groups);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? `stride` `=` $stride `padding` `=` $padding
    `dilation` `=` $dilation attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def DS_MaxPool2dOp : DS_Op<"max_pool2d", [Pure, DeclareOpInterfaceMethods<DS_GradientOpInterface>]> {
  let summary = "2-D max pooling in NCHW.";
  let description = [{
    **Constraints:** input rank 4; kernel, stride, dilation >= 1; 0 <= padding <= kernel / 2;
    the result's spatial sizes follow PyTorch's formula (with `ceil_mode`) and are >= 1.
  }];
  let arguments = (ins DS_FloatTensor:$input, DS_Dims2:$kernel_size, DS_Dims2:$stride,
                       DS_Dims2:$padding, DS_Dims2:$dilation, UnitAttr:$ceil_mode);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $input `kernel` `=` $kernel_size `stride` `=` $stride `padding` `=` $padding
    `dilation` `=` $dilation (`ceil_mode` $ceil_mode^)? attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def DS_AvgPool2dOp : DS_Op<"avg_pool2d", [Pure, DeclareOpInterfaceMethods<DS_GradientOpInterface>]> {
  let summary = "2-D average pooling in NCHW.";
  let description = [{
    **Constraints:** input rank 4; kernel, stride >= 1; 0 <= padding <= kernel / 2; the
    result's spatial sizes follow PyTorch's formula (with `ceil_mode`) and are >= 1.
  }];
  let arguments = (ins DS_FloatTensor:$input, DS_Dims2:$kernel_size, DS_Dims2:$stride,
                       DS_Dims2:$padding, UnitAttr:$ceil_mode, UnitAttr:$count_include_pad);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $input `kernel` `=` $kernel_size `stride` `=` $stride `padding` `=` $padding
    (`ceil_mode` $ceil_mode^)? (`count_include_pad` $count_include_pad^)? attr-dict
    `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def DS_AdaptiveAvgPool2dOp : DS_Op<"adaptive_avg_pool2d", [Pure, DeclareOpInterfaceMethods<DS_GradientOpInterface>]> {
  let summary = "2-D adaptive average pooling to a fixed output size.";
  let description = [{
    **Constraints:** input rank 4 (or 3); the result keeps the leading dimensions and has
    `output_size` (each >= 1) as its last two.
  }];
  let arguments = (ins DS_FloatTensor:$input, DS_Dims2:$output_size);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = "$input `output_size` `=` $output_size attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Tensor-parallel regions (ds-tensor-parallel)
//===----------------------------------------------------------------------===//

class DS_ParallelRegionOp<string mnemonic, string summary_>
    : DS_Op<mnemonic, [Pure, SameOperandsAndResultType,
                       DeclareOpInterfaceMethods<DS_GradientOpInterface>]> {
  let summary = summary_;
  let arguments = (ins DS_FloatTensor:$input, FlatSymbolRefAttr:$grid,
                       DenseI16ArrayAttr:$grid_axes);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $input `on` $grid `grid_axes` `=` $grid_axes attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
}

def DS_ParallelCopyOp : DS_ParallelRegionOp<"parallel_copy",
    "Identity whose gradient is summed over mesh axes: where a tensor-parallel region starts."> {
  let description = [{
    Megatron's `f` (copy_to_tensor_model_parallel_region): a replicated value enters a region
    whose ranks each compute a different part from it (column-parallel linears), so its
    gradient is the sum of the parts' gradients over `grid_axes` (`ds.parallel_sum`).
    `ds-autodiff` builds that gradient, then replaces the op by its input.
    ```mlir
    %x1 = ds.parallel_copy %x on @mesh grid_axes = [1] : tensor<4x16x32xf32>
    ```
    Upstream `shard` has no op whose forward and gradient are different collectives, which
    reverse-mode differentiation needs here.

    **Constraints:** `grid` names a `shard.grid`; `grid_axes` are distinct axes of it.
  }];
}

def DS_ParallelSumOp : DS_ParallelRegionOp<"parallel_sum",
    "Sum over mesh axes whose gradient is the identity: where a tensor-parallel region ends."> {
  let description = [{
    Megatron's `g` (reduce_from_tensor_model_parallel_region): each rank holds a partial sum
    (a row-parallel linear's output); the result is their sum, replicated. Its gradient is the
    replicated output gradient itself (`ds.parallel_copy`). `ds-autodiff` replaces the op by
    a `shard.all_reduce` once the gradient is built.
    ```mlir
    %y = ds.parallel_sum %partial on @mesh grid_axes = [1] : tensor<4x16x32xf32>
    ```
    **Constraints:** as `ds.parallel_copy`.
  }];
}

def DS_ParallelMaxOp : DS_ParallelRegionOp<"parallel_max",
    "Maximum over mesh axes, without a gradient: the shift of a vocabulary-parallel softmax."> {
  let description = [{
    Each rank holds the maxima of its part of the vocabulary; the result is the overall
    maximum, replicated. It only shifts a log-sum-exp (whose value and gradient do not depend
    on the shift), so it carries no gradient. `ds-autodiff` replaces it by a
    `shard.all_reduce` of kind max.
    ```mlir
    %m = ds.parallel_max %mloc on @mesh grid_axes = [1] : tensor<64xf32>
    ```
    **Constraints:** as `ds.parallel_copy`.
  }];
}

def DS_MeshCoordinateOp : DS_Op<"mesh_coordinate", [Pure]> {
  let summary = "This rank's index along one axis of a grid, as a scalar tensor.";
  let description = [{
    Where a rank's part of a split tensor starts (a vocabulary-parallel embedding's first
    row is the index times its rows). Upstream `shard.process_multi_index` gives `index`
    scalars; ds programs compute on tensors, which the runtime fills from its mesh.
    ```mlir
    %r = ds.mesh_coordinate on @mesh grid_axis = 1 : tensor<i64>
    ```
    **Constraints:** `grid` names a `shard.grid` and `grid_axis` is one of its axes.
  }];
  let arguments = (ins FlatSymbolRefAttr:$grid, I64Attr:$grid_axis);
  let results = (outs 0DTensorOf<[I64]>:$result);
  let assemblyFormat = "`on` $grid `grid_axis` `=` $grid_axis attr-dict `:` type($result)";
  let hasVerifier = 1;
}

include "ds/IR/DSTrainOps.td"
include "ds/IR/DSGenerateOps.td"

#endif // DS_OPS_TD
