//===- LowerToRuntime.cpp - ds-lower-to-runtime: a step as calls of the runtime ---===//
//
// A training step becomes an LLVM-dialect program that calls the runtime (dsrt.h) and that
// the driver runs: ds_init_slots, ds_micro_step, ds_optimizer_step and ds_metadata. Every ds
// tensor becomes a `dsrt_tensor *`. The pass plans the module first (MemoryPlan: every
// placement, wait and free, and the exact peaks), then converts each of its functions, in the
// order the runtime runs them, with one conversion pattern per op (RuntimeLowering.h): the
// patterns emit what the plan decided. What the driver needs to know of the program is its
// descriptor (ProgramDescriptor.cpp).
//
#include "ds/Transforms/Passes.h"

#include "RuntimeLowering.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSLOWERTORUNTIME
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::runtime;

namespace {
/// Every op of the plan's functions that no pattern lowers, named (a kernel the runtime lacks).
LogicalResult checkLowerable(const MemoryPlan &plan, const FrozenRewritePatternSet &patterns) {
  const auto &byName = patterns.getOpSpecificNativePatterns();
  for (const MemoryPlan::PlannedFunction &f : plan.functions())
    for (Operation &op : func::FuncOp(f.func).getBody().front())
      if (!byName.count(op.getName()))
        return op.emitError() << "ds-lower-to-runtime: no runtime kernel for '" << op.getName()
                              << "'";
  return success();
}

/// What conversion leaves behind: the casts of the functions' arguments and the null
/// handles of values with no tensor, now unused.
void eraseLeftovers(ModuleOp module) {
  SmallVector<Operation *> dead;
  module.walk([&](Operation *op) {
    if (isa<UnrealizedConversionCastOp, LLVM::ZeroOp>(op) && op->use_empty())
      dead.push_back(op);
  });
  for (Operation *op : dead)
    op->erase();
}

struct LowerToRuntimePass : mlir::ds::impl::DSLowerToRuntimeBase<LowerToRuntimePass> {
  using DSLowerToRuntimeBase::DSLowerToRuntimeBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    prepareForPlanning(module);
    markUnreadUnroutedRows(module);
    FailureOr<MemoryPlan> plan = MemoryPlan::compute(module);
    if (failed(plan))
      return signalPassFailure();
    RuntimeLowering lowering(module, *plan);

    TypeConverter types;
    types.addConversion([](Type t) { return t; });
    types.addConversion([&](RankedTensorType) { return lowering.ptrTy; });
    RewritePatternSet patterns(ctx);
    populateFunctionPatterns(types, patterns, lowering);
    populateStructurePatterns(types, patterns, lowering);
    populateMemoryPatterns(types, patterns, lowering);
    KernelPatterns kernels(types, patterns, lowering);
    populateKernelPatterns(kernels);
    FrozenRewritePatternSet frozen(std::move(patterns));
    if (failed(checkLowerable(*plan, frozen)))
      return signalPassFailure();

    OpBuilder b(ctx);
    emitInitSlots(lowering, b);
    // Each function in the runtime's order: its ops are illegal while it is converted.
    const FunctionPlan *current = nullptr;
    ConversionTarget target(*ctx);
    target.markUnknownOpDynamicallyLegal([&](Operation *op) {
      return !current || (op != func::FuncOp(current->owner).getOperation() &&
                          !current->ops.count(op));
    });
    ConversionConfig config;
    config.foldingMode = DialectConversionFoldingMode::Never; // the plan names every op
    for (const MemoryPlan::PlannedFunction &f : plan->functions()) {
      current = &plan->function(f.func);
      if (failed(applyPartialConversion(module, target, frozen, config)))
        return signalPassFailure();
    }
    current = nullptr;
    eraseLeftovers(module);
    if (plan->ppAxis >= 0)
      emitPipelineEntryPoints(lowering, b);
    emitProgramDescriptor(lowering, b);

    // The program is now the LLVM functions and their descriptor.
    for (Operation &op : llvm::make_early_inc_range(*module.getBody()))
      if (isa<func::FuncOp, ParameterOp, StateOp, FlatBufferOp, shard::GridOp>(op))
        op.erase();
    for (StringRef attr : {kRunAttrName, kMeshAttrName, kPipelineAttrName})
      module->removeAttr(attr);
  }
};
} // namespace
