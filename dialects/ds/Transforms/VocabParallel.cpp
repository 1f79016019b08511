//===- VocabParallel.cpp - ds-tensor-parallel's vocabulary-parallel layers ----===//
//
// Megatron's VocabParallelEmbedding, its LM head (a column-parallel linear whose output stays
// split) and vocab_parallel_cross_entropy, for a table [V, D] whose V divides by the tp size:
// each rank holds V / tp rows. The embedding looks up the indices in its rows (zero elsewhere)
// and sums over tp; the head computes its part of the logits; the cross-entropy combines the
// parts' maxima, sums of exponentials and target logits over tp. A table tied to the head
// (GPT's wte and lm_head) is split once for both.
//
#include "TensorParallel.h"
#include "TensorParallelRemarks.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::ds;

namespace {
RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// Whether `op` acts on each logit alone: a pure one-operand op of its operand's type (tanh),
/// or an arithmetic op of the logits and a scalar (Gemma2's soft-capping divides, takes the
/// tanh and multiplies back).
bool perLogit(Operation *op, Value logits) {
  if (op->getNumResults() != 1 || !isPure(op))
    return false;
  if (op->getNumOperands() == 1)
    return op->hasTrait<OpTrait::SameOperandsAndResultType>() && isa<GradientOpInterface>(op);
  if (!isa<AddOp, SubOp, MulOp, DivOp>(op) || op->getResult(0).getType() != logits.getType())
    return false;
  Value other = op->getOperand(0) == logits ? op->getOperand(1) : op->getOperand(0);
  return other != logits && llvm::all_of(typeOf(other).getShape(),
                                         [](int64_t d) { return d == 1; });
}

/// The cross-entropy that `linear`'s result feeds, one use each, through reshapes that keep
/// the vocabulary last and ops that act on each logit alone (collected in `between`), or
/// null.
CrossEntropyOp headLoss(LinearOp linear, SmallVectorImpl<Operation *> &between) {
  Value v = linear.getResult();
  while (v.hasOneUse()) {
    Operation *u = *v.getUsers().begin();
    if (auto r = dyn_cast<ReshapeOp>(u)) {
      // Only reshapes that keep the vocabulary as the last dimension.
      if (typeOf(r.getResult()).getShape().back() != typeOf(v).getShape().back())
        return {};
      between.push_back(r);
      v = r.getResult();
      continue;
    }
    if (perLogit(u, v)) {
      between.push_back(u);
      v = u->getResult(0);
      continue;
    }
    auto ce = dyn_cast<CrossEntropyOp>(u);
    if (ce && ce.getLogits() == v && typeOf(v).getRank() == 2)
      return ce;
    return {};
  }
  return {};
}

/// Builds ops marked as the inner steps of one fused computation.
struct Fused {
  OpBuilder &b;
  Location loc;
  template <class OpT, class... Args> Value make(Args &&...args) {
    Operation *op = OpT::create(b, loc, std::forward<Args>(args)...);
    op->setAttr(kFusedAttrName, b.getUnitAttr());
    return op->getResult(0);
  }
};
} // namespace

Value mlir::ds::scalarConstant(OpBuilder &b, Location loc, Type elem, double v) {
  auto st = RankedTensorType::get({}, elem);
  Attribute a = isa<FloatType>(elem) ? Attribute(FloatAttr::get(elem, v))
                                     : Attribute(IntegerAttr::get(elem, (int64_t)v));
  return ConstantOp::create(b, loc, DenseElementsAttr::get(st, a));
}

