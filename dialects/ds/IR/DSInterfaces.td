//===- DSInterfaces.td - op interfaces of the ds dialect ------------------===//
#ifndef DS_INTERFACES_TD
#define DS_INTERFACES_TD

include "mlir/IR/OpBase.td"

def DS_GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let cppNamespace = "::mlir::ds";
  let description = [{
    Reverse-mode differentiation of one op: given the gradients of its results (null where no
    gradient flows), build ops computing the gradients of its operands. `ds-autodiff` calls it
    for every op on the path from a trainable parameter to the loss. Forward values that a
    gradient needs (saved activations) are used directly, so they stay explicit SSA values that
    later passes (recompute, offload) can move.
  }];
  let methods = [
    InterfaceMethod<[{
        Builds the operand gradients at the builder's insertion point. `resultGrads` has one
        entry per result (null: no gradient). Fills `operandGrads` with one entry per operand
        (null: not differentiable or not needed); `needed[i]` says whether operand i needs one.
      }],
      "::llvm::LogicalResult", "buildGradient",
      (ins "::mlir::OpBuilder &":$builder, "::llvm::ArrayRef<::mlir::Value>":$resultGrads,
           "::llvm::ArrayRef<bool>":$needed,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>,
  ];
}

def DS_CostOpInterface : OpInterface<"CostOpInterface"> {
  let cppNamespace = "::mlir::ds";
  let description = [{
    The work of one execution of an op, for the compiler's cost model (`ds-opt
    --flops-report`; the pipeline split's balance): its floating-point operations, counted as
    PyTorch's `FlopCounterMode` and DeepSpeed's flops profiler count them (a multiply-add is 2),
    of which those of matrix products (matmul, linear, convolution and their gradients: what
    `FlopCounterMode` counts), and the bytes it reads and writes (every tensor operand and
    result once). Elementwise functions count one operation per element whatever the
    function; normalizations, softmax, cross-entropy and the optimizer's update count the
    operations of their usual formulas. Views (reshape, transpose, slices) count nothing.
    Attached to every ds op and to the shard collectives (bytes only) by the dialect.
  }];
  let methods = [
    InterfaceMethod<"Floating-point operations of one execution.", "int64_t", "getFlops">,
    InterfaceMethod<"Of those, the matrix products'.", "int64_t", "getMatmulFlops", (ins),
      [{}], [{ return 0; }]>,
    InterfaceMethod<"Bytes read and written (operands and results once each; 0 for views).",
      "int64_t", "getMemoryBytes">,
  ];
}

#endif // DS_INTERFACES_TD
