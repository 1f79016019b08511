//===- Autodiff.cpp - the ds-autodiff pass: reverse-mode AD of the forward --===//
#include "ds/Transforms/Passes.h"

#include "Mesh.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/ScopeExit.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSAUTODIFF
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {
RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// The name of the gradient state of parameter `name`.
std::string gradName(StringRef name) {
  return (name + "@" + stringifySlotRole(SlotRole::grad)).str();
}

struct AutodiffPass : mlir::ds::impl::DSAutodiffBase<AutodiffPass> {
  using DSAutodiffBase::DSAutodiffBase;
  void runOnOperation() override;
};

/// Whether `v` is a splat zero constant.
bool isZeroSplat(Value v) {
  auto c = v.getDefiningOp<ConstantOp>();
  auto attr = c ? dyn_cast<DenseElementsAttr>(c.getValue()) : DenseElementsAttr();
  if (!attr || !attr.isSplat())
    return false;
  if (isa<FloatType>(attr.getElementType()))
    return attr.getSplatValue<APFloat>().isZero();
  return attr.getSplatValue<APInt>().isZero();
}

/// `acc` + `g` where both are insert_slices along one dim of disjoint step-1 ranges, `g`'s
/// into zeros and `acc`'s into zeros or (recursively) such a merge: `g`'s source inserted
/// into `acc`. Null when the pattern does not apply.
Value mergeDisjointSlices(OpBuilder &b, Location loc, Value acc, Value g) {
  auto gi = g.getDefiningOp<InsertSliceOp>();
  if (!gi || !isZeroSplat(gi.getDest()) || gi.getStep() != 1)
    return Value();
  int64_t gStart = gi.getStart(), gEnd = gStart + typeOf(gi.getSource()).getShape()[gi.getDim()];
  // Walk acc's chain of inserts down to its zero buffer, checking disjointness on the way.
  Value cur = acc;
  while (auto ai = cur.getDefiningOp<InsertSliceOp>()) {
    if (ai.getDim() != gi.getDim() || ai.getStep() != 1)
      return Value();
    int64_t aStart = ai.getStart(), aEnd = aStart + typeOf(ai.getSource()).getShape()[ai.getDim()];
    if (aStart < gEnd && gStart < aEnd)
      return Value();
    cur = ai.getDest();
  }
  if (cur == acc || !isZeroSplat(cur))
    return Value();
  return InsertSliceOp::create(b, loc, typeOf(acc), gi.getSource(), acc, gi.getDimAttr(),
                               gi.getStartAttr(), gi.getStepAttr());
}

/// In a pipeline (ds-pipeline-partition's ds.stage), `op`, made right before the backward op
/// `first`, joins `first`'s phase: the backward of its chunk, not the forward of the value it
/// reads (where ds-pipeline would make it, and keep the f32 copy through the schedule).
void joinPhaseOf(Operation *op, Operation *first) {
  for (StringRef name : {kStageAttrName, kBackwardAttrName})
    if (Attribute a = first->getAttr(name))
      op->setAttr(name, a);
}

/// A widening ds.convert (16-bit float to f32) of the forward that the backward reads is
/// recomputed just before its first backward use, so that the 16-bit value is what lives
/// across the loss (half the bytes). The copy is marked `rematerialized` so that CSE keeps it.
void rematerializeWidenings(ArrayRef<Operation *> forwardOps) {
  llvm::DenseSet<Operation *> forward(forwardOps.begin(), forwardOps.end());
  auto isHalf = [](Value v) {
    Type e = typeOf(v).getElementType();
    return isa<FloatType>(e) && e.getIntOrFloatBitWidth() == 16;
  };
  // A 16-bit model's f32 result that the forward rounds (ds-mixed-precision): the backward
  // reads the rounded value, as PyTorch's autograd saves a 16-bit model's 16-bit outputs.
  for (Operation *op : forwardOps)
    for (Value r : op->getResults()) {
      auto t = dyn_cast<RankedTensorType>(r.getType());
      if (!t || !t.getElementType().isF32())
        continue;
      // Only ds-mixed-precision's pattern: the narrowing is r's one forward user, so every
      // forward reader sees the rounded value too. (A model's own r.to(bf16), beside other
      // uses of r or marked ds.model_cast, keeps r.)
      ConvertOp narrowing;
      Operation *first = nullptr;
      int forwardUsers = 0;
      for (Operation *user : r.getUsers()) {
        if (forward.contains(user)) {
          ++forwardUsers;
          if (auto c = dyn_cast<ConvertOp>(user); c && isHalf(c.getResult()))
            narrowing = c;
        } else if (!first || user->isBeforeInBlock(first)) {
          first = user;
        }
      }
      if (!narrowing || narrowing->hasAttr(kModelCastAttrName) || forwardUsers != 1 || !first)
        continue;
      OpBuilder b(first);
      auto widen = ConvertOp::create(b, op->getLoc(), t, narrowing.getResult());
      widen->setAttr("rematerialized", b.getUnitAttr());
      joinPhaseOf(widen, first);
      r.replaceUsesWithIf(widen, [&](OpOperand &use) {
        return !forward.contains(use.getOwner()) && use.getOwner() != widen;
      });
    }
  // Widenings, and reshapes, transposes, slices and broadcasts of them (element moves), that
  // the backward reads: each gets its own copy of the chain just before its first backward
  // use, so that only the 16-bit value lives across the loss.
  llvm::DenseSet<Value> widened;
  for (Operation *op : forwardOps) {
    if (auto c = dyn_cast<ConvertOp>(op)) {
      if (!typeOf(c.getResult()).getElementType().isF32() || !isHalf(c.getInput()))
        continue;
    } else if (isa<ReshapeOp, TransposeOp, SliceOp, BroadcastToOp>(op)) {
      if (!widened.contains(op->getOperand(0)))
        continue;
    } else {
      continue;
    }
    Value v = op->getResult(0);
    widened.insert(v);
    Operation *first = nullptr;
    for (Operation *user : v.getUsers())
      if (!forward.contains(user) && (!first || user->isBeforeInBlock(first)))
        first = user;
    if (!first)
      continue;
    OpBuilder b(first);
    std::function<Value(Value)> copy = [&](Value x) -> Value {
      Operation *def = x.getDefiningOp();
      if (!def || !widened.contains(x))
        return x;
      IRMapping map;
      for (Value in : def->getOperands())
        map.map(in, copy(in));
      Operation *c = b.clone(*def, map);
      if (isa<ConvertOp>(c))
        c->setAttr("rematerialized", b.getUnitAttr());
      joinPhaseOf(c, first);
      return c->getResult(0);
    };
    Value again = copy(v);
    v.replaceUsesWithIf(again, [&](OpOperand &use) {
      return !forward.contains(use.getOwner()) && use.getOwner() != again.getDefiningOp();
    });
  }
}

/// ds.dropout(x) -> x * ds.dropout_mask, so the backward multiplies by the same mask.
void expandDropout(func::FuncOp func) {
  func.walk([](DropoutOp op) {
    OpBuilder b(op);
    Value mask = DropoutMaskOp::create(b, op.getLoc(), op.getType(), op.getPAttr());
    Value y = MulOp::create(b, op.getLoc(), op.getType(), op.getInput(), mask);
    op.getResult().replaceAllUsesWith(y);
    op.erase();
  });
}
/// The ends of tensor-parallel regions, forward and backward: parallel_copy is the identity,
/// parallel_sum and parallel_max all-reduces over their grid axes (the gradients are built).
void lowerParallelRegionEnds(func::FuncOp func) {
  func.walk([&](Operation *op) {
    if (auto copy = dyn_cast<ParallelCopyOp>(op)) {
      copy.getResult().replaceAllUsesWith(copy.getInput());
      copy.erase();
    } else if (isa<ParallelSumOp, ParallelMaxOp>(op)) {
      OpBuilder ob(op);
      auto grid = op->getAttrOfType<FlatSymbolRefAttr>("grid");
      auto axes = op->getAttrOfType<DenseI16ArrayAttr>("grid_axes");
      Value r = shard::AllReduceOp::create(
          ob, op->getLoc(), op->getResult(0).getType(), grid.getValue(), axes.asArrayRef(),
          op->getOperand(0),
          isa<ParallelMaxOp>(op) ? shard::ReductionKind::Max : shard::ReductionKind::Sum);
      op->getResult(0).replaceAllUsesWith(r);
      op->erase();
    }
  });
}

/// A pipeline's chunk of an op (ds-pipeline-partition), or -1.
int64_t chunkOf(Operation *op) {
  auto a = op->getAttrOfType<IntegerAttr>(kStageAttrName);
  return a ? a.getInt() : -1;
}

/// ds-autodiff on one module: @forward's backward by a reverse sweep, into @micro_step with
/// the gradient states it accumulates into.
class Differentiator {
public:
  Differentiator(ModuleOp module, int64_t gas, int64_t dataParallelSize)
      : module(module), gas(gas), dataParallelSize(dataParallelSize), b(module.getContext()) {}
  LogicalResult build() {
    if (failed(check()) || failed(findActive()))
      return failure();
    b.setInsertionPoint(ret);
    seedLoss();
    if (failed(sweep()))
      return failure();
    rematerializeWidenings(forwardOps);
    // The backward is built: what stopped the gradient is its input again.
    func.walk([](StopGradientOp s) {
      s.getResult().replaceAllUsesWith(s.getInput());
      s.erase();
    });
    declareGradientStates();
    func.setSymName(kMicroStepName);
    lowerParallelRegionEnds(func);
    return success();
  }

private:
  /// @forward returns a float scalar; the options and the mesh agree.
  LogicalResult check();
  /// Activity: values that depend on a trainable parameter.
  LogicalResult findActive();
  /// The loss's gradient: 1 / (gas x dp), times fp16's loss scale.
  void seedLoss();
  /// The reverse sweep, inserting the backward before the return.
  LogicalResult sweep();
  /// Gradient states, accumulated across micro-batches.
  void declareGradientStates();
  void accumulate(Value v, Value g, Location loc);
  /// Marks the ops after `after` as chunk `chunk`'s backward (a pipeline's chunks).
  void markBackward(Operation *after, int64_t chunk);

  ModuleOp module;
  const int64_t gas, dataParallelSize;
  OpBuilder b;
  func::FuncOp func;
  int64_t dataParallelRanks = 1;
  Block *body = nullptr;
  Operation *ret = nullptr;
  Value loss;
  llvm::DenseSet<Value> active;
  llvm::DenseMap<Value, Value> grads;
  llvm::MapVector<std::pair<StringAttr, int64_t>, Value> paramGrads;
  SmallVector<Operation *> forwardOps;
};

} // namespace

