//===- Normalization.cpp - kernel patterns: layer norm and batch norm
//------------===//
#include "RuntimeLowering.h"

#include "ds/IR/DSShapes.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::runtime;

void mlir::ds::runtime::populateNormalizationKernels(KernelPatterns &p) {
  p.add<LayerNormOp>(
      [](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
        auto o = cast<LayerNormOp>(op);
        e.kernel(fn::dsrt_layer_norm, outs[0], e.operand(o.getInput()),
                 e.operand(o.getWeight()), e.operand(o.getBias()),
                 e.i64(numElements(o.getNormalizedShape())),
                 e.f64(o.getEps().convertToDouble()));
        return success();
      });
  p.add<LayerNormGradOp>(
      [](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
        auto o = cast<LayerNormGradOp>(op);
        e.kernel(fn::dsrt_layer_norm_grad, outs[0], outs[1], outs[2],
                 e.operand(o.getInput()), e.operand(o.getWeight()),
                 e.operand(o.getResultGrad()),
                 e.i64(numElements(o.getNormalizedShape())),
                 e.f64(o.getEps().convertToDouble()));
        return success();
      });
  p.add<BatchNormOp>(
      [](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
        auto o = cast<BatchNormOp>(op);
        e.kernel(fn::dsrt_batch_norm, outs[0], outs[1], outs[2],
                 e.operand(o.getInput()), e.operand(o.getWeight()),
                 e.operand(o.getBias()), e.f64(o.getEps().convertToDouble()));
        return success();
      });
  p.add<BatchNormGradOp>([](Operation *op, ArrayRef<Tensor> outs,
                            KernelEmitter &e) {
    auto o = cast<BatchNormGradOp>(op);
    e.kernel(fn::dsrt_batch_norm_grad, outs[0], outs[1], outs[2],
             e.operand(o.getInput()), e.operand(o.getWeight()),
             e.operand(o.getMean()), e.operand(o.getVar()),
             e.operand(o.getResultGrad()), e.f64(o.getEps().convertToDouble()));
    return success();
  });
  p.add<BatchNormInferenceOp>([](Operation *op, ArrayRef<Tensor> outs,
                                 KernelEmitter &e) {
    auto o = cast<BatchNormInferenceOp>(op);
    e.kernel(fn::dsrt_batch_norm_inference, outs[0], e.operand(o.getInput()),
             e.operand(o.getWeight()), e.operand(o.getBias()),
             e.operand(o.getRunningMean()), e.operand(o.getRunningVar()),
             e.f64(o.getEps().convertToDouble()));
    return success();
  });
}
