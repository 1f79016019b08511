//===- DSTrainOps.cpp - verifiers of the training-state and gradient ops ---===//
#include "ds/IR/DSOps.h"
#include "ds/IR/RingWorkspace.h"
#include "ds/IR/DSShapes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::ds;

namespace {
ArrayRef<int64_t> shapeOf(Value v) { return cast<RankedTensorType>(v.getType()).getShape(); }
Type elementOf(Value v) { return cast<RankedTensorType>(v.getType()).getElementType(); }

/// `value` has `expected` shape and the element type of `like`.
LogicalResult expectShape(Operation *op, Value value, ArrayRef<int64_t> expected, StringRef what,
                          Value like) {
  if (shapeOf(value) != expected)
    return op->emitOpError() << what << " has shape " << formatShape(shapeOf(value))
                             << ", expected " << formatShape(expected);
  if (like && elementOf(value) != elementOf(like))
    return op->emitOpError() << what << " has element type " << elementOf(value) << ", expected "
                             << elementOf(like);
  return success();
}
} // namespace

LogicalResult StateOp::verify() {
  if (getSymName().empty())
    return emitOpError() << "needs a name, which cannot be empty";
  auto module = (*this)->getParentOfType<ModuleOp>();
  bool scalarOfNone = false;
  switch (getRole()) {
  case SlotRole::loss_scale:
  case SlotRole::found_inf:
    scalarOfNone = true;
    break;
  case SlotRole::kv_cache:
    // Generation's cache: of no parameter, [pages, heads, page size, width].
    if (getOfAttr())
      return emitOpError() << "a kv_cache belongs to no parameter: drop `of`";
    if (getTensorType().getRank() != 4 || !isa<FloatType>(getTensorType().getElementType()))
      return emitOpError() << "a kv_cache is a float tensor of rank 4 [pages, heads, page "
                              "size, width], not "
                           << getType();
    return success();
  case SlotRole::grad:
  case SlotRole::exp_avg:
  case SlotRole::exp_avg_sq:
  case SlotRole::momentum_buffer:
  case SlotRole::master:
  case SlotRole::param_shard:
  case SlotRole::grad_shard:
    break;
  case SlotRole::parameter:
  case SlotRole::buffer:
  case SlotRole::params:
  case SlotRole::grads:
  case SlotRole::params_sharded:
    return emitOpError() << "role '" << stringifySlotRole(getRole())
                         << "' is not a state's (a ds.parameter is a parameter or a buffer; "
                            "params, grads and params_sharded are ds.flat_buffer roles)";
  }
  if (!getOfAttr()) {
    if (!scalarOfNone)
      return emitOpError() << "role '" << stringifySlotRole(getRole())
                           << "' needs `of` (only loss_scale and found_inf belong to no "
                              "parameter)";
    if (getTensorType().getRank() != 0 || !getTensorType().getElementType().isF32())
      return emitOpError() << "'" << stringifySlotRole(getRole())
                           << "' must be a tensor<f32> scalar, not " << getType();
    return success();
  }
  if (module && module.lookupSymbol<FlatBufferOp>(getOfAttr()))
    return success();
  auto param = module ? module.lookupSymbol<ParameterOp>(getOfAttr()) : ParameterOp();
  if (!param || !param.getTrainable())
    return emitOpError() << "'" << *getOf() << "' is not a trainable ds.parameter";
  return success();
}

LogicalResult MoveOp::verify() {
  switch (getTo()) {
  case MemorySpace::device:
  case MemorySpace::host:
    return success();
  case MemorySpace::nvme:
    break;
  }
  return emitOpError() << "moves to device or host, not " << stringifyMemorySpace(getTo())
                       << " (NVMe is reached through the states that live there)";
}