void AutodiffPass::runOnOperation() {
  if (failed(Differentiator(getOperation(), gradientAccumulationSteps, dataParallelSize)
                 .build()))
    signalPassFailure();
}

LogicalResult Differentiator::check() {
  func = module.lookupSymbol<func::FuncOp>(kForwardName);
  if (!func) {
    module.emitError() << "ds-autodiff needs a func.func @forward (import a model with ds-opt "
                          "MODEL.pt first)";
    return failure();
  }
  auto lossTy = func.getNumResults() == 1
                    ? dyn_cast<RankedTensorType>(func.getResultTypes()[0])
                    : RankedTensorType();
  if (!lossTy || lossTy.getRank() != 0 || !isa<FloatType>(lossTy.getElementType())) {
    func.emitError() << "ds-autodiff needs @forward to return one float scalar (the loss)";
    return failure();
  }
  if (gas < 1 || dataParallelSize < 1) {
    module.emitError() << "gradient-accumulation-steps and data-parallel-size must be >= 1";
    return failure();
  }
  // The mesh (when the module has one) decides how many data-parallel ranks average.
  if (failed(ensureDataParallelMesh(module, dataParallelSize, "ds-autodiff")))
    return failure();
  MeshAttr mesh = getMesh(module);
  dataParallelRanks = mlir::ds::dataParallelRanks(mesh);
  expandDropout(func);
  body = &func.getBody().front();
  ret = body->getTerminator();
  loss = ret->getOperand(0);
  return success();
}