namespace {
/// How `forward` reads a vocabulary table: embeddings looked up by the data's tokens, and LM
/// heads (a linear whose logits, through reshapes and per-logit ops, are a cross-entropy's).
struct VocabUses {
  struct Head {
    LinearOp linear;
    CrossEntropyOp loss;
    SmallVector<Operation *> between;
  };
  SmallVector<GetParameterOp> reads;
  SmallVector<EmbeddingOp> embeddings;
  SmallVector<Head> heads;
  bool usable = true;
  std::string why; ///< when not usable for a reason the user can change
};

VocabUses findVocabUses(TensorParallelRewriter &rewriter, ParameterOp param,
                        func::FuncOp forward) {
  VocabUses uses;
  bool headElsewhere = false; // a linear reads it whose logits do not reach a loss
  forward.walk([&](GetParameterOp g) {
    if (g.getName() != param.getSymName())
      return;
    uses.reads.push_back(g);
    for (OpOperand &use : g.getResult().getUses()) {
      Operation *u = use.getOwner();
      if (auto e = dyn_cast<EmbeddingOp>(u); e && use.getOperandNumber() == 0) {
        // A vocabulary: looked up by the data's tokens (positions, computed in the program,
        // stay replicated as in Megatron).
        if (!isa<BlockArgument>(e.getIndices())) {
          uses.usable = false;
          continue;
        }
        uses.embeddings.push_back(e);
        continue;
      }
      auto l = dyn_cast<LinearOp>(u);
      SmallVector<Operation *> rs;
      CrossEntropyOp ce = l && use.getOperandNumber() == 1 ? headLoss(l, rs) : CrossEntropyOp();
      if (!ce || rewriter.assigned.contains(l)) {
        uses.usable = false;
        headElsewhere |= l && !ce && use.getOperandNumber() == 1 && !rewriter.assigned.contains(l);
        continue;
      }
      if (ce.getLabelSmoothing().convertToDouble() != 0.0) {
        uses.usable = false;
        uses.why = "its cross-entropy has label smoothing";
        continue;
      }
      if (Value bias = l.getBias()) {
        ParameterOp bp = rewriter.parameterOf(bias);
        if (!bp || !bp.getTrainable() || !bias.hasOneUse()) {
          uses.usable = false;
          continue;
        }
      }
      uses.heads.push_back({l, ce, rs});
    }
  });
  // A table also looked up (a vocabulary) whose head is not one: say why.
  if (headElsewhere && !uses.embeddings.empty() && uses.why.empty())
    uses.why = "its logits reach the loss through ops other than reshapes and ops on each "
               "logit alone";
  return uses;
}

/// Megatron's vocabulary-parallel layers for tables of `rows` rows per rank.
struct VocabSplitter {
  TensorParallelRewriter &rewriter;
  func::FuncOp forward;
  FlatSymbolRefAttr gridAttr;
  DenseI16ArrayAttr axesAttr;
  int64_t rows = 0;
  Value coordinate; ///< this rank's tp index, made once at the start of @forward

