//===- DSOps.cpp - verifiers and folders of ds ops -------------------------===//
#include "ds/IR/DSOps.h"
#include "ds/IR/DSShapes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::ds;

namespace {
RankedTensorType tensorType(Value v) { return cast<RankedTensorType>(v.getType()); }
ArrayRef<int64_t> shapeOf(Value v) { return tensorType(v).getShape(); }
Type elementOf(Value v) { return tensorType(v).getElementType(); }

std::optional<ArrayRef<int64_t>> optionalShape(Value v) {
  if (!v)
    return std::nullopt;
  return shapeOf(v);
}

/// Checks that `result` has the inferred shape (or reports the inferred one).
LogicalResult checkResultShape(Operation *op, Value result, FailureOr<Shape> inferred) {
  if (failed(inferred))
    return failure();
  if (shapeOf(result) != ArrayRef<int64_t>(*inferred))
    return op->emitOpError() << "result shape " << formatShape(shapeOf(result))
                             << " does not match the inferred shape "
                             << formatShape(*inferred);
  return success();
}

/// Checks that every given value has the element type of the first.
LogicalResult checkSameElementType(Operation *op, ArrayRef<Value> values) {
  Type first;
  for (Value v : values) {
    if (!v)
      continue;
    if (!first)
      first = elementOf(v);
    else if (elementOf(v) != first)
      return op->emitOpError() << "element types differ: " << first << " vs " << elementOf(v);
  }
  return success();
}

LogicalResult verifyNormalization(Operation *op, Value input, Value weight, Value bias,
                                  ArrayRef<int64_t> expected, double eps, StringRef what) {
  if (!(eps > 0))
    return op->emitOpError() << "eps must be > 0, got " << eps;
  if (failed(checkSameElementType(op, {input, weight, bias})))
    return failure();
  return checkNormParams(expected, optionalShape(weight), optionalShape(bias), what,
                         [&] { return op->emitOpError(); });
}
} // namespace

LogicalResult mlir::ds::verifyBroadcastBinary(Operation *op) {
  Value lhs = op->getOperand(0), rhs = op->getOperand(1), result = op->getResult(0);
  if (failed(checkSameElementType(op, {lhs, rhs, result})))
    return failure();
  return checkResultShape(op, result, broadcastShapes(shapeOf(lhs), shapeOf(rhs), [&] {
                            return op->emitOpError();
                          }));
}

LogicalResult mlir::ds::verifyReduce(Operation *op) {
  Value input = op->getOperand(0), result = op->getResult(0);
  if (failed(checkSameElementType(op, {input, result})))
    return failure();
  auto dims = op->getAttrOfType<DenseI64ArrayAttr>("dims").asArrayRef();
  bool keepdim = op->hasAttr("keepdim");
  return checkResultShape(op, result, reduceShape(shapeOf(input), dims, keepdim, [&] {
                            return op->emitOpError();
                          }));
}

LogicalResult mlir::ds::verifyDimInRange(Operation *op, int64_t dim) {
  int64_t rank = shapeOf(op->getOperand(0)).size();
  if (dim < 0 || dim >= rank)
    return op->emitOpError() << "dim " << dim << " is out of range for rank " << rank;
  return success();
}

FailureOr<int64_t> mlir::ds::verifyLinearCrossEntropy(Operation *op, Value x, Value w,
                                                      Value bias, Value target, int64_t tiles) {
  if (failed(checkSameElementType(op, {x, w, bias})))
    return failure();
  ArrayRef<int64_t> xs = shapeOf(x), ws = shapeOf(w), ts = shapeOf(target);
  if (xs.size() != 2 || ws.size() != 2 || xs[1] != ws[1])
    return op->emitOpError() << "needs input [N, D] and weight [V, D], got " << formatShape(xs)
                             << " and " << formatShape(ws);
  if (bias && shapeOf(bias) != ArrayRef<int64_t>{ws[0]})
    return op->emitOpError() << "bias " << formatShape(shapeOf(bias)) << " is not [" << ws[0]
                             << "]";
  if (ts.size() != 1 || ts[0] != xs[0])
    return op->emitOpError() << "target " << formatShape(ts) << " is not [" << xs[0] << "]";
  if (tiles < 1)
    return op->emitOpError() << "tiles must be >= 1, got " << tiles;
  return (xs[0] + tiles - 1) / tiles;
}