LogicalResult Differentiator::findActive() {
  // Activity: values that depend on a trainable parameter.
  for (Operation &op : body->without_terminator()) {
    bool isActive = false;
    if (auto get = dyn_cast<GetParameterOp>(op)) {
      auto param = module.lookupSymbol<ParameterOp>(get.getNameAttr());
      isActive = param && param.getTrainable();
    } else if (!isa<StopGradientOp>(op)) {
      for (Value v : op.getOperands())
        isActive |= active.contains(v);
    }
    if (!isActive)
      continue;
    for (Value r : op.getResults())
      if (isa<FloatType>(typeOf(r).getElementType()))
        active.insert(r);
  }
  if (!active.contains(loss)) {
    func.emitError() << "the loss does not depend on any trainable parameter; nothing to train";
    return failure();
  }
  return success();
}

void Differentiator::accumulate(Value v, Value g, Location loc) {
  auto it = grads.find(v);
  if (it == grads.end()) {
    grads[v] = g;
    return;
  }
  // Gradients of disjoint slices of one value (q, k, v of a fused projection, chunk, split)
  // go into one buffer instead of being added as zero-padded copies.
  if (auto merged = mergeDisjointSlices(b, loc, it->second, g)) {
    it->second = merged;
    return;
  }
  it->second = AddOp::create(b, loc, typeOf(v), it->second, g);
}

void Differentiator::markBackward(Operation *after, int64_t chunk) {
  // Each op built for the gradient of a forward op joins that op's chunk, marked as
  // backward; each chunk accumulates its own uses of a parameter into the gradient state.
  if (chunk < 0)
    return;
  for (Operation *o = after ? after->getNextNode() : &body->front(); o && o != ret;
       o = o->getNextNode()) {
    o->setAttr(kStageAttrName, b.getI64IntegerAttr(chunk));
    o->setAttr(kBackwardAttrName, b.getUnitAttr());
  }
}

