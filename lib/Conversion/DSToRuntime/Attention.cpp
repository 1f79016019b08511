//===- Attention.cpp - kernel patterns: fused and ring attention and their gradients ---===//
#include "RuntimeLowering.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::runtime;

namespace {
/// The runtime's dsrt_causal of a ring op.
template <class Ring> int32_t ringCausal(Ring o) {
  return !o.getCausal() ? DSRT_CAUSAL_NONE : o.getStriped() ? DSRT_CAUSAL_STRIPED : DSRT_CAUSAL;
}
} // namespace

void mlir::ds::runtime::populateAttentionKernels(KernelPatterns &p) {
  p.add<AttentionOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    auto o = cast<AttentionOp>(op);
    e.kernel(fn::dsrt_attention, outs[0], outs[1], e.operand(o.getQuery()),
             e.operand(o.getKey()), e.operand(o.getValue()), e.operand(o.getMask()),
             e.f64(o.getScale().convertToDouble()), e.i32(o.getCausal()));
    return success();
  });
  p.add<AttentionGradOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    auto o = cast<AttentionGradOp>(op);
    e.kernel(fn::dsrt_attention_grad, outs[0], outs[1], outs[2], e.operand(o.getQuery()),
             e.operand(o.getKey()), e.operand(o.getValue()), e.operand(o.getMask()),
             e.operand(o.getResult()), e.operand(o.getLse()), e.operand(o.getResultGrad()),
             e.f64(o.getScale().convertToDouble()), e.i32(o.getCausal()));
    return success();
  });
  // Ring attention: the runtime group of its grid axes (checked against the mesh by the
  // memory plan, which sees the op as a collective).
  p.add<RingAttentionOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    auto o = cast<RingAttentionOp>(op);
    e.kernel(fn::dsrt_ring_attention, e.i32(runtimeGroupOf(o.getGridAxes())), outs[0], outs[1],
             outs[2], e.operand(o.getQuery()), e.operand(o.getKey()), e.operand(o.getValue()),
             e.f64(o.getScale().convertToDouble()), e.i32(ringCausal(o)));
    return success();
  });
  p.add<RingAttentionGradOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    auto o = cast<RingAttentionGradOp>(op);
    e.kernel(fn::dsrt_ring_attention_grad, e.i32(runtimeGroupOf(o.getGridAxes())), outs[0],
             outs[1], outs[2], outs[3], e.operand(o.getQuery()), e.operand(o.getKey()),
             e.operand(o.getValue()), e.operand(o.getResult()), e.operand(o.getLse()),
             e.operand(o.getResultGrad()), e.f64(o.getScale().convertToDouble()),
             e.i32(ringCausal(o)));
    return success();
  });
}
