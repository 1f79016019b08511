//===- CoreAtenOps.cpp - the ops of decomposed programs and HF models ------===//
//
// torch.export's run_decompositions() (the core ATen IR) spells layer norm, softmax, dtype
// conversions and the cross-entropy loss in lower-level ops (native_layer_norm, _log_softmax,
// _to_copy, gather, logical masks); HF transformers pad labels and build masks from boolean
// logic. Each becomes the ds ops of its definition.
//
#include "OpHelpers.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::ts;
using namespace mlir::ds::ts::ops;
using torch::jit::Node;
using Kind = AV::Kind;

namespace {
/// `x != 0` as a bool tensor (bool tensors pass through).
FailureOr<AV> truth(Interpreter &I, const AV &x) {
  if (!x.isTensor())
    return I.error() << "expected a tensor, got " << x.describe(), failure();
  if (x.type().getElementType().isInteger(1))
    return x;
  return compare(I, CmpPredicate::ne, x, AV::integer(0));
}

/// aten::logical_and / logical_or (and &, | on bools): where(a, b, false) / where(a, true, b).
FailureOr<R> logical(Interpreter &I, R &in, bool isAnd) {
  TRY(a, truth(I, in[0]));
  TRY(b, truth(I, in[1]));
  Type i1 = I.b().getI1Type();
  TRY(r, isAnd ? where(I, *a, *b, AV::boolean(false), i1) : where(I, *a, AV::boolean(true), *b, i1));
  return one(*r);
}

/// `&` and `|` are logical on bools only.
OpHandler bitwise(bool isAnd) {
  return [isAnd](Interpreter &I, Node *, R &in) -> FailureOr<R> {
    for (const AV &v : {in[0], in[1]})
      if (!v.isTensor() || !v.type().getElementType().isInteger(1))
        return I.error() << "bitwise " << (isAnd ? "and" : "or") << " of " << v.describe()
                         << " (ds supports it on bool tensors)",
               failure();
    return logical(I, in, isAnd);
  };
}

/// aten::constant_pad_nd(x, pad, value) / aten::pad(x, pad, "constant", value): pad pairs
/// (before, after) from the last dimension; negative amounts crop.
FailureOr<R> constantPad(Interpreter &I, const AV &x0, const AV &padArg, const AV &value) {
  TRY(x, tensorArg(I, x0));
  TRY(pad, intList(I, padArg));
  if (pad->size() % 2 || (int64_t)pad->size() / 2 > x->rank())
    return I.error() << "pad " << formatShape(*pad) << " does not fit a tensor of rank "
                     << x->rank(),
           failure();
  AV cur = *x;
  Type et = x->type().getElementType();
  for (size_t k = 0; k < pad->size() / 2; ++k) {
    int64_t dim = x->rank() - 1 - k, before = (*pad)[2 * k], after = (*pad)[2 * k + 1];
    int64_t n = cur.shape()[dim];
    if (before < 0 || after < 0) {
      TRY(s, slice(I, cur, dim, std::max<int64_t>(-before, 0),
                   n - std::max<int64_t>(-after, 0), 1));
      cur = *s;
      before = std::max<int64_t>(before, 0);
      after = std::max<int64_t>(after, 0);
    }
    std::vector<AV> parts;
    for (int64_t amount : {before, int64_t(-1), after}) {
      if (amount == -1) {
        parts.push_back(cur);
        continue;
      }
      if (amount == 0)
        continue;
      Shape shape(cur.shape().begin(), cur.shape().end());
      shape[dim] = amount;
      double v = value.isNone() ? 0.0 : value.asDouble();
      TRY(c, constantTensor(I, shape, et, [v](int64_t) { return v; }));
      parts.push_back(*c);
    }
    TRY(r, concat(I, parts, dim));
    cur = *r;
  }
  return one(cur);
}

/// aten::gather(x, dim, index) where `index` matches x outside `dim` (as cross-entropy's
/// decomposition uses it): an embedding lookup into x flattened, at the flat positions
/// index * stride(dim) + offset of the other coordinates. Its gradient is the embedding's
/// scatter-add, which is gather's.
FailureOr<R> gather(Interpreter &I, R &in) {
  TRY(x, tensorArg(I, in[0]));
  TRY(dim, dimArg(I, in[1], x->rank()));
  TRY(index, tensorArg(I, in[2]));
  if (index->rank() != x->rank())
    return I.error() << "gather index " << formatShape(index->shape())
                     << " must have the rank of the input " << formatShape(x->shape()),
           failure();
  for (int64_t d = 0; d < x->rank(); ++d)
    if (d != *dim && index->shape()[d] != x->shape()[d])
      return I.error() << "gather index " << formatShape(index->shape())
                       << " differs from the input " << formatShape(x->shape())
                       << " outside dimension " << *dim
                       << " (ds supports gather along one dimension)",
             failure();
  if (!isa<IntegerType>(index->type().getElementType()))
    return I.error() << "gather index must be an integer tensor", failure();
  Shape strides(x->rank(), 1);
  for (int64_t d = x->rank() - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * x->shape()[d + 1];
  ArrayRef<int64_t> ishape = index->shape();
  Type i64 = I.b().getI64Type();
  // The flat offset of every index position's coordinates outside `dim`.
  TRY(offsets, constantTensor(I, ishape, i64, [&](int64_t flat) {
        int64_t offset = 0;
        for (int64_t d = ishape.size() - 1; d >= 0; --d) {
          int64_t coord = flat % ishape[d];
          flat /= ishape[d];
          if (d != *dim)
            offset += coord * strides[d];
        }
        return (double)offset;
      }));
  TRY(idx, I.asTensor(*index, i64));
  TRY(scaledIdx, binary<MulOp>(I, *idx, AV::integer(strides[*dim]), i64));
  TRY(flatIdx, binary<AddOp>(I, *scaledIdx, *offsets, i64));
  TRY(table, reshape(I, *x, {numElements(x->shape()), 1}));
  Shape outShape(ishape.begin(), ishape.end());
  Shape rowShape = outShape;
  rowShape.push_back(1);
  Value rows = EmbeddingOp::create(I.b(), I.loc(), tensorOf(rowShape, x->type().getElementType()),
                                   table->tensor, flatIdx->tensor, IntegerAttr());
  TRY(r, reshape(I, result(rows, {*table}), outShape));
  return one(*r);
}

/// aten::index(x, indices): `x[i0, i1, ...]` with integer index tensors (HF's masking utilities
/// read `padding_mask[batch_idx, kv_idx]` so). The given indices must be adjacent (Nones before
/// them keep their dimensions); the indexed dimensions, moved first and flattened, are an
/// embedding table looked up at the flat positions sum_j i_j * stride_j of the broadcast indices
/// (negative ones wrapped, as PyTorch does), and the broadcast index dimensions take the indexed
/// ones' place. Its gradient is the embedding's scatter-add, which is index's.
FailureOr<R> indexTensor(Interpreter &I, R &in) {
  TRY(x, tensorArg(I, in[0]));
  if (in[1].kind != Kind::List && in[1].kind != Kind::Tuple)
    return I.error() << "index expects a list of index tensors, got " << in[1].describe(),
           failure();
  const std::vector<AV> &indices = *in[1].elems;
  int64_t first = -1, last = -1;
  for (auto [k, a] : llvm::enumerate(indices)) {
    if (a.isNone())
      continue;
    if (first >= 0 && last != static_cast<int64_t>(k) - 1)
      return I.error() << "index tensors on dimensions that are not adjacent are not "
                          "supported (index them one after the other)",
             failure();
    if (first < 0)
      first = k;
    last = k;
  }
  if (first < 0 || static_cast<int64_t>(indices.size()) > x->rank())
    return I.error() << "index needs between 1 and " << x->rank() << " index tensors for "
                     << x->describe(),
           failure();
  Type i64 = I.b().getI64Type();
  ArrayRef<int64_t> xs = x->shape();
  Shape block(xs.begin() + first, xs.begin() + last + 1);
  Shape strides(block.size(), 1);
  for (int64_t d = block.size() - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * block[d + 1];
  std::optional<AV> flat;
  for (int64_t d = first; d <= last; ++d) {
    TRY(t, tensorArg(I, indices[d]));
    Type et = t->type().getElementType();
    if (!isa<IntegerType>(et) || et.isInteger(1))
      return I.error() << "indexing with " << t->describe()
                       << " is not supported: a boolean mask selects a data-dependent number of "
                          "elements (index with integer tensors)",
             failure();
    TRY(idx, I.asTensor(*t, i64));
    // PyTorch counts negative indices from the end.
    TRY(negative, compare(I, CmpPredicate::lt, *idx, AV::integer(0)));
    TRY(wrapped, binary<AddOp>(I, *idx, AV::integer(xs[d]), i64));
    TRY(pos, where(I, *negative, *wrapped, *idx, i64));
    TRY(term, strides[d - first] == 1
                  ? FailureOr<AV>(*pos)
                  : binary<MulOp>(I, *pos, AV::integer(strides[d - first]), i64));
    if (!flat) {
      flat = *term;
      continue;
    }
    TRY(sum, binary<AddOp>(I, *flat, *term, i64));
    flat = *sum;
  }
  // The indexed dimensions first, then the rest: a table of numElements(block) rows.
  SmallVector<int64_t> perm;
  for (int64_t d = first; d <= last; ++d)
    perm.push_back(d);
  for (int64_t d = 0; d < x->rank(); ++d)
    if (d < first || d > last)
      perm.push_back(d);
  AV xt = *x;
  if (first > 0) {
    TRY(t, transpose(I, *x, perm));
    xt = *t;
  }
  Shape rest(xt.shape().begin() + block.size(), xt.shape().end());
  int64_t width = numElements(rest);
  TRY(table, reshape(I, xt, {numElements(block), width}));
  Shape rowShape(flat->shape().begin(), flat->shape().end());
  rowShape.push_back(width);
  Value rows = EmbeddingOp::create(I.b(), I.loc(), tensorOf(rowShape, x->type().getElementType()),
                                   table->tensor, flat->tensor, IntegerAttr());
  Shape outShape(flat->shape().begin(), flat->shape().end());
  outShape.append(rest.begin(), rest.end());
  TRY(out, reshape(I, result(rows, {*table}), outShape));
  if (first == 0)
    return one(*out);
  // The broadcast index dimensions go where the indexed ones were.
  int64_t nb = flat->rank();
  SmallVector<int64_t> back;
  for (int64_t d = 0; d < first; ++d)
    back.push_back(nb + d);
  for (int64_t d = 0; d < nb; ++d)
    back.push_back(d);
  for (int64_t d = nb + first; d < static_cast<int64_t>(outShape.size()); ++d)
    back.push_back(d);
  TRY(moved, transpose(I, *out, back));
  return one(*moved);
}

/// aten::native_layer_norm(x, normalized_shape, weight, bias, eps) -> (y, mean, rstd).
FailureOr<R> nativeLayerNorm(Interpreter &I, R &in) {
  R lnIn{in[0], in[1], in[2], in[3], in[4]};
  TRY(y, layerNorm(I, lnIn));
  TRY(x, tensorArg(I, in[0]));
  TRY(norm, intList(I, in[1]));
  std::vector<AV> dims;
  for (int64_t d = x->rank() - norm->size(); d < x->rank(); ++d)
    dims.push_back(AV::integer(d));
  R meanIn{*x, AV::list(dims), AV::boolean(true), AV::none()};
  TRY(mean, reduce(I, nullptr, meanIn, "mean"));
  TRY(centered, binary<SubOp>(I, *x, (*mean)[0]));
  TRY(sq, binary<MulOp>(I, *centered, *centered));
  R varIn{*sq, AV::list(dims), AV::boolean(true), AV::none()};
  TRY(var, reduce(I, nullptr, varIn, "mean"));
  TRY(shifted, binary<AddOp>(I, (*var)[0], AV::real(in[4].asDouble())));
  Value rstd = RsqrtOp::create(I.b(), I.loc(), shifted->tensor);
  return R{(*y)[0], (*mean)[0], result(rstd, {*shifted})};
}

/// aten::any(x, dim, keepdim) / any.dims: sum(x != 0) > 0.
FailureOr<R> anyOf(Interpreter &I, R &in) {
  TRY(t, truth(I, in[0]));
  TRY(wide, I.asTensor(*t, I.b().getI64Type()));
  R sumIn{*wide, in.size() > 1 ? in[1] : AV::none(),
          in.size() > 2 ? in[2] : AV::boolean(false), AV::none()};
  if (sumIn[1].kind == Kind::Int)
    sumIn[1] = AV::list({sumIn[1]});
  TRY(sum, reduce(I, nullptr, sumIn, "sum"));
  TRY(r, compare(I, CmpPredicate::gt, (*sum)[0], AV::integer(0)));
  return one(*r);
}

/// new_ones / new_zeros / new_full(x, size, [fill,] dtype, ...): a constant of x's dtype.
OpHandler newFilled(std::optional<double> value) {
  return [value](Interpreter &I, Node *, R &in) -> FailureOr<R> {
    TRY(x, tensorArg(I, in[0]));
    TRY(size, intList(I, in[1]));
    AV fill = value ? AV::real(*value) : in[2];
    const AV &dtype = in[value ? 2 : 3];
    TRY(et, I.dtypeArg(dtype, x->type().getElementType()));
    double v = fill.asDouble();
    TRY(c, constantTensor(I, *size, *et, [v](int64_t) { return v; }));
    return one(*c);
  };
}
} // namespace

void mlir::ds::ts::ops::addCoreAtenOps(llvm::StringMap<OpHandler> &h) {
  h["aten::logical_and"] = [](Interpreter &I, Node *, R &in) { return logical(I, in, true); };
  h["aten::logical_or"] = [](Interpreter &I, Node *, R &in) { return logical(I, in, false); };
  h["aten::logical_not"] = [](Interpreter &I, Node *, R &in) -> FailureOr<R> {
    TRY(t, truth(I, in[0]));
    TRY(r, compare(I, CmpPredicate::eq, *t, AV::boolean(false)));
    return one(*r);
  };
  h["aten::__and__"] = bitwise(true);
  h["aten::bitwise_and"] = bitwise(true);
  h["aten::__or__"] = bitwise(false);
  h["aten::bitwise_or"] = bitwise(false);
  h["aten::any"] = [](Interpreter &I, Node *, R &in) { return anyOf(I, in); };
  h["aten::constant_pad_nd"] = [](Interpreter &I, Node *, R &in) {
    return constantPad(I, in[0], in[1], in.size() > 2 ? in[2] : AV::none());
  };
  h["aten::pad"] = [](Interpreter &I, Node *, R &in) -> FailureOr<R> {
    if (in.size() > 2 && in[2].kind == Kind::String && in[2].s != "constant")
      return I.error() << "pad mode '" << in[2].s << "' is not supported (only 'constant')",
             failure();
    return constantPad(I, in[0], in[1], in.size() > 3 ? in[3] : AV::none());
  };
  h["aten::gather"] = [](Interpreter &I, Node *, R &in) { return gather(I, in); };
  h["aten::index"] = [](Interpreter &I, Node *, R &in) { return indexTensor(I, in); };
  h["aten::native_layer_norm"] = [](Interpreter &I, Node *, R &in) {
    return nativeLayerNorm(I, in);
  };
  h["aten::_log_softmax"] = [](Interpreter &I, Node *, R &in) {
    R args{in[0], in[1], AV::none()};
    return softmaxLike(I, args, true);
  };
  h["aten::_to_copy"] = [](Interpreter &I, Node *, R &in) -> FailureOr<R> {
    TRY(x, tensorArg(I, in[0]));
    TRY(et, I.dtypeArg(in.size() > 1 ? in[1] : AV::none(), x->type().getElementType()));
    TRY(r, I.asTensor(*x, *et));
    return one(*r);
  };
  h["aten::full_like"] = [](Interpreter &I, Node *, R &in) -> FailureOr<R> {
    TRY(x, tensorArg(I, in[0]));
    TRY(et, I.dtypeArg(in[2], x->type().getElementType()));
    double v = in[1].asDouble();
    TRY(c, constantTensor(I, x->shape(), *et, [v](int64_t) { return v; }));
    return one(*c);
  };
  // copy_(self, src): self takes src's values in its own dtype and shape (the buffer updates
  // of a functionalized .pt2, BatchNorm's running statistics).
  h["aten::copy_"] = [](Interpreter &I, Node *node, R &in) -> FailureOr<R> {
    TRY(self, tensorArg(I, in[0]));
    TRY(src, tensorArg(I, in[1]));
    TRY(converted, I.asTensor(*src, self->type().getElementType()));
    AV value = *converted;
    if (value.shape() != self->shape()) {
      if (failed(checkBroadcastTo(value.shape(), self->shape(), I.shapeError())))
        return failure();
      Value v = BroadcastToOp::create(I.b(), I.loc(), self->type(), value.tensor);
      value = result(v, {value});
    }
    if (failed(I.assignInPlace(node->inputs()[0], in[0], value)))
      return failure();
    return one(value);
  };
  // _native_batch_norm_legit_functional(x, w, b, running_mean, running_var, training,
  // momentum, eps) -> (y, save_mean, save_rstd, new_running_mean, new_running_var).
  h["aten::_native_batch_norm_legit_functional"] = [](Interpreter &I, Node *,
                                                      R &in) -> FailureOr<R> {
    TRY(x, tensorArg(I, in[0]));
    if (!(in[5].kind == Kind::Bool && in[5].b))
      return I.error() << "functional batch norm in eval mode is not supported; export the "
                          "model in training mode",
             failure();
    if (x->rank() < 2 || !in[3].isTensor() || !in[4].isTensor())
      return I.error() << "batch_norm needs an [N, C, ...] input and running statistics",
             failure();
    double eps = in[7].asDouble();
    TRY(r, batchNormTraining(I, *x, in[1], in[2], in[3], in[4], in[6], eps));
    TRY(shifted, binary<AddOp>(I, r->var, AV::real(eps)));
    Value rstd = RsqrtOp::create(I.b(), I.loc(), shifted->tensor);
    return R{r->output, r->mean, AV::ofTensor(rstd, false), r->newRunningMean,
             r->newRunningVar};
  };
  h["aten::new_ones"] = newFilled(1.0);
  h["aten::new_zeros"] = newFilled(0.0);
  h["aten::new_full"] = newFilled(std::nullopt);
}
