//===- ExpertCapacity.cpp - the ds-expert-capacity pass: DeepSpeed-MoE's token dropping ---===//
//
// DeepSpeed-MoE gives each expert a capacity per micro-batch, C = max(ceil(T / E x
// capacity_factor x k), min_capacity) of the T tokens' k choices (sharded_moe.py, _capacity),
// and drops the routed rows past it, the first choices in token order queued before the
// second ones (top2gating). An HF model's own routing is dropless; this pass adds the drop to
// it without changing the routing: the ids that the experts' products read pass through
// ds.expert_capacity, which writes -1 (a row no expert takes) past each expert's capacity.
//
#include "ds/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"

#include <cmath>

namespace mlir::ds {
#define GEN_PASS_DEF_DSEXPERTCAPACITY
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

constexpr llvm::StringLiteral kPass = "ds-expert-capacity";

/// HF's wrap of negative ids before indexing, `where(ids < 0, ids + E, ids)`: its `ids`.
Value unwrapNegative(Value v) {
  auto w = v.getDefiningOp<WhereOp>();
  if (!w)
    return v;
  auto lt = w.getCond().getDefiningOp<CmpOp>();
  auto add = w.getOnTrue().getDefiningOp<AddOp>();
  if (lt && lt.getPredicate() == CmpPredicate::lt && add && lt.getLhs() == w.getOnFalse() &&
      add.getLhs() == w.getOnFalse())
    return w.getOnFalse();
  return v;
}

/// The router's top-k whose `[..., k]` indices, flattened in token order, are `ids`; or null.
TopKOp routerChoices(Value ids) {
  auto flat = unwrapNegative(ids).getDefiningOp<ReshapeOp>();
  if (!flat)
    return {};
  auto topK = flat.getInput().getDefiningOp<TopKOp>();
  if (!topK || topK.getSmallest() || flat.getInput() != topK.getIndices())
    return {};
  return topK;
}

/// DeepSpeed's _capacity: ceil((T / E) x (capacity_factor x k)) in f32 (a Python float times
/// an f32 tensor), at least min_capacity.
int64_t capacityOf(int64_t tokens, int64_t experts, double factor, int64_t choices,
                   int64_t least) {
  float share = static_cast<float>(static_cast<double>(tokens) / static_cast<double>(experts));
  float scaled = share * static_cast<float>(factor * static_cast<double>(choices));
  return std::max(static_cast<int64_t>(std::ceil(scaled)), least);
}

struct ExpertCapacityPass : mlir::ds::impl::DSExpertCapacityBase<ExpertCapacityPass> {
  using DSExpertCapacityBase::DSExpertCapacityBase;
  void runOnOperation() override;
};

void ExpertCapacityPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (!(capacityFactor > 0) || minCapacity < 0) {
    module.emitError() << kPass << ": capacity-factor must be > 0 and min-capacity >= 0, got "
                       << static_cast<double>(capacityFactor) << " and "
                       << static_cast<int64_t>(minCapacity);
    return signalPassFailure();
  }
  auto forward = module.lookupSymbol<func::FuncOp>(kForwardName);
  if (!forward) {
    module.emitError() << kPass << " needs @forward (the imported model)";
    return signalPassFailure();
  }
  llvm::MapVector<Value, SmallVector<ExpertLinearOp>> byIds;
  forward.walk([&](ExpertLinearOp p) { byIds[p.getExpertIds()].push_back(p); });
  if (byIds.empty()) {
    module.emitError() << kPass << ": @forward has no routed experts (ds.expert_linear) to "
                          "drop tokens from; moe.drop_tokens needs a mixture-of-experts model";
    return signalPassFailure();
  }
  OpBuilder b(module.getContext());
  for (auto &[ids, products] : byIds) {
    ExpertLinearOp first = products.front();
    TopKOp router = routerChoices(ids);
    if (!router) {
      first.emitError() << kPass << ": this product's expert ids are not a router's top-k "
                        << "indices in token order, so the tokens' choices cannot be queued "
                        << "as DeepSpeed-MoE does; export the model with HF's "
                        << "experts_implementation=\"batched_mm\" (the grouped_mm form sorts "
                        << "the rows by expert first)";
      return signalPassFailure();
    }
    const int64_t k = router.getK();
    if (k > 2) {
      router.emitError() << kPass << ": the router picks " << k << " experts per token; "
                         << "DeepSpeed-MoE drops top-1 and top-2 rows in choice order, which "
                         << "ds follows, but drops by probability beyond (topkgating), which "
                         << "ds does not do: set moe.drop_tokens to false (dropless)";
      return signalPassFailure();
    }
    const int64_t experts =
        cast<RankedTensorType>(first.getWeight().getType()).getShape()[0];
    const int64_t rows = cast<RankedTensorType>(ids.getType()).getShape()[0];
    const int64_t capacity = capacityOf(rows / k, experts, capacityFactor, k, minCapacity);
    b.setInsertionPointAfterValue(ids);
    Value kept = ExpertCapacityOp::create(b, first.getLoc(), ids, experts, k, capacity);
    for (ExpertLinearOp p : products)
      p.getExpertIdsMutable().assign(kept);
  }
}

} // namespace
