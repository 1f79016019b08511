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

/// The element moves that are exact on any type: a product's operand or result may pass through
/// them on its way from a widening or to a rounding.
bool isMove(Operation *op) { return op && isa<ReshapeOp, TransposeOp, SliceOp>(op); }

/// `op` (a move or a product) cloned after itself onto `inputs`, its results of element type
/// `element`.
Operation *cloneAs(Operation *op, ValueRange inputs, Type element) {
  OpBuilder b(op->getContext());
  b.setInsertionPointAfter(op);
  IRMapping map;
  for (auto [wide, half] : llvm::zip(op->getOperands(), inputs))
    map.map(wide, half);
  Operation *half = b.clone(*op, map);
  for (auto [old, res] : llvm::zip(op->getResults(), half->getResults()))
    res.setType(RankedTensorType::get(cast<RankedTensorType>(old.getType()).getShape(),
                                      element));
  return half;
}

/// The 16-bit value whose widening `v` is, through element moves (which are then rebuilt on
/// the 16-bit value, once per value: `made`), or null.
Value narrowSource(Value v, DenseMap<Value, Value> &made) {
  if (!v)
    return {};
  if (Value known = made.lookup(v))
    return known;
  Operation *def = v.getDefiningOp();
  if (auto c = dyn_cast_or_null<ConvertOp>(def)) {
    if (!isHalf(c.getInput().getType()) ||
        !cast<RankedTensorType>(c.getType()).getElementType().isF32())
      return {};
    return c.getInput();
  }
  if (!isMove(def))
    return {};
  Value half = narrowSource(def->getOperand(0), made);
  if (!half)
    return {};
  Value moved =
      cloneAs(def, half, cast<RankedTensorType>(half.getType()).getElementType())->getResult(0);
  made[v] = moved;
  return moved;
}

/// Whether every use of `v` rounds it to `element`, directly or through element moves (an
/// unused result, as a bias gradient nothing reads, rounds trivially).
bool roundedUses(Value v, Type element) {
  for (Operation *user : v.getUsers()) {
    if (auto c = dyn_cast<ConvertOp>(user)) {
      if (cast<RankedTensorType>(c.getType()).getElementType() != element)
        return false;
    } else if (!isMove(user) || !roundedUses(user->getResult(0), element)) {
      return false;
    }
  }
  return true;
}

/// Replaces the roundings of `wide` (roundedUses) by `half`, moving it as the moves did.
void replaceRounded(Value wide, Value half) {
  for (Operation *user : llvm::make_early_inc_range(wide.getUsers())) {
    if (isMove(user))
      replaceRounded(user->getResult(0),
                     cloneAs(user, half, cast<RankedTensorType>(half.getType()).getElementType())
                         ->getResult(0));
    else
      user->getResult(0).replaceAllUsesWith(half);
    user->erase();
  }
}

/// ds-mixed-precision's products are f32 ops between roundings: convert(16-bit -> f32) on
/// every operand, the product, convert(f32 -> 16-bit) as the only use of every result, with
/// element moves (reshape, transpose, slice: the backward's rows of dy, attention's heads) on
/// either side. Each becomes the product on the 16-bit values (accumulated in f32 and rounded
/// once by every device: the same numbers, without the f32 copies), the moves on 16-bit
/// values. A result used unrounded (a weight gradient accumulated in f32) keeps the product in
/// f32.
void narrowProducts(ModuleOp module) {
  SmallVector<Operation *> products;
  module.walk([&](Operation *op) {
    if (isa<MatmulOp, LinearOp, LinearGradWeightOp>(op))
      products.push_back(op);
  });
  DenseMap<Value, Value> made;
  SmallVector<Operation *> widenings;
  for (Operation *op : products) {
    Type element;
    bool ok = true;
    for (Value v : op->getOperands()) { // every operand a widening, all of one type
      Value src = v;
      while (src && isMove(src.getDefiningOp()))
        src = src.getDefiningOp()->getOperand(0);
      auto c = src ? src.getDefiningOp<ConvertOp>() : ConvertOp();
      Type e = c && isHalf(c.getInput().getType())
                   ? cast<RankedTensorType>(c.getInput().getType()).getElementType()
                   : Type();
      ok = ok && e && (!element || e == element);
      element = e;
    }
    for (Value r : op->getResults())
      ok = ok && element && roundedUses(r, element);
    if (!ok)
      continue;
    SmallVector<Value> narrow;
    for (Value v : op->getOperands()) {
      narrow.push_back(narrowSource(v, made));
      widenings.push_back(v.getDefiningOp());
    }
    Operation *half = cloneAs(op, narrow, element);
    for (auto [old, res] : llvm::zip(op->getResults(), half->getResults()))
      replaceRounded(old, res);
    op->erase();
  }
  // The f32 widenings and moves that only the narrowed products read (each once: two
  // products may share one).
  DenseSet<Operation *> erased;
  while (!widenings.empty()) {
    Operation *op = widenings.pop_back_val();
    if (!op || erased.contains(op) || !op->use_empty() || !(isMove(op) || isa<ConvertOp>(op)))
      continue;
    Value input = op->getOperand(0);
    erased.insert(op);
    op->erase();
    if (Operation *def = input.getDefiningOp())
      widenings.push_back(def);
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