LogicalResult FlatBufferOp::verify() {
  if (getSymName().empty())
    return emitOpError() << "needs a name, which cannot be empty";
  switch (getRole()) {
  case SlotRole::params:
  case SlotRole::grads:
  case SlotRole::params_sharded:
    break;
  case SlotRole::parameter:
  case SlotRole::buffer:
  case SlotRole::grad:
  case SlotRole::exp_avg:
  case SlotRole::exp_avg_sq:
  case SlotRole::momentum_buffer:
  case SlotRole::master:
  case SlotRole::loss_scale:
  case SlotRole::found_inf:
  case SlotRole::param_shard:
  case SlotRole::grad_shard:
  case SlotRole::kv_cache:
    return emitOpError() << "role '" << stringifySlotRole(getRole())
                         << "' is not a flat buffer's (params, grads or params_sharded)";
  }
  auto module = (*this)->getParentOfType<ModuleOp>();
  int64_t total = 0;
  llvm::SmallDenseSet<Attribute> seen;
  for (Attribute a : getMembers()) {
    auto ref = cast<FlatSymbolRefAttr>(a);
    if (!seen.insert(ref).second)
      return emitOpError() << "member " << ref << " is listed twice";
    Operation *sym = module.lookupSymbol(ref.getAttr());
    RankedTensorType type;
    if (auto p = dyn_cast_or_null<ParameterOp>(sym))
      type = p.getTensorType();
    else if (auto st = dyn_cast_or_null<StateOp>(sym))
      type = st.getTensorType();
    else
      return emitOpError() << "member " << ref << " is not a ds.parameter or ds.state";
    if (type.getElementType() != getTensorType().getElementType())
      return emitOpError() << "member " << ref << " has element type " << type.getElementType()
                           << ", the buffer " << getTensorType().getElementType();
    total += type.getNumElements();
  }
  if (total > getTensorType().getNumElements())
    return emitOpError() << "members hold " << total << " elements, more than the buffer's "
                         << getTensorType().getNumElements();
  return success();
}

LogicalResult AssignOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  FailureOr<Type> type = lookupPersistentType(*this, getNameAttr(), symbolTable);
  if (failed(type))
    return failure();
  if (*type != getValue().getType())
    return emitOpError() << "value type " << getValue().getType() << " differs from the symbol's "
                         << *type;
  return success();
}

LogicalResult DropoutMaskOp::verify() {
  double p = getP().convertToDouble();
  if (!(p > 0 && p < 1))
    return emitOpError() << "p must be in (0, 1), got " << p;
  return success();
}

LogicalResult SoftmaxGradOp::verify() {
  int64_t rank = shapeOf(getOutput()).size();
  if (getDim() < 0 || getDim() >= rank)
    return emitOpError() << "dim " << getDim() << " is out of range for rank " << rank;
  return success();
}

LogicalResult LinearCrossEntropyGradOp::verify() {
  FailureOr<int64_t> rows = verifyLinearCrossEntropy(*this, getInput(), getWeight(), getBias(),
                                                     getTarget(), getTiles());
  if (failed(rows))
    return failure();
  ArrayRef<int64_t> ws = shapeOf(getWeight());
  int64_t V = ws[0], D = ws[1], wsSize = 2 * *rows * V + V * D + V;
  int64_t bias[1] = {V};
  if (failed(expectShape(*this, getResultGrad(), {}, "result_grad", getInput())) ||
      failed(expectShape(*this, getDx(), shapeOf(getInput()), "dx", getInput())) ||
      failed(expectShape(*this, getDweight(), ws, "dweight", getWeight())) ||
      failed(expectShape(*this, getDbias(), bias, "dbias", getWeight())))
    return failure();
  if (shapeOf(getWorkspace()) != ArrayRef<int64_t>{wsSize} ||
      !cast<RankedTensorType>(getWorkspace().getType()).getElementType().isF32())
    return emitOpError() << "workspace must be f32 [" << wsSize << "]";
  return success();
}

