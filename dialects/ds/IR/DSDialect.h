//===- DSDialect.h - the ds dialect and its attributes ---------------------===//
#ifndef DS_IR_DSDIALECT_H
#define DS_IR_DSDIALECT_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"

#include "ds/IR/DSDialect.h.inc"
#include "ds/IR/DSEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "ds/IR/DSAttrs.h.inc"

namespace mlir::ds {
/// Attaches ds's gradients to the upstream `shard` collectives that @forward may contain
/// (ShardGradients.cpp).
void registerShardGradients(DialectRegistry &registry);
/// The cost model (CostOpInterface, DSCost.cpp): attached to every ds op when the dialect
/// initializes; registerShardCosts adds the shard collectives'.
void attachCostModels(MLIRContext *ctx);
void registerShardCosts(DialectRegistry &registry);

/// Marks the inner ops of one fused computation (a decomposed op): ds-mixed-precision leaves
/// their f32 results unrounded, as the op they stand for computes in f32.
inline constexpr llvm::StringLiteral kFusedAttrName = "ds.fused";
/// Name of the module attribute that holds the device mesh (`#ds.mesh`).
inline constexpr llvm::StringLiteral kMeshAttrName = "ds.mesh";
/// Name of the function-argument attribute that holds the PyTorch input name.
inline constexpr llvm::StringLiteral kInputNameAttrName = "ds.input_name";
} // namespace mlir::ds

#endif // DS_IR_DSDIALECT_H
