//===- SequenceParallel.cpp - the ds-sequence-parallel pass: Ulysses -----------===//
//
// Each sp rank takes its block of every sample's sequence (the inputs are sliced along
// dimension 1 inside the program) and every op works on it, until an op needs the whole
// sequence (attention's score and value products): there an all-to-all turns the sequence
// blocks into blocks of a batch dimension (the heads, or the batch where they do not divide),
// the attention runs on whole sequences, and after it another all-to-all turns them back
// (DeepSpeed's DistributedAttention). Replicated operands of a sequence length are sliced to
// the rank's block (position tables through their indices), and the loss's sums and means
// over the sequence are completed over sp.
//
// The pass walks @forward once, in order, giving each value a State: replicated, split along
// its sequence dimension (Seq), or split along a batch dimension with the sequence whole
// (Other, only inside the attention). Results get their local types as the walk passes them.
//
#include "ds/Transforms/Passes.h"

#include "TensorParallel.h"

#include "ds/IR/RingWorkspace.h"

#include "mlir/IR/Builders.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSSEQUENCEPARALLEL
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {
RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

struct State {
  enum Kind { Whole, Seq, Other } kind = Whole;
  Split split;         ///< Seq, Other: the split dimension
  int64_t seqDim = -1; ///< Other: where the whole sequence is (-1: unknown)
};

struct SequenceParallelPass : mlir::ds::impl::DSSequenceParallelBase<SequenceParallelPass> {
  using DSSequenceParallelBase::DSSequenceParallelBase;
  void runOnOperation() override;

  int64_t sp = 1, T = 0;
  MeshAxisRef axis;
  llvm::DenseMap<Value, State> states;
  /// The sequence striped over the ranks (rank r holds positions r, r + sp, ...: Striped
  /// Attention's causal load balance for the ring) rather than in contiguous blocks.
  bool striped = false;
  /// The inputs' rank blocks, and the whole inputs (which every rank holds) they slice.
  llvm::DenseMap<Value, Value> wholeInput;
  std::string error;
  Operation *errorAt = nullptr;

  State stateOf(Value v) { return states.lookup(v); }
  LogicalResult fail(Operation *op, const Twine &why) {
    if (!errorAt) {
      errorAt = op;
      error = why.str();
    }
    return failure();
  }
  /// `t` with dimension `d` divided by sp.
  RankedTensorType local(RankedTensorType t, int64_t d) {
    SmallVector<int64_t> shape(t.getShape());
    shape[d] /= sp;
    return RankedTensorType::get(shape, t.getElementType());
  }
  /// The whole tensor's shape of a value whose local type and state are given.
  SmallVector<int64_t> wholeShape(Value v) {
    SmallVector<int64_t> shape(typeOf(v).getShape());
    State s = stateOf(v);
    if (s.kind != State::Whole)
      shape[s.split.dim] *= sp;
    return shape;
  }
  Value allToAll(OpBuilder &b, Location loc, Value x, int64_t gather, int64_t scatter);
  Value sliceLocal(OpBuilder &b, Location loc, Value v, int64_t dim, bool sequence = true);
  bool goesRing(AttentionOp a);
  LogicalResult split(func::FuncOp forward);
  LogicalResult toOther(OpBuilder &b, Operation *user, unsigned operand, int64_t batchDim);
  LogicalResult toSeq(OpBuilder &b, Operation *user, unsigned operand);
  LogicalResult shiftInput(ConcatOp c, int64_t dim);
  LogicalResult visit(Operation *op);
  LogicalResult elementwise(Operation *op);
  LogicalResult matmul(MatmulOp m);
  LogicalResult attention(AttentionOp a);
  LogicalResult ring(AttentionOp a);
  /// Whether `a` computes in f32: f32 operands in a step that ds-mixed-precision leaves f32
  /// (the module's ds.run, where the training pipeline recorded it).
  bool f32(AttentionOp a) {
    auto run = getOperation()->getAttrOfType<RunAttr>(kRunAttrName);
    return typeOf(a.getQuery()).getElementType().isF32() &&
           (!run || run.getPrecision() == Precision::fp32);
  }
  LogicalResult crossEntropy(CrossEntropyOp ce);
  LogicalResult reduction(Operation *op);
};

/// Ops that compute each element from the same elements of their operands.
bool isElementwise(Operation *op) {
  return isa<AddOp, SubOp, MulOp, DivOp, PowOp, MaximumOp, MinimumOp, CmpOp, WhereOp,
             ConvertOp, GeluOp, DropoutOp, ParallelCopyOp, ParallelSumOp>(op) ||
         (op->hasTrait<OpTrait::SameOperandsAndResultType>() && op->getNumOperands() == 1 &&
          isa<GradientOpInterface>(op));
}
} // namespace

