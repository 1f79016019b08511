//===- MixedPrecision.cpp - ds-mixed-precision: a 16-bit forward -----------===//
//
// DeepSpeed's bf16 and fp16 modes run a model whose parameters, activations and gradients are
// 16-bit, with every kernel computing in fp32 internally (PyTorch's opmath) and rounding its
// result. This pass gives @forward exactly those numbers while its ops stay f32: trainable
// parameters become 16-bit (widened where read), and every f32 result of a computing op is
// rounded through the 16-bit type right after it. ds-autodiff then differentiates the rounding
// (the gradient of a narrowing is a widening and vice versa), so the backward's gradients are
// rounded at the same points and the parameter gradients come out 16-bit.
//
//===----------------------------------------------------------------------===//
#include "ds/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSMIXEDPRECISION
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {
RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

struct MixedPrecisionPass : mlir::ds::impl::DSMixedPrecisionBase<MixedPrecisionPass> {
  using DSMixedPrecisionBase::DSMixedPrecisionBase;
  void runOnOperation() override;
};

/// Ops that only move or select elements: a 16-bit-representable input stays representable,
/// so their results need no rounding.
bool movesElementsOnly(Operation *op) {
  return isa<ReshapeOp, TransposeOp, BroadcastToOp, SliceOp, ConcatOp, EmbeddingOp,
             InsertSliceOp>(op);
}
} // namespace