LogicalResult LinearCrossEntropyOp::verify() {
  FailureOr<int64_t> rows = verifyLinearCrossEntropy(*this, getInput(), getWeight(), getBias(),
                                                     getTarget(), getTiles());
  if (failed(rows))
    return failure();
  int64_t V = shapeOf(getWeight())[0];
  if (!shapeOf(getResult()).empty() || elementOf(getResult()) != elementOf(getInput()))
    return emitOpError() << "result must be a scalar of the input's type";
  if (shapeOf(getWorkspace()) != ArrayRef<int64_t>{*rows * V + 1} ||
      !elementOf(getWorkspace()).isF32())
    return emitOpError() << "workspace must be f32 [" << *rows * V + 1 << "]";
  return success();
}

LogicalResult mlir::ds::verifyAttention(Operation *op, Value q, Value k, Value v, Value mask,
                                        bool causal, Value result, Value lse) {
  if (failed(checkSameElementType(op, {q, k, v, result})))
    return failure();
  ArrayRef<int64_t> qs = shapeOf(q), ks = shapeOf(k), vs = shapeOf(v);
  if (qs.size() != 4 || ks.size() != 4 || vs.size() != 4)
    return op->emitOpError() << "needs query, key and value of rank 4 ([batch, heads, length, "
                                "width]), got "
                             << formatShape(qs) << ", " << formatShape(ks) << ", "
                             << formatShape(vs);
  if (qs[0] != ks[0] || ks[0] != vs[0])
    return op->emitOpError() << "needs one batch size, got " << qs[0] << ", " << ks[0] << ", "
                             << vs[0];
  if (ks[1] != vs[1] || ks[2] != vs[2])
    return op->emitOpError() << "key " << formatShape(ks) << " and value " << formatShape(vs)
                             << " differ in heads or length";
  if (ks[1] == 0 || qs[1] % ks[1] != 0)
    return op->emitOpError() << qs[1] << " query heads over " << ks[1]
                             << " key/value heads (grouped-query attention needs a divisor)";
  if (qs[3] != ks[3])
    return op->emitOpError() << "query width " << qs[3] << " differs from the key's " << ks[3];
  if (mask) {
    if (causal)
      return op->emitOpError() << "has both a mask and causal";
    ArrayRef<int64_t> ms = shapeOf(mask);
    int64_t full[4] = {qs[0], qs[1], qs[2], ks[2]};
    bool ok = ms.size() == 4 && (elementOf(mask).isInteger(1) || elementOf(mask) == elementOf(q));
    for (size_t d = 0; ok && d < 4; ++d)
      ok = ms[d] == 1 || ms[d] == full[d];
    if (!ok)
      return op->emitOpError() << "mask " << tensorType(mask)
                               << " is not a bool or query-typed tensor of rank 4 that "
                                  "broadcasts to the scores "
                               << formatShape(full);
  }
  int64_t rs[4] = {qs[0], qs[1], qs[2], vs[3]}, ls[3] = {qs[0], qs[1], qs[2]};
  if (shapeOf(result) != ArrayRef<int64_t>(rs))
    return op->emitOpError() << "result shape " << formatShape(shapeOf(result))
                             << " is not " << formatShape(rs);
  if (shapeOf(lse) != ArrayRef<int64_t>(ls) || !elementOf(lse).isF32())
    return op->emitOpError() << "lse " << tensorType(lse) << " is not f32 of shape "
                             << formatShape(ls);
  return success();
}

LogicalResult AttentionOp::verify() {
  if (!(getScale().convertToDouble() > 0) && !(getScale().convertToDouble() < 0))
    return emitOpError() << "scale must be nonzero";
  return verifyAttention(*this, getQuery(), getKey(), getValue(), getMask(), getCausal(),
                         getResult(), getLse());
}

LogicalResult CumsumOp::verify() {
  if (getInput().getType().getElementType().isInteger(1))
    return emitOpError() << "sums booleans (convert them to i64 first, as torch.cumsum does)";
  return verifyDimInRange(*this, getDim());
}

