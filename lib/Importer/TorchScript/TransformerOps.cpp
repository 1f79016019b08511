//===- TransformerOps.cpp - the ops of current transformer models ----------===//
//
// Scaled dot-product attention, RMSNorm and SiLU, as PyTorch 2.x models call them. Attention is
// one ds.attention (fused kernels, no score tensor) where it fits the op, else decomposed as
// PyTorch's math reference writes it; RMSNorm and SiLU are decomposed into ds ops, so their
// gradients come from those and match PyTorch's autograd.
//
#include "OpHelpers.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::ts;
using namespace mlir::ds::ts::ops;
using torch::jit::Node;
using Kind = AV::Kind;

namespace {
/// torch.repeat_interleave(x, repeats, dim): each slice along `dim` repeated `repeats` times in
/// place (a broadcast along a new dimension after it, merged into it).
FailureOr<AV> repeatInterleave(Interpreter &I, const AV &x, int64_t repeats, int64_t dim) {
  if (repeats == 1)
    return x;
  Shape shape(x.shape().begin(), x.shape().end());
  Shape split = shape;
  split.insert(split.begin() + dim + 1, 1);
  TRY(r, reshape(I, x, split));
  Shape wide = split;
  wide[dim + 1] = repeats;
  Value v = BroadcastToOp::create(I.b(), I.loc(), x.type().clone(wide), r->tensor);
  AV b = result(v, {*r});
  shape[dim] *= repeats;
  return reshape(I, b, shape);
}

/// Grouped-query attention: each of the `groups` query heads that share a key/value head sees
/// it, as torch.repeat_interleave(x, groups, dim=-3) does.
FailureOr<AV> repeatHeads(Interpreter &I, const AV &x, int64_t groups) {
  return repeatInterleave(I, x, groups, x.rank() - 3);
}

/// aten::repeat_interleave(x, repeats: int, dim: int) (HF's and Llama-style repeat_kv); a
/// tensor of repeats or no dim (the flattened form) is not taken.
FailureOr<R> repeatInterleaveOp(Interpreter &I, R &in) {
  TRY(x, tensorArg(I, in[0]));
  if (in[1].kind != Kind::Int || in.size() < 3 || in[2].isNone())
    return I.error() << "repeat_interleave needs an int count of repeats and a dim (ds does not "
                        "import a tensor of counts or the flattened form)",
           failure();
  TRY(dim, dimArg(I, in[2], x->rank()));
  if (in[1].i < 1)
    return I.error() << "repeat_interleave needs a positive count of repeats, got " << in[1].i,
           failure();
  TRY(y, repeatInterleave(I, *x, in[1].i, *dim));
  return one(*y);
}

/// Leading dimensions of `x` (all but the last three; one where it has only two) as one.
SmallVector<int64_t> asRank4(ArrayRef<int64_t> s) {
  int64_t r = s.size(), lead = 1;
  for (int64_t d = 0; d + 3 < r; ++d)
    lead *= s[d];
  return {lead, r >= 3 ? s[r - 3] : 1, s[r - 2], s[r - 1]};
}

/// SDPA as one ds.attention where it fits the op: no dropout, f32/bf16/f16, query, key and value
/// of one rank with the same leading (batch) dimensions, a mask that needs no gradient, of
/// bool or the query's type, whose leading dimensions broadcast as a whole. Null otherwise:
/// the caller decomposes.
FailureOr<std::optional<AV>> fusedAttention(Interpreter &I, const AV &q, const AV &k,
                                            const AV &v, const AV &mask, double p, bool causal,
                                            double scale) {
  Type et = q.type().getElementType();
  int64_t r = q.rank();
  auto lead = [&](const AV &x) { return x.shape().drop_back(std::min<int64_t>(3, x.rank())); };
  bool fits = p == 0 && (et.isF32() || et.isBF16() || et.isF16()) && k.rank() == r &&
              v.rank() == r && lead(k) == lead(q) && lead(v) == lead(q) &&
              k.type().getElementType() == et && v.type().getElementType() == et;
  SmallVector<int64_t> q4 = asRank4(q.shape()), k4 = asRank4(k.shape()), v4 = asRank4(v.shape());
  SmallVector<int64_t> mask4;
  if (fits && mask.isTensor()) {
    Type mt = mask.type().getElementType();
    fits = !mask.requiresGrad && (mt.isInteger(1) || mt == et) && mask.rank() <= r;
    SmallVector<int64_t> m(r - std::min<int64_t>(r, mask.rank()), 1);
    if (fits)
      m.append(mask.shape().begin(), mask.shape().end());
    // The leading dimensions: all ones, or all the query's.
    if (fits && r > 4) {
      ArrayRef<int64_t> ml = ArrayRef<int64_t>(m).take_front(r - 3);
      fits = llvm::all_of(ml, [](int64_t d) { return d == 1; }) || ml == lead(q);
    }
    if (fits) {
      mask4 = asRank4(m);
      int64_t full[4] = {q4[0], q4[1], q4[2], k4[2]};
      for (int d = 0; d < 4; ++d)
        fits = fits && (mask4[d] == 1 || mask4[d] == full[d]);
    }
  }
  if (!fits || q4[1] % k4[1] != 0 || q4[3] != k4[3] || k4[2] != v4[2])
    return std::optional<AV>();
  auto to4 = [&](const AV &x, ArrayRef<int64_t> s4) -> FailureOr<AV> {
    if (x.shape() == s4)
      return x;
    return reshape(I, x, s4);
  };
  TRY(q1, to4(q, q4));
  TRY(k1, to4(k, k4));
  TRY(v1, to4(v, v4));
  Value m1;
  if (mask.isTensor()) {
    TRY(mr, to4(mask, mask4));
    m1 = mr->tensor;
  }
  OpBuilder &b = I.b();
  auto outT = tensorOf({q4[0], q4[1], q4[2], v4[3]}, et);
  auto lseT = tensorOf({q4[0], q4[1], q4[2]}, b.getF32Type());
  auto op = AttentionOp::create(I.b(), I.loc(), outT, lseT, q1->tensor, k1->tensor, v1->tensor,
                                m1, b.getF64FloatAttr(scale),
                                causal ? b.getUnitAttr() : UnitAttr());
  AV out = result(op.getResult(), {q, k, v});
  SmallVector<int64_t> shape(q.shape());
  shape.back() = v4[3];
  if (out.shape() != ArrayRef<int64_t>(shape)) {
    TRY(back, reshape(I, out, shape));
    out = *back;
  }
  return std::optional<AV>(out);
}

/// aten::scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0,
/// is_causal=False, *, scale=None, enable_gqa=False):
/// softmax(q k^T * scale + mask) v, with a causal mask aligned to the top left as PyTorch's.
FailureOr<R> attention(Interpreter &I, R &in) {
  TRY(q, tensorArg(I, in[0]));
  TRY(k0, tensorArg(I, in[1]));
  TRY(v0, tensorArg(I, in[2]));
  AV k = *k0, v = *v0;
  const AV &mask = in[3];
  double p = in[4].isNone() ? 0.0 : in[4].asDouble();
  bool causal = in[5].kind == Kind::Bool && in[5].b;
  bool gqa = in.size() > 7 && in[7].kind == Kind::Bool && in[7].b;
  if (q->rank() < 2 || k.rank() < 2 || v.rank() < 2)
    return I.error() << "attention needs query, key and value of rank >= 2, got "
                     << q->describe() << ", " << k.describe() << ", " << v.describe(),
           failure();
  if (!isa<FloatType>(q->type().getElementType()))
    return I.error() << "attention needs a floating-point query, got " << q->describe(),
           failure();
  if (causal && !mask.isNone())
    return I.error() << "attention with both attn_mask and is_causal=True (PyTorch refuses it "
                        "too); fold the causal mask into attn_mask",
           failure();
  int64_t e = q->shape().back();
  double scale = in.size() > 6 && !in[6].isNone() ? in[6].asDouble() : 1.0 / std::sqrt((double)e);
  bool grouped =
      q->rank() >= 3 && k.rank() >= 3 && q->shape()[q->rank() - 3] != k.shape()[k.rank() - 3];
  if (grouped) {
    int64_t hq = q->shape()[q->rank() - 3], hk = k.shape()[k.rank() - 3];
    if (!gqa || hq % hk != 0 || k.shape()[k.rank() - 3] != v.shape()[v.rank() - 3])
      return I.error() << "attention of " << hq << " query heads over " << hk
                       << " key/value heads needs enable_gqa=True and a multiple",
             failure();
  }
  TRY(fused, fusedAttention(I, *q, k, v, mask, p, causal, scale));
  if (*fused)
    return one(**fused);
  // Decomposed as PyTorch's math reference (dropout, f64, broadcast batches): the score
  // tensor exists whole.
  if (grouped) {
    int64_t hq = q->shape()[q->rank() - 3], hk = k.shape()[k.rank() - 3];
    TRY(kr, repeatHeads(I, k, hq / hk));
    TRY(vr, repeatHeads(I, v, hq / hk));
    k = *kr;
    v = *vr;
  }
  SmallVector<int64_t> perm;
  for (int64_t d = 0; d < k.rank(); ++d)
    perm.push_back(d);
  std::swap(perm[k.rank() - 1], perm[k.rank() - 2]);
  TRY(kt, transpose(I, k, perm));
  TRY(scores, matmul(I, *q, *kt));
  TRY(att, scaled(I, (*scores)[0], AV::real(scale)));
  AV a = *att;
  Type et = a.type().getElementType();
  int64_t l = a.shape()[a.rank() - 2], s = a.shape().back();
  AV minusInf = AV::real(-std::numeric_limits<double>::infinity());
  if (causal) {
    TRY(keep, constantTensor(I, {l, s}, I.b().getI1Type(),
                             [s](int64_t i) { return (double)(i % s <= i / s); }));
    TRY(masked, where(I, *keep, a, minusInf, et));
    a = *masked;
  } else if (mask.isTensor()) {
    if (mask.type().getElementType().isInteger(1)) {
      // The type's lowest finite value, not -inf: a query row whose every key is masked (the
      // padding rows of a left-padded batch) then gets finite weights, set to zero below;
      // elsewhere exp underflows to 0 as exp(-inf) does.
      auto ft = cast<FloatType>(et);
      double lowest =
          APFloat::getLargest(ft.getFloatSemantics(), /*Negative=*/true).convertToDouble();
      TRY(masked, where(I, mask, a, AV::real(lowest), et));
      a = *masked;
    } else {
      TRY(added, binary<AddOp>(I, a, mask, et));
      a = *added;
    }
    if (a.shape() != (*att).shape())
      return I.error() << "attn_mask " << formatShape(mask.shape())
                       << " does not broadcast to the scores " << formatShape((*att).shape()),
             failure();
  } else if (!mask.isNone()) {
    return I.error() << "attn_mask must be a tensor or None, got " << mask.describe(), failure();
  }
  R softmaxIn{a, AV::integer(-1), AV::none()};
  TRY(probs, softmaxLike(I, softmaxIn, false));
  AV weights = (*probs)[0];
  if (mask.isTensor() && mask.type().getElementType().isInteger(1)) {
    // As PyTorch's attention (a safe softmax since 2.5): a row with no key to attend to has
    // zero weights.
    TRY(wide, I.asTensor(mask, I.b().getI64Type()));
    R sumIn{*wide, AV::list({AV::integer(-1)}), AV::boolean(true), AV::none()};
    TRY(keys, reduce(I, nullptr, sumIn, "sum"));
    TRY(any, compare(I, CmpPredicate::gt, (*keys)[0], AV::integer(0)));
    TRY(safe, where(I, *any, weights, AV::real(0.0), et));
    weights = *safe;
  }
  if (p > 0) {
    R dropIn{weights, AV::real(p), AV::boolean(true)};
    TRY(dropped, dropout(I, dropIn));
    weights = (*dropped)[0];
  }
  return matmul(I, weights, v);
}

/// aten::rms_norm(input, normalized_shape, weight=None, eps=None): PyTorch's composite,
/// x * rsqrt(mean(x^2 over the normalized dims) + eps) * weight, eps defaulting to the dtype's
/// machine epsilon.
FailureOr<R> rmsNorm(Interpreter &I, R &in) {
  TRY(x, tensorArg(I, in[0]));
  TRY(norm, intList(I, in[1]));
  ArrayRef<int64_t> shape = x->shape();
  if (norm->size() > shape.size() || shape.take_back(norm->size()) != ArrayRef<int64_t>(*norm))
    return I.error() << "normalized_shape " << formatShape(*norm)
                     << " is not the trailing dimensions of the input " << formatShape(shape),
           failure();
  auto ft = dyn_cast<FloatType>(x->type().getElementType());
  if (!ft)
    return I.error() << "rms_norm needs a floating-point input, got " << x->describe(),
           failure();
  double eps = in.size() > 3 && !in[3].isNone()
                   ? in[3].asDouble()
                   : std::ldexp(1.0, 1 - (int)APFloat::semanticsPrecision(ft.getFloatSemantics()));
  TRY(sq, binary<MulOp>(I, *x, *x));
  SmallVector<AV> dims;
  for (size_t d = shape.size() - norm->size(); d < shape.size(); ++d)
    dims.push_back(AV::integer(d));
  R meanIn{*sq, AV::list(std::vector<AV>(dims.begin(), dims.end())), AV::boolean(true),
           AV::none()};
  TRY(ms, reduce(I, nullptr, meanIn, "mean"));
  TRY(shifted, binary<AddOp>(I, (*ms)[0], AV::real(eps)));
  Value inv = RsqrtOp::create(I.b(), I.loc(), shifted->tensor);
  TRY(y, binary<MulOp>(I, *x, result(inv, {*shifted})));
  if (in.size() > 2 && in[2].isTensor()) {
    if (in[2].shape() != ArrayRef<int64_t>(*norm))
      return I.error() << "rms_norm weight " << formatShape(in[2].shape())
                       << " does not match normalized_shape " << formatShape(*norm),
             failure();
    TRY(w, binary<MulOp>(I, *y, in[2]));
    return one(*w);
  }
  return one(*y);
}

/// aten::silu(x) = x * sigmoid(x), the sigmoid a step of one fused computation (ds.fused):
/// in 16 bits it is computed in f32 and rounded once, with its gradient, as PyTorch's silu.
FailureOr<R> silu(Interpreter &I, R &in) {
  TRY(x, tensorArg(I, in[0]));
  if (!isa<FloatType>(x->type().getElementType()))
    return I.error() << "silu needs a floating-point tensor, got " << x->describe(), failure();
  auto s = SigmoidOp::create(I.b(), I.loc(), x->tensor);
  s->setAttr(kFusedAttrName, I.b().getUnitAttr());
  TRY(y, binary<MulOp>(I, *x, result(s, {*x})));
  return one(*y);
}
} // namespace

void mlir::ds::ts::ops::addTransformerOps(llvm::StringMap<OpHandler> &h) {
  h["aten::scaled_dot_product_attention"] = [](Interpreter &I, Node *, R &in) {
    return attention(I, in);
  };
  h["aten::rms_norm"] = [](Interpreter &I, Node *, R &in) { return rmsNorm(I, in); };
  h["aten::repeat_interleave"] = [](Interpreter &I, Node *, R &in) {
    return repeatInterleaveOp(I, in);
  };
  h["aten::silu"] = [](Interpreter &I, Node *, R &in) { return silu(I, in); };
}
