//===- ExpertOps.cpp - the ops of mixture-of-experts routers -------------------===//
//
// A router picks each token's experts with topk (one ds.top_k) and HF's auxiliary
// load-balancing loss counts the picks with histc (compares and a sum: no gradient flows
// through counts). The experts' products arrive in one of two forms of HF's:
//  - batched_mm: a gather of each pair's weights and a bmm, which ds-fuse-experts folds into
//    ds.expert_linear;
//  - grouped_mm: the pairs sorted by expert (sort: a stable ds.top_k of the smallest), the
//    tokens gathered in that order (perm // top_k), the per-expert row ends (histc, cumsum),
//    transformers::grouped_mm_fallback over those rows (ds.expert_linear with each row's
//    expert counted from the ends), and the rows put back in token order by the inverse
//    permutation (`inv[perm] = arange(n)`: an argsort of perm, another stable ds.top_k).
//
#include "OpHelpers.h"

#include <limits>
#include <sstream>

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::ts;
using namespace mlir::ds::ts::ops;
using torch::jit::Node;
using Kind = AV::Kind;

namespace {

/// `v` as Python prints a float argument's value (0, 7, 0.5).
std::string shortNumber(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

/// aten::topk(x, k, dim=-1, largest=True, sorted=True) along the last dimension.
FailureOr<R> topk(Interpreter &I, R &in) {
  TRY(x, tensorArg(I, in[0]));
  Type et = x->type().getElementType();
  if ((!isa<FloatType>(et) && !et.isInteger(64)) || x->rank() < 1)
    return I.error() << "topk takes a floating-point or int64 tensor of rank >= 1, got "
                     << x->describe(),
           failure();
  if (in[1].kind != Kind::Int)
    return I.error() << "topk needs an int k, got " << in[1].describe(), failure();
  int64_t k = in[1].i, n = x->shape().back();
  AV dimArgV = in.size() > 2 ? in[2] : AV::integer(-1);
  TRY(dim, dimArg(I, dimArgV, x->rank()));
  if (*dim != x->rank() - 1)
    return I.error() << "topk along dimension " << *dim << " of " << x->describe()
                     << ": ds takes it along the last dimension (transpose first)",
           failure();
  if (k < 1 || k > n)
    return I.error() << "topk k = " << k << " is not in [1, " << n << "] for " << x->describe(),
           failure();
  Shape out(x->shape().begin(), x->shape().end());
  out.back() = k;
  bool smallest = in.size() > 3 && in[3].kind == Kind::Bool && !in[3].b;
  auto op = TopKOp::create(I.b(), I.loc(), x->type().clone(out),
                           tensorOf(out, I.b().getI64Type()), x->tensor,
                           I.b().getI64IntegerAttr(k), smallest ? I.b().getUnitAttr() : UnitAttr());
  return R{result(op.getValues(), {*x}), result(op.getIndices(), {})};
}

/// aten::histc(x, bins, min, max): counts of the elements in `bins` equal bins over
/// [min, max] (the last bin closed), elements outside ignored, as PyTorch's bin of an element:
/// (x - min) * bins / (max - min) truncated, max itself in the last bin. ds compares every
/// element with every bin (a router's few experts); min == max (the data's range) is not taken.
FailureOr<R> histc(Interpreter &I, R &in) {
  TRY(x, tensorArg(I, in[0]));
  Type et = x->type().getElementType();
  if (!isa<FloatType>(et))
    return I.error() << "histc takes a floating-point tensor (as PyTorch on the CPU), got "
                     << x->describe(),
           failure();
  int64_t bins = in.size() > 1 && in[1].kind == Kind::Int ? in[1].i : 100;
  double lo = in.size() > 2 && !in[2].isNone() ? in[2].asDouble() : 0;
  double hi = in.size() > 3 && !in[3].isNone() ? in[3].asDouble() : 0;
  if (bins < 1)
    return I.error() << "histc needs bins >= 1, got " << bins, failure();
  if (!(lo < hi))
    return I.error() << "histc over [" << shortNumber(lo) << ", " << shortNumber(hi)
                     << "]: ds needs min < max given (min == max takes the data's range, "
                        "which is known only at run time)",
           failure();
  TRY(flat, reshape(I, *x, {numElements(x->shape()), 1}));
  AV column = AV::ofTensor(flat->tensor, false);
  TRY(shifted, binary<SubOp>(I, column, AV::real(lo), et));
  TRY(spread, binary<MulOp>(I, *shifted, AV::real((double)bins), et));
  TRY(pos, binary<DivOp>(I, *spread, AV::real(hi - lo), et));
  // Bin b holds b <= pos < b + 1; the last one also pos up to x == max.
  TRY(lower, constantTensor(I, {bins}, et, [](int64_t b) { return (double)b; }));
  TRY(upper, constantTensor(I, {bins}, et, [bins](int64_t b) {
        return b + 1 == bins ? std::numeric_limits<double>::infinity() : (double)(b + 1);
      }));
  TRY(atLeast, compare(I, CmpPredicate::ge, *pos, *lower));
  TRY(below, compare(I, CmpPredicate::lt, *pos, *upper));
  TRY(inRange, compare(I, CmpPredicate::le, column, AV::real(hi)));
  TRY(aboveMin, compare(I, CmpPredicate::ge, column, AV::real(lo)));
  TRY(a, I.asTensor(*atLeast, et));
  TRY(c, I.asTensor(*below, et));
  TRY(d, I.asTensor(*inRange, et));
  TRY(e, I.asTensor(*aboveMin, et));
  TRY(ac, binary<MulOp>(I, *a, *c, et));
  TRY(de, binary<MulOp>(I, *d, *e, et));
  TRY(hits, binary<MulOp>(I, *ac, *de, et));
  Value counts = SumOp::create(I.b(), I.loc(), tensorOf({bins}, et), hits->tensor,
                               I.b().getDenseI64ArrayAttr({0}), UnitAttr());
  return one(result(counts, {}));
}

/// A stable sort of `x` along its last dimension, ascending (or descending): (values,
/// indices), one ds.top_k of the whole row.
FailureOr<R> sortLastDim(Interpreter &I, const AV &x, bool descending) {
  Type et = x.type().getElementType();
  TRY(xs, I.asTensor(x, isa<FloatType>(et) ? et : Type(I.b().getI64Type())));
  if (xs->rank() < 1)
    return I.error() << "sort takes a tensor of rank >= 1, got " << x.describe(), failure();
  int64_t n = xs->shape().back();
  auto op = TopKOp::create(I.b(), I.loc(), xs->type(),
                           tensorOf(xs->shape(), I.b().getI64Type()), xs->tensor,
                           I.b().getI64IntegerAttr(n),
                           descending ? UnitAttr() : I.b().getUnitAttr());
  return R{result(op.getValues(), {*xs}), result(op.getIndices(), {})};
}

/// aten::sort(x, dim=-1, descending=False) and sort.stable(x, stable, dim, descending): ds
/// always sorts stably (equal values keep their order), which torch.sort allows.
FailureOr<R> sort(Interpreter &I, Node *n, R &in) {
  TRY(x, tensorArg(I, in[0]));
  bool stableForm = n->inputs().size() == 4 && in[1].kind != Kind::Int;
  AV dim = in.size() > (stableForm ? 2u : 1u) ? in[stableForm ? 2 : 1] : AV::integer(-1);
  AV desc = in.size() > (stableForm ? 3u : 2u) ? in[stableForm ? 3 : 2] : AV::boolean(false);
  TRY(d, dimArg(I, dim, x->rank()));
  if (*d != x->rank() - 1)
    return I.error() << "sort along dimension " << *d << " of " << x->describe()
                     << ": ds sorts along the last dimension (transpose first)",
           failure();
  return sortLastDim(I, *x, desc.kind == Kind::Bool && desc.b);
}

/// aten::floor_divide(a, b) of integers: the quotient rounded down (toward minus infinity),
/// from the truncating division and its remainder.
FailureOr<R> floorDivide(Interpreter &I, R &in) {
  TRY(a, tensorArg(I, in[0]));
  Type i64 = I.b().getI64Type();
  bool ints = isa<IntegerType>(a->type().getElementType()) &&
              (in[1].kind == Kind::Int ||
               (in[1].isTensor() && isa<IntegerType>(in[1].type().getElementType())));
  if (!ints)
    return I.error() << "floor_divide of " << a->describe() << " by " << in[1].describe()
                     << ": ds takes integer operands (a float quotient has no floor op here)",
           failure();
  TRY(q, binary<DivOp>(I, *a, in[1], i64));
  TRY(qb, binary<MulOp>(I, *q, in[1], i64));
  TRY(r, binary<SubOp>(I, *a, *qb, i64));
  // A remainder whose sign differs from the divisor's: the truncated quotient is one too big.
  TRY(rb, binary<MulOp>(I, *r, in[1], i64));
  TRY(off, compare(I, CmpPredicate::lt, *rb, AV::integer(0)));
  TRY(q1, binary<SubOp>(I, *q, AV::integer(1), i64));
  TRY(y, where(I, *off, *q1, *q, i64));
  return one(*y);
}

/// Whether `v` is the constant 0, 1, ..., n-1.
bool isIota(const AV &v, int64_t n) {
  if (!v.isTensor() || v.rank() != 1 || v.shape()[0] != n)
    return false;
  auto c = v.tensor.getDefiningOp<ConstantOp>();
  auto d = c ? dyn_cast<DenseElementsAttr>(c.getValue()) : DenseElementsAttr();
  if (!d || !isa<IntegerType>(d.getElementType()))
    return false;
  int64_t k = 0;
  for (const APInt &x : d.getValues<APInt>())
    if (x.getSExtValue() != k++)
      return false;
  return true;
}

/// aten::index_put_(dest, [perm], arange(n)) on a fresh `dest` (empty_like): the inverse
/// permutation that HF's grouped_mm experts build, an argsort of perm. Other forms of
/// index_put_ (a scatter of data) are refused.
FailureOr<R> indexPut(Interpreter &I, Node *n, R &in) {
  TRY(dest, tensorArg(I, in[0]));
  bool fresh = n->inputs().size() >= 3 && n->input(0)->node()->kind().toQualString() ==
                                               std::string("aten::empty_like");
  bool accumulate = in.size() > 3 && in[3].kind == Kind::Bool && in[3].b;
  const std::vector<AV> *indices =
      in[1].kind == Kind::List || in[1].kind == Kind::Tuple ? in[1].elems.get() : nullptr;
  if (!fresh || accumulate || !indices || indices->size() != 1 || !(*indices)[0].isTensor() ||
      dest->rank() != 1 || (*indices)[0].rank() != 1 ||
      (*indices)[0].shape()[0] != dest->shape()[0] || !isIota(in[2], dest->shape()[0]))
    return I.error() << "index_put_ imports in one form: `inv = empty_like(perm); inv[perm] = "
                        "arange(n)`, the inverse of a permutation (HF's grouped_mm experts); "
                        "ds does not scatter data otherwise",
           failure();
  TRY(sorted, sortLastDim(I, (*indices)[0], false));
  TRY(inv, I.asTensor((*sorted)[1], dest->type().getElementType()));
  return one(*inv);
}

/// transformers::grouped_mm_fallback(x [S, in], w [E, in, out], offs [E]): rows
/// offs[e-1] .. offs[e] of x times w[e], rows past offs[E-1] zeros: ds.expert_linear with row
/// s's expert the number of ends at or before s (E past the last: zeros). A weight that is the
/// transpose of an [E, out, in] tensor (HF's `weight.transpose(-2, -1)`) is read as it is.
FailureOr<R> groupedMm(Interpreter &I, R &in) {
  TRY(x, tensorArg(I, in[0]));
  TRY(w, tensorArg(I, in[1]));
  TRY(offs, tensorArg(I, in[2]));
  if (x->rank() != 2 || w->rank() != 3 || offs->rank() != 1 ||
      offs->shape()[0] != w->shape()[0] || w->shape()[1] != x->shape()[1])
    return I.error() << "grouped_mm_fallback takes input [S, in], weight [E, in, out] and "
                        "offsets [E], got "
                     << x->describe() << ", " << w->describe() << " and " << offs->describe(),
           failure();
  int64_t S = x->shape()[0], E = w->shape()[0];
  Type i64 = I.b().getI64Type();
  TRY(ends, I.asTensor(*offs, i64));
  TRY(endsRow, reshape(I, *ends, {1, E}));
  TRY(rows, constantTensor(I, {S, 1}, i64, [](int64_t s) { return (double)s; }));
  TRY(passed, compare(I, CmpPredicate::le, *endsRow, *rows));
  TRY(count, I.asTensor(*passed, i64));
  Value ids = SumOp::create(I.b(), I.loc(), tensorOf({S}, i64), count->tensor,
                            I.b().getDenseI64ArrayAttr({1}), UnitAttr());
  Value weight = w->tensor;
  bool transposed = true;
  if (auto t = weight.getDefiningOp<TransposeOp>();
      t && t.getPermutation() == ArrayRef<int64_t>{0, 2, 1}) {
    weight = t.getInput();
    transposed = false;
  }
  if (w->type().getElementType() != x->type().getElementType())
    return I.error() << "grouped_mm_fallback of " << x->describe() << " by " << w->describe()
                     << ": one element type expected",
           failure();
  int64_t out = w->shape()[2];
  Value y = ExpertLinearOp::create(I.b(), I.loc(), tensorOf({S, out}, x->type().getElementType()),
                                   x->tensor, weight, ids,
                                   transposed ? I.b().getUnitAttr() : UnitAttr());
  return one(result(y, {*x, *w}));
}

} // namespace

void mlir::ds::ts::ops::addExpertOps(llvm::StringMap<OpHandler> &h) {
  h["aten::topk"] = [](Interpreter &I, Node *, R &in) { return topk(I, in); };
  h["aten::histc"] = [](Interpreter &I, Node *, R &in) { return histc(I, in); };
  h["aten::sort"] = [](Interpreter &I, Node *n, R &in) { return sort(I, n, in); };
  h["aten::floor_divide"] = [](Interpreter &I, Node *, R &in) { return floorDivide(I, in); };
  // Uninitialized memory: zeros are one of its values (index_put_ above overwrites it all).
  h["aten::empty_like"] = h["aten::zeros_like"];
  h["aten::index_put_"] = [](Interpreter &I, Node *n, R &in) { return indexPut(I, n, in); };
  h["aten::index_put"] = h["aten::index_put_"];
  h["transformers::grouped_mm_fallback"] = [](Interpreter &I, Node *, R &in) {
    return groupedMm(I, in);
  };
}
