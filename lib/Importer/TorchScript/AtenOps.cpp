//===- AtenOps.cpp - aten tensor ops to ds ops -----------------------------===//
//
// One handler per aten op (in-place variants reuse the functional one). Handlers check shapes
// with the functions of DSShapes.h, so a rejected shape is reported at the op's Python line.
//
#include "OpHelpers.h"

#include <cmath>

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::ts;
using torch::jit::Node;
using Kind = AV::Kind;
using R = std::vector<AV>;

namespace mlir::ds::ts::ops {

int category(Type t) { return t.isInteger(1) ? 0 : isa<IntegerType>(t) ? 1 : 2; }

bool anyGrad(ArrayRef<AV> values) {
  return llvm::any_of(values, [](const AV &v) { return v.isTensor() && v.requiresGrad; });
}

/// PyTorch's result type for mixing tensors of any rank and Python numbers.
Type promote(Interpreter &I, ArrayRef<AV> operands) {
  Type byPriority[3];
  for (const AV &v : operands) {
    int prio = !v.isTensor() ? 0 : v.rank() == 0 ? 1 : 2;
    Type t;
    if (v.isTensor())
      t = v.type().getElementType();
    else if (v.kind == Kind::Double)
      t = I.b().getF32Type();
    else if (v.kind == Kind::Int)
      t = I.b().getI64Type();
    else if (v.kind == Kind::Bool)
      t = I.b().getI1Type();
    else
      continue;
    Type &cur = byPriority[prio];
    if (!cur || category(t) > category(cur) ||
        (category(t) == category(cur) && t.getIntOrFloatBitWidth() > cur.getIntOrFloatBitWidth()))
      cur = t;
  }
  Type result;
  for (int prio = 2; prio >= 0; --prio) {
    Type t = byPriority[prio];
    if (!t)
      continue;
    if (!result)
      result = t;
    else if (category(t) > category(result))
      result = prio == 0 ? (category(t) == 2 ? Type(I.b().getF32Type()) : Type(I.b().getI64Type())) : t;
  }
  return result;
}

int64_t normDim(int64_t d, int64_t rank) { return d < 0 ? d + rank : d; }

FailureOr<int64_t> dimArg(Interpreter &I, const AV &v, int64_t rank) {
  if (v.kind != Kind::Int)
    return I.error() << "expected a dimension, got " << v.describe(), failure();
  int64_t d = normDim(v.i, std::max<int64_t>(rank, 1));
  if (d < 0 || d >= std::max<int64_t>(rank, 1))
    return I.error() << "dimension " << v.i << " is out of range for rank " << rank, failure();
  return d;
}

FailureOr<SmallVector<int64_t>> intList(Interpreter &I, const AV &v, size_t broadcastTo) {
  SmallVector<int64_t> out;
  if (v.kind == Kind::Int) {
    out.assign(std::max<size_t>(broadcastTo, 1), v.i);
    return out;
  }
  if (v.kind != Kind::List && v.kind != Kind::Tuple)
    return I.error() << "expected a list of ints, got " << v.describe(), failure();
  for (const AV &e : *v.elems) {
    if (e.kind != Kind::Int)
      return I.error() << "expected a list of ints, got an element " << e.describe(), failure();
    out.push_back(e.i);
  }
  if (broadcastTo && out.size() == 1)
    out.assign(broadcastTo, out[0]);
  return out;
}

FailureOr<AV> tensorArg(Interpreter &I, const AV &v) {
  if (!v.isTensor())
    return I.error() << "expected a tensor, got " << v.describe(), failure();
  return v;
}

AV result(Value v, ArrayRef<AV> from) {
  bool grad = isa<FloatType>(cast<RankedTensorType>(v.getType()).getElementType()) && anyGrad(from);
  return AV::ofTensor(v, grad);
}

RankedTensorType tensorOf(ArrayRef<int64_t> shape, Type et) {
  return RankedTensorType::get(shape, et);
}


FailureOr<AV> compare(Interpreter &I, CmpPredicate pred, const AV &a, const AV &b) {
  Type type = promote(I, {a, b});
  auto ta = I.asTensor(a, type), tb = I.asTensor(b, type);
  if (failed(ta) || failed(tb))
    return failure();
  auto shape = broadcastShapes(ta->shape(), tb->shape(), I.shapeError());
  if (failed(shape))
    return failure();
  Value v = CmpOp::create(I.b(), I.loc(), tensorOf(*shape, I.b().getI1Type()), pred,
                          ta->tensor, tb->tensor);
  return AV::ofTensor(v, false);
}

FailureOr<AV> reshape(Interpreter &I, const AV &x, ArrayRef<int64_t> shape) {
  if (x.shape() == shape)
    return x;
  if (numElements(x.shape()) != numElements(shape))
    return I.error() << "cannot reshape " << formatShape(x.shape()) << " ("
                     << numElements(x.shape()) << " elements) to " << formatShape(shape),
           failure();
  Value v = ReshapeOp::create(I.b(), I.loc(), x.type().clone(shape), x.tensor);
  return result(v, {x});
}

FailureOr<AV> scaled(Interpreter &I, const AV &x, const AV &factor) {
  if (factor.isNumber() && factor.asDouble() == 1.0)
    return x;
  return binary<MulOp>(I, x, factor);
}

/// Resolves a view/reshape size list with at most one -1.
FailureOr<Shape> resolveSize(Interpreter &I, const AV &x, const AV &sizeArg) {
  auto size = intList(I, sizeArg);
  if (failed(size))
    return failure();
  Shape out(size->begin(), size->end());
  int64_t known = 1, inferred = -1;
  for (auto [k, d] : llvm::enumerate(out)) {
    if (d == -1) {
      if (inferred >= 0)
        return I.error() << "only one dimension can be -1 in " << formatShape(out), failure();
      inferred = k;
    } else if (d < 0) {
      return I.error() << "invalid size " << d << " in " << formatShape(out), failure();
    } else {
      known *= d;
    }
  }
  int64_t total = numElements(x.shape());
  if (inferred >= 0) {
    if (known == 0 || total % known)
      return I.error() << "cannot view " << formatShape(x.shape()) << " as " << formatShape(out),
             failure();
    out[inferred] = total / known;
  }
  return out;
}

FailureOr<AV> slice(Interpreter &I, const AV &x, int64_t dim, int64_t start, int64_t end,
                    int64_t step) {
  int64_t n = x.shape()[dim];
  if (start < 0)
    start += n;
  if (end < 0)
    end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  if (start == 0 && end == n && step == 1)
    return x;
  auto shape = sliceShape(x.shape(), dim, start, end, step, I.shapeError());
  if (failed(shape))
    return failure();
  Value v = SliceOp::create(I.b(), I.loc(), x.type().clone(*shape), x.tensor, dim, start, end,
                            step);
  return result(v, {x});
}

FailureOr<AV> select(Interpreter &I, const AV &x, int64_t dim, int64_t index) {
  int64_t n = x.shape()[dim];
  if (index < -n || index >= n)
    return I.error() << "index " << index << " is out of range for dimension " << dim
                     << " of size " << n,
           failure();
  if (index < 0)
    index += n;
  auto s = slice(I, x, dim, index, index + 1, 1);
  if (failed(s))
    return failure();
  Shape shape(x.shape().begin(), x.shape().end());
  shape.erase(shape.begin() + dim);
  return reshape(I, *s, shape);
}

FailureOr<AV> transpose(Interpreter &I, const AV &x, ArrayRef<int64_t> perm) {
  bool identity = true;
  for (auto [k, p] : llvm::enumerate(perm))
    identity &= (int64_t)k == p;
  if (identity)
    return x;
  auto shape = transposeShape(x.shape(), perm, I.shapeError());
  if (failed(shape))
    return failure();
  Value v = TransposeOp::create(I.b(), I.loc(), x.type().clone(*shape), x.tensor, perm);
  return result(v, {x});
}

FailureOr<AV> concat(Interpreter &I, ArrayRef<AV> xs, int64_t dim) {
  if (xs.size() == 1)
    return xs[0];
  Type type = promote(I, xs);
  SmallVector<Value> values;
  SmallVector<Shape> shapes;
  std::vector<AV> converted;
  for (const AV &x : xs) {
    auto t = I.asTensor(x, type);
    if (failed(t))
      return failure();
    converted.push_back(*t);
    values.push_back(t->tensor);
    shapes.emplace_back(t->shape());
  }
  auto shape = concatShape(shapes, dim, I.shapeError());
  if (failed(shape))
    return failure();
  Value v = ConcatOp::create(I.b(), I.loc(), tensorOf(*shape, type), values, dim);
  return result(v, converted);
}

FailureOr<AV> where(Interpreter &I, const AV &cond, const AV &onTrue, const AV &onFalse,
                    Type type) {
  auto tt = I.asTensor(onTrue, type), tf = I.asTensor(onFalse, type);
  if (failed(tt) || failed(tf))
    return failure();
  if (cond.type().getElementType() != I.b().getI1Type())
    return I.error() << "the condition/mask must be a bool tensor, got " << cond.describe(),
           failure();
  auto partial = broadcastShapes(tt->shape(), tf->shape(), I.shapeError());
  if (failed(partial))
    return failure();
  auto shape = broadcastShapes(cond.shape(), *partial, I.shapeError());
  if (failed(shape))
    return failure();
  Value v = WhereOp::create(I.b(), I.loc(), tensorOf(*shape, type), cond.tensor, tt->tensor,
                            tf->tensor);
  return result(v, {*tt, *tf});
}


FailureOr<AV> constantTensor(Interpreter &I, ArrayRef<int64_t> shape, Type et,
                             llvm::function_ref<double(int64_t)> valueAt) {
  auto type = tensorOf(shape, et);
  int64_t n = numElements(shape);
  DenseElementsAttr attr;
  if (auto ft = dyn_cast<FloatType>(et)) {
    SmallVector<APFloat> vals;
    for (int64_t k = 0; k < n; ++k) {
      APFloat f(valueAt(k));
      bool lost;
      f.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
      vals.push_back(f);
    }
    attr = DenseElementsAttr::get(type, vals);
  } else if (et.isInteger(1)) {
    SmallVector<bool> vals;
    for (int64_t k = 0; k < n; ++k)
      vals.push_back(valueAt(k) != 0);
    attr = DenseElementsAttr::get(type, vals);
  } else {
    SmallVector<APInt> vals;
    for (int64_t k = 0; k < n; ++k)
      vals.push_back(APInt(et.getIntOrFloatBitWidth(), (int64_t)valueAt(k), true));
    attr = DenseElementsAttr::get(type, vals);
  }
  AV out = AV::ofTensor(I.constant(attr, type), false);
  if (shape.empty())
    out.scalar = valueAt(0);
  return out;
}

/// Wraps a functional handler as its in-place variant (`add_`, `relu_`, ...).
OpHandler inPlace(OpHandler functional) {
  return [functional](Interpreter &I, Node *node, R &in) -> FailureOr<R> {
    auto out = functional(I, node, in);
    if (failed(out))
      return failure();
    if (failed(I.assignInPlace(node->inputs()[0], in[0], (*out)[0])))
      return failure();
    return out;
  };
}

template <typename OpTy>
OpHandler binaryHandler() {
  return [](Interpreter &I, Node *, R &in) -> FailureOr<R> {
    auto r = binary<OpTy>(I, in[0], in[1]);
    if (failed(r))
      return failure();
    return one(*r);
  };
}

template <typename OpTy>
OpHandler unaryHandler() {
  return [](Interpreter &I, Node *, R &in) -> FailureOr<R> {
    auto x = tensorArg(I, in[0]);
    if (failed(x))
      return failure();
    auto r = unaryFloat<OpTy>(I, *x);
    if (failed(r))
      return failure();
    return one(*r);
  };
}

OpHandler compareHandler(CmpPredicate pred) {
  return [pred](Interpreter &I, Node *, R &in) -> FailureOr<R> {
    auto r = compare(I, pred, in[0], in[1]);
    if (failed(r))
      return failure();
    return one(*r);
  };
}


FailureOr<R> addSub(Interpreter &I, R &in, bool subtract, bool reversed) {
  AV alpha = in.size() > 2 ? in[2] : AV::integer(1);
  AV a = reversed ? in[1] : in[0], b = reversed ? in[0] : in[1];
  TRY(sb, scaled(I, b, alpha));
  auto r = subtract ? binary<SubOp>(I, a, *sb, promote(I, {a, b})) :
                      binary<AddOp>(I, a, *sb, promote(I, {a, b}));
  if (failed(r))
    return failure();
  return one(*r);
}

FailureOr<R> divide(Interpreter &I, R &in) {
  if (in.size() > 2 && !in[2].isNone())
    return I.error() << "division with rounding_mode=" << in[2].describe()
                     << " is not supported on tensors",
           failure();
  Type type = promote(I, {in[0], in[1]});
  if (!isa<FloatType>(type))
    type = I.b().getF32Type();
  TRY(r, binary<DivOp>(I, in[0], in[1], type));
  return one(*r);
}

FailureOr<R> matmul(Interpreter &I, const AV &a0, const AV &b0) {
  AV a = a0, b = b0;
  bool squeezeM = false, squeezeN = false;
  if (a.rank() == 0 || b.rank() == 0)
    return I.error() << "matmul of a 0-d tensor", failure();
  if (a.rank() == 1) {
    TRY(r, reshape(I, a, {1, a.shape()[0]}));
    a = *r;
    squeezeM = true;
  }
  if (b.rank() == 1) {
    TRY(r, reshape(I, b, {b.shape()[0], 1}));
    b = *r;
    squeezeN = true;
  }
  TRY(shape, matmulShape(a.shape(), b.shape(), I.shapeError()));
  Type type = a.type().getElementType();
  if (b.type().getElementType() != type)
    return I.error() << "matmul of " << a.describe() << " and " << b.describe(), failure();
  Value v = MatmulOp::create(I.b(), I.loc(), tensorOf(*shape, type), a.tensor, b.tensor);
  AV out = result(v, {a, b});
  Shape final(shape->begin(), shape->end());
  if (squeezeN)
    final.erase(final.end() - 1);
  if (squeezeM)
    final.erase(final.end() - (squeezeN ? 1 : 2));
  TRY(r, reshape(I, out, final));
  return one(*r);
}

FailureOr<R> matmulAdd(Interpreter &I, R &in, int rank) {
  // baddbmm / addmm: beta * input + alpha * (b1 @ b2)
  TRY(b1, tensorArg(I, in[1]));
  TRY(b2, tensorArg(I, in[2]));
  if (b1->rank() != rank || b2->rank() != rank)
    return I.error() << "expects " << rank << "-D operands, got " << b1->describe() << " and "
                     << b2->describe(),
           failure();
  TRY(prod, matmul(I, *b1, *b2));
  TRY(scaledProd, scaled(I, (*prod)[0], in.size() > 4 ? in[4] : AV::integer(1)));
  AV beta = in.size() > 3 ? in[3] : AV::integer(1);
  if (beta.isNumber() && beta.asDouble() == 0)
    return one(*scaledProd);
  TRY(input, scaled(I, in[0], beta));
  TRY(sum, binary<AddOp>(I, *input, *scaledProd));
  if (sum->shape() != scaledProd->shape())
    return I.error() << "input " << formatShape(in[0].shape())
                     << " does not broadcast to the product " << formatShape(scaledProd->shape()),
           failure();
  return one(*sum);
}

FailureOr<R> reduce(Interpreter &I, Node *, R &in, StringRef which) {
  TRY(x, tensorArg(I, in[0]));
  SmallVector<int64_t> dims;
  bool keepdim = false;
  AV dtype = AV::none();
  if (in.size() <= 2) { // sum(x, dtype) / mean(x, dtype): all dimensions
    for (int64_t d = 0; d < x->rank(); ++d)
      dims.push_back(d);
    if (in.size() == 2)
      dtype = in[1];
  } else {
    if (in[1].isNone()) {
      for (int64_t d = 0; d < x->rank(); ++d)
        dims.push_back(d);
    } else {
      TRY(list, intList(I, in[1]));
      for (int64_t d : *list) {
        TRY(nd, dimArg(I, AV::integer(d), x->rank()));
        dims.push_back(*nd);
      }
      if (list->empty()) // ATen: sum(x, dim=[]) reduces every dimension
        for (int64_t d = 0; d < x->rank(); ++d)
          dims.push_back(d);
    }
    keepdim = in[2].kind == Kind::Bool && in[2].b;
    if (in.size() > 3)
      dtype = in[3];
  }
  Type et = x->type().getElementType();
  if (which == "mean" && !isa<FloatType>(et) && dtype.isNone())
    return I.error() << "mean of an integer tensor needs a floating dtype", failure();
  if (which == "sum" && dtype.isNone() && isa<IntegerType>(et))
    dtype = AV::integer((int64_t)c10::ScalarType::Long);
  TRY(target, I.dtypeArg(dtype, et));
  TRY(xc, I.asTensor(*x, *target));
  llvm::sort(dims);
  TRY(shape, reduceShape(xc->shape(), dims, keepdim, I.shapeError()));
  auto type = tensorOf(*shape, *target);
  Value v;
  if (which == "sum")
    v = SumOp::create(I.b(), I.loc(), type, xc->tensor, dims, keepdim);
  else if (which == "mean")
    v = MeanOp::create(I.b(), I.loc(), type, xc->tensor, dims, keepdim);
  else
    v = AmaxOp::create(I.b(), I.loc(), type, xc->tensor, dims, keepdim);
  return one(result(v, {*xc}));
}

FailureOr<R> softmaxLike(Interpreter &I, R &in, bool log) {
  TRY(x, tensorArg(I, in[0]));
  TRY(dim, dimArg(I, in[1], x->rank()));
  AV dtype = in.size() > 2 && in[2].kind == Kind::Int ? in[2] : AV::none();
  TRY(et, I.dtypeArg(dtype, x->type().getElementType()));
  TRY(xc, I.asTensor(*x, *et));
  if (!isa<FloatType>(*et))
    return I.error() << "expects a floating-point tensor", failure();
  Value v = log ? (Value)LogSoftmaxOp::create(I.b(), I.loc(), xc->tensor, *dim)
                : (Value)SoftmaxOp::create(I.b(), I.loc(), xc->tensor, *dim);
  return one(result(v, {*xc}));
}

FailureOr<R> cumsum(Interpreter &I, R &in) {
  // torch.cumsum: integers and booleans sum as int64 unless a dtype is given.
  TRY(x, tensorArg(I, in[0]));
  TRY(dim, dimArg(I, in[1], x->rank()));
  Type xt = x->type().getElementType();
  Type fallback = isa<FloatType>(xt) ? xt : Type(I.b().getI64Type());
  AV dtype = in.size() > 2 && in[2].kind == Kind::Int ? in[2] : AV::none();
  TRY(et, I.dtypeArg(dtype, fallback));
  TRY(xc, I.asTensor(*x, *et));
  Value v = CumsumOp::create(I.b(), I.loc(), xc->tensor, I.b().getI64IntegerAttr(*dim),
                             UnitAttr());
  return one(result(v, {*xc}));
}

FailureOr<R> dropout(Interpreter &I, R &in) {
  TRY(x, tensorArg(I, in[0]));
  double p = in[1].asDouble();
  bool train = in[2].kind == Kind::Bool && in[2].b;
  if (p < 0 || p > 1)
    return I.error() << "dropout probability " << p << " is not in [0, 1]", failure();
  if (!train || p == 0)
    return one(*x);
  if (p == 1)
    return I.error() << "dropout with p=1 zeroes its input; remove the layer", failure();
  Value v = DropoutOp::create(I.b(), I.loc(), x->tensor, I.b().getF64FloatAttr(p));
  return one(result(v, {*x}));
}

FailureOr<R> linear(Interpreter &I, R &in) {
  TRY(x, tensorArg(I, in[0]));
  TRY(w, tensorArg(I, in[1]));
  Value bias;
  std::optional<ArrayRef<int64_t>> biasShape;
  if (in.size() > 2 && in[2].isTensor()) {
    bias = in[2].tensor;
    biasShape = in[2].shape();
  }
  TRY(shape, linearShape(x->shape(), w->shape(), biasShape, I.shapeError()));
  Value v = LinearOp::create(I.b(), I.loc(), tensorOf(*shape, x->type().getElementType()),
                             x->tensor, w->tensor, bias);
  return one(result(v, {*x, *w, in.size() > 2 ? in[2] : AV::none()}));
}

FailureOr<R> embedding(Interpreter &I, R &in) {
  TRY(w, tensorArg(I, in[0]));
  TRY(idx, tensorArg(I, in[1]));
  if (!isa<IntegerType>(idx->type().getElementType()) || idx->type().getElementType().isInteger(1))
    return I.error() << "embedding indices must be an integer tensor, got " << idx->describe(),
           failure();
  if (in.size() > 3 && in[3].kind == Kind::Bool && in[3].b)
    return I.error() << "embedding with scale_grad_by_freq=True is not supported", failure();
  TRY(shape, embeddingShape(w->shape(), idx->shape(), I.shapeError()));
  IntegerAttr padding;
  if (in.size() > 2 && in[2].kind == Kind::Int && in[2].i >= 0)
    padding = I.b().getI64IntegerAttr(in[2].i);
  Value v = EmbeddingOp::create(I.b(), I.loc(), tensorOf(*shape, w->type().getElementType()),
                                w->tensor, idx->tensor, padding);
  return one(result(v, {*w}));
}

FailureOr<R> layerNorm(Interpreter &I, R &in) {
  TRY(x, tensorArg(I, in[0]));
  TRY(norm, intList(I, in[1]));
  Value w = in[2].isTensor() ? in[2].tensor : Value();
  Value b = in[3].isTensor() ? in[3].tensor : Value();
  ArrayRef<int64_t> shape = x->shape();
  if (norm->size() > shape.size() || shape.take_back(norm->size()) != ArrayRef<int64_t>(*norm))
    return I.error() << "normalized_shape " << formatShape(*norm)
                     << " is not the trailing dimensions of the input " << formatShape(shape),
           failure();
  if (failed(checkNormParams(*norm, w ? std::optional(in[2].shape()) : std::nullopt,
                             b ? std::optional(in[3].shape()) : std::nullopt, "layer_norm",
                             I.shapeError())))
    return failure();
  Value v = LayerNormOp::create(I.b(), I.loc(), x->type(), x->tensor, w, b,
                                I.b().getDenseI64ArrayAttr(*norm),
                                I.b().getF64FloatAttr(in[4].asDouble()));
  return one(result(v, {*x, in[2], in[3]}));
}

FailureOr<R> crossEntropy(Interpreter &I, R &in) {
  TRY(logits, tensorArg(I, in[0]));
  TRY(target, tensorArg(I, in[1]));
  if (!in[2].isNone())
    return I.error() << "cross_entropy with class weights is not supported", failure();
  if (isa<FloatType>(target->type().getElementType()))
    return I.error() << "cross_entropy with probability targets is not supported; pass class "
                        "indices",
           failure();
  int64_t red = in[3].i;
  if (red < 0 || red > 2)
    return I.error() << "unknown reduction " << red, failure();
  Reduction reduction = red == 0 ? Reduction::none : red == 1 ? Reduction::mean : Reduction::sum;
  AV lg = *logits, tg = *target;
  Shape restore;
  if (lg.rank() > 2) {
    // [N, C, d...] -> [N*d..., C]; targets [N, d...] -> [N*d...].
    SmallVector<int64_t> perm{0};
    for (int64_t k = 2; k < lg.rank(); ++k)
      perm.push_back(k);
    perm.push_back(1);
    TRY(t, transpose(I, lg, perm));
    int64_t c = lg.shape()[1];
    TRY(flat, reshape(I, *t, {numElements(lg.shape()) / c, c}));
    restore.assign(tg.shape().begin(), tg.shape().end());
    TRY(tflat, reshape(I, tg, {numElements(tg.shape())}));
    lg = *flat;
    tg = *tflat;
  }
  TRY(shape, crossEntropyShape(lg.shape(), tg.shape(), reduction != Reduction::none,
                               I.shapeError()));
  Value v = CrossEntropyOp::create(
      I.b(), I.loc(), tensorOf(*shape, lg.type().getElementType()), lg.tensor, tg.tensor,
      I.b().getI64IntegerAttr(in[4].i), ReductionAttr::get(I.b().getContext(), reduction),
      I.b().getF64FloatAttr(in[5].asDouble()));
  AV out = result(v, {lg});
  if (!restore.empty() && reduction == Reduction::none) {
    TRY(r, reshape(I, out, restore));
    return one(*r);
  }
  return one(out);
}

FailureOr<R> conv2d(Interpreter &I, const AV &x, const AV &w, const AV &bias, const AV &strideA,
                    const AV &paddingA, const AV &dilationA, int64_t groups) {
  if (!x.isTensor() || !w.isTensor())
    return I.error() << "conv2d expects tensors", failure();
  if (paddingA.kind == Kind::String)
    return I.error() << "conv2d with padding='" << paddingA.s << "' is not supported; give "
                        "explicit padding",
           failure();
  TRY(stride, intList(I, strideA, 2));
  TRY(padding, intList(I, paddingA, 2));
  TRY(dilation, intList(I, dilationA, 2));
  if (stride->size() != 2 || padding->size() != 2 || dilation->size() != 2)
    return I.error() << "only 2-D convolution is supported", failure();
  std::optional<ArrayRef<int64_t>> biasShape;
  if (bias.isTensor())
    biasShape = bias.shape();
  TRY(shape, conv2dShape(x.shape(), w.shape(), biasShape, *stride, *padding, *dilation, groups,
                         I.shapeError()));
  Value v = Conv2dOp::create(I.b(), I.loc(), tensorOf(*shape, x.type().getElementType()),
                             x.tensor, w.tensor, bias.isTensor() ? bias.tensor : Value(),
                             *stride, *padding, *dilation, groups);
  return one(result(v, {x, w, bias}));
}

FailureOr<BatchNormResults> batchNormTraining(Interpreter &I, const AV &x, const AV &w,
                                              const AV &b, const AV &rm, const AV &rv,
                                              const AV &momentum, double eps) {
  int64_t c = x.shape()[1];
  int64_t perChannel = numElements(x.shape()) / c;
  if (perChannel <= 1)
    return I.error() << "batch_norm in training needs more than one value per channel, got "
                        "input "
                     << formatShape(x.shape()),
           failure();
  Value wv = w.isTensor() ? w.tensor : Value(), bv = b.isTensor() ? b.tensor : Value();
  auto statType = tensorOf({c}, x.type().getElementType());
  auto bn = BatchNormOp::create(I.b(), I.loc(), x.type(), statType, statType, x.tensor, wv, bv,
                                I.b().getF64FloatAttr(eps));
  BatchNormResults r;
  r.output = result(bn.getResult(), {x, w, b});
  r.mean = AV::ofTensor(bn.getMean(), false);
  r.var = AV::ofTensor(bn.getVar(), false);
  if (rm.isTensor() && rv.isTensor()) {
    if (momentum.isNone())
      return I.error() << "batch_norm with momentum=None (cumulative average) is not supported",
             failure();
    double m = momentum.asDouble();
    double unbias = (double)perChannel / (double)(perChannel - 1);
    TRY(oldM, binary<MulOp>(I, rm, AV::real(1 - m)));
    TRY(newM, binary<MulOp>(I, r.mean, AV::real(m)));
    TRY(sumM, binary<AddOp>(I, *oldM, *newM));
    TRY(oldV, binary<MulOp>(I, rv, AV::real(1 - m)));
    TRY(newV, binary<MulOp>(I, r.var, AV::real(m * unbias)));
    TRY(sumV, binary<AddOp>(I, *oldV, *newV));
    r.newRunningMean = *sumM;
    r.newRunningVar = *sumV;
  }
  return r;
}

FailureOr<R> batchNorm(Interpreter &I, Node *node, R &in) {
  TRY(x, tensorArg(I, in[0]));
  const AV &w = in[1], &b = in[2], &rm = in[3], &rv = in[4];
  bool training = in[5].kind == Kind::Bool && in[5].b;
  double eps = in[7].asDouble();
  if (x->rank() < 2)
    return I.error() << "batch_norm input must be [N, C, ...], got " << x->describe(), failure();
  int64_t c = x->shape()[1];
  if (failed(checkNormParams({c}, w.isTensor() ? std::optional(w.shape()) : std::nullopt,
                             b.isTensor() ? std::optional(b.shape()) : std::nullopt,
                             "batch_norm", I.shapeError())))
    return failure();
  Value wv = w.isTensor() ? w.tensor : Value(), bv = b.isTensor() ? b.tensor : Value();
  if (!training) {
    if (!rm.isTensor() || !rv.isTensor())
      return I.error() << "eval-mode batch_norm needs running statistics", failure();
    Value v = BatchNormInferenceOp::create(I.b(), I.loc(), x->type(), x->tensor, wv, bv,
                                           rm.tensor, rv.tensor, I.b().getF64FloatAttr(eps));
    return one(result(v, {*x, w, b}));
  }
  TRY(r, batchNormTraining(I, *x, w, b, rm, rv, in[6], eps));
  if (rm.isTensor() && rv.isTensor() &&
      (failed(I.assignInPlace(node->inputs()[3], rm, r->newRunningMean)) ||
       failed(I.assignInPlace(node->inputs()[4], rv, r->newRunningVar))))
    return failure();
  return one(r->output);
}

FailureOr<R> pool2d(Interpreter &I, R &in, bool isMax) {
  TRY(x, tensorArg(I, in[0]));
  TRY(kernel, intList(I, in[1], 2));
  TRY(stride, intList(I, in[2], 2));
  if (stride->empty())
    *stride = *kernel;
  TRY(padding, intList(I, in[3], 2));
  SmallVector<int64_t> dilation{1, 1};
  bool ceil;
  if (isMax) {
    TRY(dl, intList(I, in[4], 2));
    dilation = *dl;
    ceil = in[5].b;
  } else {
    ceil = in[4].b;
    if (in.size() > 6 && !in[6].isNone())
      return I.error() << "avg_pool2d with divisor_override is not supported", failure();
  }
  if (kernel->size() != 2 || stride->size() != 2 || padding->size() != 2 || dilation.size() != 2)
    return I.error() << "only 2-D pooling is supported", failure();
  if (x->rank() != 4)
    return I.error() << "pooling input must be [N, C, H, W], got " << x->describe(), failure();
  TRY(shape, pool2dShape(x->shape(), *kernel, *stride, *padding, dilation, ceil,
                         I.shapeError()));
  auto type = x->type().clone(*shape);
  Value v;
  if (isMax)
    v = MaxPool2dOp::create(I.b(), I.loc(), type, x->tensor, *kernel, *stride, *padding, dilation,
                            ceil);
  else
    v = AvgPool2dOp::create(I.b(), I.loc(), type, x->tensor, *kernel, *stride, *padding, ceil,
                            in[5].b);
  return one(result(v, {*x}));
}

FailureOr<R> adaptiveAvgPool(Interpreter &I, R &in) {
  TRY(x, tensorArg(I, in[0]));
  if (x->rank() != 4 && x->rank() != 3)
    return I.error() << "adaptive_avg_pool2d input must be [N, C, H, W], got " << x->describe(),
           failure();
  if (in[1].kind != Kind::List || in[1].elems->size() != 2)
    return I.error() << "output_size must have two entries", failure();
  SmallVector<int64_t> os;
  for (auto [k, e] : llvm::enumerate(*in[1].elems))
    os.push_back(e.isNone() ? x->shape()[x->rank() - 2 + k] : e.i);
  Shape shape(x->shape().begin(), x->shape().end());
  shape[shape.size() - 2] = os[0];
  shape[shape.size() - 1] = os[1];
  Value v = AdaptiveAvgPool2dOp::create(I.b(), I.loc(), x->type().clone(shape), x->tensor, os);
  return one(result(v, {*x}));
}

FailureOr<R> arange(Interpreter &I, R &in) {
  // arange(end, dtype, layout, device, pin) | (start, end, ...) | (start, end, step, ...)
  size_t numbers = in.size() - 4;
  double start = 0, end, step = 1;
  bool allInt = true;
  for (size_t k = 0; k < numbers; ++k) {
    if (!in[k].isNumber())
      return I.error() << "arange bounds must be numbers, got " << in[k].describe(), failure();
    allInt &= in[k].kind != Kind::Double;
  }
  if (numbers == 1) {
    end = in[0].asDouble();
  } else {
    start = in[0].asDouble();
    end = in[1].asDouble();
    if (numbers == 3)
      step = in[2].asDouble();
  }
  if (step == 0)
    return I.error() << "arange step must not be zero", failure();
  TRY(et, I.dtypeArg(in[numbers], allInt ? Type(I.b().getI64Type()) : Type(I.b().getF32Type())));
  int64_t n = std::max<int64_t>(0, (int64_t)std::ceil((end - start) / step));
  TRY(c, constantTensor(I, {n}, *et, [&](int64_t k) { return start + k * step; }));
  return one(*c);
}

FailureOr<R> filled(Interpreter &I, ArrayRef<int64_t> shape, const AV &value, const AV &dtype) {
  Type fallback = value.kind == Kind::Double ? Type(I.b().getF32Type())
                  : value.kind == Kind::Bool ? Type(I.b().getI1Type())
                                             : Type(I.b().getI64Type());
  TRY(et, I.dtypeArg(dtype, fallback));
  double v = value.asDouble();
  TRY(c, constantTensor(I, shape, *et, [&](int64_t) { return v; }));
  return one(*c);
}

FailureOr<R> triangle(Interpreter &I, R &in, bool upper) {
  TRY(x, tensorArg(I, in[0]));
  if (x->rank() < 2)
    return I.error() << "expects a tensor of rank >= 2, got " << x->describe(), failure();
  int64_t diag = in[1].i, rows = x->shape()[x->rank() - 2], cols = x->shape().back();
  TRY(mask, constantTensor(I, {rows, cols}, I.b().getI1Type(), [&](int64_t k) {
        int64_t r = k / cols, c = k % cols;
        return upper ? (double)(c - r >= diag) : (double)(c - r <= diag);
      }));
  Type et = x->type().getElementType();
  TRY(r, where(I, *mask, *x, AV::integer(0), et));
  return one(*r);
}

FailureOr<R> toDtype(Interpreter &I, R &in) {
  TRY(x, tensorArg(I, in[0]));
  Type et = x->type().getElementType();
  if (in.size() > 1) {
    if (in[1].isTensor())
      et = in[1].type().getElementType();
    else if (in[1].kind == Kind::Int)
      et = I.elementTypeFromScalarType(in[1].i);
    else if ((in[1].kind == Kind::Device || in[1].isNone()) && in.size() > 2 &&
             in[2].kind == Kind::Int)
      et = I.elementTypeFromScalarType(in[2].i);
  }
  if (!et)
    return I.error() << "unsupported dtype", failure();
  TRY(r, I.asTensor(*x, et));
  return one(*r);
}

} // namespace mlir::ds::ts::ops

