//===- FuseSwiglu.cpp - the ds-fuse-swiglu pass: the experts' SwiGLU as one op ---------===//
//
// HF's MoE experts (Mixtral, Qwen-MoE, OLMoE, DeepSeek) compute their activation on the
// fused gate-and-up product: gate, up = h.chunk(2, -1); act(gate) * up, with silu imported as
// x * sigmoid(x):
//   g = slice(h, last, 0:F); u = slice(h, last, F:2F); y = (g * sigmoid(g)) * u
// Five ops, two of them copies, over rows of which expert parallelism leaves most as padding
// (a rank's receive buffers hold the dropless worst case, every rank's rows); their gradients
// are seven more. This pass replaces the chain by one ds.swiglu on the product's rows, told
// the product's expert ids, so its kernels skip the rows no expert took (zeros there, as the
// chain gives on the product's zero rows) and its gradient is one ds.swiglu_grad.
//
#include "ds/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSFUSESWIGLU
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// `v` as a slice of the last dimension from `start` at step 1 (its end follows: the callers
/// take `v` of the width they want): the sliced value, or null.
Value sliceOfLast(Value v, int64_t start) {
  auto s = v.getDefiningOp<SliceOp>();
  if (!s || s.getStep() != 1)
    return Value();
  int64_t rank = typeOf(s.getInput()).getRank();
  if (static_cast<int64_t>(s.getDim()) != rank - 1 ||
      static_cast<int64_t>(s.getStart()) != start)
    return Value();
  return s.getInput();
}

/// `v` = g * sigmoid(g) (either order): g, or null.
Value siluInput(Value v) {
  auto m = v.getDefiningOp<MulOp>();
  if (!m)
    return Value();
  for (auto [a, b] : {std::pair(m.getLhs(), m.getRhs()), std::pair(m.getRhs(), m.getLhs())})
    if (auto s = b.getDefiningOp<SigmoidOp>(); s && s.getInput() == a)
      return a;
  return Value();
}

/// The expert product whose rows `h` holds, through reshapes back to its own shape; null.
ExpertLinearOp expertRows(Value h) {
  Value v = h;
  while (auto r = v.getDefiningOp<ReshapeOp>())
    v = r.getInput();
  auto p = v.getDefiningOp<ExpertLinearOp>();
  return p && typeOf(p.getResult()) == typeOf(h) ? p : ExpertLinearOp();
}

/// Erases `roots` and what fed only them, down to the chain's first value (the gate's slice
/// feeds both the sigmoid and the product: each op is erased once, when its last user is).
void eraseDead(ArrayRef<Operation *> roots) {
  llvm::SetVector<Operation *> work(roots.begin(), roots.end());
  for (bool erased = true; erased;) {
    erased = false;
    for (Operation *o : SmallVector<Operation *>(work.begin(), work.end())) {
      if (!o->use_empty())
        continue;
      work.remove(o);
      for (Value v : o->getOperands())
        if (Operation *d = v.getDefiningOp(); d && isa<MulOp, SigmoidOp, SliceOp, ReshapeOp>(d))
          work.insert(d);
      o->erase();
      erased = true;
    }
  }
}

/// Folds `m` if it ends a SwiGLU on an expert product's rows.
bool fuse(MulOp m) {
  RankedTensorType t = typeOf(m.getResult());
  if (t.getRank() != 2 || typeOf(m.getLhs()) != t || typeOf(m.getRhs()) != t)
    return false;
  const int64_t width = t.getShape().back();
  for (auto [act, up] : {std::pair(m.getLhs(), m.getRhs()), std::pair(m.getRhs(), m.getLhs())}) {
    Value gate = siluInput(act);
    if (!gate)
      continue;
    Value h = sliceOfLast(gate, 0);
    if (!h || typeOf(h).getShape().back() != 2 * width || sliceOfLast(up, width) != h)
      continue;
    ExpertLinearOp product = expertRows(h);
    if (!product)
      continue;
    OpBuilder b(m);
    Value y = SwigluOp::create(b, m.getLoc(), t, product.getResult(), product.getExpertIds());
    m.getResult().replaceAllUsesWith(y);
    eraseDead({m});
    return true;
  }
  return false;
}

struct FuseSwigluPass : mlir::ds::impl::DSFuseSwigluBase<FuseSwigluPass> {
  using DSFuseSwigluBase::DSFuseSwigluBase;
  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp f) {
      SmallVector<MulOp> products;
      f.walk([&](MulOp m) { products.push_back(m); });
      for (MulOp m : products)
        fuse(m);
    });
  }
};

} // namespace
