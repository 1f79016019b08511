//===- ShardGradients.cpp - gradients of the upstream shard collectives -------===//
//
// ds programs differentiate through the `shard` collectives that ds-sequence-parallel puts in
// @forward: an all-to-all's gradient is the all-to-all that sends every piece back (split and
// concatenation axes swapped); a rank's slice of a replicated value's is the gathered slices'
// gradients over the group's size (see AllSliceGradient). Attached to the upstream op as an external model, so the op
// stays upstream's.
//
#include "ds/IR/DSDialect.h"
#include "ds/IR/DSOps.h"

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectRegistry.h"

using namespace mlir;

namespace {
struct AllToAllGradient
    : public ds::GradientOpInterface::ExternalModel<AllToAllGradient, shard::AllToAllOp> {
  LogicalResult buildGradient(Operation *op, OpBuilder &b, ArrayRef<Value> dys,
                              ArrayRef<bool>, SmallVectorImpl<Value> &dxs) const {
    auto a = cast<shard::AllToAllOp>(op);
    dxs[0] = shard::AllToAllOp::create(b, a.getLoc(), a.getInput().getType(), a.getGridAttr(),
                                       a.getGridAxesAttr(), dys[0], a.getConcatAxisAttr(),
                                       a.getSplitAxisAttr());
    return success();
  }
};
/// The gradient of this rank's block of a replicated value: every rank's block gradient,
/// gathered, over the group's size. The ranks' copies of the replicated value's gradient are
/// then summed over the group (the optimizer sums parameter gradients over every axis that
/// holds replicas), which leaves each block's gradient once.
struct AllSliceGradient
    : public ds::GradientOpInterface::ExternalModel<AllSliceGradient, shard::AllSliceOp> {
  LogicalResult buildGradient(Operation *op, OpBuilder &b, ArrayRef<Value> dys,
                              ArrayRef<bool>, SmallVectorImpl<Value> &dxs) const {
    auto s = cast<shard::AllSliceOp>(op);
    auto grid = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(op, s.getGridAttr());
    auto t = dyn_cast<RankedTensorType>(s.getInput().getType());
    if (!grid || !t || !isa<FloatType>(t.getElementType()))
      return failure();
    int64_t n = 1;
    for (int16_t a : s.getGridAxes())
      n *= grid.getShape()[a];
    Location loc = s.getLoc();
    Value all = shard::AllGatherOp::create(b, loc, t, s.getGridAttr(), s.getGridAxesAttr(), dys[0],
                                           s.getSliceAxisAttr());
    auto scalar = RankedTensorType::get({}, t.getElementType());
    Value inv = ds::ConstantOp::create(
        b, loc, DenseElementsAttr::get(scalar, FloatAttr::get(t.getElementType(), 1.0 / n)));
    dxs[0] = ds::MulOp::create(b, loc, t, all, inv);
    return success();
  }
};
} // namespace

void mlir::ds::registerShardGradients(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, shard::ShardDialect *) {
    shard::AllToAllOp::attachInterface<AllToAllGradient>(*ctx);
    shard::AllSliceOp::attachInterface<AllSliceGradient>(*ctx);
  });
}