/// Exchanges blocks over sp: `x` (local) holds a block of dimension `gather` and all of
/// dimension `scatter`; the result holds all of `gather` and a block of `scatter`. Rank q's
/// block of `gather` comes from rank q; block q of `scatter` goes to rank q.
Value SequenceParallelPass::allToAll(OpBuilder &b, Location loc, Value x, int64_t gather,
                                     int64_t scatter) {
  RankedTensorType t = typeOf(x);
  Type elem = t.getElementType();
  ArrayRef<int64_t> s = t.getShape();
  const int64_t r = t.getRank();
  // 1. The scattered dimension as [sp, n / sp], the sp factor moved to the front.
  SmallVector<int64_t> s1;
  for (int64_t d = 0; d < r; ++d) {
    if (d == scatter) {
      s1.push_back(sp);
      s1.push_back(s[d] / sp);
    } else {
      s1.push_back(s[d]);
    }
  }
  Value v = ReshapeOp::create(b, loc, RankedTensorType::get(s1, elem), x);
  SmallVector<int64_t> perm{scatter};
  for (int64_t d = 0; d < r + 1; ++d)
    if (d != scatter)
      perm.push_back(d);
  SmallVector<int64_t> s2;
  for (int64_t p : perm)
    s2.push_back(s1[p]);
  v = TransposeOp::create(b, loc, RankedTensorType::get(s2, elem), v,
                          b.getDenseI64ArrayAttr(perm));
  // 2. The exchange: piece q of dimension 0 to rank q; piece q received from rank q.
  v = shard::AllToAllOp::create(b, loc, v.getType(), FlatSymbolRefAttr::get(b.getContext(), axis.grid),
                                b.getDenseI16ArrayAttr(axis.axes()), v, b.getIndexAttr(0),
                                b.getIndexAttr(0));
  // 3. The sources (dimension 0) just before the gathered dimension, then merged with it.
  // In s2's order, the other dimensions are s1 without the sp factor; `gather` sits at
  // position gather + 1 (after the sources).
  int64_t g = gather; // position of the gathered dimension among the other dimensions
  SmallVector<int64_t> perm2;
  for (int64_t d = 1; d <= g; ++d)
    perm2.push_back(d);
  perm2.push_back(0);
  for (int64_t d = g + 1; d < r + 1; ++d)
    perm2.push_back(d);
  SmallVector<int64_t> s3;
  for (int64_t p : perm2)
    s3.push_back(s2[p]);
  v = TransposeOp::create(b, loc, RankedTensorType::get(s3, elem), v,
                          b.getDenseI64ArrayAttr(perm2));
  SmallVector<int64_t> out(s);
  out[gather] *= sp;
  out[scatter] /= sp;
  return ReshapeOp::create(b, loc, RankedTensorType::get(out, elem), v);
}

/// This rank's block of dimension `dim` of a replicated value. A lookup of a table is redone
/// on the block of its indices (a position table: no communication, an exact gradient);
/// anything else takes its block as a view (shard.all_slice along a leading sp factor).
Value SequenceParallelPass::sliceLocal(OpBuilder &b, Location loc, Value v, int64_t dim,
                                       bool sequence) {
  RankedTensorType t = typeOf(v);
  if (auto e = v.getDefiningOp<EmbeddingOp>();
      e && dim < typeOf(e.getIndices()).getRank()) {
    Value idx = sliceLocal(b, loc, e.getIndices(), dim, sequence);
    return EmbeddingOp::create(b, loc, local(t, dim), e.getWeight(), idx,
                               e.getPaddingIdxAttr());
  }
  Type elem = t.getElementType();
  ArrayRef<int64_t> s = t.getShape();
  // [..., n, ...] -> [..., sp, n / sp, ...] (striped: [..., n / sp, sp, ...]) -> [sp, ...,
  // n / sp, ...] -> this rank's [1, ..., n / sp, ...] -> [..., n / sp, ...].
  const bool stripes = sequence && striped;
  const int64_t at = stripes ? dim + 1 : dim; // where the sp factor is
  SmallVector<int64_t> s1;
  for (int64_t d = 0; d < t.getRank(); ++d) {
    if (d == dim && !stripes)
      s1.push_back(sp);
    s1.push_back(d == dim ? s[d] / sp : s[d]);
    if (d == dim && stripes)
      s1.push_back(sp);
  }
  Value x = ReshapeOp::create(b, loc, RankedTensorType::get(s1, elem), v);
  if (at != 0) {
    SmallVector<int64_t> perm{at}, s2{sp};
    for (int64_t d = 0; d < static_cast<int64_t>(s1.size()); ++d)
      if (d != at) {
        perm.push_back(d);
        s2.push_back(s1[d]);
      }
    x = TransposeOp::create(b, loc, RankedTensorType::get(s2, elem), x,
                            b.getDenseI64ArrayAttr(perm));
  }
  SmallVector<int64_t> one(typeOf(x).getShape());
  one[0] = 1;
  x = shard::AllSliceOp::create(b, loc, RankedTensorType::get(one, elem), x, axis.grid,
                                axis.axes(), 0);
  return ReshapeOp::create(b, loc, local(t, dim), x);
}