  Value rankIndex() {
    if (!coordinate) {
      OpBuilder b = OpBuilder::atBlockBegin(&forward.getBody().front());
      coordinate = MeshCoordinateOp::create(b, forward.getLoc(),
                                            RankedTensorType::get({}, b.getI64Type()), gridAttr,
                                            b.getI64IntegerAttr(rewriter.axis.axis));
    }
    return coordinate;
  }
  /// The embedding: this rank's rows, zero for the others' indices, summed over tp.
  void splitEmbedding(EmbeddingOp e);
  /// The head: its part of the logits from the replicated input, then the cross-entropy.
  void splitHead(LinearOp l, CrossEntropyOp ce, ArrayRef<Operation *> between);
  /// vocab_parallel_cross_entropy in place of `ce`, whose logits are this rank's part.
  void splitCrossEntropy(CrossEntropyOp ce);
};

void VocabSplitter::splitEmbedding(EmbeddingOp e) {
  MLIRContext *ctx = e.getContext();
  OpBuilder b(e);
  Location loc = e.getLoc();
  Value idx = e.getIndices();
  RankedTensorType it = typeOf(idx);
  auto scalarOf = [&](Type elem, double v) { return scalarConstant(b, loc, elem, v); };
  Value r = rankIndex();
  if (it.getElementType() != cast<RankedTensorType>(r.getType()).getElementType())
    r = ConvertOp::create(b, loc, RankedTensorType::get({}, it.getElementType()), r);
  Value first = MulOp::create(b, loc, typeOf(r), r, scalarOf(it.getElementType(), rows));
  Value local = SubOp::create(b, loc, it, idx, first);
  auto boolT = RankedTensorType::get(it.getShape(), b.getI1Type());
  Value geZero = CmpOp::create(b, loc, boolT, CmpPredicateAttr::get(ctx, CmpPredicate::ge),
                               local, scalarOf(it.getElementType(), 0));
  Value ltRows = CmpOp::create(b, loc, boolT, CmpPredicateAttr::get(ctx, CmpPredicate::lt),
                               local, scalarOf(it.getElementType(), rows));
  Value mine = WhereOp::create(b, loc, boolT, geZero, ltRows, geZero); // and
  Value safe = WhereOp::create(b, loc, it, mine, local, scalarOf(it.getElementType(), 0));
  RankedTensorType et = typeOf(e.getResult());
  e.getIndicesMutable().assign(safe);
  b.setInsertionPointAfter(e);
  SmallVector<int64_t> maskShape(it.getShape());
  maskShape.push_back(1);
  Value mask =
      ReshapeOp::create(b, loc, RankedTensorType::get(maskShape, b.getI1Type()), mine);
  Value zero = scalarOf(et.getElementType(), 0.0);
  Operation *keep = WhereOp::create(b, loc, et, mask, e.getResult(), zero);
  Value kept = keep->getResult(0);
  if (std::optional<uint64_t> pad = e.getPaddingIdx()) {
    // padding_idx names a global row, which one rank holds: its tokens' lookups pass no
    // gradient on any rank (the local table has no padding row of its own).
    e.removePaddingIdxAttr();
    Value isPad = CmpOp::create(b, loc, boolT, CmpPredicateAttr::get(ctx, CmpPredicate::eq),
                                idx, scalarOf(it.getElementType(), static_cast<double>(*pad)));
    Value padMask =
        ReshapeOp::create(b, loc, RankedTensorType::get(maskShape, b.getI1Type()), isPad);
    kept = WhereOp::create(b, loc, et, padMask, StopGradientOp::create(b, loc, kept), kept);
  }
  Value summed = ParallelSumOp::create(b, loc, kept, gridAttr, axesAttr);
  e.getResult().replaceAllUsesExcept(summed, keep);
}

void VocabSplitter::splitHead(LinearOp l, CrossEntropyOp ce, ArrayRef<Operation *> between) {
  OpBuilder b(l);
  Location loc = l.getLoc();
  Value in = ParallelCopyOp::create(b, loc, l.getInput(), gridAttr, axesAttr);
  l.getInputMutable().assign(in);
  if (Value bias = l.getBias())
    rewriter.splitParameter(rewriter.parameterOf(bias), 0, 1);
  auto localLast = [&](Value v) {
    RankedTensorType vt = typeOf(v);
    SmallVector<int64_t> shape(vt.getShape());
    shape.back() /= rewriter.tp;
    v.setType(RankedTensorType::get(shape, vt.getElementType()));
  };
  localLast(l.getResult());
  for (Operation *op : between)
    localLast(op->getResult(0));
  splitCrossEntropy(ce);
}

void VocabSplitter::splitCrossEntropy(CrossEntropyOp ce) {
  MLIRContext *ctx = ce.getContext();
  // loss_i = m_i + log(sum_tp sum_j exp(x_ij - m_i)) - x_i,t_i, with m_i the rows' maximum
  // over tp (no gradient: the shift cancels).
  OpBuilder b(ce);
  Location loc = ce.getLoc();
  Fused f{b, loc};
  Value x = ce.getLogits(), target = ce.getTarget();
  RankedTensorType xt = typeOf(x), tt = typeOf(target);
  Type fe = xt.getElementType(), ie = tt.getElementType();
  const int64_t n = xt.getShape()[0];
  auto rowT = RankedTensorType::get({n}, fe), colT = RankedTensorType::get({n, 1}, fe);
  auto scalar = [&](Type elem, double v) { return scalarConstant(b, loc, elem, v); };
  Value mloc = f.make<AmaxOp>(rowT, x, ArrayRef<int64_t>{1}, false);
  Value m = f.make<ParallelMaxOp>(mloc, gridAttr, axesAttr);
  Value shifted = f.make<SubOp>(xt, x, f.make<ReshapeOp>(colT, m));
  Value sloc = f.make<SumOp>(rowT, f.make<ExpOp>(xt, shifted), ArrayRef<int64_t>{1}, false);
  Value s = f.make<ParallelSumOp>(sloc, gridAttr, axesAttr);
  Value lse = f.make<AddOp>(rowT, f.make<LogOp>(rowT, s), m);
  // The target's logit: on the rank whose rows hold it.
  SmallVector<APInt> iota;
  for (int64_t j = 0; j < rows; ++j)
    iota.push_back(APInt(ie.getIntOrFloatBitWidth(), j, /*isSigned=*/true));
  auto iotaT = RankedTensorType::get({1, rows}, ie);
  Value cols = ConstantOp::create(b, loc, DenseElementsAttr::get(iotaT, iota));
  Value r = rankIndex();
  if (ie != cast<RankedTensorType>(r.getType()).getElementType())
    r = ConvertOp::create(b, loc, RankedTensorType::get({}, ie), r);
  Value global = AddOp::create(b, loc, iotaT, cols,
                               MulOp::create(b, loc, typeOf(r), r, scalar(ie, rows)));
  auto tcolT = RankedTensorType::get({n, 1}, ie);
  Value hit = CmpOp::create(b, loc, RankedTensorType::get({n, rows}, b.getI1Type()),
                            CmpPredicateAttr::get(ctx, CmpPredicate::eq), global,
                            ReshapeOp::create(b, loc, tcolT, target));
  Value picked = f.make<WhereOp>(xt, hit, x, scalar(fe, 0.0));
  Value tloc = f.make<SumOp>(rowT, picked, ArrayRef<int64_t>{1}, false);
  Value tl = f.make<ParallelSumOp>(tloc, gridAttr, axesAttr);
  Value perRow = f.make<SubOp>(rowT, lse, tl);
  // ignore_index rows count for nothing.
  Value valid = CmpOp::create(b, loc, RankedTensorType::get({n}, b.getI1Type()),
                              CmpPredicateAttr::get(ctx, CmpPredicate::ne), target,
                              ConstantOp::create(b, loc, DenseElementsAttr::get(
                                  RankedTensorType::get({}, ie),
                                  IntegerAttr::get(ie, static_cast<int64_t>(
                                                           ce.getIgnoreIndex())))));
  perRow = f.make<WhereOp>(rowT, valid, perRow, scalar(fe, 0.0));
  Value loss;
  auto scalarT = RankedTensorType::get({}, fe);
  switch (ce.getReduction()) {
  case Reduction::none:
    loss = perRow;
    perRow.getDefiningOp()->removeAttr(kFusedAttrName);
    break;
  case Reduction::sum:
    loss = SumOp::create(b, loc, scalarT, perRow, ArrayRef<int64_t>{0}, false);
    break;
  case Reduction::mean: {
    Value count = f.make<SumOp>(scalarT,
                                f.make<WhereOp>(rowT, valid, scalar(fe, 1.0), scalar(fe, 0.0)),
                                ArrayRef<int64_t>{0}, false);
    loss = DivOp::create(b, loc, scalarT, f.make<SumOp>(scalarT, perRow,
                                                        ArrayRef<int64_t>{0}, false),
                         count);
    break;
  }
  }
  ce.getResult().replaceAllUsesWith(loss);
  ce.erase();
}
} // namespace

