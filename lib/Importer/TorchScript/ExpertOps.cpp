//===- ExpertOps.cpp - the ops of mixture-of-experts routers -------------------===//
//
// A router picks each token's experts with topk (one ds.top_k) and HF's auxiliary
// load-balancing loss counts the picks with histc (compares and a sum: no gradient flows
// through counts). The experts' products themselves arrive as the ops of HF's batched_mm
// form (a gather of the weights and a bmm), which ds-fuse-experts folds into ds.expert_linear.
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
  if (!isa<FloatType>(x->type().getElementType()) || x->rank() < 1)
    return I.error() << "topk takes a floating-point tensor of rank >= 1, got " << x->describe(),
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
  if (in.size() > 3 && in[3].kind == Kind::Bool && !in[3].b)
    return I.error() << "topk with largest=False is not supported (negate the input)",
           failure();
  if (k < 1 || k > n)
    return I.error() << "topk k = " << k << " is not in [1, " << n << "] for " << x->describe(),
           failure();
  Shape out(x->shape().begin(), x->shape().end());
  out.back() = k;
  auto op = TopKOp::create(I.b(), I.loc(), x->type().clone(out),
                           tensorOf(out, I.b().getI64Type()), x->tensor,
                           I.b().getI64IntegerAttr(k));
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

} // namespace

void mlir::ds::ts::ops::addExpertOps(llvm::StringMap<OpHandler> &h) {
  h["aten::topk"] = [](Interpreter &I, Node *, R &in) { return topk(I, in); };
  h["aten::histc"] = [](Interpreter &I, Node *, R &in) { return histc(I, in); };
}