// An input shifted along the sequence: concatenated with a constant there and sliced back to
// its length (HF's causal-LM loss shifts the labels so: pad with -100, drop the first). Rank
// r's block of the shift needs the first positions of rank r + 1's block; every rank holds
// the whole input, so the shift runs on it before this rank's block is sliced from the
// result (ALST asks its users to pre-shift the labels instead).
LogicalResult SequenceParallelPass::shiftInput(ConcatOp c, int64_t dim) {
  auto sl = c->hasOneUse() ? dyn_cast<SliceOp>(*c->getUsers().begin()) : SliceOp();
  if (!sl || static_cast<int64_t>(sl.getDim()) != dim ||
      typeOf(sl.getResult()).getShape()[dim] != T)
    return fail(c, "concatenates along the split sequence dimension (only an input shifted "
                   "along the sequence, concatenated there and sliced back to its length, "
                   "splits)");
  for (OpOperand &in : c->getOpOperands()) {
    State st = stateOf(in.get());
    if (st.kind == State::Whole)
      continue;
    Value whole = wholeInput.lookup(in.get());
    if (!whole)
      return fail(c, "concatenates along the split sequence dimension a value computed in "
                     "the model (only an input shifted along the sequence splits; shift it "
                     "in the data, as DeepSpeed's ALST does with shift_labels)");
    in.set(whole);
  }
  // The whole shift, then this rank's block of it: its users see the block.
  SmallVector<OpOperand *> uses;
  for (OpOperand &u : sl.getResult().getUses())
    uses.push_back(&u);
  OpBuilder b(sl->getContext());
  b.setInsertionPointAfter(sl);
  Value local = sliceLocal(b, sl.getLoc(), sl.getResult(), dim);
  for (OpOperand *u : uses)
    u->set(local);
  states[local] = State{State::Seq, Split{dim, 1}, -1};
  return success();
}

LogicalResult SequenceParallelPass::toOther(OpBuilder &b, Operation *user, unsigned i,
                                            int64_t batchDim) {
  Value x = user->getOperand(i);
  State s = stateOf(x);
  if (striped)
    return fail(user, "exchanges a striped sequence (the ring's layout)");
  if (s.kind == State::Other)
    return s.split.dim == batchDim ? success()
                                   : fail(user, "combines blocks of different batch dimensions");
  if (s.kind != State::Seq || s.split.segments != 1)
    return fail(user, "needs whole sequences of an operand split with the batch");
  if (typeOf(x).getShape()[batchDim] % sp != 0)
    return fail(user, "has no batch dimension that divides by sp to exchange the sequence for");
  Value y = allToAll(b, user->getLoc(), x, s.split.dim, batchDim);
  states[y] = State{State::Other, Split{batchDim, 1}, s.split.dim};
  user->setOperand(i, y);
  return success();
}

LogicalResult SequenceParallelPass::toSeq(OpBuilder &b, Operation *user, unsigned i) {
  Value x = user->getOperand(i);
  State s = stateOf(x);
  if (s.kind != State::Other)
    return success();
  if (s.seqDim < 0 || s.split.segments != 1)
    return fail(user, "follows the attention where its sequence dimension is lost");
  Value y = allToAll(b, user->getLoc(), x, s.split.dim, s.seqDim);
  states[y] = State{State::Seq, Split{s.seqDim, 1}, -1};
  user->setOperand(i, y);
  return success();
}

