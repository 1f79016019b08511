//===- Convolution.cpp - kernel patterns: 2-D convolution and pooling ------------===//
#include "KernelPatterns.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::runtime;

namespace {
/// A [h, w] attribute as two i64 arguments.
void pair(KernelEmitter &e, ArrayRef<int64_t> hw, SmallVectorImpl<Value> &args) {
  args.push_back(e.i64(hw[0]));
  args.push_back(e.i64(hw[1]));
}

/// stride, padding and dilation of a convolution, then its groups.
template <class Op> void convArgs(Op o, KernelEmitter &e, SmallVectorImpl<Value> &args) {
  pair(e, o.getStride(), args);
  pair(e, o.getPadding(), args);
  pair(e, o.getDilation(), args);
  args.push_back(e.i64(o.getGroups()));
}
} // namespace

void mlir::ds::runtime::populateConvolutionKernels(KernelPatterns &p) {
  p.add<Conv2dOp>([](Operation *op, ArrayRef<Value> outs, KernelEmitter &e) {
    auto o = cast<Conv2dOp>(op);
    SmallVector<Value> args = {outs[0], e.operand(o.getInput()), e.operand(o.getWeight()),
                               e.operand(o.getBias())};
    convArgs(o, e, args);
    e.kernel("dsrt_conv2d", args);
    return success();
  });
  p.add<Conv2dGradInputOp>([](Operation *op, ArrayRef<Value> outs, KernelEmitter &e) {
    auto o = cast<Conv2dGradInputOp>(op);
    SmallVector<Value> args = {outs[0], e.operand(o.getResultGrad()), e.operand(o.getWeight())};
    convArgs(o, e, args);
    e.kernel("dsrt_conv2d_grad_input", args);
    return success();
  });
  p.add<Conv2dGradWeightOp>(
      [](Operation *op, ArrayRef<Value> outs, KernelEmitter &e) {
        auto o = cast<Conv2dGradWeightOp>(op);
        SmallVector<Value> args = {outs[0], outs[1], e.operand(o.getInput()),
                                   e.operand(o.getResultGrad())};
        convArgs(o, e, args);
        e.kernel("dsrt_conv2d_grad_weight", args);
        return success();
      },
      /*optionalResults=*/true);
  p.add<MaxPool2dOp>([](Operation *op, ArrayRef<Value> outs, KernelEmitter &e) {
    auto o = cast<MaxPool2dOp>(op);
    SmallVector<Value> args = {outs[0], e.operand(o.getInput())};
    for (ArrayRef<int64_t> hw : {o.getKernelSize(), o.getStride(), o.getPadding(), o.getDilation()})
      pair(e, hw, args);
    e.kernel("dsrt_max_pool2d", args);
    return success();
  });
  p.add<MaxPool2dGradOp>([](Operation *op, ArrayRef<Value> outs, KernelEmitter &e) {
    auto o = cast<MaxPool2dGradOp>(op);
    SmallVector<Value> args = {outs[0], e.operand(o.getInput()), e.operand(o.getResultGrad())};
    for (ArrayRef<int64_t> hw : {o.getKernelSize(), o.getStride(), o.getPadding(), o.getDilation()})
      pair(e, hw, args);
    e.kernel("dsrt_max_pool2d_grad", args);
    return success();
  });
  p.add<AvgPool2dOp>([](Operation *op, ArrayRef<Value> outs, KernelEmitter &e) {
    auto o = cast<AvgPool2dOp>(op);
    SmallVector<Value> args = {outs[0], e.operand(o.getInput())};
    for (ArrayRef<int64_t> hw : {o.getKernelSize(), o.getStride(), o.getPadding()})
      pair(e, hw, args);
    args.push_back(e.i32(o.getCountIncludePad()));
    e.kernel("dsrt_avg_pool2d", args);
    return success();
  });
  p.add<AvgPool2dGradOp>([](Operation *op, ArrayRef<Value> outs, KernelEmitter &e) {
    auto o = cast<AvgPool2dGradOp>(op);
    SmallVector<Value> args = {outs[0], e.operand(o.getResultGrad())};
    for (ArrayRef<int64_t> hw : {o.getKernelSize(), o.getStride(), o.getPadding()})
      pair(e, hw, args);
    args.push_back(e.i32(o.getCountIncludePad()));
    e.kernel("dsrt_avg_pool2d_grad", args);
    return success();
  });
  p.add<AdaptiveAvgPool2dOp>([](Operation *op, ArrayRef<Value> outs, KernelEmitter &e) {
    e.kernel("dsrt_adaptive_avg_pool2d",
           {outs[0], e.operand(cast<AdaptiveAvgPool2dOp>(op).getInput())});
    return success();
  });
  p.add<AdaptiveAvgPool2dGradOp>([](Operation *op, ArrayRef<Value> outs, KernelEmitter &e) {
    e.kernel("dsrt_adaptive_avg_pool2d_grad",
           {outs[0], e.operand(cast<AdaptiveAvgPool2dGradOp>(op).getResultGrad())});
    return success();
  });
}