namespace {
/// An attention gradient (fused or ring): a valid forward, and gradients of its operands'
/// types.
template <class GradOp> LogicalResult verifyAttentionGrad(GradOp op, Value mask) {
  if (failed(verifyAttention(op, op.getQuery(), op.getKey(), op.getValue(), mask,
                             op.getCausal(), op.getResult(), op.getLse())) ||
      failed(expectShape(op, op.getResultGrad(), shapeOf(op.getResult()), "result_grad",
                         op.getResult())) ||
      failed(expectShape(op, op.getDq(), shapeOf(op.getQuery()), "dq", op.getQuery())) ||
      failed(expectShape(op, op.getDk(), shapeOf(op.getKey()), "dk", op.getKey())) ||
      failed(expectShape(op, op.getDv(), shapeOf(op.getValue()), "dv", op.getValue())))
    return failure();
  return success();
}
} // namespace

LogicalResult AttentionGradOp::verify() { return verifyAttentionGrad(*this, getMask()); }

namespace {
/// Ring attention's f32 operands, grid axes and workspace (RingWorkspace.h's size).
LogicalResult verifyRing(Operation *op, Value q, Value ws, RankedTensorType expected,
                         ArrayRef<int16_t> axes, bool causal, bool striped) {
  if (striped && !causal)
    return op->emitOpError() << "is striped but not causal (striped is a causal layout)";
  if (!cast<RankedTensorType>(q.getType()).getElementType().isF32())
    return op->emitOpError() << "computes in f32 only, got " << q.getType();
  if (axes.empty())
    return op->emitOpError() << "needs the grid axes of its ring";
  if (ws.getType() != expected)
    return op->emitOpError() << "workspace must be " << expected;
  return success();
}
RankedTensorType typeOfValue(Value v) { return cast<RankedTensorType>(v.getType()); }
} // namespace

LogicalResult RingAttentionOp::verify() {
  if (failed(verifyAttention(*this, getQuery(), getKey(), getValue(), Value(), getCausal(),
                             getResult(), getLse())))
    return failure();
  return verifyRing(*this, getQuery(), getWorkspace(),
                    ringAttentionWorkspace(typeOfValue(getKey()), typeOfValue(getValue()),
                                           typeOfValue(getResult()), typeOfValue(getLse())),
                    getGridAxes(), getCausal(), getStriped());
}

LogicalResult RingAttentionGradOp::verify() {
  if (failed(verifyAttentionGrad(*this, Value())))
    return failure();
  return verifyRing(*this, getQuery(), getWorkspace(),
                    ringAttentionGradWorkspace(typeOfValue(getQuery()), typeOfValue(getKey()),
                                               typeOfValue(getValue())),
                    getGridAxes(), getCausal(), getStriped());
}

LogicalResult LayerNormGradOp::verify() {
  ArrayRef<int64_t> x = shapeOf(getInput()), ns = getNormalizedShape();
  if (ns.size() > x.size() || x.take_back(ns.size()) != ns)
    return emitOpError() << "normalized_shape " << formatShape(ns)
                         << " is not the input's trailing dims " << formatShape(x);
  if (failed(expectShape(*this, getResultGrad(), x, "result_grad", getInput())) ||
      failed(expectShape(*this, getDx(), x, "dx", getInput())) ||
      failed(expectShape(*this, getDweight(), ns, "dweight", getInput())) ||
      failed(expectShape(*this, getDbias(), ns, "dbias", getInput())))
    return failure();
  if (getWeight() && failed(expectShape(*this, getWeight(), ns, "weight", getInput())))
    return failure();
  return success();
}

LogicalResult BatchNormGradOp::verify() {
  ArrayRef<int64_t> x = shapeOf(getInput());
  if (x.size() < 2)
    return emitOpError() << "input rank must be >= 2";
  int64_t c[1] = {x[1]};
  if (failed(expectShape(*this, getResultGrad(), x, "result_grad", getInput())) ||
      failed(expectShape(*this, getDx(), x, "dx", getInput())) ||
      failed(expectShape(*this, getMean(), c, "mean", getInput())) ||
      failed(expectShape(*this, getVar(), c, "var", getInput())) ||
      failed(expectShape(*this, getDweight(), c, "dweight", getInput())) ||
      failed(expectShape(*this, getDbias(), c, "dbias", getInput())))
    return failure();
  if (getWeight() && failed(expectShape(*this, getWeight(), c, "weight", getInput())))
    return failure();
  return success();
}