LogicalResult SequenceParallelPass::elementwise(Operation *op) {
  RankedTensorType rt = typeOf(op->getResult(0));
  const int64_t R = rt.getRank();
  // The result's state from the split operands (aligned from the right).
  std::optional<State> res;
  for (Value o : op->getOperands()) {
    State s = stateOf(o);
    if (s.kind == State::Whole)
      continue;
    int64_t shift = R - typeOf(o).getRank();
    State at{s.kind, Split{s.split.dim + shift, s.split.segments},
             s.seqDim < 0 ? -1 : s.seqDim + shift};
    if (res && (res->kind != at.kind || res->split != at.split))
      return fail(op, "combines parts split differently");
    if (!res || res->seqDim < 0)
      res = at;
  }
  if (!res)
    return success();
  // Whole operands of the split dimension's size: their block.
  OpBuilder b(op);
  for (auto [i, o] : llvm::enumerate(op->getOperands())) {
    if (stateOf(o).kind != State::Whole)
      continue;
    RankedTensorType ot = typeOf(o);
    int64_t d = res->split.dim - (R - ot.getRank());
    if (d < 0 || ot.getShape()[d] == 1)
      continue;
    if (res->split.segments != 1 || ot.getShape()[d] != rt.getShape()[res->split.dim])
      return fail(op, "combines a block with a whole operand it cannot slice");
    op->setOperand(i, sliceLocal(b, op->getLoc(), o, d));
  }
  for (Value r : op->getResults()) {
    r.setType(local(typeOf(r), res->split.dim));
    states[r] = *res;
  }
  return success();
}

LogicalResult SequenceParallelPass::matmul(MatmulOp m) {
  OpBuilder b(m);
  RankedTensorType rt = typeOf(m.getResult());
  const int64_t R = rt.getRank();
  auto batchOf = [&](Value v, int64_t d) {
    int64_t rank = typeOf(v).getRank();
    return d < rank - 2 ? R - rank + d : -1;
  };
  State ls = stateOf(m.getLhs()), rs = stateOf(m.getRhs());
  int64_t lr = typeOf(m.getLhs()).getRank(), rr = typeOf(m.getRhs()).getRank();
  // A product within each position of the sequence (x @ W): no exchange.
  if (ls.kind == State::Seq && rs.kind == State::Whole && ls.split.dim == lr - 2) {
    m.getResult().setType(local(rt, R - 2));
    states[m.getResult()] = State{State::Seq, Split{R - 2, ls.split.segments}, -1};
    return success();
  }
  // Otherwise the product mixes positions (attention): both operands blocks of one batch
  // dimension, the sequence whole. The heads where they divide (the batch dimension nearest
  // the matrices), else the batch.
  int64_t batch = -1;
  if (ls.kind == State::Other)
    batch = batchOf(m.getLhs(), ls.split.dim);
  else if (rs.kind == State::Other)
    batch = batchOf(m.getRhs(), rs.split.dim);
  else
    for (int64_t d = R - 3; d >= 0 && batch < 0; --d) {
      int64_t l = d - (R - lr), r = d - (R - rr);
      bool ok = rt.getShape()[d] % sp == 0 && (l < 0 || typeOf(m.getLhs()).getShape()[l] == rt.getShape()[d]) &&
                (r < 0 || typeOf(m.getRhs()).getShape()[r] == rt.getShape()[d]);
      if (ok)
        batch = d;
    }
  if (batch < 0)
    return fail(m, "mixes sequence positions but has no batch dimension that divides by sp");
  for (unsigned i = 0; i < 2; ++i) {
    Value o = m->getOperand(i);
    int64_t rank = typeOf(o).getRank();
    if (stateOf(o).kind == State::Whole)
      continue; // a broadcast operand has size 1 there
    if (failed(toOther(b, m, i, batch - (R - rank))))
      return failure();
  }
  State l = stateOf(m.getLhs());
  State out{State::Other, Split{batch, 1}, -1};
  if (l.kind == State::Other && l.seqDim == lr - 2)
    out.seqDim = R - 2;
  m.getResult().setType(local(rt, batch));
  states[m.getResult()] = out;
  return success();
}

bool SequenceParallelPass::goesRing(AttentionOp a) {
  ArrayRef<int64_t> q = typeOf(a.getQuery()).getShape(), k = typeOf(a.getKey()).getShape();
  bool heads = q[1] % sp == 0 && k[1] % sp == 0;
  bool ringable = !a.getMask() && f32(a);
  return mode == SequenceParallelMode::ring ||
         (mode == SequenceParallelMode::automatic && !heads && ringable);
}