//===----------------------------------------------------------------------===//
// State
//===----------------------------------------------------------------------===//

SmallVector<StringRef> ParameterOp::getNames() {
  SmallVector<StringRef> names{getSymName()};
  if (auto aliases = getAliases())
    for (Attribute a : *aliases)
      names.push_back(cast<StringAttr>(a).getValue());
  return names;
}

LogicalResult ParameterOp::verify() {
  // MLIR parses @"" but prints it as an invalid symbol; a state_dict key is never empty.
  if (getSymName().empty())
    return emitOpError() << "needs a name: its state_dict key, which cannot be empty";
  llvm::StringSet<> seen;
  for (StringRef name : getNames())
    if (!seen.insert(name).second)
      return emitOpError() << "state_dict key '" << name << "' is listed twice";
  auto sharding = getShardingAttr();
  if (!sharding)
    return success();
  int64_t rank = getTensorType().getRank();
  if ((int64_t)sharding.getDims().size() != rank)
    return emitOpError() << "sharding has " << sharding.getDims().size()
                         << " entries for a tensor of rank " << rank;
  auto module = (*this)->getParentOfType<ModuleOp>();
  auto mesh = module ? module->getAttrOfType<MeshAttr>(kMeshAttrName) : MeshAttr();
  if (!mesh)
    return emitOpError() << "has a sharding but the module has no '" << kMeshAttrName
                         << "' attribute";
  for (Attribute dim : sharding.getDims())
    for (Attribute axis : cast<ArrayAttr>(dim))
      if (mesh.findAxis(cast<StringAttr>(axis).getValue()) < 0)
        return emitOpError() << "sharding names mesh axis '" << cast<StringAttr>(axis).getValue()
                             << "', which the module's mesh does not have";
  return success();
}

static FailureOr<ParameterOp> lookupParameter(Operation *user, FlatSymbolRefAttr name,
                                              SymbolTableCollection &symbolTable) {
  auto param = symbolTable.lookupNearestSymbolFrom<ParameterOp>(user, name.getAttr());
  if (!param)
    return user->emitOpError() << "'" << name.getValue() << "' is not a ds.parameter";
  return param;
}

FailureOr<Type> mlir::ds::lookupPersistentType(Operation *user, FlatSymbolRefAttr name,
                                               SymbolTableCollection &symbolTable) {
  Operation *sym = symbolTable.lookupNearestSymbolFrom(user, name.getAttr());
  if (auto param = dyn_cast_or_null<ParameterOp>(sym))
    return param.getType();
  if (auto state = dyn_cast_or_null<StateOp>(sym))
    return state.getType();
  if (auto flat = dyn_cast_or_null<FlatBufferOp>(sym))
    return flat.getType();
  return user->emitOpError() << "'" << name.getValue()
                             << "' is not a ds.parameter, ds.state or ds.flat_buffer";
}

LogicalResult GetParameterOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  FailureOr<Type> type = lookupPersistentType(*this, getNameAttr(), symbolTable);
  if (failed(type))
    return failure();
  if (*type != getType())
    return emitOpError() << "result type " << getType() << " differs from the symbol's " << *type;
  return success();
}

LogicalResult AssignBufferOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto param = lookupParameter(*this, getNameAttr(), symbolTable);
  if (failed(param))
    return failure();
  if (param->getTrainable())
    return emitOpError() << "'" << getName() << "' is a trainable parameter; only buffers "
                         << "can be assigned";
  if (param->getType() != getValue().getType())
    return emitOpError() << "value type " << getValue().getType()
                         << " differs from the buffer's " << param->getType();
  return success();
}

//===----------------------------------------------------------------------===//
// Constants, conversions, elementwise
//===----------------------------------------------------------------------===//

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

LogicalResult ConvertOp::verify() {
  if (shapeOf(getInput()) != shapeOf(getResult()))
    return emitOpError() << "changes the shape " << formatShape(shapeOf(getInput())) << " to "
                         << formatShape(shapeOf(getResult()));
  return success();
}

