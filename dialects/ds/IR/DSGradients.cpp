//===- DSGradients.cpp - GradientOpInterface: the backward of each ds op ---===//
//
// Each rule follows PyTorch's derivatives.yaml (1.13) so that ds-autodiff reproduces
// autograd's numbers: same formulas, and where PyTorch has a special rule (ties of
// maximum/minimum/amax, relu at 0) the same choice.
//
//===----------------------------------------------------------------------===//
#include "ds/IR/DSOps.h"
#include "ds/IR/RingWorkspace.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace mlir::ds;

#include "ds/IR/DSInterfaces.cpp.inc"

namespace {
RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }
Type elementOf(Value v) { return typeOf(v).getElementType(); }
RankedTensorType withShape(Value like, ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape, elementOf(like));
}

Value splat(OpBuilder &b, Location loc, RankedTensorType type, double value) {
  Attribute elem;
  if (auto ft = dyn_cast<FloatType>(type.getElementType()))
    elem = FloatAttr::get(ft, value);
  else
    elem = IntegerAttr::get(type.getElementType(), static_cast<int64_t>(value));
  return ConstantOp::create(b, loc, DenseElementsAttr::get(type, elem));
}
/// A rank-0 constant of `like`'s element type.
Value scalar(OpBuilder &b, Location loc, Value like, double value) {
  return splat(b, loc, RankedTensorType::get({}, elementOf(like)), value);
}

Value binary(OpBuilder &b, Location loc, StringRef kind, Value x, Value y, Value like) {
  RankedTensorType type = typeOf(like);
  if (kind == "add")
    return AddOp::create(b, loc, type, x, y);
  if (kind == "sub")
    return SubOp::create(b, loc, type, x, y);
  if (kind == "mul")
    return MulOp::create(b, loc, type, x, y);
  return DivOp::create(b, loc, type, x, y);
}
Value mul(OpBuilder &b, Location loc, Value x, Value y, Value like) {
  return binary(b, loc, "mul", x, y, like);
}

/// Sums `g` down to the shape of `operand` (the reverse of PyTorch broadcasting). Where the
/// operand widens a 16-bit value (ds-mixed-precision), `g` is rounded to that type first:
/// PyTorch computes a 16-bit op's gradient at the broadcast shape in 16 bits and then sums
/// it (an RMSNorm weight's gradient sums rounded products).
Value reduceTo(OpBuilder &b, Location loc, Value g, Value operand) {
  RankedTensorType gt = typeOf(g), target = typeOf(operand);
  if (gt.getShape() == target.getShape())
    return g;
  if (auto widening = operand.getDefiningOp<ConvertOp>()) {
    auto from = cast<RankedTensorType>(widening.getInput().getType());
    if (from.getElementType().getIntOrFloatBitWidth() == 16 && gt.getElementType().isF32())
      g = ConvertOp::create(b, loc, gt,
                            ConvertOp::create(b, loc, from.clone(gt.getShape()), g));
  }
  ArrayRef<int64_t> gs = gt.getShape(), ts = target.getShape();
  int64_t lead = gs.size() - ts.size();
  SmallVector<int64_t> dims, kept;
  for (int64_t i = 0; i < (int64_t)gs.size(); ++i) {
    if (i < lead || (ts[i - lead] == 1 && gs[i] != 1))
      dims.push_back(i);
    else
      kept.push_back(gs[i]);
  }
  Value r = g;
  if (!dims.empty())
    r = SumOp::create(b, loc, RankedTensorType::get(kept, gt.getElementType()), g,
                      b.getDenseI64ArrayAttr(dims), /*keepdim=*/nullptr);
  if (typeOf(r).getShape() != ts)
    r = ReshapeOp::create(b, loc, RankedTensorType::get(ts, gt.getElementType()), r);
  return r;
}

/// The reduced shape with the reduced dims kept as 1.
SmallVector<int64_t> keepdimShape(ArrayRef<int64_t> in, ArrayRef<int64_t> dims) {
  SmallVector<int64_t> s(in);
  for (int64_t d : dims)
    s[d] = 1;
  return s;
}

SmallVector<int64_t> swapLast2(int64_t rank) {
  SmallVector<int64_t> perm;
  for (int64_t i = 0; i < rank; ++i)
    perm.push_back(i);
  std::swap(perm[rank - 1], perm[rank - 2]);
  return perm;
}
Value transposeLast2(OpBuilder &b, Location loc, Value v) {
  ArrayRef<int64_t> s = typeOf(v).getShape();
  SmallVector<int64_t> perm = swapLast2(s.size());
  SmallVector<int64_t> shape(s);
  std::swap(shape[s.size() - 1], shape[s.size() - 2]);
  return TransposeOp::create(b, loc, withShape(v, shape), v, b.getDenseI64ArrayAttr(perm));
}

