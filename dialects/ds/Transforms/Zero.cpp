//===- Zero.cpp - the ds-zero pass: data parallelism and ZeRO partitioning ---===//
//
// Stage 0 (plain data parallelism): every rank holds the whole model; the gradients that
// ds-autodiff accumulated (already scaled by 1 / (gas x dp)) are summed over the data-parallel
// grid at the start of @optimizer_step, as DeepSpeed's all-reduce at the accumulation boundary.
// The collectives are the upstream `shard` dialect's on a one-axis grid `@dp`.
//
#include "ds/Transforms/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSZERO
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {
struct ZeroPass : mlir::ds::impl::DSZeroBase<ZeroPass> {
  using DSZeroBase::DSZeroBase;
  void runOnOperation() override;
};
} // namespace

void ZeroPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (stage < 0 || stage > 3) {
    module.emitError() << "ds-zero: stage " << static_cast<int64_t>(stage) << " is not a ZeRO stage (0, 1, 2 or 3)";
    return signalPassFailure();
  }
  if (stage > 0) {
    module.emitError() << "ds-zero: stage " << static_cast<int64_t>(stage)
                       << " is not implemented yet; use stage 0 (data parallelism)";
    return signalPassFailure();
  }
  if (dataParallelSize < 1) {
    module.emitError() << "ds-zero: data-parallel-size must be >= 1";
    return signalPassFailure();
  }
  auto opt = module.lookupSymbol<func::FuncOp>("optimizer_step");
  if (!opt) {
    module.emitError() << "ds-zero: no @optimizer_step; run ds-optimizer first";
    return signalPassFailure();
  }
  if (dataParallelSize == 1)
    return; // one rank: nothing to communicate
  if (module.lookupSymbol("dp")) {
    module.emitError() << "ds-zero: the module already has a symbol @dp (run ds-zero once)";
    return signalPassFailure();
  }
  OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
  Location loc = module.getLoc();
  shard::GridOp::create(b, loc, "dp", ArrayRef<int64_t>{dataParallelSize});

  // All the all-reduces first, then the writes back: the channel runs them back to back.
  b.setInsertionPointToStart(&opt.getBody().front());
  SmallVector<std::pair<StateOp, Value>> reduced;
  for (auto state : module.getOps<StateOp>()) {
    if (state.getRole() != "grad")
      continue;
    auto type = cast<RankedTensorType>(state.getType());
    Value g = GetParameterOp::create(b, state.getLoc(), type,
                                     FlatSymbolRefAttr::get(state.getSymNameAttr()));
    Value r = shard::AllReduceOp::create(b, state.getLoc(), type, "dp", ArrayRef<int16_t>{0}, g,
                                         shard::ReductionKind::Sum);
    reduced.push_back({state, r});
  }
  for (auto [state, r] : reduced)
    AssignOp::create(b, state.getLoc(), FlatSymbolRefAttr::get(state.getSymNameAttr()), r);
}