LogicalResult CmpOp::verify() {
  if (failed(checkSameElementType(*this, {getLhs(), getRhs()})))
    return failure();
  return checkResultShape(*this, getResult(),
                          broadcastShapes(shapeOf(getLhs()), shapeOf(getRhs()),
                                          [&] { return emitOpError(); }));
}

LogicalResult WhereOp::verify() {
  if (failed(checkSameElementType(*this, {getOnTrue(), getOnFalse(), getResult()})))
    return failure();
  auto emit = [&] { return emitOpError(); };
  auto partial = broadcastShapes(shapeOf(getOnTrue()), shapeOf(getOnFalse()), emit);
  if (failed(partial))
    return failure();
  return checkResultShape(*this, getResult(), broadcastShapes(shapeOf(getCond()), *partial, emit));
}

namespace {
/// The splat value of a constant tensor, if `v` is one.
std::optional<APFloat> splatOf(Value v) {
  auto c = v.getDefiningOp<ConstantOp>();
  auto dense = c ? dyn_cast<DenseFPElementsAttr>(c.getValue()) : nullptr;
  if (!dense || !dense.isSplat())
    return std::nullopt;
  return dense.getSplatValue<APFloat>();
}

/// where(mask, 0, softmax_grad(y, dy)) with y = softmax(where(mask, -inf, x)), the same mask on
/// the same side: softmax_grad(y, dy). Where the forward filled -inf, y is exactly 0 and so is
/// y * (dy - sum(dy * y)) (up to the sign of the zero): the select changes nothing. The
/// gradient autodiff writes for masked_fill before F.softmax (attention's causal mask).
struct MaskedSoftmaxGrad : OpRewritePattern<WhereOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(WhereOp bwd, PatternRewriter &rewriter) const override {
    for (bool zeroOnTrue : {true, false}) {
      Value zero = zeroOnTrue ? bwd.getOnTrue() : bwd.getOnFalse();
      Value grad = zeroOnTrue ? bwd.getOnFalse() : bwd.getOnTrue();
      std::optional<APFloat> z = splatOf(zero);
      auto sg = grad.getDefiningOp<SoftmaxGradOp>();
      if (!z || !z->isZero() || !sg || sg.getLog() || sg.getType() != bwd.getType())
        continue;
      auto y = sg.getOutput().getDefiningOp<SoftmaxOp>();
      auto fwd = y ? y.getInput().getDefiningOp<WhereOp>() : nullptr;
      if (!fwd || fwd.getCond() != bwd.getCond() || fwd.getType() != bwd.getType())
        continue;
      std::optional<APFloat> fill = splatOf(zeroOnTrue ? fwd.getOnTrue() : fwd.getOnFalse());
      if (!fill || !fill->isInfinity() || !fill->isNegative())
        continue;
      rewriter.replaceOp(bwd, grad);
      return success();
    }
    return failure();
  }
};
} // namespace

void WhereOp::getCanonicalizationPatterns(RewritePatternSet &results, MLIRContext *context) {
  results.add<MaskedSoftmaxGrad>(context);
}

LogicalResult DropoutOp::verify() {
  double p = getP().convertToDouble();
  if (!(p > 0.0 && p < 1.0))
    return emitOpError() << "p must be in (0, 1), got " << p;
  return success();
}

//===----------------------------------------------------------------------===//
// Normalizations
//===----------------------------------------------------------------------===//

LogicalResult LayerNormOp::verify() {
  ArrayRef<int64_t> in = shapeOf(getInput());
  ArrayRef<int64_t> norm = getNormalizedShape();
  if (norm.empty() || norm.size() > in.size() || in.take_back(norm.size()) != norm)
    return emitOpError() << "normalized_shape " << formatShape(norm)
                         << " is not the trailing dimensions of the input "
                         << formatShape(in);
  if (getResult().getType() != getInput().getType())
    return emitOpError() << "result type must equal the input type";
  return verifyNormalization(*this, getInput(), getWeight(), getBias(), norm,
                             getEps().convertToDouble(), "layer_norm");
}

static LogicalResult verifyBatchNormInput(Operation *op, Value input) {
  if (shapeOf(input).size() < 2)
    return op->emitOpError() << "batch_norm input must have rank >= 2 ([N, C, ...]), got "
                             << formatShape(shapeOf(input));
  return success();
}