Value cmp(OpBuilder &b, Location loc, CmpPredicate pred, Value x, Value y, ArrayRef<int64_t> shape) {
  return CmpOp::create(b, loc, RankedTensorType::get(shape, b.getI1Type()),
                       CmpPredicateAttr::get(b.getContext(), pred), x, y);
}
Value where(OpBuilder &b, Location loc, Value c, Value x, Value y, Value like) {
  return WhereOp::create(b, loc, typeOf(like), c, x, y);
}
} // namespace

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

// The two ends of a tensor-parallel region are each other's gradient.
LogicalResult ParallelCopyOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys, ArrayRef<bool>,
                                            SmallVectorImpl<Value> &dxs) {
  dxs[0] = ParallelSumOp::create(b, getLoc(), dys[0], getGridAttr(), getGridAxesAttr());
  return success();
}

LogicalResult ParallelSumOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys, ArrayRef<bool>,
                                           SmallVectorImpl<Value> &dxs) {
  dxs[0] = ParallelCopyOp::create(b, getLoc(), dys[0], getGridAttr(), getGridAxesAttr());
  return success();
}

// Only a shift whose effect cancels (see its description): no gradient.
LogicalResult ParallelMaxOp::buildGradient(OpBuilder &, ArrayRef<Value>, ArrayRef<bool>,
                                           SmallVectorImpl<Value> &) {
  return success();
}

LogicalResult ConvertOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys, ArrayRef<bool> needed,
                                       SmallVectorImpl<Value> &dxs) {
  if (!isa<FloatType>(elementOf(getInput())))
    return success();
  dxs[0] = ConvertOp::create(b, getLoc(), typeOf(getInput()), dys[0]);
  return success();
}

#define DS_UNARY_GRADIENT(OP, BODY)                                                             \
  LogicalResult OP::buildGradient(OpBuilder &b, ArrayRef<Value> dys, ArrayRef<bool>,          \
                                  SmallVectorImpl<Value> &dxs) {                               \
    Location loc = getLoc();                                                                   \
    Value dy = dys[0], x = getInput(), y = getResult();                                        \
    (void)x;                                                                                   \
    (void)y;                                                                                   \
    (void)loc;                                                                                 \
    dxs[0] = BODY;                                                                             \
    return success();                                                                          \
  }

DS_UNARY_GRADIENT(NegOp, NegOp::create(b, loc, typeOf(dy), dy))
DS_UNARY_GRADIENT(ExpOp, mul(b, loc, dy, y, dy))
DS_UNARY_GRADIENT(LogOp, binary(b, loc, "div", dy, x, dy))
// sqrt: dy / (2 y)
DS_UNARY_GRADIENT(SqrtOp,
                  binary(b, loc, "div", dy, mul(b, loc, y, scalar(b, loc, y, 2.0), y), dy))
// rsqrt: -0.5 dy y^3
DS_UNARY_GRADIENT(RsqrtOp,
                  mul(b, loc, mul(b, loc, dy, mul(b, loc, mul(b, loc, y, y, y), y, y), dy),
                      scalar(b, loc, y, -0.5), dy))
// tanh: dy (1 - y^2)
DS_UNARY_GRADIENT(TanhOp, mul(b, loc, dy,
                              binary(b, loc, "sub", scalar(b, loc, y, 1.0),
                                     mul(b, loc, y, y, y), y),
                              dy))
// cos: -dy sin(x); sin: dy cos(x)
DS_UNARY_GRADIENT(CosOp, mul(b, loc, dy, NegOp::create(b, loc, typeOf(x),
                                                      SinOp::create(b, loc, typeOf(x), x)),
                             dy))
DS_UNARY_GRADIENT(SinOp, mul(b, loc, dy, CosOp::create(b, loc, typeOf(x), x), dy))
// sigmoid: dy (1 - y) y
DS_UNARY_GRADIENT(SigmoidOp,
                  mul(b, loc,
                      mul(b, loc, dy, binary(b, loc, "sub", scalar(b, loc, y, 1.0), y, y), dy),
                      y, dy))
