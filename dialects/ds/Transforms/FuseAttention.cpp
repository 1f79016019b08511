//===- FuseAttention.cpp - the ds-fuse-attention pass: eager attention as one op ----===//
//
// Models that write attention out (HF's "eager" attention, nanoGPT's and minGPT's
// masked_fill form, TorchScript exports, core-ATen decompositions of SDPA) reach ds as
//   scores = matmul(q, transpose(k)) [* scale | / scale] [+ mask | where(keep, ., -inf)]
//   out = matmul(softmax(scores, -1), v)
// which keeps the [L, S] scores and probabilities for the backward. This pass rewrites each
// such chain whose intermediate values have no other use into one ds.attention (whose kernels
// never hold them); a chain that differs (dropout, a mask that needs a gradient, a softmax
// along another dimension, a reduced-precision softmax) stays as it is, and so does every
// chain of a bf16 or fp16 model, whose ops PyTorch rounds one by one. Then every
// ds.attention whose mask is a constant lower-triangular one (HF's causal mask, folded by an
// export) takes the causal attribute instead of the mask, and one with no mask whose keys
// and values repeat their heads for the query heads (HF's repeat_kv) reads the heads
// themselves (grouped-query attention, as HF's SDPA path asks PyTorch for it without a mask).
//
#include "ds/Transforms/Passes.h"

#include "RepeatedHeads.h"

#include "mlir/IR/Builders.h"

#include <cmath>