void TensorParallelRewriter::vocabParallel(ModuleOp module, func::FuncOp forward) {
  MLIRContext *ctx = module.getContext();
  VocabSplitter splitter{*this, forward, FlatSymbolRefAttr::get(ctx, axis.grid),
                         DenseI16ArrayAttr::get(ctx, axis.axes())};
  for (ParameterOp param : llvm::to_vector(module.getOps<ParameterOp>())) {
    RankedTensorType t = param.getTensorType();
    if (!param.getTrainable() || param.getShardingAttr() || t.getRank() != 2)
      continue;
    const int64_t V = t.getShape()[0];
    // Every read of the table is an embedding's weight or an LM head's.
    VocabUses uses = findVocabUses(*this, param, forward);
    if (std::string why = keptByRules(param.getSymName());
        !why.empty() && (!uses.embeddings.empty() || !uses.heads.empty())) {
      remarkStaysWhole(param, param.getSymName(), why);
      continue;
    }
    if (!uses.usable || (uses.embeddings.empty() && uses.heads.empty())) {
      if (!uses.why.empty())
        remarkStaysWhole(param, param.getSymName(), uses.why);
      continue;
    }
    if (V % tp != 0) {
      remarkStaysWhole(param, param.getSymName(),
                       "its vocabulary of " + Twine(V) + " rows does not divide by tp = " +
                           Twine(tp));
      continue;
    }
    splitter.rows = V / tp;
    splitParameter(param, 0, 1);
    for (EmbeddingOp e : uses.embeddings)
      splitter.splitEmbedding(e);
    for (VocabUses::Head &h : uses.heads)
      splitter.splitHead(h.linear, h.loss, h.between);
    for (GetParameterOp g : uses.reads)
      g.getResult().setType(param.getTensorType());
  }
}
