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

#endif // DS_INTERFACES_TD