LogicalResult LinearGradWeightOp::verify() {
  ArrayRef<int64_t> x = shapeOf(getInput()), dy = shapeOf(getResultGrad());
  if (x.empty() || dy.size() != x.size() || x.drop_back() != dy.drop_back())
    return emitOpError() << "input " << formatShape(x) << " and result_grad " << formatShape(dy)
                         << " must share their leading dims";
  int64_t w[2] = {dy.back(), x.back()};
  int64_t b[1] = {dy.back()};
  if (failed(expectShape(*this, getDweight(), w, "dweight", getInput())) ||
      failed(expectShape(*this, getDbias(), b, "dbias", getInput())))
    return failure();
  return success();
}

LogicalResult ExpertLinearGradWeightOp::verify() {
  auto result = expertLinearShape(shapeOf(getInput()), shapeOf(getDweight()),
                                  shapeOf(getExpertIds()), getTransposed(),
                                  [&] { return emitOpError(); });
  if (failed(result))
    return failure();
  return expectShape(*this, getResultGrad(), *result, "result_grad", getInput());
}

LogicalResult SwigluGradOp::verify() {
  auto rows = getRows() ? std::optional<ArrayRef<int64_t>>(shapeOf(getRows())) : std::nullopt;
  auto result = swigluShape(shapeOf(getInput()), rows, [&] { return emitOpError(); });
  if (failed(result) ||
      failed(expectShape(*this, getResultGrad(), *result, "result_grad", getInput())))
    return failure();
  return expectShape(*this, getResult(), shapeOf(getInput()), "result", getInput());
}

namespace {
/// The ranks of the group along `axes` of `grid` (a shard.grid).
FailureOr<int64_t> groupSize(Operation *op, FlatSymbolRefAttr grid, ArrayRef<int16_t> axes) {
  auto g = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(op, grid);
  if (!g)
    return op->emitOpError() << "names " << grid << ", which is not a shard.grid";
  if (axes.empty())
    return op->emitOpError() << "needs the grid axes of its group";
  int64_t n = 1;
  for (int16_t a : axes) {
    if (a < 0 || a >= static_cast<int64_t>(g.getShape().size()) || g.getShape()[a] < 1)
      return op->emitOpError() << "grid axis " << a << " is not a static axis of " << grid;
    n *= g.getShape()[a];
  }
  return n;
}

/// The rows an expert exchange's plan routes (its length less 2 G), after checking it.
FailureOr<int64_t> planRows(Operation *op, Value plan, int64_t ranks) {
  ArrayRef<int64_t> p = shapeOf(plan);
  if (p.size() != 1 || !elementOf(plan).isInteger(64) || p[0] < 2 * ranks)
    return op->emitOpError() << "plan must be i64 [rows + 2 x " << ranks << "], got "
                             << plan.getType();
  return p[0] - 2 * ranks;
}

/// The rows a rank receives: at most `rows` x `ranks` (every rank's rows to this one, the
/// dropless worst case), fewer where a capacity bounds them.
LogicalResult checkReceiveRows(Operation *op, StringRef what, int64_t got, int64_t rows,
                               int64_t ranks) {
  if (got < 1 || got > rows * ranks)
    return op->emitOpError() << what << " must have between 1 and " << rows * ranks
                             << " rows (" << rows << " x " << ranks
                             << " ranks, the dropless worst case), got " << got;
  return success();
}

/// An exchange's `input` and `result`: the plan's rows and the rows received.
template <class Exchange>
LogicalResult verifyExchange(Exchange op, bool toExperts) {
  FailureOr<int64_t> g = groupSize(op, op.getGridAttr(), op.getGridAxes());
  if (failed(g))
    return failure();
  FailureOr<int64_t> rows = planRows(op, op.getPlan(), *g);
  if (failed(rows))
    return failure();
  Value from = op.getInput(), to = op.getResult();
  if (!toExperts)
    std::swap(from, to);
  ArrayRef<int64_t> x = shapeOf(from);
  if (x.empty() || x[0] != *rows)
    return op->emitOpError() << (toExperts ? "input" : "result") << " must have the plan's "
                             << *rows << " rows, got " << from.getType();
  const char *side = toExperts ? "result" : "input";
  ArrayRef<int64_t> y = shapeOf(to);
  if (failed(checkReceiveRows(op, side, y.empty() ? 0 : y[0], *rows, *g)))
    return failure();
  Shape expected(x);
  expected[0] = y[0];
  return expectShape(op, to, expected, side, from);
}
} // namespace