namespace mlir::ds {
#define GEN_PASS_DEF_DSFUSEATTENTION
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// The value of a splat floating-point constant (of any shape), if `v` is one.
std::optional<double> splatOf(Value v) {
  auto c = v.getDefiningOp<ConstantOp>();
  if (!c)
    return std::nullopt;
  auto d = dyn_cast<DenseElementsAttr>(c.getValue());
  if (!d || !d.isSplat() || !isa<FloatType>(d.getElementType()))
    return std::nullopt;
  return d.getSplatValue<APFloat>().convertToDouble();
}

/// Whether a trainable parameter reaches `v` (a learned bias: the fused op gives it no
/// gradient).
bool fromTrainable(Value v) {
  SmallVector<Value> stack{v};
  llvm::DenseSet<Value> seen;
  while (!stack.empty()) {
    Value x = stack.pop_back_val();
    if (!seen.insert(x).second)
      continue;
    Operation *d = x.getDefiningOp();
    if (!d)
      continue;
    if (auto g = dyn_cast<GetParameterOp>(d)) {
      auto p = SymbolTable::lookupNearestSymbolFrom<ParameterOp>(d, g.getNameAttr());
      if (!p || p.getTrainable())
        return true;
      continue;
    }
    for (Value o : d->getOperands())
      stack.push_back(o);
  }
  return false;
}

/// `x` as rank 4 by leading ones (an operand of the scores' shape that broadcasts), or null.
Value asRank4(OpBuilder &b, Location loc, Value x) {
  RankedTensorType t = typeOf(x);
  if (t.getRank() > 4)
    return nullptr;
  if (t.getRank() == 4)
    return x;
  SmallVector<int64_t> s(4 - t.getRank(), 1);
  s.append(t.getShape().begin(), t.getShape().end());
  return ReshapeOp::create(b, loc, RankedTensorType::get(s, t.getElementType()), x);
}

bool singleUse(Value v) { return v.hasOneUse(); }

struct FuseAttentionPass : mlir::ds::impl::DSFuseAttentionBase<FuseAttentionPass> {
  using DSFuseAttentionBase::DSFuseAttentionBase;
  void runOnOperation() override;
  /// Rewrites the chain that ends at `pv` (the probabilities' product with the values).
  bool fuse(MatmulOp pv);
};

bool FuseAttentionPass::fuse(MatmulOp pv) {
  auto sm = pv.getLhs().getDefiningOp<SoftmaxOp>();
  if (!sm || !singleUse(sm.getResult()))
    return false;
  RankedTensorType st = typeOf(sm.getResult());
  if (st.getRank() != 4 || sm.getDim() != 3)
    return false;
  Type et = st.getElementType();
  if (!et.isF32() && !et.isBF16() && !et.isF16())
    return false;
  Value x = sm.getInput();
  SmallVector<Operation *> chain{pv, sm};
  // The mask: an added float tensor, or kept keys (where(keep, x, -inf)).
  Value mask;
  bool keepMask = false;
  CmpOp invert;
  if (auto add = x.getDefiningOp<AddOp>(); add && singleUse(x)) {
    Value a = add.getLhs(), m = add.getRhs();
    if (typeOf(a) != st)
      std::swap(a, m);
    if (typeOf(a) == st && typeOf(m).getElementType() == et && !fromTrainable(m)) {
      chain.push_back(add);
      mask = m;
      x = a;
    }
  } else if (auto w = x.getDefiningOp<WhereOp>(); w && singleUse(x)) {
    auto minusInf = [](Value c) {
      std::optional<double> v = splatOf(c);
      return v && std::isinf(*v) && *v < 0;
    };
    if (minusInf(w.getOnFalse()) && typeOf(w.getOnTrue()) == st) {
      chain.push_back(w);
      mask = w.getCond();
      x = w.getOnTrue();
    } else if (auto drop = w.getCond().getDefiningOp<CmpOp>();
               drop && minusInf(w.getOnTrue()) && typeOf(w.getOnFalse()) == st) {
      // masked_fill(drop, -inf) with drop a comparison: keep is the opposite comparison.
      chain.push_back(w);
      mask = drop.getResult();
      invert = drop;
      x = w.getOnFalse();
    }
    keepMask = static_cast<bool>(mask);
  }
  // The scale: a product with (or a quotient by) a splat constant.
  double scale = 1.0;
  if (auto mul = x.getDefiningOp<MulOp>(); mul && singleUse(x)) {
    std::optional<double> c = splatOf(mul.getRhs());
    Value a = mul.getLhs();
    if (!c) {
      c = splatOf(mul.getLhs());
      a = mul.getRhs();
    }
    if (c && typeOf(a) == st) {
      chain.push_back(mul);
      scale = *c;
      x = a;
    }
  } else if (auto div = x.getDefiningOp<DivOp>(); div && singleUse(x)) {
    std::optional<double> c = splatOf(div.getRhs());
    if (c && *c != 0 && typeOf(div.getLhs()) == st) {
      chain.push_back(div);
      scale = 1.0 / *c;
      x = div.getLhs();
    }
  }
  auto qk = x.getDefiningOp<MatmulOp>();
  if (!qk || !singleUse(x) || scale == 0)
    return false;
  auto kt = qk.getRhs().getDefiningOp<TransposeOp>();
  if (!kt || kt.getPermutation() != ArrayRef<int64_t>{0, 1, 3, 2})
    return false;
  Value q = qk.getLhs(), k = kt.getInput(), v = pv.getRhs();
  RankedTensorType qt = typeOf(q), kT = typeOf(k), vt = typeOf(v);
  auto rank4Same = [&](RankedTensorType t) {
    return t.getRank() == 4 && t.getShape()[0] == qt.getShape()[0] &&
           t.getShape()[1] == qt.getShape()[1] && t.getElementType() == et;
  };
  if (!rank4Same(qt) || !rank4Same(kT) || !rank4Same(vt) || kT.getShape()[2] != vt.getShape()[2])
    return false;
  OpBuilder b(pv);
  Location loc = pv.getLoc();
  if (mask) {
    RankedTensorType mt = typeOf(mask);
    if (mt.getRank() > 4)
      return false;
    ArrayRef<int64_t> full = st.getShape();
    for (int64_t d = 0; d < mt.getRank(); ++d) {
      int64_t n = mt.getShape()[d], want = full[4 - mt.getRank() + d];
      if (n != 1 && n != want)
        return false;
    }
    if (keepMask != mt.getElementType().isInteger(1))
      return false;
    if (invert) {
      auto opposite = [](CmpPredicate p) {
        switch (p) {
        case CmpPredicate::eq: return CmpPredicate::ne;
        case CmpPredicate::ne: return CmpPredicate::eq;
        case CmpPredicate::lt: return CmpPredicate::ge;
        case CmpPredicate::ge: return CmpPredicate::lt;
        case CmpPredicate::le: return CmpPredicate::gt;
        case CmpPredicate::gt: return CmpPredicate::le;
        }
        return p;
      };
      b.setInsertionPointAfter(invert);
      mask = CmpOp::create(b, invert.getLoc(), typeOf(invert.getResult()),
                           CmpPredicateAttr::get(b.getContext(), opposite(invert.getPredicate())),
                           invert.getLhs(), invert.getRhs());
      b.setInsertionPoint(pv);
    }
    mask = asRank4(b, loc, mask);
  }
  auto lseT = RankedTensorType::get(st.getShape().drop_back(), b.getF32Type());
  auto att = AttentionOp::create(b, loc, typeOf(pv.getResult()), lseT, q, k, v, mask,
                                 b.getF64FloatAttr(scale), UnitAttr());
  pv.getResult().replaceAllUsesWith(att.getResult());
  for (Operation *op : chain)
    op->erase();
  qk->erase();
  if (kt->use_empty())
    kt->erase();
  return true;
}

/// Whether a constant boolean mask [.., .., L, S] keeps exactly the keys j <= i of every row
/// (the causal mask HF's models build and an export folds to a constant).
bool isCausalConstant(Value mask) {
  auto c = mask.getDefiningOp<ConstantOp>();
  auto d = c ? dyn_cast<DenseElementsAttr>(c.getValue()) : DenseElementsAttr();
  if (!d || !d.getElementType().isInteger(1))
    return false;
  ArrayRef<int64_t> shape = typeOf(mask).getShape();
  const int64_t L = shape[2], S = shape[3];
  if (d.isSplat())
    return d.getSplatValue<bool>() ? S == 1 : false;
  int64_t n = 0;
  for (bool keep : d.getValues<bool>()) {
    const int64_t j = n % S, i = (n / S) % L;
    if (keep != (j <= i))
      return false;
    ++n;
  }
  return true;
}

void FuseAttentionPass::runOnOperation() {
  ModuleOp module = getOperation();
  module.walk([&](func::FuncOp f) {
    SmallVector<MatmulOp> products;
    if (writtenOut)
      f.walk([&](MatmulOp m) { products.push_back(m); });
    for (MatmulOp m : products)
      fuse(m);
    // A constant causal mask becomes the causal attribute: no [L, S] mask is read.
    f.walk([&](AttentionOp a) {
      if (a.getMask() && isCausalConstant(a.getMask())) {
        a.getMaskMutable().clear();
        a.setCausal(true);
      }
      // Key and value heads repeated for the query heads (repeat_kv) with no mask: HF passes
      // SDPA the heads themselves then (enable_gqa), whose kernels sum each key/value head's
      // gradient over its query heads before rounding it, and keep no repeated copies.
      Value k = repeatedHeads(a.getKey()), v = repeatedHeads(a.getValue());
      if (!a.getMask() && k && v && typeOf(k).getDimSize(1) == typeOf(v).getDimSize(1)) {
        Value oldK = a.getKey(), oldV = a.getValue();
        a.getKeyMutable().assign(k);
        a.getValueMutable().assign(v);
        SmallVector<Value> olds{oldK};
        if (oldV != oldK) // one repeated tensor as both: its chain is erased once
          olds.push_back(oldV);
        for (Value old : olds)
          for (Operation *op = old.getDefiningOp(); op && op->use_empty();) {
            Operation *next = op->getNumOperands() ? op->getOperand(0).getDefiningOp() : nullptr;
            op->erase();
            op = isa_and_nonnull<ReshapeOp, BroadcastToOp>(next) ? next : nullptr;
          }
      }
    });
  });
}

} // namespace

// (RepeatedHeads.h)
Value mlir::ds::repeatedHeads(Value x) {
  auto outer = x.getDefiningOp<ReshapeOp>();
  auto wide = outer ? outer.getInput().getDefiningOp<BroadcastToOp>() : BroadcastToOp();
  auto inner = wide ? wide.getInput().getDefiningOp<ReshapeOp>() : ReshapeOp();
  if (!inner)
    return {};
  ArrayRef<int64_t> from = typeOf(inner.getInput()).getShape(),
                    one = typeOf(inner.getResult()).getShape(),
                    grown = typeOf(wide.getResult()).getShape(),
                    to = typeOf(outer.getResult()).getShape();
  if (from.size() != 4 || one.size() != 5 || grown.size() != 5)
    return {};
  const bool same = one[0] == from[0] && one[1] == from[1] && one[2] == 1 &&
                    one[3] == from[2] && one[4] == from[3] && grown[0] == one[0] &&
                    grown[1] == one[1] && grown[3] == one[3] && grown[4] == one[4] &&
                    to[0] == from[0] && to[1] == from[1] * grown[2] && to[2] == from[2] &&
                    to[3] == from[3];
  return same ? inner.getInput() : Value();
}
