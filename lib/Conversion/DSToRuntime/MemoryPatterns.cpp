//===- MemoryPatterns.cpp - slots, moves, views and in-place updates ------------===//
//
// The ops whose lowering is mostly where their values live: slot reads and writes (NVMe ones
// on the transfer stream), moves between the spaces, reshapes and slices that are views,
// matmuls on strided views, insertions written into a dying buffer, AdamW and the key/value
// cache's writes in place. The
// memory plan decided each placement; these patterns emit it.
//
#include "RuntimeLowering.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::runtime;

namespace {
RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

struct GetParameterLowering : RuntimeOpPattern<GetParameterOp> {
  using RuntimeOpPattern::RuntimeOpPattern;
  LogicalResult lower(GetParameterOp g, const OpPlan &plan, CallEmitter &e) const override {
    const Placement &p = plan.results[0];
    if (p.kind != Placement::AllocHost) {
      e.place(g.getResult(), p); // the slot's value
      return success();
    }
    // An NVMe slot: read into a host buffer on the transfer stream.
    int idx = lowering.plan.slots().indexOf(g.getName());
    Tensor t = e.place(g.getResult(), p);
    lowering.events[g.getResult()] = e.call(fn::dsrt_slot_fetch, e.ctx(), e.i32(idx), t);
    return success();
  }
};

struct MoveLowering : RuntimeOpPattern<MoveOp> {
  using RuntimeOpPattern::RuntimeOpPattern;
  LogicalResult lower(MoveOp m, const OpPlan &plan, CallEmitter &e) const override {
    Tensor out = e.place(m.getResult(), plan.results[0]);
    lowering.events[m.getResult()] =
        e.call(fn::dsrt_move, e.ctx(), out, e.operand(m.getInput()));
    return success();
  }
};

/// ds.assign and ds.assign_buffer: the slot's new value (NVMe: written on the transfer
/// stream, at most two writes in flight, as the plan waits for them).
template <class Op> struct AssignLowering : RuntimeOpPattern<Op> {
  using RuntimeOpPattern<Op>::RuntimeOpPattern;
  LogicalResult lower(Op a, const OpPlan &, CallEmitter &e) const override {
    RuntimeLowering &l = this->lowering;
    int idx = l.plan.slots().indexOf(a.getName());
    if (l.plan.slots()[idx].space == MemorySpace::nvme)
      l.stores.push_back(
          e.call(fn::dsrt_slot_store, e.ctx(), e.i32(idx), e.operand(a.getValue())));
    else
      e.call(fn::dsrt_slot_set, e.ctx(), e.i32(idx), e.operand(a.getValue()));
    return success();
  }
};

struct ReshapeLowering : RuntimeOpPattern<ReshapeOp> {
  using RuntimeOpPattern::RuntimeOpPattern;
  LogicalResult lower(ReshapeOp r, const OpPlan &plan, CallEmitter &e) const override {
    e.place(r.getResult(), plan.results[0]); // a view of the input
    return success();
  }
};

struct InsertSliceLowering : RuntimeOpPattern<InsertSliceOp> {
  using RuntimeOpPattern::RuntimeOpPattern;
  LogicalResult lower(InsertSliceOp s, const OpPlan &plan, CallEmitter &e) const override {
    // Into a buffer that dies here (a view of it), or a copy of the destination.
    const Placement &p = plan.results[0];
    Tensor out = e.place(s.getResult(), p);
    if (p.kind != Placement::ViewOf)
      e.call(fn::dsrt_copy, e.ctx(), out, e.operand(s.getDest()));
    e.call(fn::dsrt_insert_slice, e.ctx(), out, e.operand(s.getSource()), e.i64(s.getDim()),
           e.i64(s.getStart()), e.i64(s.getStep()));
    return success();
  }
};

struct AdamWLowering : RuntimeOpPattern<AdamWUpdateOp> {
  using RuntimeOpPattern::RuntimeOpPattern;
  LogicalResult lower(AdamWUpdateOp u, const OpPlan &plan, CallEmitter &e) const override {
    // Each new value in place of its old one, or fresh (the plan's choice).
    Tensor outs[3];
    for (int i = 0; i < 3; ++i)
      outs[i] = e.place(u->getResult(i), plan.results[i]);
    e.call(fn::dsrt_adamw_update, e.ctx(), outs[0], outs[1], outs[2], e.operand(u.getParam()),
           e.operand(u.getGrad()), e.operand(u.getExpAvg()), e.operand(u.getExpAvgSq()),
           e.operand(u.getStepSize()), e.operand(u.getBiasCorrection2Sqrt()),
           e.operand(u.getDecay()), e.operand(u.getBeta1()),
           e.f64(u.getBeta2().convertToDouble()), e.f64(u.getEps().convertToDouble()));
    return success();
  }
};

struct CacheWriteLowering : RuntimeOpPattern<CacheWriteOp> {
  using RuntimeOpPattern::RuntimeOpPattern;
  LogicalResult lower(CacheWriteOp w, const OpPlan &plan, CallEmitter &e) const override {
    // The tokens written into the cache's own storage (the plan's choice when the new cache
    // goes back to its state), or into a copy of it.
    Value olds[2] = {w.getKCache(), w.getVCache()};
    Tensor outs[2];
    for (int i = 0; i < 2; ++i) {
      outs[i] = e.place(w->getResult(i), plan.results[i]);
      if (plan.results[i].kind != Placement::ViewOf)
        e.call(fn::dsrt_copy, e.ctx(), outs[i], e.operand(olds[i]));
    }
    e.call(fn::dsrt_cache_write, e.ctx(), outs[0], outs[1], e.operand(w.getKey()),
           e.operand(w.getValue()), e.operand(w.getSlots()));
    return success();
  }
};
} // namespace

