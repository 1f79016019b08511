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

/// isHalfKernel: an op of the runtime's unary, binary, cmp, where, softmax, softmax_grad,
/// layer_norm and layer_norm_grad kernels (one kernel call each). isHalfElementwise: one whose
/// floating-point operands and results all have one 16-bit type: every device runs those
/// kernels on 16-bit operands, each element widened to f32, computed and rounded once, as
/// PyTorch's 16-bit kernels compute (the same numbers as widening around the op, without the
/// f32 copies).
bool isHalfKernel(Operation *op) {
  return isa<NegOp, ExpOp, LogOp, SqrtOp, RsqrtOp, TanhOp, SigmoidOp, ReluOp, CosOp, SinOp, AddOp,
             SubOp, MulOp, DivOp, PowOp, MaximumOp, MinimumOp, GeluOp, GeluGradOp, CmpOp, WhereOp,
             SoftmaxOp, LogSoftmaxOp, SoftmaxGradOp, LayerNormOp, LayerNormGradOp>(op);
}
bool isHalfElementwise(Operation *op) {
  if (!isHalfKernel(op))
    return false;
  Type element;
  for (Type t : llvm::concat<Type>(op->getOperandTypes(), op->getResultTypes())) {
    auto rt = dyn_cast<RankedTensorType>(t);
    if (!rt)
      return false;
    Type e = rt.getElementType();
    if (!isa<FloatType>(e)) // where's condition, cmp's result
      continue;
    if (!isHalf(t) || (element && e != element))
      return false;
    element = e;
  }
  return static_cast<bool>(element);
}

/// What the runtime does on 16-bit tensors as they are: storage, conversion, fills, element
/// moves, communication (runtime/src/core/half.h), products and the elementwise kernels.
bool runsIn16Bit(Operation *op) {
  if (auto c = dyn_cast<ConstantOp>(op))
    return cast<DenseElementsAttr>(c.getValue()).isSplat();
  if (isHalfProduct(op) || isHalfElementwise(op))
    return true;
  if (isa<AttentionOp, AttentionGradOp>(op)) // 16-bit tensors, the log-sum-exp in f32
    return isHalf(op->getOperand(0).getType());
  if (isa<EmbeddingGradOp>(op)) // rows summed in 16 bits, as PyTorch's CPU backward sums them
    return isHalf(op->getResult(0).getType());
  return isa<ConvertOp, GetParameterOp, AssignOp, ReshapeOp, TransposeOp, BroadcastToOp,
             SliceOp, InsertSliceOp, ConcatOp, EmbeddingOp, shard::AllReduceOp,
             shard::AllGatherOp, shard::ReduceScatterOp, shard::AllSliceOp>(op) ||
         op->getDialect() != op->getContext()->getLoadedDialect<DSDialect>() &&
             !isa<shard::ShardDialect>(op->getDialect());
}

/// The element moves that are exact on any type: a product's operand or result may pass through
/// them on its way from a widening or to a rounding. Each moves its first operand (an
/// embedding's table: the token and position rows then come out of the 16-bit tables).
bool isMove(Operation *op) {
  return op && isa<ReshapeOp, TransposeOp, SliceOp, EmbeddingOp>(op);
}

