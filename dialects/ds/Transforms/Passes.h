//===- Passes.h - declarations of the ds passes ----------------------------===//
#ifndef DS_TRANSFORMS_PASSES_H
#define DS_TRANSFORMS_PASSES_H

#include "ds/IR/DSOps.h"
#include "ds/Transforms/DeepSpeedDefaults.h"
#include "ds/Transforms/EnumOption.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Pass/Pass.h"

namespace mlir::ds {
#define GEN_PASS_DECL
#include "ds/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

#endif // DS_TRANSFORMS_PASSES_H
