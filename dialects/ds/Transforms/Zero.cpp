//===- Zero.cpp - the ds-zero pass: data parallelism and ZeRO partitioning ---===//
//
// Runs between ds-autodiff and ds-optimizer. Declares the data-parallel grid `@dp` (upstream
// `shard` dialect) and records the stage in the module (`ds.zero_stage`); ds-optimizer then
// emits the update with the communication that the stage needs. For stages 1-3 it lays the
// trainable parameters out in one flat buffer, padded once so that it splits into equal
// shards (as DeepSpeed's flat partitions), and (stage 1) the gradients in another.
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
/// Shards are whole multiples of 16 elements (64 bytes of f32, the arena's alignment).
constexpr int64_t kShardAlignment = 16;

struct ZeroPass : mlir::ds::impl::DSZeroBase<ZeroPass> {
  using DSZeroBase::DSZeroBase;
  void runOnOperation() override;
};
} // namespace

void ZeroPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (stage < 0 || stage > 3) {
    module.emitError() << "ds-zero: stage " << static_cast<int64_t>(stage)
                       << " is not a ZeRO stage (0, 1, 2 or 3)";
    return signalPassFailure();
  }
  if (stage > 1) {
    module.emitError() << "ds-zero: stage " << static_cast<int64_t>(stage)
                       << " is not implemented yet; use stage 0 or 1";
    return signalPassFailure();
  }
  if (dataParallelSize < 1) {
    module.emitError() << "ds-zero: data-parallel-size must be >= 1";
    return signalPassFailure();
  }
  if (module.lookupSymbol("optimizer_step")) {
    module.emitError() << "ds-zero: the module already has an @optimizer_step; run ds-zero "
                          "before ds-optimizer";
    return signalPassFailure();
  }
  if (dataParallelSize == 1)
    return; // one rank: nothing to partition or communicate
  if (module.lookupSymbol("dp")) {
    module.emitError() << "ds-zero: the module already has a symbol @dp (run ds-zero once)";
    return signalPassFailure();
  }
  OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
  Location loc = module.getLoc();
  shard::GridOp::create(b, loc, "dp", ArrayRef<int64_t>{dataParallelSize});
  module->setAttr("ds.zero_stage", b.getI64IntegerAttr(stage));
  if (stage == 0)
    return;

  // The flat layout: trainable parameters in module order, and their gradients likewise.
  SmallVector<Attribute> params, grads;
  int64_t total = 0;
  Type elem;
  for (auto state : module.getOps<StateOp>()) {
    if (state.getRole() != "grad")
      continue;
    auto param = module.lookupSymbol<ParameterOp>(state.getOfAttr());
    RankedTensorType t = param.getTensorType();
    if (!t.getElementType().isF32()) {
      param.emitError() << "ds-zero: stage " << static_cast<int64_t>(stage)
                        << " partitions f32 parameters only; '" << param.getSymName() << "' is "
                        << t.getElementType();
      return signalPassFailure();
    }
    elem = t.getElementType();
    params.push_back(FlatSymbolRefAttr::get(param.getSymNameAttr()));
    grads.push_back(FlatSymbolRefAttr::get(state.getSymNameAttr()));
    total += t.getNumElements();
  }
  if (params.empty()) {
    module.emitError() << "ds-zero: no gradient states; run ds-autodiff first";
    return signalPassFailure();
  }
  int64_t unit = dataParallelSize * kShardAlignment;
  int64_t padded = (total + unit - 1) / unit * unit;
  auto flatType = RankedTensorType::get({padded}, elem);
  b.setInsertionPointToEnd(module.getBody());
  for (Operation &op : *module.getBody())
    if (!isa<ParameterOp, StateOp, shard::GridOp>(op)) {
      b.setInsertionPoint(&op);
      break;
    }
  FlatBufferOp::create(b, loc, b.getStringAttr("zero.params"), b.getStringAttr("params"),
                       b.getArrayAttr(params), TypeAttr::get(flatType));
  FlatBufferOp::create(b, loc, b.getStringAttr("zero.grads"), b.getStringAttr("grads"),
                       b.getArrayAttr(grads), TypeAttr::get(flatType));
}