LogicalResult ExpertRouteOp::verify() {
  FailureOr<int64_t> g = groupSize(*this, getGridAttr(), getGridAxes());
  if (failed(g))
    return failure();
  ArrayRef<int64_t> ids = shapeOf(getExpertIds());
  if (ids.size() != 1)
    return emitOpError() << "expert_ids must be [N], got " << getExpertIds().getType();
  if (getExperts() < 1 || getExperts() % *g != 0)
    return emitOpError() << getExperts() << " experts do not split evenly over the group's "
                         << *g << " ranks";
  FailureOr<int64_t> rows = planRows(*this, getPlan(), *g);
  if (failed(rows))
    return failure();
  if (*rows != ids[0])
    return emitOpError() << "plan routes " << *rows << " rows, not the " << ids[0] << " ids";
  ArrayRef<int64_t> local = shapeOf(getLocalIds());
  if (local.size() != 1)
    return emitOpError() << "local_ids must be [R], got " << getLocalIds().getType();
  if (failed(checkReceiveRows(*this, "local_ids", local[0], ids[0], *g)))
    return failure();
  return expectShape(*this, getLocalIds(), {local[0]}, "local_ids", getExpertIds());
}

LogicalResult ExpertDispatchOp::verify() { return verifyExchange(*this, true); }
LogicalResult ExpertCombineOp::verify() { return verifyExchange(*this, false); }

LogicalResult EmbeddingGradOp::verify() {
  ArrayRef<int64_t> w = shapeOf(getResult());
  if (w.size() != 2)
    return emitOpError() << "result must be [V, D]";
  Shape expected(shapeOf(getIndices()));
  expected.push_back(w[1]);
  return expectShape(*this, getResultGrad(), expected, "result_grad", getResult());
}

LogicalResult CrossEntropyGradOp::verify() {
  return expectShape(*this, getResult(), shapeOf(getLogits()), "result", getLogits());
}

LogicalResult InsertSliceOp::verify() {
  ArrayRef<int64_t> src = shapeOf(getSource()), dst = shapeOf(getDest());
  if (elementOf(getSource()) != elementOf(getDest()) || getResult().getType() != getDest().getType())
    return emitOpError() << "source, dest and result must share the element type and dest's type";
  int64_t dim = getDim();
  if (src.size() != dst.size() || dim < 0 || dim >= (int64_t)dst.size())
    return emitOpError() << "dim " << dim << " is invalid for source " << formatShape(src)
                         << " and dest " << formatShape(dst);
  for (size_t i = 0; i < dst.size(); ++i)
    if ((int64_t)i != dim && src[i] != dst[i])
      return emitOpError() << "source " << formatShape(src) << " and dest " << formatShape(dst)
                           << " differ outside dim " << dim;
  if (getStart() < 0 || getStep() < 1 ||
      (src[dim] > 0 && getStart() + getStep() * (src[dim] - 1) >= dst[dim]))
    return emitOpError() << "the slice [" << getStart() << " :: " << getStep() << "] of "
                         << src[dim] << " elements does not fit dim " << dim << " of size "
                         << dst[dim];
  return success();
}

