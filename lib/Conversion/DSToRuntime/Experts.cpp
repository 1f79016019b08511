//===- Experts.cpp - kernel patterns: a router's top-k, the experts' products, their exchange ===//
//
// Expert parallelism's exchange runs on its group's communication thread (dsrt_expert_route,
// _dispatch, _combine return an event); the step waits for it at once. Before the lowering,
// markUnreadUnroutedRows lets the products and SwiGLU leave the rows no expert takes unwritten
// where nothing reads them (most of an expert-parallel rank's receive buffers).
//
#include "RuntimeLowering.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::runtime;

namespace {
template <class Op> int32_t unroutedFlag(Op op) {
  return op.getUnroutedUndefined() ? DSRT_EXPERT_UNROUTED_UNDEFINED : 0;
}

/// Whether every reader of `v` skips the rows of negative id in `ids` (the only ones that
/// `unrouted_undefined` leaves unwritten): the experts' products and SwiGLU told the same ids,
/// and the combine along the route whose received rows' ids they are (it sends back the
/// received rows only, each of an expert; the ids are -1 past them).
bool unroutedRowsUnread(Value v, Value ids) {
  for (OpOperand &use : v.getUses()) {
    Operation *user = use.getOwner();
    const unsigned at = use.getOperandNumber();
    if (auto p = dyn_cast<ExpertLinearOp>(user); p && at == 0 && p.getExpertIds() == ids)
      continue;
    if (auto g = dyn_cast<ExpertLinearGradWeightOp>(user); g && at <= 1 && g.getExpertIds() == ids)
      continue;
    if (auto a = dyn_cast<SwigluOp>(user); a && at == 0 && a.getRows() == ids)
      continue;
    if (auto a = dyn_cast<SwigluGradOp>(user); a && at <= 1 && a.getRows() == ids)
      continue;
    if (auto c = dyn_cast<ExpertCombineOp>(user)) {
      auto route = c.getPlan().getDefiningOp<ExpertRouteOp>();
      if (at == 0 && route && route.getLocalIds() == ids)
        continue;
    }
    return false;
  }
  return true;
}
} // namespace

void mlir::ds::runtime::markUnreadUnroutedRows(ModuleOp module) {
  auto unit = UnitAttr::get(module.getContext());
  module.walk([&](Operation *op) {
    if (auto p = dyn_cast<ExpertLinearOp>(op)) {
      if (unroutedRowsUnread(p.getResult(), p.getExpertIds()))
        p.setUnroutedUndefinedAttr(unit);
    } else if (auto a = dyn_cast<SwigluOp>(op)) {
      if (a.getRows() && unroutedRowsUnread(a.getResult(), a.getRows()))
        a.setUnroutedUndefinedAttr(unit);
    } else if (auto g = dyn_cast<SwigluGradOp>(op)) {
      if (g.getRows() && unroutedRowsUnread(g.getResult(), g.getRows()))
        g.setUnroutedUndefinedAttr(unit);
    }
  });
}

void mlir::ds::runtime::populateExpertKernels(KernelPatterns &p) {
  p.add<TopKOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    auto o = cast<TopKOp>(op);
    e.kernel(fn::dsrt_top_k, outs[0], outs[1], e.operand(o.getInput()), e.i32(o.getSmallest()));
    return success();
  });
  p.add<ExpertLinearOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    auto o = cast<ExpertLinearOp>(op);
    e.kernel(fn::dsrt_expert_linear, outs[0], e.operand(o.getInput()), e.operand(o.getWeight()),
             e.operand(o.getExpertIds()),
             e.i32((o.getTransposed() ? DSRT_EXPERT_TRANSPOSED : 0) | unroutedFlag(o)));
    return success();
  });
  p.add<ExpertLinearGradWeightOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    auto o = cast<ExpertLinearGradWeightOp>(op);
    e.kernel(fn::dsrt_expert_linear_grad_weight, outs[0], e.operand(o.getInput()),
             e.operand(o.getResultGrad()), e.operand(o.getExpertIds()),
             e.i32(o.getTransposed()));
    return success();
  });
  p.add<SwigluOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    auto o = cast<SwigluOp>(op);
    e.kernel(fn::dsrt_swiglu, outs[0], e.operand(o.getInput()), e.operand(o.getRows()),
             e.i32(unroutedFlag(o)));
    return success();
  });
  p.add<SwigluGradOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    auto o = cast<SwigluGradOp>(op);
    e.kernel(fn::dsrt_swiglu_grad, outs[0], e.operand(o.getInput()),
             e.operand(o.getResultGrad()), e.operand(o.getRows()), e.i32(unroutedFlag(o)));
    return success();
  });
  p.add<ExpertCapacityOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    auto o = cast<ExpertCapacityOp>(op);
    e.kernel(fn::dsrt_expert_capacity, outs[0], e.operand(o.getExpertIds()),
             e.i64(o.getExperts()), e.i64(o.getChoices()), e.i64(o.getCapacity()));
    return success();
  });
  p.add<ExpertRouteOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    auto o = cast<ExpertRouteOp>(op);
    e.kernelWaited(fn::dsrt_expert_route, e.i32(runtimeGroupOf(o.getGridAxes())), outs[0],
                   outs[1], e.operand(o.getExpertIds()), e.i64(o.getExperts()));
    return success();
  });
  p.add<ExpertDispatchOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    auto o = cast<ExpertDispatchOp>(op);
    e.kernelWaited(fn::dsrt_expert_dispatch, e.i32(runtimeGroupOf(o.getGridAxes())), outs[0],
                   e.operand(o.getInput()), e.operand(o.getPlan()));
    return success();
  });
  p.add<ExpertCombineOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    auto o = cast<ExpertCombineOp>(op);
    e.kernelWaited(fn::dsrt_expert_combine, e.i32(runtimeGroupOf(o.getGridAxes())), outs[0],
                   e.operand(o.getInput()), e.operand(o.getPlan()));
    return success();
  });
}
