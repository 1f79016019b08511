//===- Experts.cpp - kernel patterns: a router's top-k, the experts' products, their exchange ===//
//
// Expert parallelism's exchange runs on its group's communication thread (dsrt_expert_route,
// _dispatch, _combine return an event); the step waits for it at once.
//
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
  p.add<SwigluOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    auto o = cast<SwigluOp>(op);
    e.kernel(fn::dsrt_swiglu, outs[0], e.operand(o.getInput()), e.operand(o.getRows()));
    return success();
  });
  p.add<SwigluGradOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    auto o = cast<SwigluGradOp>(op);
    e.kernel(fn::dsrt_swiglu_grad, outs[0], e.operand(o.getInput()),
             e.operand(o.getResultGrad()), e.operand(o.getRows()));
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
