//===- Reductions.cpp - kernel patterns: reductions, cumsum, softmax, cross-entropy ===//
#include "RuntimeLowering.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::runtime;

namespace {
/// The runtime's dimension mask: bit d for each reduced dim d.
uint64_t reduceMask(ArrayRef<int64_t> dims) {
  uint64_t m = 0;
  for (int64_t d : dims)
    m |= uint64_t(1) << d;
  return m;
}

dsrt_reduction reductionCode(Reduction r) {
  switch (r) {
  case Reduction::none:
    return DSRT_REDUCTION_NONE;
  case Reduction::mean:
    return DSRT_REDUCTION_MEAN;
  case Reduction::sum:
    return DSRT_REDUCTION_SUM;
  }
  llvm_unreachable("a Reduction without a runtime code");
}

template <class Op> KernelLowering reduction(dsrt_reduce_kind kind) {
  return [kind](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    auto o = cast<Op>(op);
    e.kernel(fn::dsrt_reduce, e.i32(kind), outs[0], e.operand(o.getInput()),
             e.u64(reduceMask(o.getDims())));
    return success();
  };
}

template <class Op> KernelLowering softmax(bool log) {
  return [log](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    auto o = cast<Op>(op);
    e.kernel(fn::dsrt_softmax, outs[0], e.operand(o.getInput()), e.i64(o.getDim()), e.i32(log));
    return success();
  };
}
} // namespace

void mlir::ds::runtime::populateReductionKernels(KernelPatterns &p) {
  p.add<SumOp>(reduction<SumOp>(DSRT_SUM));
  p.add<MeanOp>(reduction<MeanOp>(DSRT_MEAN));
  p.add<AmaxOp>(reduction<AmaxOp>(DSRT_AMAX));
  p.add<CumsumOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    auto o = cast<CumsumOp>(op);
    e.kernel(fn::dsrt_cumsum, outs[0], e.operand(o.getInput()), e.i64(o.getDim()),
             e.i32(o.getReverse()));
    return success();
  });
  p.add<SoftmaxOp>(softmax<SoftmaxOp>(false));
  p.add<LogSoftmaxOp>(softmax<LogSoftmaxOp>(true));
  p.add<SoftmaxGradOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    auto o = cast<SoftmaxGradOp>(op);
    e.kernel(fn::dsrt_softmax_grad, outs[0], e.operand(o.getOutput()),
             e.operand(o.getResultGrad()), e.i64(o.getDim()), e.i32(o.getLog()));
    return success();
  });
  p.add<CrossEntropyOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    auto o = cast<CrossEntropyOp>(op);
    e.kernel(fn::dsrt_cross_entropy, outs[0], e.operand(o.getLogits()), e.operand(o.getTarget()),
             e.i64(o.getIgnoreIndex()), e.i32(reductionCode(o.getReduction())),
             e.f64(o.getLabelSmoothing().convertToDouble()));
    return success();
  });
  // The tiled LM head and loss (ds-tile-sequence): the workspace is the last result.
  p.add<LinearCrossEntropyOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    auto o = cast<LinearCrossEntropyOp>(op);
    e.kernel(fn::dsrt_linear_cross_entropy, outs[0], outs[1], e.operand(o.getInput()),
             e.operand(o.getWeight()), e.operand(o.getBias()), e.operand(o.getTarget()),
             e.i64(o.getTiles()), e.i64(o.getIgnoreIndex()),
             e.f64(o.getLabelSmoothing().convertToDouble()));
    return success();
  });
  p.add<LinearCrossEntropyGradOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    auto o = cast<LinearCrossEntropyGradOp>(op);
    e.kernel(fn::dsrt_linear_cross_entropy_grad, outs[0], outs[1], outs[2], outs[3],
             e.operand(o.getInput()), e.operand(o.getWeight()), e.operand(o.getBias()),
             e.operand(o.getTarget()), e.operand(o.getResultGrad()), e.i64(o.getTiles()),
             e.i64(o.getIgnoreIndex()), e.f64(o.getLabelSmoothing().convertToDouble()));
    return success();
  });
  p.add<CrossEntropyGradOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    auto o = cast<CrossEntropyGradOp>(op);
    e.kernel(fn::dsrt_cross_entropy_grad, outs[0], e.operand(o.getLogits()),
             e.operand(o.getTarget()), e.operand(o.getResultGrad()), e.i64(o.getIgnoreIndex()),
             e.i32(reductionCode(o.getReduction())),
             e.f64(o.getLabelSmoothing().convertToDouble()));
    return success();
  });
}
