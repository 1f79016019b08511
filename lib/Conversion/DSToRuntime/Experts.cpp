//===- Experts.cpp - kernel patterns: a router's top-k and the routed experts' products ===//
#include "RuntimeLowering.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::runtime;

void mlir::ds::runtime::populateExpertKernels(KernelPatterns &p) {
  p.add<TopKOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    auto o = cast<TopKOp>(op);
    e.kernel(fn::dsrt_top_k, outs[0], outs[1], e.operand(o.getInput()), e.i32(o.getSmallest()));
    return success();
  });
  p.add<ExpertLinearOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    auto o = cast<ExpertLinearOp>(op);
    e.kernel(fn::dsrt_expert_linear, outs[0], e.operand(o.getInput()), e.operand(o.getWeight()),
             e.operand(o.getExpertIds()), e.i32(o.getTransposed()));
    return success();
  });
  p.add<ExpertLinearGradWeightOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    auto o = cast<ExpertLinearGradWeightOp>(op);
    e.kernel(fn::dsrt_expert_linear_grad_weight, outs[0], e.operand(o.getInput()),
             e.operand(o.getResultGrad()), e.operand(o.getExpertIds()),
             e.i32(o.getTransposed()));
    return success();
  });
}