LogicalResult SequenceParallelPass::attention(AttentionOp a) {
  // Whole sequences for a block of the heads (query and key/value heads both divide by sp),
  // else of the batch: query, key and value [B, H, L, E] arrive split along their length.
  OpBuilder b(a);
  ArrayRef<int64_t> q = typeOf(a.getQuery()).getShape(), k = typeOf(a.getKey()).getShape();
  bool heads = q[1] % sp == 0 && k[1] % sp == 0;
  if (goesRing(a))
    return ring(a);
  int64_t batch = heads ? 1 : q[0] % sp == 0 ? 0 : -1;
  if (batch < 0)
    return fail(a, "has " + std::to_string(q[1]) + " query and " + std::to_string(k[1]) +
                       " key/value heads and a batch of " + std::to_string(q[0]) +
                       ", none of which divides by sp to exchange the sequence for");
  for (unsigned i = 0; i < 3; ++i) {
    State s = stateOf(a->getOperand(i));
    if (s.kind == State::Whole || (s.kind == State::Seq && s.split.dim != 2))
      return fail(a, "needs query, key and value split along their length ([B, H, L, E])");
    if (failed(toOther(b, a, i, batch)))
      return failure();
  }
  if (Value m = a.getMask()) {
    if (stateOf(m).kind != State::Whole)
      return fail(a, "has a mask split with the sequence (a padding mask under sp)");
    if (typeOf(m).getShape()[batch] != 1)
      a.getMaskMutable().assign(sliceLocal(b, a.getLoc(), m, batch, /*sequence=*/false));
  }
  for (Value r : a->getResults()) {
    r.setType(local(typeOf(r), batch));
    states[r] = State{State::Other, Split{batch, 1}, 2};
  }
  return success();
}

LogicalResult SequenceParallelPass::ring(AttentionOp a) {
  // The blocks stay where they are: ds.ring_attention passes the keys and values round.
  if (a.getMask())
    return fail(a, "has a mask; ring attention takes a causal or an unmasked attention "
                   "(sequence_parallel_mode \"ulysses\" exchanges it whole)");
  if (!f32(a))
    return fail(a, "is not f32; ring attention computes in f32 only (use "
                   "sequence_parallel_mode \"ulysses\" for bf16/fp16)");
  for (unsigned i = 0; i < 3; ++i) {
    State s = stateOf(a->getOperand(i));
    if (s.kind != State::Seq || s.split.dim != 2 || s.split.segments != 1)
      return fail(a, "needs query, key and value split along their length ([B, H, L, E])");
  }
  OpBuilder b(a);
  RankedTensorType out = local(typeOf(a.getResult()), 2), lse = local(typeOf(a.getLse()), 2);
  auto ws = ringAttentionWorkspace(typeOf(a.getKey()), typeOf(a.getValue()), out, lse);
  auto r = RingAttentionOp::create(b, a.getLoc(), out, lse, ws, a.getQuery(), a.getKey(),
                                   a.getValue(), a.getScaleAttr(), a.getCausalAttr(),
                                   striped && a.getCausal() ? b.getUnitAttr() : UnitAttr(),
                                   FlatSymbolRefAttr::get(b.getContext(), axis.grid),
                                   b.getDenseI16ArrayAttr(axis.axes()));
  State seq{State::Seq, Split{2, 1}, -1};
  states[r.getResult()] = seq;
  states[r.getLse()] = seq;
  a.getResult().replaceAllUsesWith(r.getResult());
  a.getLse().replaceAllUsesWith(r.getLse());
  a.erase();
  return success();
}