LogicalResult BatchNormOp::verify() {
  if (failed(verifyBatchNormInput(*this, getInput())))
    return failure();
  int64_t c = shapeOf(getInput())[1];
  if (getResult().getType() != getInput().getType())
    return emitOpError() << "result type must equal the input type";
  if (shapeOf(getMean()) != ArrayRef<int64_t>{c} || shapeOf(getVar()) != ArrayRef<int64_t>{c})
    return emitOpError() << "mean and var must be [" << c << "]";
  if (failed(checkSameElementType(*this, {getInput(), getMean(), getVar()})))
    return failure();
  return verifyNormalization(*this, getInput(), getWeight(), getBias(), {c},
                             getEps().convertToDouble(), "batch_norm");
}

LogicalResult BatchNormInferenceOp::verify() {
  if (failed(verifyBatchNormInput(*this, getInput())))
    return failure();
  int64_t c = shapeOf(getInput())[1];
  if (getResult().getType() != getInput().getType())
    return emitOpError() << "result type must equal the input type";
  for (Value stat : {getRunningMean(), getRunningVar()})
    if (shapeOf(stat) != ArrayRef<int64_t>{c})
      return emitOpError() << "running_mean and running_var must be [" << c << "], got "
                           << formatShape(shapeOf(stat));
  if (failed(checkSameElementType(*this, {getInput(), getRunningMean(), getRunningVar()})))
    return failure();
  return verifyNormalization(*this, getInput(), getWeight(), getBias(), {c},
                             getEps().convertToDouble(), "batch_norm");
}

//===----------------------------------------------------------------------===//
// Contractions and lookups
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::verify() {
  if (failed(checkSameElementType(*this, {getLhs(), getRhs(), getResult()})))
    return failure();
  return checkResultShape(*this, getResult(), matmulShape(shapeOf(getLhs()), shapeOf(getRhs()),
                                                          [&] { return emitOpError(); }));
}

LogicalResult LinearOp::verify() {
  if (failed(checkSameElementType(*this, {getInput(), getWeight(), getBias(), getResult()})))
    return failure();
  return checkResultShape(*this, getResult(),
                          linearShape(shapeOf(getInput()), shapeOf(getWeight()),
                                      optionalShape(getBias()), [&] { return emitOpError(); }));
}

LogicalResult EmbeddingOp::verify() {
  if (failed(checkSameElementType(*this, {getWeight(), getResult()})))
    return failure();
  if (auto pad = getPaddingIdx(); pad && shapeOf(getWeight()).size() == 2 &&
                                  (*pad < 0 || *pad >= shapeOf(getWeight())[0]))
    return emitOpError() << "padding_idx " << *pad << " is not a row of the "
                         << shapeOf(getWeight())[0] << "-row weight";
  return checkResultShape(*this, getResult(),
                          embeddingShape(shapeOf(getWeight()), shapeOf(getIndices()),
                                         [&] { return emitOpError(); }));
}

LogicalResult ExpertLinearOp::verify() {
  if (failed(checkSameElementType(*this, {getInput(), getWeight(), getResult()})))
    return failure();
  return checkResultShape(*this, getResult(),
                          expertLinearShape(shapeOf(getInput()), shapeOf(getWeight()),
                                            shapeOf(getExpertIds()), getTransposed(),
                                            [&] { return emitOpError(); }));
}

LogicalResult SwigluOp::verify() {
  if (failed(checkSameElementType(*this, {getInput(), getResult()})))
    return failure();
  return checkResultShape(*this, getResult(),
                          swigluShape(shapeOf(getInput()), optionalShape(getRows()),
                                      [&] { return emitOpError(); }));
}

LogicalResult ExpertCapacityOp::verify() {
  ArrayRef<int64_t> ids = shapeOf(getExpertIds());
  if (ids.size() != 1)
    return emitOpError() << "expert_ids must be [N], got " << getExpertIds().getType();
  // I64Attr's getters are unsigned: the signed values.
  const int64_t choices = getChoicesAttr().getInt(), experts = getExpertsAttr().getInt(),
                capacity = getCapacityAttr().getInt();
  if (choices < 1 || ids[0] % choices != 0)
    return emitOpError() << "choices = " << choices << " must be >= 1 and divide the "
                         << ids[0] << " rows";
  if (experts < 1)
    return emitOpError() << "experts = " << experts << " must be >= 1";
  if (capacity < 0)
    return emitOpError() << "capacity = " << capacity << " must be >= 0";
  return success();
}

