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

/// A product whose operands and results all have one 16-bit type: every device runs it in 16
/// bits with f32 accumulation (the CPU on its bf16 units through oneDNN where it has them),
/// rounding once as PyTorch's 16-bit matmul and linear do.
bool isHalfProduct(Operation *op) {
  if (!isa<MatmulOp, LinearOp, LinearGradWeightOp>(op))
    return false;
  Type element;
  for (Type t : llvm::concat<Type>(op->getOperandTypes(), op->getResultTypes())) {
    if (!isHalf(t))
      return false;
    Type e = cast<RankedTensorType>(t).getElementType();
    if (element && e != element)
      return false;
    element = e;
  }
  return true;
}

/// What the runtime does on 16-bit tensors as they are: storage, conversion, fills, element
/// moves, communication (runtime/src/core/half.h) and products.
bool runsIn16Bit(Operation *op) {
  if (auto c = dyn_cast<ConstantOp>(op))
    return cast<DenseElementsAttr>(c.getValue()).isSplat();
  if (isHalfProduct(op))
    return true;
  return isa<ConvertOp, GetParameterOp, AssignOp, ReshapeOp, TransposeOp, BroadcastToOp,
             SliceOp, InsertSliceOp, ConcatOp, EmbeddingOp, shard::AllReduceOp,
             shard::AllGatherOp, shard::ReduceScatterOp, shard::AllSliceOp>(op) ||
         op->getDialect() != op->getContext()->getLoadedDialect<DSDialect>() &&
             !isa<shard::ShardDialect>(op->getDialect());
}

/// The 16-bit value that `v` widens (v = ds.convert of a 16-bit tensor to f32), or null.
Value narrowSource(Value v) {
  auto c = v ? v.getDefiningOp<ConvertOp>() : ConvertOp();
  if (!c || !isHalf(c.getInput().getType()) ||
      !cast<RankedTensorType>(c.getType()).getElementType().isF32())
    return {};
  return c.getInput();
}

/// ds-mixed-precision's products are f32 ops between roundings: convert(16-bit -> f32) on
/// every operand, the product, convert(f32 -> 16-bit) as the only use of every result. Each
/// becomes the product on the 16-bit values (accumulated in f32 and rounded once by every
/// device: the same numbers, without the f32 copies). A result used unrounded (a weight
/// gradient accumulated in f32) keeps the product in f32.
void narrowProducts(ModuleOp module) {
  SmallVector<Operation *> products;
  module.walk([&](Operation *op) {
    if (isa<MatmulOp, LinearOp, LinearGradWeightOp>(op))
      products.push_back(op);
  });
  for (Operation *op : products) {
    Type element;
    SmallVector<Value> narrow;
    bool ok = true;
    for (Value v : op->getOperands()) {
      Value src = narrowSource(v);
      Type e = src ? cast<RankedTensorType>(src.getType()).getElementType() : Type();
      ok = ok && src && (!element || e == element);
      element = e;
      narrow.push_back(src);
    }
    for (Value r : op->getResults())
      for (Operation *user : r.getUsers()) {
        auto c = dyn_cast<ConvertOp>(user);
        ok = ok && c && cast<RankedTensorType>(c.getType()).getElementType() == element;
      }
    if (!ok || !element)
      continue;
    OpBuilder b(op);
    IRMapping map;
    for (auto [wide, half] : llvm::zip(op->getOperands(), narrow))
      map.map(wide, half);
    Operation *half = b.clone(*op, map);
    for (auto [old, res] : llvm::zip(op->getResults(), half->getResults())) {
      res.setType(RankedTensorType::get(cast<RankedTensorType>(old.getType()).getShape(),
                                        element));
      for (Operation *user : llvm::make_early_inc_range(old.getUsers())) {
        user->getResult(0).replaceAllUsesWith(res);
        user->erase();
      }
    }
    op->erase();
  }
}

struct Widen16BitPass : mlir::ds::impl::DSWiden16BitBase<Widen16BitPass> {
  void runOnOperation() override;
};
} // namespace

void Widen16BitPass::runOnOperation() {
  narrowProducts(getOperation());
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