void MixedPrecisionPass::runOnOperation() {
  ModuleOp module = getOperation();
  MLIRContext *ctx = &getContext();
  Type half;
  switch (dtype) {
  case Precision::bf16:
    half = BFloat16Type::get(ctx);
    break;
  case Precision::fp16:
    half = Float16Type::get(ctx);
    break;
  case Precision::fp32:
    module.emitError() << "ds-mixed-precision: dtype fp32 has no 16-bit model; use bf16 or fp16";
    return signalPassFailure();
  }
  auto func = module.lookupSymbol<func::FuncOp>("forward");
  if (!func) {
    module.emitError() << "ds-mixed-precision runs before ds-autodiff on a func.func @forward "
                          "(import a model with ds-opt MODEL.pt first)";
    return signalPassFailure();
  }
  auto narrow = [&](RankedTensorType t) { return RankedTensorType::get(t.getShape(), half); };
  llvm::DenseSet<Operation *> inserted;
  // The uses of `v` (an f32 value, or a read just made 16-bit) that were there before become
  // widenings of the 16-bit `n` to `wide`: one of its own for every computing use, so that
  // ds-autodiff rounds each op's gradient before it adds the gradients of several uses, as
  // PyTorch rounds each op's gradient with respect to a 16-bit tensor and sums those in 16
  // bits (an f32 sum rounded once is not its number: a residual stream, a tied weight); one
  // shared by the uses that only move elements (views in PyTorch, whose gradients it
  // assembles without rounding: attention's q, k, v slices, whose gradients then meet in one
  // concat).
  //
  // Each widening is made right before its use (the shared one before the first), not where
  // `n` is made: a torch.export program reads every parameter at the top of the function, and
  // a widened copy made there would be live from the step's start.
  auto widenEachUse = [&](OpBuilder &b, Value n, Value v, RankedTensorType wide,
                          ArrayRef<OpOperand *> unordered) {
    SmallVector<OpOperand *> uses(unordered);
    llvm::stable_sort(uses, [](OpOperand *x, OpOperand *y) {
      return x->getOwner()->isBeforeInBlock(y->getOwner());
    });
    OpBuilder::InsertionGuard guard(b);
    Value moves;
    for (OpOperand *use : uses) {
      const bool move = movesElementsOnly(use->getOwner());
      if (move && moves) {
        use->set(moves);
        continue;
      }
      b.setInsertionPoint(use->getOwner());
      auto w = ConvertOp::create(b, v.getLoc(), wide, n);
      inserted.insert(w);
      use->set(w);
      if (move)
        moves = w;
    }
  };
  auto usesOf = [](Value v) {
    SmallVector<OpOperand *> uses;
    for (OpOperand &use : v.getUses())
      uses.push_back(&use);
    return uses;
  };
  // x -> convert(convert(x : f32 -> half) : half -> f32), one widening per use of x.
  auto round = [&](OpBuilder &b, Value x) {
    SmallVector<OpOperand *> uses = usesOf(x);
    auto n = ConvertOp::create(b, x.getLoc(), narrow(typeOf(x)), x);
    inserted.insert(n);
    widenEachUse(b, n, x, typeOf(x), uses);
  };

  // Trainable parameters are stored in 16 bits (ds-optimizer keeps their f32 masters).
  llvm::DenseSet<StringAttr> narrowed;
  for (auto param : module.getOps<ParameterOp>()) {
    if (!param.getTrainable())
      continue;
    RankedTensorType t = param.getTensorType();
    if (!t.getElementType().isF32()) {
      param.emitError() << "ds-mixed-precision: trainable parameters must be f32 before "
                           "the pass; '"
                        << param.getSymName() << "' is " << t.getElementType();
      return signalPassFailure();
    }
    param.setTypeAttr(TypeAttr::get(narrow(t)));
    narrowed.insert(param.getSymNameAttr());
  }
  Block &body = func.getBody().front();
  Operation *ret = body.getTerminator();
  OpBuilder b(ctx);
  b.setInsertionPointToStart(&body);
  for (BlockArgument arg : body.getArguments())
    if (auto t = dyn_cast<RankedTensorType>(arg.getType()); t && t.getElementType().isF32() &&
                                                             !arg.use_empty())
      round(b, arg);
  for (Operation &op : llvm::make_early_inc_range(body.without_terminator())) {
    if (inserted.contains(&op))
      continue;
    b.setInsertionPointAfter(&op);
    if (auto get = dyn_cast<GetParameterOp>(op)) {
      if (!narrowed.contains(get.getNameAttr().getAttr()))
        continue; // buffers stay f32
      Value v = get.getResult();
      RankedTensorType t = typeOf(v);
      SmallVector<OpOperand *> uses = usesOf(v);
      v.setType(narrow(t));
      widenEachUse(b, v, v, t, uses);
      continue;
    }
    // The inner steps of one fused computation (ds-tensor-parallel's vocabulary-parallel
    // cross-entropy) compute in f32 as the op they stand for does; its result is rounded.
    if (isa<ConstantOp>(op) || movesElementsOnly(&op) || op.hasAttr(kFusedAttrName))
      continue;
    for (auto [i, r] : llvm::enumerate(op.getResults())) {
      auto t = dyn_cast<RankedTensorType>(r.getType());
      if (!t || !t.getElementType().isF32() || r.use_empty())
        continue;
      if (isa<BatchNormOp>(op) && i > 0)
        continue; // the batch statistics stay f32, as PyTorch keeps them
      // The loss itself is reported (and seeded) in f32.
      if (llvm::all_of(r.getUsers(), [&](Operation *u) { return u == ret; }))
        continue;
      round(b, r);
    }
  }

  // fp16: the loss is multiplied by the dynamic scale before backward (ds-autodiff seeds with
  // it) and the gradients divided by it again in the optimizer.
  if (lossScaling) {
    OpBuilder mb = OpBuilder::atBlockBegin(module.getBody());
    for (Operation &op : *module.getBody())
      if (isa<ParameterOp, StateOp>(op))
        mb.setInsertionPointAfter(&op);
    StateOp::create(mb, module.getLoc(), mb.getStringAttr(stringifySlotRole(SlotRole::loss_scale)),
                    FlatSymbolRefAttr(),
                    SlotRoleAttr::get(mb.getContext(), SlotRole::loss_scale),
                    TypeAttr::get(RankedTensorType::get({}, mb.getF32Type())));
  }
}
