//===- Widen16Bit.cpp - ds-widen-16bit: f32 arithmetic for 16-bit tensors --===//
#include "ds/Transforms/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSWIDEN16BIT
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {
bool isHalf(Type t) {
  auto rt = dyn_cast<RankedTensorType>(t);
  return rt && isa<FloatType>(rt.getElementType()) &&
         rt.getElementType().getIntOrFloatBitWidth() == 16;
}
RankedTensorType widened(Type t) {
  auto rt = cast<RankedTensorType>(t);
  return RankedTensorType::get(rt.getShape(), Float32Type::get(t.getContext()));
}

/// What the runtime does on 16-bit tensors as they are: storage, conversion, fills, element
/// moves and communication (runtime/src/core/half.h).
bool runsIn16Bit(Operation *op) {
  if (auto c = dyn_cast<ConstantOp>(op))
    return cast<DenseElementsAttr>(c.getValue()).isSplat();
  return isa<ConvertOp, GetParameterOp, AssignOp, ReshapeOp, TransposeOp, BroadcastToOp,
             SliceOp, InsertSliceOp, ConcatOp, EmbeddingOp, shard::AllReduceOp,
             shard::AllGatherOp, shard::ReduceScatterOp, shard::AllSliceOp>(op) ||
         op->getDialect() != op->getContext()->getLoadedDialect<DSDialect>() &&
             !isa<shard::ShardDialect>(op->getDialect());
}

struct Widen16BitPass : mlir::ds::impl::DSWiden16BitBase<Widen16BitPass> {
  void runOnOperation() override;
};
} // namespace

void Widen16BitPass::runOnOperation() {
  SmallVector<Operation *> todo;
  getOperation().walk([&](Operation *op) {
    if (runsIn16Bit(op))
      return;
    bool half = llvm::any_of(op->getOperandTypes(), isHalf) ||
                llvm::any_of(op->getResultTypes(), isHalf);
    if (half)
      todo.push_back(op);
  });
  for (Operation *op : todo) {
    OpBuilder b(op);
    Location loc = op->getLoc();
    if (auto c = dyn_cast<ConstantOp>(op)) { // non-splat 16-bit data: an f32 constant
      auto attr = cast<DenseElementsAttr>(c.getValue());
      SmallVector<float> values;
      for (APFloat v : attr.getValues<APFloat>())
        values.push_back(static_cast<float>(v.convertToDouble()));
      RankedTensorType wide = widened(c.getType());
      Value f = ConstantOp::create(b, loc, DenseElementsAttr::get(wide, ArrayRef<float>(values)));
      c.getResult().replaceAllUsesWith(ConvertOp::create(b, loc, c.getType(), f));
      c.erase();
      continue;
    }
    IRMapping map;
    for (Value v : op->getOperands())
      if (isHalf(v.getType()))
        map.map(v, ConvertOp::create(b, loc, widened(v.getType()), v).getResult());
    Operation *wide = b.clone(*op, map);
    for (auto [old, res] : llvm::zip(op->getResults(), wide->getResults())) {
      if (!isHalf(old.getType()))
        continue;
      res.setType(widened(old.getType()));
      b.setInsertionPointAfter(wide);
      old.replaceAllUsesWith(ConvertOp::create(b, loc, old.getType(), res).getResult());
    }
    for (auto [old, res] : llvm::zip(op->getResults(), wide->getResults()))
      if (!old.use_empty())
        old.replaceAllUsesWith(res);
    op->erase();
  }
}