// relu: dy where y > 0 (threshold_backward on the result).
DS_UNARY_GRADIENT(ReluOp, where(b, loc,
                                cmp(b, loc, CmpPredicate::gt, y, scalar(b, loc, y, 0.0),
                                    typeOf(y).getShape()),
                                dy, scalar(b, loc, y, 0.0), dy))
#undef DS_UNARY_GRADIENT

LogicalResult GeluOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys, ArrayRef<bool>,
                                    SmallVectorImpl<Value> &dxs) {
  dxs[0] = GeluGradOp::create(b, getLoc(), typeOf(getInput()), getInput(), dys[0],
                              getApproximateAttr());
  return success();
}

LogicalResult AddOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys, ArrayRef<bool> needed,
                                   SmallVectorImpl<Value> &dxs) {
  if (needed[0])
    dxs[0] = reduceTo(b, getLoc(), dys[0], getLhs());
  if (needed[1])
    dxs[1] = reduceTo(b, getLoc(), dys[0], getRhs());
  return success();
}

LogicalResult SubOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys, ArrayRef<bool> needed,
                                   SmallVectorImpl<Value> &dxs) {
  Value dy = dys[0];
  if (needed[0])
    dxs[0] = reduceTo(b, getLoc(), dy, getLhs());
  if (needed[1])
    dxs[1] = reduceTo(b, getLoc(), NegOp::create(b, getLoc(), typeOf(dy), dy), getRhs());
  return success();
}

LogicalResult MulOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys, ArrayRef<bool> needed,
                                   SmallVectorImpl<Value> &dxs) {
  Location loc = getLoc();
  Value dy = dys[0];
  if (needed[0])
    dxs[0] = reduceTo(b, loc, mul(b, loc, dy, getRhs(), dy), getLhs());
  if (needed[1])
    dxs[1] = reduceTo(b, loc, mul(b, loc, dy, getLhs(), dy), getRhs());
  return success();
}

LogicalResult DivOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys, ArrayRef<bool> needed,
                                   SmallVectorImpl<Value> &dxs) {
  Location loc = getLoc();
  Value dy = dys[0], x = getLhs(), y = getRhs();
  if (needed[0])
    dxs[0] = reduceTo(b, loc, binary(b, loc, "div", dy, y, dy), x);
  if (needed[1]) {
    // -dy * x / (y * y), as PyTorch's div_tensor_other_backward.
    Value yy = binary(b, loc, "mul", y, y, y);
    Value num = mul(b, loc, NegOp::create(b, loc, typeOf(dy), dy), x, dy);
    dxs[1] = reduceTo(b, loc, binary(b, loc, "div", num, yy, dy), y);
  }
  return success();
}

LogicalResult PowOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys, ArrayRef<bool> needed,
                                   SmallVectorImpl<Value> &dxs) {
  Location loc = getLoc();
  Value dy = dys[0], x = getLhs(), e = getRhs(), y = getResult();
  if (needed[0]) {
    // dy * e * x^(e - 1), zero where e == 0 (pow_backward).
    Value em1 = binary(b, loc, "sub", e, scalar(b, loc, e, 1.0), e);
    Value xpow = PowOp::create(b, loc, typeOf(y), x, em1);
    Value g = mul(b, loc, mul(b, loc, dy, e, dy), xpow, dy);
    Value zero = scalar(b, loc, e, 0.0);
    Value isZero = cmp(b, loc, CmpPredicate::eq, e, zero, typeOf(e).getShape());
    g = where(b, loc, isZero, zero, g, g);
    dxs[0] = reduceTo(b, loc, g, x);
  }
  if (needed[1]) {
    // dy * y * log(x), zero where x == 0 and e >= 0 (pow_backward_exponent).
    Value g = mul(b, loc, mul(b, loc, dy, y, dy), LogOp::create(b, loc, typeOf(x), x), dy);
    Value zero = scalar(b, loc, x, 0.0);
    Value xz = cmp(b, loc, CmpPredicate::eq, x, zero, typeOf(x).getShape());
    Value eNonNeg = cmp(b, loc, CmpPredicate::ge, e, zero, typeOf(e).getShape());
    Value falseScalar = splat(b, loc, RankedTensorType::get({}, b.getI1Type()), 0);
    Value mask = WhereOp::create(
        b, loc, RankedTensorType::get(typeOf(dy).getShape(), b.getI1Type()), xz, eNonNeg,
        falseScalar);
    g = where(b, loc, mask, zero, g, g);
    dxs[1] = reduceTo(b, loc, g, e);
  }
  return success();
}

