//===- InitAll.cpp - registration of dialects and passes -------------------===//
#include "ds/InitAll.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "ds/IR/DSDialect.h"
#include "ds/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Transforms/Passes.h"

void mlir::ds::registerAllDialects(DialectRegistry &registry) {
  registry.insert<DSDialect, func::FuncDialect, LLVM::LLVMDialect, shard::ShardDialect,
                  scf::SCFDialect, arith::ArithDialect>();
  registerShardGradients(registry);
  registerShardCosts(registry);
}

void mlir::ds::registerAllPasses() {
  registerDSPasses();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
}