void Differentiator::seedLoss() {
  double scale = 1.0 / double(gas * dataParallelRanks);
  RankedTensorType lossType = typeOf(loss);
  auto seed = DenseElementsAttr::get(
      lossType, FloatAttr::get(lossType.getElementType(), scale));
  grads[loss] = ConstantOp::create(b, loss.getLoc(), seed);
  // fp16's loss scaling: the seed times the scale the driver sets before the step.
  for (auto state : module.getOps<StateOp>())
    if (state.getRole() == SlotRole::loss_scale) {
      Value s = GetParameterOp::create(
          b, loss.getLoc(), state.getTensorType(),
          FlatSymbolRefAttr::get(state.getSymNameAttr()));
      if (s.getType() != lossType)
        s = ConvertOp::create(b, loss.getLoc(), lossType, s);
      grads[loss] = MulOp::create(b, loss.getLoc(), lossType, grads[loss], s);
    }
}

LogicalResult Differentiator::sweep() {
  for (Operation &op : body->without_terminator())
    forwardOps.push_back(&op);
  for (Operation *op : llvm::reverse(forwardOps)) {
    SmallVector<Value> resultGrads;
    bool any = false;
    for (Value r : op->getResults()) {
      auto it = grads.find(r);
      resultGrads.push_back(it == grads.end() ? Value() : it->second);
      any |= it != grads.end();
    }
    if (!any)
      continue;
    Operation *before = ret->getPrevNode();
    auto marked = llvm::make_scope_exit([&] { markBackward(before, chunkOf(op)); });
    if (auto get = dyn_cast<GetParameterOp>(op)) {
      std::pair<StringAttr, int64_t> name{get.getNameAttr().getAttr(), chunkOf(op)};
      auto it = paramGrads.find(name);
      if (it == paramGrads.end())
        paramGrads.insert({name, resultGrads[0]});
      else
        it->second = AddOp::create(b, op->getLoc(), typeOf(resultGrads[0]), it->second,
                                   resultGrads[0]);
      continue;
    }
    auto iface = dyn_cast<GradientOpInterface>(op);
    if (!iface) {
      op->emitOpError() << "has no gradient; ds-autodiff cannot differentiate through it";
      return failure();
    }
    SmallVector<bool> needed;
    for (Value v : op->getOperands())
      needed.push_back(active.contains(v));
    SmallVector<Value> operandGrads(op->getNumOperands());
    if (failed(iface.buildGradient(b, resultGrads, needed, operandGrads))) {
      op->emitOpError() << "failed to build its gradient";
      return failure();
    }
    for (auto [operand, g] : llvm::zip(op->getOperands(), operandGrads))
      if (g && active.contains(operand))
        accumulate(operand, g, op->getLoc());
  }
  return success();
}

void Differentiator::declareGradientStates() {
  OpBuilder mb = OpBuilder::atBlockBegin(module.getBody());
  for (Operation &op : *module.getBody())
    if (isa<ParameterOp, StateOp>(op))
      mb.setInsertionPointAfter(&op);
  for (auto param : llvm::to_vector(module.getOps<ParameterOp>())) {
    if (!param.getTrainable())
      continue;
    std::string name = gradName(param.getSymName());
    StateOp::create(mb, param.getLoc(), mb.getStringAttr(name),
                    FlatSymbolRefAttr::get(param.getSymNameAttr()),
                    SlotRoleAttr::get(mb.getContext(), SlotRole::grad),
                    TypeAttr::get(param.getType()));
    // Unused by the loss: its gradient stays zero.
    for (auto &[key, g] : paramGrads) {
      if (key.first != param.getSymNameAttr())
        continue;
      // Where the gradient was computed (the model's line, for ds-run --trace).
      Location loc = g.getDefiningOp() ? g.getDefiningOp()->getLoc() : param.getLoc();
      RankedTensorType type = param.getTensorType();
      Operation *before = ret->getPrevNode();
      auto symbol = FlatSymbolRefAttr::get(module.getContext(), name);
      Value acc = GetParameterOp::create(b, loc, type, symbol);
      Value sum = AddOp::create(b, loc, type, acc, g);
      auto write = AssignOp::create(b, loc, symbol, sum);
      markBackward(before, key.second);
      // Accumulated as soon as the gradient is complete, so that it dies there instead of
      // living to the end of backward (a pipeline's program orders its chunks itself).
      if (Operation *def = g.getDefiningOp();
          def && def->getBlock() == write->getBlock() && !module->hasAttr(kPipelineAttrName)) {
        acc.getDefiningOp()->moveAfter(def);
        sum.getDefiningOp()->moveAfter(acc.getDefiningOp());
        write->moveAfter(sum.getDefiningOp());
      }
    }
  }
}