/// maximum/minimum: dy to the larger (smaller) operand, half each on ties.
static LogicalResult minMaxGradient(Operation *op, OpBuilder &b, Value dy, ArrayRef<bool> needed,
                                    SmallVectorImpl<Value> &dxs, CmpPredicate wins) {
  Location loc = op->getLoc();
  Value x = op->getOperand(0), y = op->getOperand(1);
  ArrayRef<int64_t> shape = typeOf(dy).getShape();
  Value zero = scalar(b, loc, dy, 0.0);
  Value half = mul(b, loc, dy, scalar(b, loc, dy, 0.5), dy);
  Value tie = cmp(b, loc, CmpPredicate::eq, x, y, shape);
  Value xWins = cmp(b, loc, wins, x, y, shape);
  Value yWins = cmp(b, loc, wins, y, x, shape);
  if (needed[0])
    dxs[0] = reduceTo(b, loc, where(b, loc, xWins, dy, where(b, loc, tie, half, zero, dy), dy),
                      x);
  if (needed[1])
    dxs[1] = reduceTo(b, loc, where(b, loc, yWins, dy, where(b, loc, tie, half, zero, dy), dy),
                      y);
  return success();
}

LogicalResult MaximumOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys, ArrayRef<bool> needed,
                                       SmallVectorImpl<Value> &dxs) {
  return minMaxGradient(*this, b, dys[0], needed, dxs, CmpPredicate::gt);
}

LogicalResult MinimumOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys, ArrayRef<bool> needed,
                                       SmallVectorImpl<Value> &dxs) {
  return minMaxGradient(*this, b, dys[0], needed, dxs, CmpPredicate::lt);
}

LogicalResult WhereOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys, ArrayRef<bool> needed,
                                     SmallVectorImpl<Value> &dxs) {
  Location loc = getLoc();
  Value dy = dys[0];
  Value zero = scalar(b, loc, dy, 0.0);
  if (needed[1])
    dxs[1] = reduceTo(b, loc, where(b, loc, getCond(), dy, zero, dy), getOnTrue());
  if (needed[2])
    dxs[2] = reduceTo(b, loc, where(b, loc, getCond(), zero, dy, dy), getOnFalse());
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions and normalization
//===----------------------------------------------------------------------===//

/// dy reshaped to the keepdim shape and broadcast back to the input.
static Value expandReduced(OpBuilder &b, Location loc, Value dy, Value input,
                           ArrayRef<int64_t> dims) {
  SmallVector<int64_t> kd = keepdimShape(typeOf(input).getShape(), dims);
  Value r = dy;
  if (typeOf(dy).getShape() != ArrayRef<int64_t>(kd))
    r = ReshapeOp::create(b, loc, withShape(dy, kd), dy);
  return BroadcastToOp::create(b, loc, withShape(dy, typeOf(input).getShape()), r);
}

LogicalResult SumOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys, ArrayRef<bool>,
                                   SmallVectorImpl<Value> &dxs) {
  dxs[0] = expandReduced(b, getLoc(), dys[0], getInput(), getDims());
  return success();
}

LogicalResult MeanOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys, ArrayRef<bool>,
                                    SmallVectorImpl<Value> &dxs) {
  Location loc = getLoc();
  int64_t n = 1;
  for (int64_t d : getDims())
    n *= typeOf(getInput()).getShape()[d];
  Value g = expandReduced(b, loc, dys[0], getInput(), getDims());
  dxs[0] = binary(b, loc, "div", g, scalar(b, loc, g, (double)n), g);
  return success();
}

LogicalResult AmaxOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys, ArrayRef<bool>,
                                    SmallVectorImpl<Value> &dxs) {
  // Evenly among the maxima (amax's rule in derivatives.yaml).
  Location loc = getLoc();
  Value x = getInput();
  ArrayRef<int64_t> xs = typeOf(x).getShape();
  SmallVector<int64_t> kd = keepdimShape(xs, getDims());
  Value y = getResult();
  if (typeOf(y).getShape() != ArrayRef<int64_t>(kd))
    y = ReshapeOp::create(b, loc, withShape(y, kd), y);
  Value isMax = cmp(b, loc, CmpPredicate::eq, x, y, xs);
  Value m = ConvertOp::create(b, loc, typeOf(x), isMax);
  Value count = SumOp::create(b, loc, withShape(x, kd), m, b.getDenseI64ArrayAttr(getDims()),
                              b.getUnitAttr());
  Value dy = dys[0];
  if (typeOf(dy).getShape() != ArrayRef<int64_t>(kd))
    dy = ReshapeOp::create(b, loc, withShape(dy, kd), dy);
  Value share = binary(b, loc, "div", dy, count, count);
  dxs[0] = mul(b, loc, m, share, x);
  return success();
}