LogicalResult TopKOp::verify() {
  ArrayRef<int64_t> in = shapeOf(getInput());
  if (in.empty())
    return emitOpError() << "input must have rank >= 1";
  int64_t k = getK();
  if (k < 1 || k > in.back())
    return emitOpError() << "k = " << k << " must be in [1, " << in.back() << "]";
  Shape out(in.begin(), in.end());
  out.back() = k;
  Type et = getInput().getType().getElementType();
  if (!isa<FloatType>(et) && !et.isInteger(64))
    return emitOpError() << "input must be float or i64, got " << et;
  if (failed(checkSameElementType(*this, {getInput(), getValues()})))
    return failure();
  if (!getIndices().getType().getElementType().isInteger(64))
    return emitOpError() << "indices must be i64";
  if (failed(checkResultShape(*this, getValues(), FailureOr<Shape>(out))))
    return failure();
  return checkResultShape(*this, getIndices(), FailureOr<Shape>(out));
}

LogicalResult CrossEntropyOp::verify() {
  if (failed(checkSameElementType(*this, {getLogits(), getResult()})))
    return failure();
  double ls = getLabelSmoothing().convertToDouble();
  if (!(ls >= 0.0 && ls <= 1.0))
    return emitOpError() << "label_smoothing must be in [0, 1], got " << ls;
  return checkResultShape(*this, getResult(),
                          crossEntropyShape(shapeOf(getLogits()), shapeOf(getTarget()),
                                            getReduction() != Reduction::none,
                                            [&] { return emitOpError(); }));
}

//===----------------------------------------------------------------------===//
// Shape and layout
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  if (failed(checkSameElementType(*this, {getInput(), getResult()})))
    return failure();
  if (numElements(shapeOf(getInput())) != numElements(shapeOf(getResult())))
    return emitOpError() << "cannot reshape " << formatShape(shapeOf(getInput())) << " ("
                         << numElements(shapeOf(getInput())) << " elements) to "
                         << formatShape(shapeOf(getResult())) << " ("
                         << numElements(shapeOf(getResult())) << " elements)";
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  return {};
}

/// The identity permutation, and a transpose of a transpose that undoes it, fold to the
/// input. Other compositions stay two ops: each may fold into a matmul's transpose flag in the
/// lowering, where their composition may not.
OpFoldResult TransposeOp::fold(FoldAdaptor) {
  auto identity = [](ArrayRef<int64_t> perm) {
    for (auto [i, p] : llvm::enumerate(perm))
      if (p != (int64_t)i)
        return false;
    return true;
  };
  ArrayRef<int64_t> perm = getPermutation();
  if (identity(perm))
    return getInput();
  if (auto inner = getInput().getDefiningOp<TransposeOp>()) {
    ArrayRef<int64_t> first = inner.getPermutation();
    SmallVector<int64_t> composed; // result dim i is the first input's dim first[perm[i]]
    for (int64_t p : perm)
      composed.push_back(first[p]);
    if (identity(composed))
      return inner.getInput();
  }
  return {};
}

LogicalResult TransposeOp::verify() {
  if (failed(checkSameElementType(*this, {getInput(), getResult()})))
    return failure();
  return checkResultShape(*this, getResult(),
                          transposeShape(shapeOf(getInput()), getPermutation(),
                                         [&] { return emitOpError(); }));
}

LogicalResult BroadcastToOp::verify() {
  if (failed(checkSameElementType(*this, {getInput(), getResult()})))
    return failure();
  return checkBroadcastTo(shapeOf(getInput()), shapeOf(getResult()),
                          [&] { return emitOpError(); });
}

LogicalResult SliceOp::verify() {
  if (failed(checkSameElementType(*this, {getInput(), getResult()})))
    return failure();
  return checkResultShape(*this, getResult(),
                          sliceShape(shapeOf(getInput()), getDim(), getStart(), getEnd(),
                                     getStep(), [&] { return emitOpError(); }));
}