/// `op` (a move, a product or an elementwise op) cloned after itself onto `inputs`, its
/// floating-point results of element type `element` (a comparison's i1 stays).
Operation *cloneAs(Operation *op, ValueRange inputs, Type element) {
  OpBuilder b(op->getContext());
  b.setInsertionPointAfter(op);
  IRMapping map;
  for (auto [wide, half] : llvm::zip(op->getOperands(), inputs))
    map.map(wide, half);
  Operation *half = b.clone(*op, map);
  for (auto [old, res] : llvm::zip(op->getResults(), half->getResults())) {
    auto rt = cast<RankedTensorType>(old.getType());
    if (isa<FloatType>(rt.getElementType()))
      res.setType(RankedTensorType::get(rt.getShape(), element));
  }
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

/// The 16-bit type that `v` widens to f32 (through element moves), or null: where
/// narrowSource finds a 16-bit value.
Type widenedFrom(Value v) {
  while (v && isMove(v.getDefiningOp()))
    v = v.getDefiningOp()->getOperand(0);
  auto c = v ? v.getDefiningOp<ConvertOp>() : ConvertOp();
  if (!c || !isHalf(c.getInput().getType()) ||
      !cast<RankedTensorType>(c.getType()).getElementType().isF32())
    return {};
  return cast<RankedTensorType>(c.getInput().getType()).getElementType();
}

/// The 16-bit type of the first rounding among `v`'s uses (through element moves), or null.
Type firstRounding(Value v) {
  for (Operation *user : v.getUsers()) {
    if (auto c = dyn_cast<ConvertOp>(user)) {
      if (isHalf(c.getType()))
        return cast<RankedTensorType>(c.getType()).getElementType();
    } else if (isMove(user)) {
      if (Type e = firstRounding(user->getResult(0)))
        return e;
    }
  }
  return {};
}

/// An f32 concat whose every use rounds it becomes the concat of its rounded parts (rounding
/// commutes with concatenation): attention's backward, whose q, k and v gradients meet in the
/// fused projection's dy, then has each product between roundings (narrowBetweenRoundings).
/// A part that widens a value of that type (through moves: narrowSource) is that value.
void narrowConcats(ModuleOp module) {
  SmallVector<ConcatOp> concats;
  module.walk([&](ConcatOp c) { concats.push_back(c); });
  DenseMap<Value, Value> made;
  for (ConcatOp c : concats) {
    if (!cast<RankedTensorType>(c.getType()).getElementType().isF32())
      continue;
    Type element = firstRounding(c.getResult());
    if (!element || !roundedUses(c.getResult(), element))
      continue;
    OpBuilder b(c);
    SmallVector<Value> parts;
    for (Value v : c->getOperands()) {
      if (widenedFrom(v) == element) {
        parts.push_back(narrowSource(v, made));
        continue;
      }
      auto t = cast<RankedTensorType>(v.getType());
      parts.push_back(
          ConvertOp::create(b, c.getLoc(), RankedTensorType::get(t.getShape(), element), v));
    }
    replaceRounded(c.getResult(), cloneAs(c, parts, element)->getResult(0));
    c.erase();
  }
}

/// The value of the splat f32 constant `v` as a splat of `element` when it is exact there (an
/// attention mask's -inf, a scale of 0.125), or null.
DenseElementsAttr exactHalfSplat(Value v, Type element) {
  auto c = v.getDefiningOp<ConstantOp>();
  auto attr = c ? dyn_cast<DenseElementsAttr>(c.getValue()) : DenseElementsAttr();
  if (!attr || !attr.isSplat() || !attr.getElementType().isF32())
    return {};
  APFloat narrow = attr.getSplatValue<APFloat>();
  bool lost = false;
  narrow.convert(cast<FloatType>(element).getFloatSemantics(), APFloat::rmNearestTiesToEven,
                 &lost);
  if (lost)
    return {};
  return DenseElementsAttr::get(RankedTensorType::get(attr.getType().getShape(), element),
                                narrow);
}

/// exactHalfSplat's value as a constant beside `v`'s.
Value exactHalfConstant(Value v, Type element) {
  OpBuilder b(v.getDefiningOp());
  return ConstantOp::create(b, v.getLoc(), exactHalfSplat(v, element));
}

/// Attention's log-sum-exp: f32 at every precision (a result of ds.attention, an operand of
/// ds.attention_grad), never a widening or a rounding.
bool isLse(Operation *op, Value v) {
  if (auto a = dyn_cast<AttentionOp>(op))
    return v == a.getLse();
  if (auto g = dyn_cast<AttentionGradOp>(op))
    return v == g.getLse();
  return false;
}

/// ds-mixed-precision leaves products and elementwise ops as f32 ops between roundings:
/// convert(16-bit -> f32) on every floating-point operand, the op, convert(f32 -> 16-bit) as
/// the only use of every floating-point result, with element moves (reshape, transpose,
/// slice: the backward's rows of dy, attention's heads) on either side. Each becomes the op on
/// the 16-bit values (computed in f32 and rounded once by every device: the same numbers,
/// without the f32 copies), the moves on 16-bit values. An f32 splat constant operand whose
/// value is exact in 16 bits (a mask's -inf, a scale) becomes a 16-bit one. A result used
/// unrounded (a weight gradient accumulated in f32) keeps the op in f32. Attention and its
/// gradient too, their f32 log-sum-exp aside: the kernels then hold 16-bit values where
/// PyTorch's 16-bit flash kernel does (runtime/src/cpu/attention.cpp). An embedding's
/// gradient too: its rows are then summed in 16 bits, each addition rounded, as PyTorch's CPU
/// embedding backward sums them (runtime/src/cpu/nn.cpp).
void narrowBetweenRoundings(ModuleOp module) {
  SmallVector<Operation *> ops;
  module.walk([&](Operation *op) {
    if (isa<MatmulOp, LinearOp, LinearGradWeightOp, AttentionOp, AttentionGradOp,
            EmbeddingGradOp>(op) ||
        isHalfKernel(op))
      ops.push_back(op);
  });
  DenseMap<Value, Value> made;
  SmallVector<Operation *> widenings;
  auto isFloatTensor = [](Value v) {
    auto rt = dyn_cast<RankedTensorType>(v.getType());
    return rt && isa<FloatType>(rt.getElementType());
  };
  for (Operation *op : ops) {
    // Every floating-point operand a widening or an exact constant, the widenings of one type.
    Type element;
    bool ok = true;
    for (Value v : op->getOperands()) {
      if (!isFloatTensor(v) || v.getDefiningOp<ConstantOp>() || isLse(op, v))
        continue;
      Type e = widenedFrom(v);
      ok = ok && e && (!element || e == element);
      element = e;
    }
    for (Value r : op->getResults())
      ok = ok && element && (!isFloatTensor(r) || isLse(op, r) || roundedUses(r, element));
    // A constant that 16 bits cannot hold keeps the op in f32: checked before anything is built.
    for (Value v : op->getOperands())
      if (ok && isFloatTensor(v) && v.getDefiningOp<ConstantOp>())
        ok = static_cast<bool>(exactHalfSplat(v, element));
    if (!ok)
      continue;
    SmallVector<Value> narrow;
    for (Value v : op->getOperands()) {
      if (!isFloatTensor(v) || isLse(op, v))
        narrow.push_back(v);
      else if (v.getDefiningOp<ConstantOp>())
        narrow.push_back(exactHalfConstant(v, element));
      else
        narrow.push_back(narrowSource(v, made));
      assert(narrow.back() && "widenedFrom and narrowSource follow the same moves");
    }
    for (Value v : op->getOperands())
      if (isFloatTensor(v) && !isLse(op, v))
        widenings.push_back(v.getDefiningOp());
    Operation *half = cloneAs(op, narrow, element);
    for (auto [old, res] : llvm::zip(op->getResults(), half->getResults())) {
      if (isLse(op, old))
        res.setType(old.getType());
      if (isFloatTensor(old) && !isLse(op, old))
        replaceRounded(old, res);
      else
        old.replaceAllUsesWith(res);
    }
    op->erase();
  }
  // The f32 widenings, moves and constants that only the narrowed ops read (each once: two
  // ops may share one).
  DenseSet<Operation *> erased;
  while (!widenings.empty()) {
    Operation *op = widenings.pop_back_val();
    if (!op || erased.contains(op) || !op->use_empty() ||
        !(isMove(op) || isa<ConvertOp, ConstantOp>(op)))
      continue;
    Value input = op->getNumOperands() ? op->getOperand(0) : Value();
    erased.insert(op);
    op->erase();
    if (Operation *def = input ? input.getDefiningOp() : nullptr)
      widenings.push_back(def);
  }
}

/// A rounding of a widening back to the same 16-bit type is the 16-bit value itself (both
/// conversions exact): what widening one op leaves next to a neighbour that reads 16 bits
/// (layer norm's dx on its way into the residual sum: two passes over the activations each).
void foldRoundTrips(ModuleOp module) {
  SmallVector<ConvertOp> converts;
  module.walk([&](ConvertOp c) { converts.push_back(c); });
  for (ConvertOp c : converts) {
    auto widening = c.getInput().getDefiningOp<ConvertOp>();
    if (!widening || !isHalf(c.getType()) || widening.getInput().getType() != c.getType() ||
        !cast<RankedTensorType>(widening.getType()).getElementType().isF32())
      continue;
    c.replaceAllUsesWith(widening.getInput());
    c.erase();
    if (widening->use_empty())
      widening.erase();
  }
}

struct Widen16BitPass : mlir::ds::impl::DSWiden16BitBase<Widen16BitPass> {
  void runOnOperation() override;
};
} // namespace

void Widen16BitPass::runOnOperation() {
  narrowConcats(getOperation());
  narrowBetweenRoundings(getOperation());
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
  foldRoundTrips(getOperation());
}