LogicalResult SequenceParallelPass::reduction(Operation *op) {
  Value in = op->getOperand(0);
  State s = stateOf(in);
  auto dims = op->getAttrOfType<DenseI64ArrayAttr>("dims").asArrayRef();
  bool keep = op->hasAttr("keepdim");
  Value r = op->getResult(0);
  if (!llvm::is_contained(dims, s.split.dim)) {
    int64_t d = s.split.dim;
    if (!keep)
      d -= llvm::count_if(dims, [&](int64_t x) { return x < s.split.dim; });
    r.setType(local(typeOf(r), d));
    states[r] = State{s.kind, Split{d, s.split.segments}, -1};
    return success();
  }
  // Over the split dimension: this rank's sum, completed over sp; a mean of equal blocks is
  // the mean of the ranks' means.
  if (s.kind != State::Seq || !isa<SumOp, MeanOp>(op))
    return fail(op, "reduces the split dimension other than by a sum or mean");
  OpBuilder b(op);
  b.setInsertionPointAfter(op);
  auto grid = FlatSymbolRefAttr::get(b.getContext(), axis.grid);
  auto axes = b.getDenseI16ArrayAttr(axis.axes());
  Operation *sum = ParallelSumOp::create(b, op->getLoc(), r, grid, axes);
  Value total = sum->getResult(0);
  // One reduction in 16-bit modes: only the completed result is rounded.
  op->setAttr(kFusedAttrName, b.getUnitAttr());
  if (isa<MeanOp>(op)) {
    sum->setAttr(kFusedAttrName, b.getUnitAttr());
    RankedTensorType t = typeOf(r);
    Value inv = scalarConstant(b, op->getLoc(), t.getElementType(), 1.0 / sp);
    total = MulOp::create(b, op->getLoc(), t, total, inv);
  }
  r.replaceAllUsesExcept(total, sum);
  return success();
}

LogicalResult SequenceParallelPass::crossEntropy(CrossEntropyOp ce) {
  State ls = stateOf(ce.getLogits()), ts = stateOf(ce.getTarget());
  if (ls.kind != State::Seq || ts.kind != State::Seq || ls.split.dim != 0 || ts.split.dim != 0 ||
      ls.split.segments != ts.split.segments)
    return fail(ce, "takes logits and targets that are not split by rows alike");
  if (ce.getReduction() == Reduction::none) {
    ce.getResult().setType(local(typeOf(ce.getResult()), 0));
    states[ce.getResult()] = ls;
    return success();
  }
  // sum: the ranks' sums; mean: their sums over the targets counted on every rank.
  OpBuilder b(ce);
  Location loc = ce.getLoc();
  auto grid = FlatSymbolRefAttr::get(b.getContext(), axis.grid);
  auto axes = b.getDenseI16ArrayAttr(axis.axes());
  RankedTensorType t = typeOf(ce.getResult());
  Type fe = t.getElementType();
  Value sum = CrossEntropyOp::create(b, loc, t, ce.getLogits(), ce.getTarget(),
                                     ce.getIgnoreIndexAttr(),
                                     ReductionAttr::get(b.getContext(), Reduction::sum),
                                     ce.getLabelSmoothingAttr());
  Value total = ParallelSumOp::create(b, loc, sum, grid, axes);
  // One cross-entropy in 16-bit modes: only the loss is rounded (the sums stay f32).
  sum.getDefiningOp()->setAttr(kFusedAttrName, b.getUnitAttr());
  if (ce.getReduction() == Reduction::mean) {
    total.getDefiningOp()->setAttr(kFusedAttrName, b.getUnitAttr());
    RankedTensorType tt = typeOf(ce.getTarget());
    auto scalarOf = [&](Type e, double v) { return scalarConstant(b, loc, e, v); };
    Value valid = CmpOp::create(b, loc, RankedTensorType::get(tt.getShape(), b.getI1Type()),
                                CmpPredicateAttr::get(b.getContext(), CmpPredicate::ne),
                                ce.getTarget(),
                                ConstantOp::create(b, loc, DenseElementsAttr::get(
                                    RankedTensorType::get({}, tt.getElementType()),
                                    IntegerAttr::get(tt.getElementType(),
                                                     static_cast<int64_t>(ce.getIgnoreIndex())))));
    auto rowT = RankedTensorType::get(tt.getShape(), fe);
    Value ones = WhereOp::create(b, loc, rowT, valid, scalarOf(fe, 1.0), scalarOf(fe, 0.0));
    SmallVector<int64_t> all;
    for (int64_t d = 0; d < tt.getRank(); ++d)
      all.push_back(d);
    Value count = SumOp::create(b, loc, t, ones, all, false);
    count.getDefiningOp()->setAttr(kFusedAttrName, b.getUnitAttr());
    count = ParallelSumOp::create(b, loc, count, grid, axes);
    count.getDefiningOp()->setAttr(kFusedAttrName, b.getUnitAttr());
    total = DivOp::create(b, loc, t, total, count);
  }
  ce.getResult().replaceAllUsesWith(total);
  ce.erase();
  return success();
}

