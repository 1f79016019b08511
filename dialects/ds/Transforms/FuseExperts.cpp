//===- FuseExperts.cpp - the ds-fuse-experts pass: routed experts as one op ---------===//
//
// HF's batched_mm experts (transformers/integrations/moe.py) multiply each token-expert pair
// by its expert's weights gathered per pair:
//   w_rows = weight[ids]                  (ds: reshape, embedding, reshape: [N, out, in])
//   y = bmm(w_rows, x[..., None])[..., 0] (or bmm(x[:, None, :], w_rows)[:, 0] transposed)
// which holds N copies of an expert's matrix for the forward and the same again as its
// gradient. This pass replaces each such product by one ds.expert_linear on the weight
// itself, whose kernels multiply each expert's rows as one product; the gather dies.
//
#include "ds/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSFUSEEXPERTS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// The rows of a 3-D weight gathered by 1-D ids, `[N, a, b]` from `[E, a, b]`: returns the
/// weight and the ids, or nulls.
std::pair<Value, Value> gatheredWeight(Value v) {
  auto out = v.getDefiningOp<ReshapeOp>();
  if (!out)
    return {};
  auto gather = out.getInput().getDefiningOp<EmbeddingOp>();
  if (!gather || gather.getPaddingIdx())
    return {};
  auto table = gather.getWeight().getDefiningOp<ReshapeOp>();
  if (!table)
    return {};
  Value w = table.getInput();
  ArrayRef<int64_t> ws = typeOf(w).getShape(), rows = typeOf(v).getShape();
  Value ids = gather.getIndices();
  if (ws.size() != 3 || rows.size() != 3 || typeOf(ids).getRank() != 1 ||
      rows[0] != typeOf(ids).getShape()[0] || rows[1] != ws[1] || rows[2] != ws[2])
    return {};
  return {w, ids};
}

/// Erases `op` and the ops that fed only it, up to the gathered weight's reads.
void eraseDead(Operation *op) {
  SmallVector<Operation *> work{op};
  while (!work.empty()) {
    Operation *o = work.pop_back_val();
    if (!o->use_empty() || !isa<ReshapeOp, EmbeddingOp>(o))
      continue;
    SmallVector<Value> operands(o->getOperands());
    o->erase();
    for (Value v : operands)
      if (Operation *d = v.getDefiningOp())
        work.push_back(d);
  }
}

struct FuseExpertsPass : mlir::ds::impl::DSFuseExpertsBase<FuseExpertsPass> {
  using DSFuseExpertsBase::DSFuseExpertsBase;
  void runOnOperation() override;
};

/// Folds `m` if it is one row-by-row product with gathered expert weights.
bool fuse(MatmulOp m) {
  ArrayRef<int64_t> rs = typeOf(m.getResult()).getShape();
  if (rs.size() != 3)
    return false;
  // bmm(w_rows [N, out, in], x [N, in, 1]) or bmm(x [N, 1, in], w_rows [N, in, out]).
  auto [wl, idsl] = gatheredWeight(m.getLhs());
  auto [wr, idsr] = gatheredWeight(m.getRhs());
  bool transposed = !wl && wr;
  Value w = transposed ? wr : wl, ids = transposed ? idsr : idsl;
  Value x = transposed ? m.getLhs() : m.getRhs();
  if (!w || (wl && wr))
    return false;
  ArrayRef<int64_t> xs = typeOf(x).getShape();
  if (xs.size() != 3 || xs[transposed ? 1 : 2] != 1)
    return false;
  OpBuilder b(m);
  Location loc = m.getLoc();
  Type et = typeOf(x).getElementType();
  int64_t n = rs[0], in = xs[transposed ? 2 : 1], out = rs[transposed ? 2 : 1];
  Value rows = ReshapeOp::create(b, loc, RankedTensorType::get({n, in}, et), x);
  Value y = ExpertLinearOp::create(b, loc, RankedTensorType::get({n, out}, et), rows, w, ids,
                                   transposed ? b.getUnitAttr() : UnitAttr());
  Value back = ReshapeOp::create(b, loc, typeOf(m.getResult()), y);
  Operation *gathered = (transposed ? m.getRhs() : m.getLhs()).getDefiningOp();
  m.getResult().replaceAllUsesWith(back);
  m.erase();
  eraseDead(gathered);
  return true;
}

void FuseExpertsPass::runOnOperation() {
  getOperation().walk([&](func::FuncOp f) {
    SmallVector<MatmulOp> products;
    f.walk([&](MatmulOp m) { products.push_back(m); });
    for (MatmulOp m : products)
      fuse(m);
  });
}

} // namespace