LogicalResult SoftmaxOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys, ArrayRef<bool>,
                                       SmallVectorImpl<Value> &dxs) {
  dxs[0] = SoftmaxGradOp::create(b, getLoc(), typeOf(getResult()), getResult(), dys[0],
                                 getDimAttr(), /*log=*/nullptr);
  return success();
}

LogicalResult LogSoftmaxOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys, ArrayRef<bool>,
                                          SmallVectorImpl<Value> &dxs) {
  dxs[0] = SoftmaxGradOp::create(b, getLoc(), typeOf(getResult()), getResult(), dys[0],
                                 getDimAttr(), b.getUnitAttr());
  return success();
}

LogicalResult CumsumOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys, ArrayRef<bool>,
                                      SmallVectorImpl<Value> &dxs) {
  // Each input element reaches every later (earlier, when reversed) running sum.
  dxs[0] = CumsumOp::create(b, getLoc(), typeOf(getResult()), dys[0], getDimAttr(),
                            getReverse() ? UnitAttr() : b.getUnitAttr());
  return success();
}

LogicalResult LinearCrossEntropyOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys,
                                                  ArrayRef<bool>, SmallVectorImpl<Value> &dxs) {
  if (!dys[0])
    return success();
  ArrayRef<int64_t> ws = typeOf(getWeight()).getShape();
  int64_t N = typeOf(getInput()).getShape()[0], V = ws[0], D = ws[1];
  int64_t rows = (N + getTiles() - 1) / getTiles();
  auto wsT = RankedTensorType::get({2 * rows * V + V * D + V}, b.getF32Type());
  auto g = LinearCrossEntropyGradOp::create(
      b, getLoc(), typeOf(getInput()), typeOf(getWeight()), withShape(getWeight(), {V}), wsT,
      getInput(), getWeight(), getBias(), getTarget(), dys[0], getTilesAttr(),
      getIgnoreIndexAttr(), getLabelSmoothingAttr());
  dxs[0] = g.getDx();
  dxs[1] = g.getDweight();
  if (getBias())
    dxs[2] = g.getDbias();
  return success();
}

LogicalResult AttentionOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys,
                                         ArrayRef<bool> needed, SmallVectorImpl<Value> &dxs) {
  if (!dys[0])
    return success(); // nothing but the gradient reads the log-sum-exp
  if (getMask() && needed[3])
    return emitOpError() << "has a mask that needs a gradient (a learned attention bias); the "
                            "fused attention gives none: compute the bias outside the mask or "
                            "train it with the decomposed attention";
  auto g = AttentionGradOp::create(b, getLoc(), typeOf(getQuery()), typeOf(getKey()),
                                   typeOf(getValue()), getQuery(), getKey(), getValue(),
                                   getMask(), getResult(), getLse(), dys[0], getScaleAttr(),
                                   getCausalAttr());
  dxs[0] = g.getDq();
  dxs[1] = g.getDk();
  dxs[2] = g.getDv();
  return success();
}

LogicalResult RingAttentionOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys,
                                             ArrayRef<bool>, SmallVectorImpl<Value> &dxs) {
  if (!dys[0])
    return success(); // nothing but the gradient reads the log-sum-exp
  auto ws = ringAttentionGradWorkspace(typeOf(getQuery()), typeOf(getKey()), typeOf(getValue()));
  auto g = RingAttentionGradOp::create(
      b, getLoc(), typeOf(getQuery()), typeOf(getKey()), typeOf(getValue()), ws, getQuery(),
      getKey(), getValue(), getResult(), getLse(), dys[0], getScaleAttr(), getCausalAttr(),
      getStripedAttr(), getGridAttr(), getGridAxesAttr());
  dxs[0] = g.getDq();
  dxs[1] = g.getDk();
  dxs[2] = g.getDv();
  return success();
}

LogicalResult LayerNormOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys, ArrayRef<bool>,
                                         SmallVectorImpl<Value> &dxs) {
  Value x = getInput();
  RankedTensorType ns = withShape(x, getNormalizedShape());
  auto g = LayerNormGradOp::create(b, getLoc(), typeOf(x), ns, ns, x, dys[0], getWeight(),
                                   getNormalizedShapeAttr(), getEpsAttr());
  dxs[0] = g.getDx();
  if (getWeight())
    dxs[1] = g.getDweight();
  if (getBias())
    dxs[getWeight() ? 2 : 1] = g.getDbias();
  return success();
}

