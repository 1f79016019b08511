//===- StepCompiler.h - STEP.mlir to native code, shared by JIT and AOT --*- C++ -*-===//
#ifndef DS_PIPELINES_STEPCOMPILER_H
#define DS_PIPELINES_STEPCOMPILER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Target/TargetMachine.h"

#include <memory>
#include <string>

namespace mlir::ds {

/// The dialects and LLVM IR translations a lowered step needs.
void registerStepDialects(DialectRegistry &registry);

/// "" unless `module` was imported from an export without weights (ds.weight_free); then why
/// STEP.mlir (`stepPath`) has no weights of its own and what to give instead.
std::string weightFreeReason(ModuleOp module, llvm::StringRef stepPath);

/// Parses STEP.mlir and lowers it to calls of the runtime (LLVM dialect). Diagnostics go to the
/// context's handler; on failure returns null and sets `error` to a one-line cause.
OwningOpRef<ModuleOp> loadLoweredStep(llvm::StringRef path, MLIRContext &context,
                                      llvm::SourceMgr &sourceMgr, std::string &error);

/// The one target every step is compiled for, by ds-run's JIT and by ds-compile: the host's
/// CPU and features, codegen at O0 (a step is thousands of calls in one block, which O2 takes
/// seconds on; the work is in the runtime's kernels). `forObject` selects PIC and the small
/// code model, so that an object links into a PIE. A `cpu` name (ds-compile --cpu, e.g.
/// x86-64-v3) replaces the host's CPU and features, so that the code runs on other machines
/// of the host's architecture; an unknown name is an error that lists some known ones.
llvm::Expected<std::unique_ptr<llvm::TargetMachine>>
createStepTargetMachine(bool forObject, llvm::StringRef cpu = "");

} // namespace mlir::ds

#endif // DS_PIPELINES_STEPCOMPILER_H