LogicalResult SequenceParallelPass::visit(Operation *op) {
  bool split = llvm::any_of(op->getOperands(),
                            [&](Value v) { return stateOf(v).kind != State::Whole; });
  if (!split)
    return success();
  OpBuilder b(op);
  // Blocks of a batch dimension exist only inside the attention: anything else gets the
  // sequence blocks back first.
  if (!isElementwise(op) && !isa<MatmulOp, SoftmaxOp, LogSoftmaxOp, AttentionOp>(op))
    for (unsigned i = 0; i < op->getNumOperands(); ++i)
      if (failed(toSeq(b, op, i)))
        return failure();
  if (isElementwise(op))
    return elementwise(op);
  if (auto m = dyn_cast<MatmulOp>(op))
    return matmul(m);
  if (auto a = dyn_cast<AttentionOp>(op))
    return attention(a);
  if (auto ce = dyn_cast<CrossEntropyOp>(op))
    return crossEntropy(ce);
  if (isa<SumOp, MeanOp, AmaxOp>(op))
    return reduction(op);
  Value in = op->getOperand(0);
  State s = stateOf(in);
  Value r = op->getNumResults() ? op->getResult(0) : Value();
  auto set = [&](Value v, State st) {
    v.setType(local(typeOf(v), st.split.dim));
    states[v] = st;
    return success();
  };
  if (isa<SoftmaxOp, LogSoftmaxOp>(op)) {
    if (op->getAttrOfType<IntegerAttr>("dim").getInt() == s.split.dim)
      return fail(op, "normalizes along the split dimension");
    return set(r, s);
  }
  if (auto t = dyn_cast<TransposeOp>(op)) {
    for (auto [i, p] : llvm::enumerate(t.getPermutation()))
      if (p == s.split.dim)
        return set(r, State{s.kind, Split{static_cast<int64_t>(i), s.split.segments}, -1});
  }
  if (auto re = dyn_cast<ReshapeOp>(op)) {
    std::string why;
    FailureOr<Split> o = splitThroughReshape(wholeShape(in), typeOf(r).getShape(), s.split, sp,
                                             why);
    if (failed(o))
      return fail(op, "reshapes the sequence blocks: " + why);
    return set(r, State{s.kind, *o, -1});
  }
  if (auto bc = dyn_cast<BroadcastToOp>(op)) {
    // New leading dimensions or size-1 ones grown (repeat_kv's expand): the split one stays.
    int64_t e = s.split.dim + typeOf(r).getRank() - typeOf(in).getRank();
    if (wholeShape(in)[s.split.dim] != typeOf(r).getShape()[e])
      return fail(op, "broadcasts the split dimension");
    return set(r, State{s.kind, Split{e, s.split.segments}, -1});
  }
  if (auto c = dyn_cast<ConcatOp>(op)) {
    if (static_cast<int64_t>(c.getDim()) == s.split.dim && s.kind == State::Seq)
      return shiftInput(c, s.split.dim);
    // Pieces split alike (rotary's halves), joined along another dimension.
    for (Value v : c.getInputs()) {
      State vs = stateOf(v);
      if (vs.kind != s.kind || !(vs.split == s.split))
        return fail(op, "concatenates pieces that are not split alike");
    }
    if (static_cast<int64_t>(c.getDim()) == s.split.dim)
      return fail(op, "concatenates along the split dimension");
    return set(r, s);
  }
  if (auto sl = dyn_cast<SliceOp>(op)) {
    if (static_cast<int64_t>(sl.getDim()) == s.split.dim)
      return fail(op, "slices the split sequence dimension");
    return set(r, s);
  }
  if (auto l = dyn_cast<LinearOp>(op)) {
    if (s.split.dim == typeOf(in).getRank() - 1)
      return fail(op, "contracts the split dimension");
    return set(r, s);
  }
  if (auto ln = dyn_cast<LayerNormOp>(op)) {
    int64_t rank = typeOf(in).getRank();
    if (s.split.dim >= rank - static_cast<int64_t>(ln.getNormalizedShape().size()))
      return fail(op, "normalizes along the split dimension");
    return set(r, s);
  }
  if (auto e = dyn_cast<EmbeddingOp>(op)) {
    State is = stateOf(e.getIndices());
    if (is.kind == State::Whole || op->getOperand(0) != e.getWeight() ||
        stateOf(e.getWeight()).kind != State::Whole)
      return fail(op, "looks up a split table");
    return set(r, is);
  }
  return fail(op, "has no rule for a sequence-split operand");
}