LogicalResult BatchNormOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys, ArrayRef<bool>,
                                         SmallVectorImpl<Value> &dxs) {
  if (!dys[0])
    return success(); // only the running statistics use mean/var
  Value x = getInput();
  RankedTensorType c = withShape(x, {typeOf(x).getShape()[1]});
  auto g = BatchNormGradOp::create(b, getLoc(), typeOf(x), c, c, x, dys[0], getMean(), getVar(),
                                   getWeight(), getEpsAttr());
  dxs[0] = g.getDx();
  if (getWeight())
    dxs[1] = g.getDweight();
  if (getBias())
    dxs[getWeight() ? 2 : 1] = g.getDbias();
  return success();
}

LogicalResult BatchNormInferenceOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys,
                                                  ArrayRef<bool> needed,
                                                  SmallVectorImpl<Value> &dxs) {
  // y = (x - mean) * rsqrt(var + eps) * w + b with fixed statistics.
  Location loc = getLoc();
  Value x = getInput(), dy = dys[0];
  ArrayRef<int64_t> xs = typeOf(x).getShape();
  SmallVector<int64_t> cs(xs.size(), 1);
  cs[1] = xs[1];
  auto toC = [&](Value v) { return ReshapeOp::create(b, loc, withShape(v, cs), v); };
  Value invStd = RsqrtOp::create(
      b, loc, typeOf(getRunningVar()),
      binary(b, loc, "add", getRunningVar(), scalar(b, loc, x, getEps().convertToDouble()),
             getRunningVar()));
  Value scale = invStd;
  if (getWeight())
    scale = mul(b, loc, invStd, getWeight(), invStd);
  unsigned idx = 1;
  if (needed[0])
    dxs[0] = mul(b, loc, dy, toC(scale), dy);
  SmallVector<int64_t> reduceDims;
  for (int64_t i = 0; i < (int64_t)xs.size(); ++i)
    if (i != 1)
      reduceDims.push_back(i);
  RankedTensorType c = withShape(x, {xs[1]});
  if (getWeight()) {
    if (needed[idx]) {
      Value xhat = mul(b, loc, binary(b, loc, "sub", x, toC(getRunningMean()), x), toC(invStd), x);
      dxs[idx] = SumOp::create(b, loc, c, mul(b, loc, dy, xhat, dy),
                               b.getDenseI64ArrayAttr(reduceDims), nullptr);
    }
    ++idx;
  }
  if (getBias() && needed[idx])
    dxs[idx] = SumOp::create(b, loc, c, dy, b.getDenseI64ArrayAttr(reduceDims), nullptr);
  return success();
}

//===----------------------------------------------------------------------===//
// Linear algebra, lookups, losses
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys, ArrayRef<bool> needed,
                                      SmallVectorImpl<Value> &dxs) {
  Location loc = getLoc();
  Value a = getLhs(), c = getRhs(), dy = dys[0];
  ArrayRef<int64_t> ys = typeOf(dy).getShape();
  if (needed[0]) {
    Value ct = transposeLast2(b, loc, c);
    SmallVector<int64_t> shape(ys);
    shape.back() = typeOf(a).getShape().back();
    Value g = MatmulOp::create(b, loc, withShape(a, shape), dy, ct);
    dxs[0] = reduceTo(b, loc, g, a);
  }
  if (needed[1]) {
    Value at = transposeLast2(b, loc, a);
    SmallVector<int64_t> shape(ys);
    shape[shape.size() - 2] = typeOf(c).getShape()[typeOf(c).getRank() - 2];
    Value g = MatmulOp::create(b, loc, withShape(c, shape), at, dy);
    dxs[1] = reduceTo(b, loc, g, c);
  }
  return success();
}

