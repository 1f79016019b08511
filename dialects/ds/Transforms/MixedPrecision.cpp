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
/// The op that completes the fused computation `op` is a step of (ds.fused: an imported
/// silu's sigmoid, whose one reader multiplies it by the input): the op itself otherwise. The
/// steps of one fused computation read one widening of a 16-bit value, so that its gradient
/// is rounded once, as the PyTorch kernel it stands for rounds it (silu_backward).
Operation *fusedComputation(Operation *op) {
  if (!op->hasAttr(kFusedAttrName) || op->getNumResults() != 1 ||
      !op->getResult(0).hasOneUse())
    return op;
  Operation *reader = *op->getResult(0).getUsers().begin();
  return reader->hasAttr(kFusedAttrName) ? op : reader;
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
    // An fp32 step of a model exported in 16 bits: it would need the masters and the 16-bit
    // arithmetic of DeepSpeed's bf16 or fp16 mode.
    for (auto param : module.getOps<ParameterOp>()) {
      Type e = param.getTensorType().getElementType();
      if (!param.getTrainable() || !isa<FloatType>(e) || e.getIntOrFloatBitWidth() != 16)
        continue;
      param.emitError() << "trainable parameter '" << param.getSymName() << "' is " << e
                        << " but the config trains in fp32; enable the config's \""
                        << (e.isBF16() ? "bf16" : "fp16")
                        << "\" section (f32 master weights), or export the model in f32";
      return signalPassFailure();
    }
    return;
  }
  auto func = module.lookupSymbol<func::FuncOp>(kForwardName);
  if (!func) {
    module.emitError() << "ds-mixed-precision runs before ds-autodiff on a func.func @forward "
                          "(import a model with ds-opt MODEL.pt first)";
    return signalPassFailure();
  }
  if (module->hasAttr(kMixedPrecisionAttrName)) {
    module.emitError() << "ds-mixed-precision: the module is 16-bit already (the pass ran "
                          "before); run it once";
    return signalPassFailure();
  }
  module->setAttr(kMixedPrecisionAttrName, UnitAttr::get(ctx));
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
    llvm::DenseMap<Operation *, Value> fusedReads;
    for (OpOperand *use : uses) {
      Operation *owner = use->getOwner();
      const bool move = movesElementsOnly(owner);
      if (move && moves) {
        use->set(moves);
        continue;
      }
      Operation *whole = fusedComputation(owner);
      if (Value shared = fusedReads.lookup(whole)) {
        use->set(shared);
        continue;
      }
      b.setInsertionPoint(owner);
      auto w = ConvertOp::create(b, v.getLoc(), wide, n);
      inserted.insert(w);
      use->set(w);
      if (move)
        moves = w;
      else
        fusedReads[whole] = w;
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

  // Trainable parameters are stored in 16 bits (ds-optimizer keeps their f32 masters). A
  // model exported in 16 bits (cast to bf16 before torch.export) has them so already.
  llvm::DenseSet<StringAttr> narrowed;
  ParameterOp firstF32, firstHalf;
  for (auto param : module.getOps<ParameterOp>()) {
    if (!param.getTrainable())
      continue;
    Type e = param.getTensorType().getElementType();
    if (e.isF32() && !firstF32)
      firstF32 = param;
    else if (e == half && !firstHalf)
      firstHalf = param;
    else if (!e.isF32() && e != half) {
      param.emitError() << "ds-mixed-precision: trainable parameter '" << param.getSymName()
                        << "' is " << e << ", but the config's 16-bit mode is " << half
                        << "; export the model in f32 or in " << half
                        << ", or enable the config's section for " << e;
      return signalPassFailure();
    }
  }
  if (firstF32 && firstHalf) {
    firstHalf.emitError() << "ds-mixed-precision: trainable parameter '"
                          << firstHalf.getSymName() << "' is " << half << " but '"
                          << firstF32.getSymName()
                          << "' is 'f32'; export the model with every parameter in one dtype "
                             "(model.float() or model.to(torch.bfloat16) before torch.export)";
    return signalPassFailure();
  }
  Block &body = func.getBody().front();
  Operation *ret = body.getTerminator();
  OpBuilder b(ctx);
  b.setInsertionPointToStart(&body);
  if (firstHalf) {
    // The author's own 16-bit program: each op it wrote in 16 bits computes in f32 and rounds
    // (as PyTorch's 16-bit kernels do, and as the f32 program's ops below), and what it wrote
    // in f32 (HF's RMSNorm, rotary tables and loss) stays f32 between its own casts.
    auto isHalfValue = [&](Value v) {
      auto t = dyn_cast<RankedTensorType>(v.getType());
      return t && t.getElementType() == half;
    };
    auto wide = [&](Value v) {
      return RankedTensorType::get(typeOf(v).getShape(), Float32Type::get(ctx));
    };
    auto widenUses = [&](Value v) {
      if (!v.use_empty())
        widenEachUse(b, v, v, wide(v), usesOf(v));
    };
    for (BlockArgument arg : body.getArguments())
      if (isHalfValue(arg))
        widenUses(arg);
    for (Operation &op : llvm::make_early_inc_range(body.without_terminator())) {
      if (inserted.contains(&op))
        continue;
      b.setInsertionPointAfter(&op);
      if (auto c = dyn_cast<ConvertOp>(op); c && c.getInput().getType() == c.getType()) {
        c.replaceAllUsesWith(c.getInput()); // a widening the author wrote: now made above
        c.erase();
        continue;
      }
      // Reads, constants and the author's roundings are 16-bit values: widened where read.
      if (isa<GetParameterOp, ConstantOp, ConvertOp>(op)) {
        if (isa<ConvertOp>(op) && isHalfValue(op.getResult(0)))
          op.setAttr(kModelCastAttrName, UnitAttr::get(ctx));
        for (Value r : op.getResults())
          if (isHalfValue(r))
            widenUses(r);
        continue;
      }
      for (Value r : op.getResults()) {
        if (!isHalfValue(r))
          continue;
        r.setType(wide(r));
        if (r.use_empty() || op.hasAttr(kFusedAttrName) ||
            llvm::all_of(r.getUsers(), [&](Operation *u) { return u == ret; }))
          continue;
        round(b, r);
      }
    }
    func.setType(FunctionType::get(ctx, body.getArgumentTypes(), ret->getOperandTypes()));
  } else {
    for (auto param : module.getOps<ParameterOp>()) {
      if (!param.getTrainable())
        continue;
      param.setTypeAttr(TypeAttr::get(narrow(param.getTensorType())));
      narrowed.insert(param.getSymNameAttr());
    }
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