namespace {
/// Insertions one into the other that cover their destination exactly, each piece once (the
/// gradient of a split: dq, dk, dv into the zeros of dqkv), are the pieces' concatenation; the
/// destination's values are never read.
struct InsertSlicesToConcat : OpRewritePattern<InsertSliceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(InsertSliceOp last, PatternRewriter &rewriter) const override {
    int64_t dim = last.getDim();
    SmallVector<std::pair<int64_t, Value>> pieces;
    for (InsertSliceOp s = last; s;) {
      if (s.getDim() != dim || s.getStep() != 1)
        return failure();
      pieces.push_back({s.getStart(), s.getSource()});
      auto inner = s.getDest().getDefiningOp<InsertSliceOp>();
      if (inner && !inner->hasOneUse())
        return failure();
      s = inner;
    }
    if (pieces.size() < 2)
      return failure();
    llvm::sort(pieces, [](auto &a, auto &b) { return a.first < b.first; });
    int64_t at = 0;
    SmallVector<Value> inputs;
    for (auto &[start, source] : pieces) {
      if (start != at)
        return failure();
      at += shapeOf(source)[dim];
      inputs.push_back(source);
    }
    if (at != shapeOf(last.getDest())[dim])
      return failure();
    rewriter.replaceOpWithNewOp<ConcatOp>(last, last.getType(), inputs, dim);
    return success();
  }
};
} // namespace

void InsertSliceOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                                MLIRContext *context) {
  results.add<InsertSlicesToConcat>(context);
}

LogicalResult Conv2dGradInputOp::verify() {
  auto emit = [&] { return emitOpError(); };
  auto out = conv2dShape(shapeOf(getResult()), shapeOf(getWeight()), std::nullopt, getStride(),
                         getPadding(), getDilation(), getGroups(), emit);
  if (failed(out))
    return failure();
  return expectShape(*this, getResultGrad(), *out, "result_grad", getResult());
}

LogicalResult Conv2dGradWeightOp::verify() {
  auto emit = [&] { return emitOpError(); };
  auto out = conv2dShape(shapeOf(getInput()), shapeOf(getDweight()), std::nullopt, getStride(),
                         getPadding(), getDilation(), getGroups(), emit);
  if (failed(out))
    return failure();
  int64_t b[1] = {shapeOf(getDweight())[0]};
  if (failed(expectShape(*this, getResultGrad(), *out, "result_grad", getInput())) ||
      failed(expectShape(*this, getDbias(), b, "dbias", getInput())))
    return failure();
  return success();
}

LogicalResult MaxPool2dGradOp::verify() {
  auto out = pool2dShape(shapeOf(getInput()), getKernelSize(), getStride(), getPadding(),
                         getDilation(), getCeilMode(), [&] { return emitOpError(); });
  if (failed(out))
    return failure();
  if (getResult().getType() != getInput().getType())
    return emitOpError() << "result must have the input's type";
  return expectShape(*this, getResultGrad(), *out, "result_grad", getInput());
}

LogicalResult AvgPool2dGradOp::verify() {
  int64_t ones[2] = {1, 1};
  auto out = pool2dShape(shapeOf(getResult()), getKernelSize(), getStride(), getPadding(), ones,
                         getCeilMode(), [&] { return emitOpError(); });
  if (failed(out))
    return failure();
  return expectShape(*this, getResultGrad(), *out, "result_grad", getResult());
}

LogicalResult AdaptiveAvgPool2dGradOp::verify() {
  ArrayRef<int64_t> dy = shapeOf(getResultGrad()), dx = shapeOf(getResult());
  if (dy.size() != dx.size() || dx.size() < 3 || dy.drop_back(2) != dx.drop_back(2) ||
      elementOf(getResult()) != elementOf(getResultGrad()))
    return emitOpError() << "result " << formatShape(dx) << " and result_grad "
                         << formatShape(dy) << " must share rank, leading dims and element type";
  return success();
}