LogicalResult LinearOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys, ArrayRef<bool> needed,
                                      SmallVectorImpl<Value> &dxs) {
  Location loc = getLoc();
  Value x = getInput(), w = getWeight(), dy = dys[0];
  ArrayRef<int64_t> xs = typeOf(x).getShape();
  int64_t out = typeOf(w).getShape()[0], in = typeOf(w).getShape()[1];
  if (needed[0]) {
    int64_t rows = 1;
    for (int64_t d : xs.drop_back())
      rows *= d;
    Value dy2 = ReshapeOp::create(b, loc, withShape(dy, {rows, out}), dy);
    Value dx2 = MatmulOp::create(b, loc, withShape(x, {rows, in}), dy2, w);
    dxs[0] = ReshapeOp::create(b, loc, typeOf(x), dx2);
  }
  if (needed[1] || (getBias() && needed[2])) {
    auto g = LinearGradWeightOp::create(b, loc, typeOf(w), withShape(w, {out}), x, dy);
    if (needed[1])
      dxs[1] = g.getDweight();
    if (getBias() && needed[2])
      dxs[2] = g.getDbias();
  }
  return success();
}

/// A value v at a chosen position goes back to it: dx = sum_j onehot(indices[..., j]) dv[..., j]
/// (the one-hot [..., k, n] compares the indices with 0..n-1; k and n are a router's few).
LogicalResult TopKOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys, ArrayRef<bool>,
                                    SmallVectorImpl<Value> &dxs) {
  Location loc = getLoc();
  Value x = getInput(), dv = dys[0], idx = getIndices();
  if (!dv)
    return success();
  ArrayRef<int64_t> xs = typeOf(x).getShape();
  int64_t n = xs.back(), r = xs.size();
  SmallVector<int64_t> column(typeOf(idx).getShape()), iotaShape(r + 1, 1), pairs(column);
  column.push_back(1);
  iotaShape.back() = n;
  pairs.push_back(n);
  auto i64 = RankedTensorType::get(iotaShape, b.getI64Type());
  SmallVector<int64_t> iota(n);
  for (int64_t i = 0; i < n; ++i)
    iota[i] = i;
  Value positions = ConstantOp::create(b, loc, DenseElementsAttr::get(i64, ArrayRef(iota)));
  Value idxColumn =
      ReshapeOp::create(b, loc, RankedTensorType::get(column, b.getI64Type()), idx);
  Value hit = cmp(b, loc, CmpPredicate::eq, idxColumn, positions, pairs);
  Value onehot = ConvertOp::create(b, loc, withShape(x, pairs), hit);
  Value dvColumn = ReshapeOp::create(b, loc, withShape(x, column), dv);
  Value spread = mul(b, loc, onehot, dvColumn, onehot);
  dxs[0] = SumOp::create(b, loc, typeOf(x), spread, b.getDenseI64ArrayAttr({r - 1}), nullptr);
  return success();
}

/// dx = expert_linear(dy, w, ids) with the weight's other orientation; dw per expert.
LogicalResult ExpertLinearOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys,
                                            ArrayRef<bool> needed,
                                            SmallVectorImpl<Value> &dxs) {
  Location loc = getLoc();
  Value x = getInput(), w = getWeight(), ids = getExpertIds(), dy = dys[0];
  if (needed[0])
    dxs[0] = ExpertLinearOp::create(b, loc, typeOf(x), dy, w, ids,
                                    getTransposed() ? UnitAttr() : b.getUnitAttr());
  if (needed[1])
    dxs[1] = ExpertLinearGradWeightOp::create(b, loc, typeOf(w), x, dy, ids,
                                              getTransposedAttr());
  return success();
}

LogicalResult SwigluOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys, ArrayRef<bool>,
                                      SmallVectorImpl<Value> &dxs) {
  dxs[0] = SwigluGradOp::create(b, getLoc(), typeOf(getInput()), getInput(), dys[0], getRows());
  return success();
}

/// Dispatch and combine are each other's adjoints along the same plan.
LogicalResult ExpertDispatchOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys,
                                              ArrayRef<bool>, SmallVectorImpl<Value> &dxs) {
  dxs[0] = ExpertCombineOp::create(b, getLoc(), typeOf(getInput()), dys[0], getPlan(),
                                   getGridAttr(), getGridAxesAttr());
  return success();
}

LogicalResult ExpertCombineOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys,
                                             ArrayRef<bool>, SmallVectorImpl<Value> &dxs) {
  dxs[0] = ExpertDispatchOp::create(b, getLoc(), typeOf(getInput()), dys[0], getPlan(),
                                    getGridAttr(), getGridAxesAttr());
  return success();
}

LogicalResult EmbeddingOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys, ArrayRef<bool>,
                                         SmallVectorImpl<Value> &dxs) {
  dxs[0] = EmbeddingGradOp::create(b, getLoc(), typeOf(getWeight()), dys[0], getIndices(),
                                   getPaddingIdxAttr());
  return success();
}