LogicalResult ConcatOp::verify() {
  SmallVector<Value> all(getInputs().begin(), getInputs().end());
  all.push_back(getResult());
  if (failed(checkSameElementType(*this, all)))
    return failure();
  SmallVector<Shape> shapes;
  for (Value v : getInputs())
    shapes.emplace_back(shapeOf(v));
  return checkResultShape(*this, getResult(),
                          concatShape(shapes, getDim(), [&] { return emitOpError(); }));
}

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

LogicalResult Conv2dOp::verify() {
  if (failed(checkSameElementType(*this, {getInput(), getWeight(), getBias(), getResult()})))
    return failure();
  return checkResultShape(*this, getResult(),
                          conv2dShape(shapeOf(getInput()), shapeOf(getWeight()),
                                      optionalShape(getBias()), getStride(), getPadding(),
                                      getDilation(), getGroups(), [&] { return emitOpError(); }));
}

LogicalResult MaxPool2dOp::verify() {
  if (failed(checkSameElementType(*this, {getInput(), getResult()})))
    return failure();
  return checkResultShape(*this, getResult(),
                          pool2dShape(shapeOf(getInput()), getKernelSize(), getStride(),
                                      getPadding(), getDilation(), getCeilMode(),
                                      [&] { return emitOpError(); }));
}

LogicalResult AvgPool2dOp::verify() {
  if (failed(checkSameElementType(*this, {getInput(), getResult()})))
    return failure();
  int64_t ones[2] = {1, 1};
  return checkResultShape(*this, getResult(),
                          pool2dShape(shapeOf(getInput()), getKernelSize(), getStride(),
                                      getPadding(), ones, getCeilMode(),
                                      [&] { return emitOpError(); }));
}

LogicalResult AdaptiveAvgPool2dOp::verify() {
  if (failed(checkSameElementType(*this, {getInput(), getResult()})))
    return failure();
  ArrayRef<int64_t> in = shapeOf(getInput());
  if (in.size() != 4 && in.size() != 3)
    return emitOpError() << "input must be [N, C, H, W] or [C, H, W], got " << formatShape(in);
  ArrayRef<int64_t> os = getOutputSize();
  if (os[0] < 1 || os[1] < 1)
    return emitOpError() << "output_size must be >= 1";
  Shape expected(in.begin(), in.end());
  expected[in.size() - 2] = os[0];
  expected[in.size() - 1] = os[1];
  return checkResultShape(*this, getResult(), expected);
}

#define GET_OP_CLASSES
static LogicalResult verifyParallelRegion(Operation *op, FlatSymbolRefAttr grid,
                                          ArrayRef<int16_t> axes) {
  Operation *g = SymbolTable::lookupNearestSymbolFrom(op, grid);
  if (!g || g->getName().getStringRef() != "shard.grid")
    return op->emitOpError() << "'" << grid.getValue() << "' is not a shard.grid";
  auto shape = g->getAttrOfType<DenseI64ArrayAttr>("shape");
  llvm::SmallDenseSet<int16_t> seen;
  for (int16_t a : axes)
    if (a < 0 || (shape && a >= static_cast<int64_t>(shape.size())) || !seen.insert(a).second)
      return op->emitOpError() << "grid axis " << a << " is not a distinct axis of @"
                               << grid.getValue();
  return success();
}

LogicalResult ParallelCopyOp::verify() {
  return verifyParallelRegion(*this, getGridAttr(), getGridAxes());
}
LogicalResult ParallelSumOp::verify() {
  return verifyParallelRegion(*this, getGridAttr(), getGridAxes());
}

LogicalResult ParallelMaxOp::verify() {
  return verifyParallelRegion(*this, getGridAttr(), getGridAxes());
}
LogicalResult MeshCoordinateOp::verify() {
  int64_t axis = static_cast<int64_t>(getGridAxis());
  if (axis > INT16_MAX)
    return emitOpError() << "grid axis " << axis << " is out of range";
  return verifyParallelRegion(*this, getGridAttr(), {static_cast<int16_t>(axis)});
}

#include "ds/IR/DSOps.cpp.inc"
