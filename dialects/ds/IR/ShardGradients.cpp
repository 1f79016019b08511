//===- ShardGradients.cpp - gradients of the upstream shard collectives -------===//
//
// ds programs differentiate through the `shard` collectives that ds-sequence-parallel puts in
// @forward: an all-to-all's gradient is the all-to-all that sends every piece back (split and
// concatenation axes swapped). Attached to the upstream op as an external model, so the op
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
} // namespace

void mlir::ds::registerShardGradients(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, shard::ShardDialect *) {
    shard::AllToAllOp::attachInterface<AllToAllGradient>(*ctx);
  });
}