LogicalResult CrossEntropyOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys, ArrayRef<bool>,
                                            SmallVectorImpl<Value> &dxs) {
  dxs[0] = CrossEntropyGradOp::create(b, getLoc(), typeOf(getLogits()), getLogits(), getTarget(),
                                      dys[0], getIgnoreIndexAttr(), getReductionAttr(),
                                      getLabelSmoothingAttr());
  return success();
}

//===----------------------------------------------------------------------===//
// Shapes
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys, ArrayRef<bool>,
                                       SmallVectorImpl<Value> &dxs) {
  dxs[0] = ReshapeOp::create(b, getLoc(), typeOf(getInput()), dys[0]);
  return success();
}

LogicalResult TransposeOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys, ArrayRef<bool>,
                                         SmallVectorImpl<Value> &dxs) {
  ArrayRef<int64_t> perm = getPermutation();
  SmallVector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inverse[perm[i]] = i;
  dxs[0] = TransposeOp::create(b, getLoc(), typeOf(getInput()), dys[0],
                               b.getDenseI64ArrayAttr(inverse));
  return success();
}

LogicalResult BroadcastToOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys, ArrayRef<bool>,
                                           SmallVectorImpl<Value> &dxs) {
  dxs[0] = reduceTo(b, getLoc(), dys[0], getInput());
  return success();
}

LogicalResult SliceOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys, ArrayRef<bool>,
                                     SmallVectorImpl<Value> &dxs) {
  Location loc = getLoc();
  Value zeros = splat(b, loc, typeOf(getInput()), 0.0);
  dxs[0] = InsertSliceOp::create(b, loc, typeOf(getInput()), dys[0], zeros, getDimAttr(),
                                 getStartAttr(), getStepAttr());
  return success();
}

LogicalResult ConcatOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys, ArrayRef<bool> needed,
                                      SmallVectorImpl<Value> &dxs) {
  int64_t dim = getDim(), offset = 0;
  for (auto [i, input] : llvm::enumerate(getInputs())) {
    int64_t size = typeOf(input).getShape()[dim];
    if (needed[i])
      dxs[i] = SliceOp::create(b, getLoc(), typeOf(input), dys[0], getDimAttr(),
                               b.getI64IntegerAttr(offset), b.getI64IntegerAttr(offset + size),
                               b.getI64IntegerAttr(1));
    offset += size;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

LogicalResult Conv2dOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys, ArrayRef<bool> needed,
                                      SmallVectorImpl<Value> &dxs) {
  Location loc = getLoc();
  Value dy = dys[0];
  if (needed[0])
    dxs[0] = Conv2dGradInputOp::create(b, loc, typeOf(getInput()), dy, getWeight(),
                                       getStrideAttr(), getPaddingAttr(), getDilationAttr(),
                                       getGroupsAttr());
  if (needed[1] || (getBias() && needed[2])) {
    RankedTensorType bt = withShape(dy, {typeOf(getWeight()).getShape()[0]});
    auto g = Conv2dGradWeightOp::create(b, loc, typeOf(getWeight()), bt, getInput(), dy,
                                        getStrideAttr(), getPaddingAttr(), getDilationAttr(),
                                        getGroupsAttr());
    if (needed[1])
      dxs[1] = g.getDweight();
    if (getBias() && needed[2])
      dxs[2] = g.getDbias();
  }
  return success();
}

LogicalResult MaxPool2dOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys, ArrayRef<bool>,
                                         SmallVectorImpl<Value> &dxs) {
  dxs[0] = MaxPool2dGradOp::create(b, getLoc(), typeOf(getInput()), getInput(), dys[0],
                                   getKernelSizeAttr(), getStrideAttr(), getPaddingAttr(),
                                   getDilationAttr(), getCeilModeAttr());
  return success();
}

LogicalResult AvgPool2dOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys, ArrayRef<bool>,
                                         SmallVectorImpl<Value> &dxs) {
  dxs[0] = AvgPool2dGradOp::create(b, getLoc(), typeOf(getInput()), dys[0], getKernelSizeAttr(),
                                   getStrideAttr(), getPaddingAttr(), getCeilModeAttr(),
                                   getCountIncludePadAttr());
  return success();
}

LogicalResult AdaptiveAvgPool2dOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys,
                                                 ArrayRef<bool>, SmallVectorImpl<Value> &dxs) {
  dxs[0] = AdaptiveAvgPool2dGradOp::create(b, getLoc(), typeOf(getInput()), dys[0]);
  return success();
}