FailureOr<bool> mlir::ds::runtime::lowerArrangement(Operation *op, const OpPlan &plan,
                                                    CallEmitter &e) {
  const FunctionPlan &fn = *e.lowering.fn;
  if (isa<TransposeOp>(op) && fn.fusedTransposes.contains(op))
    return true; // folded into its matmul
  if (auto it = fn.views.plans.find(op); it != fn.views.plans.end()) {
    // A matmul on views of its operands, writing its result (or a piece of a concatenation,
    // whose buffer the first piece makes).
    const MatmulViewPlan &mv = it->second;
    Value result = mv.resultBuffer ? mv.resultBuffer : op->getResult(0);
    Tensor out = e.operand(result);
    if (!e.lowering.lowered.lookup(result))
      out = e.place(result, mv.resultBuffer ? fn.bufferPlacements.lookup(result)
                                            : plan.results[0]);
    e.call(fn::dsrt_matmul_view, e.ctx(), out, e.operand(mv.lhsRoot), e.operand(mv.rhsRoot),
           e.i64Array(mv.views), e.f64(mv.alpha));
    return true;
  }
  if (auto c = dyn_cast<ConcatOp>(op); c && fn.views.concatsWritten.contains(op)) {
    // Matmuls wrote some pieces in place (making it); copy in the others.
    Tensor out = e.operand(c.getResult());
    int64_t offset = 0;
    for (Value in : c.getInputs()) {
      if (e.lowering.lowered.lookup(in))
        e.call(fn::dsrt_insert_slice, e.ctx(), out, e.operand(in), e.i64(c.getDim()),
               e.i64(offset), e.i64(1));
      offset += typeOf(in).getShape()[c.getDim()];
    }
    return true;
  }
  if (auto sl = dyn_cast<SliceOp>(op);
      sl && sl.getStep() == 1 && typeOf(sl.getInput()).getRank() == 1) {
    // A contiguous slice of a 1-D tensor (stage 3's parameter views): a view, no copy.
    RankedTensorType type = typeOf(sl.getResult());
    e.bind(sl.getResult(),
           e.call(fn::dsrt_tensor_view_at, e.ctx(), e.operand(sl.getInput()),
                  e.i64(sl.getStart()), e.i32(type.getRank()), e.i64Array(type.getShape())));
    return true;
  }
  return false;
}

void mlir::ds::runtime::populateMemoryPatterns(const TypeConverter &types,
                                               RewritePatternSet &patterns,
                                               RuntimeLowering &lowering) {
  patterns.add<GetParameterLowering, MoveLowering, AssignLowering<AssignOp>,
               AssignLowering<AssignBufferOp>, ReshapeLowering, InsertSliceLowering,
               AdamWLowering, CacheWriteLowering>(types, patterns.getContext(), lowering);
}
