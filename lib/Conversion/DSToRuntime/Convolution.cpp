//===- Convolution.cpp - kernel patterns: 2-D convolution and pooling ------------===//
#include "RuntimeLowering.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::runtime;

namespace {
/// A [h, w] attribute's two i64 arguments.
struct HW {
  Arg<int64_t> h, w;
  HW(KernelEmitter &e, ArrayRef<int64_t> hw) : h(e.i64(hw[0])), w(e.i64(hw[1])) {}
};
} // namespace

void mlir::ds::runtime::populateConvolutionKernels(KernelPatterns &p) {
  p.add<Conv2dOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    auto o = cast<Conv2dOp>(op);
    HW s(e, o.getStride()), pad(e, o.getPadding()), d(e, o.getDilation());
    e.kernel(fn::dsrt_conv2d, outs[0], e.operand(o.getInput()), e.operand(o.getWeight()),
             e.operand(o.getBias()), s.h, s.w, pad.h, pad.w, d.h, d.w, e.i64(o.getGroups()));
    return success();
  });
  p.add<Conv2dGradInputOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    auto o = cast<Conv2dGradInputOp>(op);
    HW s(e, o.getStride()), pad(e, o.getPadding()), d(e, o.getDilation());
    e.kernel(fn::dsrt_conv2d_grad_input, outs[0], e.operand(o.getResultGrad()),
             e.operand(o.getWeight()), s.h, s.w, pad.h, pad.w, d.h, d.w, e.i64(o.getGroups()));
    return success();
  });
  p.add<Conv2dGradWeightOp>(
      [](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
        auto o = cast<Conv2dGradWeightOp>(op);
        HW s(e, o.getStride()), pad(e, o.getPadding()), d(e, o.getDilation());
        e.kernel(fn::dsrt_conv2d_grad_weight, outs[0], outs[1], e.operand(o.getInput()),
                 e.operand(o.getResultGrad()), s.h, s.w, pad.h, pad.w, d.h, d.w,
                 e.i64(o.getGroups()));
        return success();
      });
  p.add<MaxPool2dOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    auto o = cast<MaxPool2dOp>(op);
    HW k(e, o.getKernelSize()), s(e, o.getStride()), pad(e, o.getPadding()),
        d(e, o.getDilation());
    e.kernel(fn::dsrt_max_pool2d, outs[0], e.operand(o.getInput()), k.h, k.w, s.h, s.w, pad.h,
             pad.w, d.h, d.w);
    return success();
  });
  p.add<MaxPool2dGradOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    auto o = cast<MaxPool2dGradOp>(op);
    HW k(e, o.getKernelSize()), s(e, o.getStride()), pad(e, o.getPadding()),
        d(e, o.getDilation());
    e.kernel(fn::dsrt_max_pool2d_grad, outs[0], e.operand(o.getInput()),
             e.operand(o.getResultGrad()), k.h, k.w, s.h, s.w, pad.h, pad.w, d.h, d.w);
    return success();
  });
  p.add<AvgPool2dOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    auto o = cast<AvgPool2dOp>(op);
    HW k(e, o.getKernelSize()), s(e, o.getStride()), pad(e, o.getPadding());
    e.kernel(fn::dsrt_avg_pool2d, outs[0], e.operand(o.getInput()), k.h, k.w, s.h, s.w, pad.h,
             pad.w, e.i32(o.getCountIncludePad()));
    return success();
  });
  p.add<AvgPool2dGradOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    auto o = cast<AvgPool2dGradOp>(op);
    HW k(e, o.getKernelSize()), s(e, o.getStride()), pad(e, o.getPadding());
    e.kernel(fn::dsrt_avg_pool2d_grad, outs[0], e.operand(o.getResultGrad()), k.h, k.w, s.h,
             s.w, pad.h, pad.w, e.i32(o.getCountIncludePad()));
    return success();
  });
  p.add<AdaptiveAvgPool2dOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    e.kernel(fn::dsrt_adaptive_avg_pool2d, outs[0],
             e.operand(cast<AdaptiveAvgPool2dOp>(op).getInput()));
    return success();
  });
  p.add<AdaptiveAvgPool2dGradOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    e.kernel(fn::dsrt_adaptive_avg_pool2d_grad, outs[0],
             e.operand(cast<AdaptiveAvgPool2dGradOp>(op).getResultGrad()));
    return success();
  });
}