namespace {
using namespace mlir::ds::ts::ops;

/// Elementwise arithmetic, reductions, normalizations, contractions and lookups.
void addArithmeticHandlers(llvm::StringMap<OpHandler> &h) {
  // Elementwise arithmetic.
  h["aten::add"] = [](Interpreter &I, Node *, R &in) { return addSub(I, in, false, false); };
  h["aten::sub"] = [](Interpreter &I, Node *, R &in) { return addSub(I, in, true, false); };
  h["aten::rsub"] = [](Interpreter &I, Node *, R &in) { return addSub(I, in, true, true); };
  h["aten::mul"] = binaryHandler<MulOp>();
  h["aten::div"] = [](Interpreter &I, Node *, R &in) { return divide(I, in); };
  h["aten::pow"] = binaryHandler<PowOp>();
  h["aten::maximum"] = binaryHandler<MaximumOp>();
  h["aten::minimum"] = binaryHandler<MinimumOp>();
  h["aten::eq"] = compareHandler(CmpPredicate::eq);
  h["aten::ne"] = compareHandler(CmpPredicate::ne);
  h["aten::lt"] = compareHandler(CmpPredicate::lt);
  h["aten::le"] = compareHandler(CmpPredicate::le);
  h["aten::gt"] = compareHandler(CmpPredicate::gt);
  h["aten::ge"] = compareHandler(CmpPredicate::ge);
  h["aten::neg"] = unaryHandler<NegOp>();
  // x.detach(), x.data: the same values, no gradient.
  h["aten::detach"] = h["prim::data"] = [](Interpreter &I, Node *, R &in) -> FailureOr<R> {
    auto x = tensorArg(I, in[0]);
    if (failed(x))
      return failure();
    return one(AV::ofTensor(StopGradientOp::create(I.b(), I.loc(), x->tensor), false));
  };
  h["aten::exp"] = unaryHandler<ExpOp>();
  h["aten::log"] = unaryHandler<LogOp>();
  h["aten::sqrt"] = unaryHandler<SqrtOp>();
  h["aten::rsqrt"] = unaryHandler<RsqrtOp>();
  h["aten::tanh"] = unaryHandler<TanhOp>();
  h["aten::sigmoid"] = unaryHandler<SigmoidOp>();
  h["aten::cos"] = unaryHandler<CosOp>();
  h["aten::sin"] = unaryHandler<SinOp>();
  h["aten::relu"] = unaryHandler<ReluOp>();
  h["aten::gelu"] = [](Interpreter &I, Node *, R &in) -> FailureOr<R> {
    TRY(x, tensorArg(I, in[0]));
    std::string approx = in.size() > 1 && in[1].kind == Kind::String ? in[1].s : "none";
    if (approx != "none" && approx != "tanh")
      return I.error() << "unknown GELU approximation '" << approx << "'", failure();
    if (!isa<FloatType>(x->type().getElementType()))
      return I.error() << "expects a floating-point tensor", failure();
    Value v = GeluOp::create(I.b(), I.loc(), x->tensor,
                             approx == "tanh" ? GeluApproximate::tanh : GeluApproximate::none);
    return one(result(v, {*x}));
  };
  h["aten::where"] = [](Interpreter &I, Node *, R &in) -> FailureOr<R> {
    TRY(cond, tensorArg(I, in[0]));
    TRY(r, where(I, *cond, in[1], in[2], promote(I, {in[1], in[2]})));
    return one(*r);
  };
  h["aten::masked_fill"] = [](Interpreter &I, Node *, R &in) -> FailureOr<R> {
    TRY(x, tensorArg(I, in[0]));
    TRY(mask, tensorArg(I, in[1]));
    TRY(r, where(I, *mask, in[2], *x, x->type().getElementType()));
    if (r->shape() != x->shape())
      return I.error() << "mask " << formatShape(mask->shape()) << " does not broadcast to "
                       << formatShape(x->shape()),
             failure();
    return one(*r);
  };
  h["aten::softmax"] = [](Interpreter &I, Node *, R &in) { return softmaxLike(I, in, false); };
  h["aten::_softmax"] = [](Interpreter &I, Node *, R &in) {
    R args{in[0], in[1]};
    return softmaxLike(I, args, false);
  };
  h["aten::log_softmax"] = [](Interpreter &I, Node *, R &in) { return softmaxLike(I, in, true); };
  h["aten::dropout"] = [](Interpreter &I, Node *, R &in) { return dropout(I, in); };
  // Reductions and normalizations.
  h["aten::sum"] = [](Interpreter &I, Node *n, R &in) { return reduce(I, n, in, "sum"); };
  h["aten::mean"] = [](Interpreter &I, Node *n, R &in) { return reduce(I, n, in, "mean"); };
  h["aten::amax"] = [](Interpreter &I, Node *n, R &in) {
    R args{in[0], in[1], in.size() > 2 ? in[2] : AV::boolean(false)};
    return reduce(I, n, args, "amax");
  };
  h["aten::cumsum"] = [](Interpreter &I, Node *, R &in) { return cumsum(I, in); };
  h["aten::layer_norm"] = [](Interpreter &I, Node *, R &in) { return layerNorm(I, in); };
  h["aten::batch_norm"] = [](Interpreter &I, Node *n, R &in) { return batchNorm(I, n, in); };
  h["aten::cross_entropy_loss"] = [](Interpreter &I, Node *, R &in) { return crossEntropy(I, in); };
  // Contractions and lookups.
  h["aten::linear"] = [](Interpreter &I, Node *, R &in) { return linear(I, in); };
  h["aten::matmul"] = [](Interpreter &I, Node *, R &in) -> FailureOr<R> {
    TRY(a, tensorArg(I, in[0]));
    TRY(b, tensorArg(I, in[1]));
    return matmul(I, *a, *b);
  };
  auto exactRankMatmul = [](int rank) {
    return [rank](Interpreter &I, Node *, R &in) -> FailureOr<R> {
      TRY(a, tensorArg(I, in[0]));
      TRY(b, tensorArg(I, in[1]));
      if (a->rank() != rank || b->rank() != rank)
        return I.error() << "expects " << rank << "-D operands, got " << a->describe() << " and "
                         << b->describe(),
               failure();
      return matmul(I, *a, *b);
    };
  };
  h["aten::mm"] = exactRankMatmul(2);
  h["aten::bmm"] = exactRankMatmul(3);
  h["aten::baddbmm"] = [](Interpreter &I, Node *, R &in) { return matmulAdd(I, in, 3); };
  h["aten::addmm"] = [](Interpreter &I, Node *, R &in) { return matmulAdd(I, in, 2); };
  h["aten::embedding"] = [](Interpreter &I, Node *, R &in) { return embedding(I, in); };
}

/// Views, permutations and layout.
void addLayoutHandlers(llvm::StringMap<OpHandler> &h) {
  // Shapes and layout.
  auto viewLike = [](Interpreter &I, Node *, R &in) -> FailureOr<R> {
    TRY(x, tensorArg(I, in[0]));
    TRY(size, resolveSize(I, *x, in[1]));
    TRY(r, reshape(I, *x, *size));
    return one(*r);
  };
  h["aten::view"] = viewLike;
  h["aten::reshape"] = viewLike;
  auto viewAs = [](Interpreter &I, Node *, R &in) -> FailureOr<R> {
    TRY(x, tensorArg(I, in[0]));
    TRY(other, tensorArg(I, in[1]));
    TRY(r, reshape(I, *x, other->shape()));
    return one(*r);
  };
  h["aten::view_as"] = viewAs;
  h["aten::reshape_as"] = viewAs;
  h["aten::flatten"] = [](Interpreter &I, Node *, R &in) -> FailureOr<R> {
    TRY(x, tensorArg(I, in[0]));
    if (x->rank() == 0)
      return one(*x);
    TRY(s, dimArg(I, in[1], x->rank()));
    TRY(e, dimArg(I, in[2], x->rank()));
    Shape shape(x->shape().begin(), x->shape().begin() + *s);
    shape.push_back(numElements(x->shape().slice(*s, *e - *s + 1)));
    shape.append(x->shape().begin() + *e + 1, x->shape().end());
    TRY(r, reshape(I, *x, shape));
    return one(*r);
  };
  h["aten::unflatten"] = [](Interpreter &I, Node *, R &in) -> FailureOr<R> {
    TRY(x, tensorArg(I, in[0]));
    TRY(d, dimArg(I, in[1], x->rank()));
    AV inner = AV::ofTensor(Value(), false);
    TRY(sizes, intList(I, in[2]));
    Shape part(sizes->begin(), sizes->end());
    int64_t known = 1, unknown = -1;
    for (auto [k, s] : llvm::enumerate(part))
      s == -1 ? unknown = k : known *= s;
    if (unknown >= 0)
      part[unknown] = x->shape()[*d] / known;
    if (numElements(part) != x->shape()[*d])
      return I.error() << "unflatten sizes " << formatShape(part) << " do not multiply to "
                       << x->shape()[*d],
             failure();
    Shape shape(x->shape().begin(), x->shape().begin() + *d);
    shape.append(part.begin(), part.end());
    shape.append(x->shape().begin() + *d + 1, x->shape().end());
    TRY(r, reshape(I, *x, shape));
    return one(*r);
  };
  h["aten::squeeze"] = [](Interpreter &I, Node *, R &in) -> FailureOr<R> {
    TRY(x, tensorArg(I, in[0]));
    Shape shape;
    if (in.size() == 1) {
      for (int64_t d : x->shape())
        if (d != 1)
          shape.push_back(d);
    } else { // squeeze.dim, or squeeze.dims (a list)
      std::vector<AV> dimsArg = in[1].kind == Kind::List || in[1].kind == Kind::Tuple
                                    ? *in[1].elems
                                    : std::vector<AV>{in[1]};
      std::vector<bool> drop(x->rank(), false);
      for (const AV &dv : dimsArg) {
        TRY(d, dimArg(I, dv, x->rank()));
        if (x->rank() > 0 && x->shape()[*d] == 1)
          drop[*d] = true;
      }
      for (int64_t k = 0; k < x->rank(); ++k)
        if (!drop[k])
          shape.push_back(x->shape()[k]);
    }
    TRY(r, reshape(I, *x, shape));
    return one(*r);
  };
  h["aten::unsqueeze"] = [](Interpreter &I, Node *, R &in) -> FailureOr<R> {
    TRY(x, tensorArg(I, in[0]));
    TRY(d, dimArg(I, in[1], x->rank() + 1));
    Shape shape(x->shape().begin(), x->shape().end());
    shape.insert(shape.begin() + *d, 1);
    TRY(r, reshape(I, *x, shape));
    return one(*r);
  };
  h["aten::transpose"] = [](Interpreter &I, Node *, R &in) -> FailureOr<R> {
    TRY(x, tensorArg(I, in[0]));
    if (x->rank() == 0)
      return one(*x);
    TRY(d0, dimArg(I, in[1], x->rank()));
    TRY(d1, dimArg(I, in[2], x->rank()));
    SmallVector<int64_t> perm;
    for (int64_t k = 0; k < x->rank(); ++k)
      perm.push_back(k);
    std::swap(perm[*d0], perm[*d1]);
    TRY(r, transpose(I, *x, perm));
    return one(*r);
  };
  h["aten::t"] = [](Interpreter &I, Node *, R &in) -> FailureOr<R> {
    TRY(x, tensorArg(I, in[0]));
    if (x->rank() < 2)
      return one(*x);
    TRY(r, transpose(I, *x, {1, 0}));
    return one(*r);
  };
  h["aten::permute"] = [](Interpreter &I, Node *, R &in) -> FailureOr<R> {
    TRY(x, tensorArg(I, in[0]));
    TRY(dims, intList(I, in[1]));
    SmallVector<int64_t> perm;
    for (int64_t d : *dims)
      perm.push_back(normDim(d, x->rank()));
    TRY(r, transpose(I, *x, perm));
    return one(*r);
  };
}

/// Expansions, slices, splits, concatenations and dtype conversions.
void addSlicingHandlers(llvm::StringMap<OpHandler> &h) {
  auto expandTo = [](Interpreter &I, const AV &x, ArrayRef<int64_t> sizes) -> FailureOr<R> {
    Shape shape(sizes.begin(), sizes.end());
    if (shape.size() < (size_t)x.rank())
      return I.error() << "cannot expand " << formatShape(x.shape()) << " to "
                       << formatShape(shape),
             failure();
    size_t lead = shape.size() - x.rank();
    for (size_t k = 0; k < shape.size(); ++k)
      if (shape[k] == -1) {
        if (k < lead)
          return I.error() << "-1 is not allowed for a new leading dimension", failure();
        shape[k] = x.shape()[k - lead];
      }
    if (failed(checkBroadcastTo(x.shape(), shape, I.shapeError())))
      return failure();
    if (ArrayRef<int64_t>(shape) == x.shape())
      return one(x);
    Value v = BroadcastToOp::create(I.b(), I.loc(), x.type().clone(shape), x.tensor);
    return one(result(v, {x}));
  };
  h["aten::expand"] = [expandTo](Interpreter &I, Node *, R &in) -> FailureOr<R> {
    TRY(x, tensorArg(I, in[0]));
    TRY(sizes, intList(I, in[1]));
    return expandTo(I, *x, *sizes);
  };
  h["aten::expand_as"] = [expandTo](Interpreter &I, Node *, R &in) -> FailureOr<R> {
    TRY(x, tensorArg(I, in[0]));
    TRY(other, tensorArg(I, in[1]));
    return expandTo(I, *x, other->shape());
  };
  h["aten::slice"] = [](Interpreter &I, Node *, R &in) -> FailureOr<R> {
    TRY(x, tensorArg(I, in[0]));
    TRY(d, dimArg(I, in[1], x->rank()));
    int64_t n = x->shape()[*d];
    int64_t start = in[2].kind == Kind::Int ? in[2].i : 0;
    int64_t end = in[3].kind == Kind::Int ? std::min(in[3].i, n) : n;
    int64_t step = in[4].kind == Kind::Int ? in[4].i : 1;
    if (step < 1)
      return I.error() << "slice step must be >= 1, got " << step, failure();
    TRY(r, slice(I, *x, *d, start, end, step));
    return one(*r);
  };
  h["aten::narrow"] = [](Interpreter &I, Node *, R &in) -> FailureOr<R> {
    TRY(x, tensorArg(I, in[0]));
    TRY(d, dimArg(I, in[1], x->rank()));
    int64_t start = normDim(in[2].i, x->shape()[*d]);
    if (start < 0 || start + in[3].i > x->shape()[*d] || in[3].i < 0)
      return I.error() << "narrow [" << in[2].i << ", +" << in[3].i
                       << ") is out of range for size " << x->shape()[*d],
             failure();
    TRY(r, slice(I, *x, *d, start, start + in[3].i, 1));
    return one(*r);
  };
  h["aten::select"] = [](Interpreter &I, Node *, R &in) -> FailureOr<R> {
    TRY(x, tensorArg(I, in[0]));
    if (x->rank() == 0)
      return I.error() << "select on a 0-d tensor", failure();
    TRY(d, dimArg(I, in[1], x->rank()));
    TRY(r, select(I, *x, *d, in[2].i));
    return one(*r);
  };
  auto splitBySizes = [](Interpreter &I, const AV &x, int64_t dim,
                         ArrayRef<int64_t> sizes) -> FailureOr<R> {
    std::vector<AV> parts;
    int64_t offset = 0;
    for (int64_t s : sizes) {
      TRY(p, slice(I, x, dim, offset, offset + s, 1));
      parts.push_back(*p);
      offset += s;
    }
    if (offset != x.shape()[dim])
      return I.error() << "split sizes add up to " << offset << ", not " << x.shape()[dim],
             failure();
    return one(AV::list(parts));
  };
  h["aten::split"] = [splitBySizes](Interpreter &I, Node *, R &in) -> FailureOr<R> {
    TRY(x, tensorArg(I, in[0]));
    TRY(d, dimArg(I, in[2], x->rank()));
    int64_t n = x->shape()[*d];
    SmallVector<int64_t> sizes;
    if (in[1].kind == Kind::Int) {
      if (in[1].i <= 0)
        return I.error() << "split size must be positive", failure();
      for (int64_t o = 0; o < n; o += in[1].i)
        sizes.push_back(std::min(in[1].i, n - o));
    } else {
      TRY(list, intList(I, in[1]));
      sizes = *list;
    }
    return splitBySizes(I, *x, *d, sizes);
  };
  h["aten::split_with_sizes"] = h["aten::split"];
  h["aten::chunk"] = [splitBySizes](Interpreter &I, Node *, R &in) -> FailureOr<R> {
    TRY(x, tensorArg(I, in[0]));
    TRY(d, dimArg(I, in[2], x->rank()));
    int64_t n = x->shape()[*d], chunks = in[1].i;
    if (chunks <= 0)
      return I.error() << "chunk count must be positive", failure();
    int64_t each = (n + chunks - 1) / chunks;
    SmallVector<int64_t> sizes;
    for (int64_t o = 0; o < n; o += each)
      sizes.push_back(std::min(each, n - o));
    return splitBySizes(I, *x, *d, sizes);
  };
  h["aten::unbind"] = [](Interpreter &I, Node *, R &in) -> FailureOr<R> {
    TRY(x, tensorArg(I, in[0]));
    TRY(d, dimArg(I, in[1], x->rank()));
    std::vector<AV> parts;
    for (int64_t k = 0; k < x->shape()[*d]; ++k) {
      TRY(p, select(I, *x, *d, k));
      parts.push_back(*p);
    }
    return one(AV::list(parts));
  };
  h["aten::cat"] = [](Interpreter &I, Node *, R &in) -> FailureOr<R> {
    if (in[0].kind != Kind::List || in[0].elems->empty())
      return I.error() << "cat expects a non-empty list of tensors", failure();
    TRY(d, dimArg(I, in[1], (*in[0].elems)[0].rank()));
    TRY(r, concat(I, *in[0].elems, *d));
    return one(*r);
  };
  h["aten::stack"] = [](Interpreter &I, Node *, R &in) -> FailureOr<R> {
    if (in[0].kind != Kind::List || in[0].elems->empty())
      return I.error() << "stack expects a non-empty list of tensors", failure();
    TRY(d, dimArg(I, in[1], (*in[0].elems)[0].rank() + 1));
    std::vector<AV> parts;
    for (const AV &x : *in[0].elems) {
      Shape shape(x.shape().begin(), x.shape().end());
      shape.insert(shape.begin() + *d, 1);
      TRY(p, reshape(I, x, shape));
      parts.push_back(*p);
    }
    TRY(r, concat(I, parts, *d));
    return one(*r);
  };
  h["aten::to"] = [](Interpreter &I, Node *, R &in) { return toDtype(I, in); };
  h["aten::type_as"] = [](Interpreter &I, Node *, R &in) { return toDtype(I, in); };
}

/// Convolution, pooling and factories.
void addConvolutionAndFactoryHandlers(llvm::StringMap<OpHandler> &h) {
  // Convolution and pooling.
  h["aten::conv2d"] = [](Interpreter &I, Node *, R &in) {
    return conv2d(I, in[0], in[1], in[2], in[3], in[4], in[5], in[6].i);
  };
  h["aten::_convolution"] = [](Interpreter &I, Node *, R &in) -> FailureOr<R> {
    if (in[6].kind == Kind::Bool && in[6].b)
      return I.error() << "transposed convolution is not supported", failure();
    return conv2d(I, in[0], in[1], in[2], in[3], in[4], in[5], in[8].i);
  };
  h["aten::max_pool2d"] = [](Interpreter &I, Node *, R &in) { return pool2d(I, in, true); };
  h["aten::avg_pool2d"] = [](Interpreter &I, Node *, R &in) { return pool2d(I, in, false); };
  h["aten::adaptive_avg_pool2d"] = [](Interpreter &I, Node *, R &in) {
    return adaptiveAvgPool(I, in);
  };
  // Factories (constants: every size is static).
  h["aten::arange"] = [](Interpreter &I, Node *, R &in) { return arange(I, in); };
  h["aten::full"] = [](Interpreter &I, Node *, R &in) -> FailureOr<R> {
    TRY(size, intList(I, in[0]));
    return filled(I, *size, in[1], in[2]);
  };
  auto fill = [](double v) {
    return [v](Interpreter &I, Node *, R &in) -> FailureOr<R> {
      TRY(size, intList(I, in[0]));
      return filled(I, *size, AV::real(v), in[1].isNone() ? AV::integer(6) : in[1]);
    };
  };
  h["aten::zeros"] = fill(0);
  h["aten::ones"] = fill(1);
  h["aten::zeros_like"] = [](Interpreter &I, Node *, R &in) -> FailureOr<R> {
    TRY(x, tensorArg(I, in[0]));
    TRY(et, I.dtypeArg(in[1], x->type().getElementType()));
    TRY(c, constantTensor(I, x->shape(), *et, [](int64_t) { return 0.0; }));
    return one(*c);
  };
  h["aten::ones_like"] = [](Interpreter &I, Node *, R &in) -> FailureOr<R> {
    TRY(x, tensorArg(I, in[0]));
    TRY(et, I.dtypeArg(in[1], x->type().getElementType()));
    TRY(c, constantTensor(I, x->shape(), *et, [](int64_t) { return 1.0; }));
    return one(*c);
  };
  h["aten::triu"] = [](Interpreter &I, Node *, R &in) { return triangle(I, in, true); };
  h["aten::tril"] = [](Interpreter &I, Node *, R &in) { return triangle(I, in, false); };
}

llvm::StringMap<OpHandler> buildHandlers() {
  llvm::StringMap<OpHandler> h;
  addArithmeticHandlers(h);
  addLayoutHandlers(h);
  addSlicingHandlers(h);
  addConvolutionAndFactoryHandlers(h);
  addTransformerOps(h);
  addCoreAtenOps(h);
  addExpertOps(h);

  // In-place variants: the functional op, then a rebinding (or a buffer assignment).
  for (const char *name : {"add", "sub", "mul", "div", "relu", "gelu", "masked_fill", "dropout",
                           "tanh", "sigmoid", "exp", "neg", "pow", "sqrt", "rsqrt", "silu"}) {
    std::string functional = std::string("aten::") + name;
    h[functional + "_"] = inPlace(h[functional]);
  }
  return h;
}
} // namespace

const llvm::StringMap<OpHandler> &mlir::ds::ts::atenHandlers() {
  static const llvm::StringMap<OpHandler> handlers = buildHandlers();
  return handlers;
}