void SequenceParallelPass::runOnOperation() {
  ModuleOp module = getOperation();
  MeshAttr mesh = getMesh(module);
  if (!mesh) {
    if (sequenceParallelSize == 1)
      return;
    module->setAttr(kMeshAttrName, buildMesh(&getContext(), 1, 1, sequenceParallelSize));
    mesh = getMesh(module);
  } else if (sequenceParallelSize != 1 &&
             mesh.getSize(MeshAxis::sp) != sequenceParallelSize) {
    module.emitError() << "ds-sequence-parallel: sequence-parallel-size "
                       << static_cast<int64_t>(sequenceParallelSize)
                       << " disagrees with the module's mesh " << mesh.str()
                       << " (drop the option; the mesh decides)";
    return signalPassFailure();
  }
  sp = mesh.getSize(MeshAxis::sp);
  if (sp == 1)
    return;
  auto forward = module.lookupSymbol<func::FuncOp>(kForwardName);
  if (!forward || forward.getBody().getBlocks().size() != 1) {
    module.emitError() << "ds-sequence-parallel: needs the imported func.func @forward (run "
                          "it before ds-autodiff)";
    return signalPassFailure();
  }
  FailureOr<MeshAxisRef> a = getMeshAxis(module, MeshAxis::sp, "ds-sequence-parallel");
  if (failed(a))
    return signalPassFailure();
  axis = *a;
  // The sequence: dimension 1 of the inputs of rank >= 2 (DeepSpeed-Ulysses' [batch,
  // sequence, ...] layout); every input with that length there is split.
  Block &body = forward.getBody().front();
  for (BlockArgument arg : body.getArguments()) {
    auto t = dyn_cast<RankedTensorType>(arg.getType());
    if (t && t.getRank() >= 2 && T == 0)
      T = t.getShape()[1];
  }
  if (T == 0) {
    forward.emitError() << "ds-sequence-parallel: no input has a sequence dimension (dimension "
                           "1 of a [batch, sequence, ...] input)";
    return signalPassFailure();
  }
  if (T % sp != 0) {
    forward.emitError() << "ds-sequence-parallel: the sequence length " << T
                        << " does not divide by sequence_parallel_size " << sp
                        << "; pick a length that does or another size";
    return signalPassFailure();
  }
  // A causal attention that takes the ring: the sequence striped over the ranks, so that the
  // ring's steps are as long on every rank. Where the walk then needs an exchange of the
  // sequence (Ulysses beside the ring), it starts again with contiguous blocks.
  forward.walk([&](AttentionOp a) { striped |= a.getCausal() && goesRing(a); });
  if (striped) {
    auto backup = cast<func::FuncOp>(forward->clone());
    if (succeeded(split(forward))) {
      backup.erase();
      return;
    }
    forward.getBody().takeBody(backup.getBody());
    backup.erase();
    states.clear();
    wholeInput.clear();
    error.clear();
    errorAt = nullptr;
    striped = false;
  }
  if (failed(split(forward))) {
    errorAt->emitError() << "ds-sequence-parallel: '" << errorAt->getName().getStringRef()
                         << "' " << error;
    return signalPassFailure();
  }
}

/// Slices the inputs to this rank's part of the sequence and walks @forward.
LogicalResult SequenceParallelPass::split(func::FuncOp forward) {
  Block &body = forward.getBody().front();
  OpBuilder b = OpBuilder::atBlockBegin(&body);
  for (BlockArgument arg : body.getArguments()) {
    auto t = dyn_cast<RankedTensorType>(arg.getType());
    if (!t || t.getRank() < 2 || t.getShape()[1] != T)
      continue;
    SmallVector<OpOperand *> uses;
    for (OpOperand &u : arg.getUses())
      uses.push_back(&u);
    Value l = sliceLocal(b, forward.getLoc(), arg, 1);
    for (OpOperand *u : uses)
      u->set(l);
    states[l] = State{State::Seq, Split{1, 1}, -1};
    wholeInput[l] = arg;
  }
  for (Operation &op : llvm::make_early_inc_range(body.without_terminator())) {
    if (op.getNumResults() && states.contains(op.getResult(0)))
      continue; // made by this pass
    if (failed(visit(&op)))
      return failure();
  }
  Operation *ret = body.getTerminator();
  for (Value v : ret->getOperands())
    if (stateOf(v).kind != State::Whole)
      return fail(ret, "returns a value split along the sequence; return the loss (a sum or "
                       "mean over it)");
  return success();
}
