//===- LinearAlgebra.cpp - kernel patterns: matmul, linear layers, embeddings
//----===//
#include "RuntimeLowering.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::runtime;

void mlir::ds::runtime::populateLinearAlgebraKernels(KernelPatterns &p) {
  p.add<MatmulOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    // A transpose of the last two dims folds into the kernel's transpose flag.
    auto o = cast<MatmulOp>(op);
    Value a = o.getLhs(), b = o.getRhs();
    bool ta = e.isFusedTranspose(a), tb = e.isFusedTranspose(b);
    if (ta)
      a = a.getDefiningOp<TransposeOp>().getInput();
    if (tb)
      b = b.getDefiningOp<TransposeOp>().getInput();
    e.kernel(fn::dsrt_matmul, outs[0], e.operand(a), e.operand(b), e.i32(ta),
             e.i32(tb));
    return success();
  });
  p.add<LinearOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    auto o = cast<LinearOp>(op);
    e.kernel(fn::dsrt_linear, outs[0], e.operand(o.getInput()),
             e.operand(o.getWeight()), e.operand(o.getBias()));
    return success();
  });
  p.add<LinearGradWeightOp>(
      [](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
        auto o = cast<LinearGradWeightOp>(op);
        e.kernel(fn::dsrt_linear_grad_weight, outs[0], outs[1],
                 e.operand(o.getInput()), e.operand(o.getResultGrad()));
        return success();
      });
  p.add<EmbeddingOp>(
      [](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
        auto o = cast<EmbeddingOp>(op);
        e.kernel(fn::dsrt_embedding, outs[0], e.operand(o.getWeight()),
                 e.operand(o.getIndices()));
        return success();
      });
  p.add<EmbeddingGradOp>(
      [](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
        auto o = cast<EmbeddingGradOp>(op);
        int64_t pad = o.getPaddingIdx() ? (int64_t)*o.getPaddingIdx() : -1;
        e.kernel(fn::dsrt_embedding_grad, outs[0], e.operand(o.getResultGrad()),
                 e.operand(o.getIndices()), e.i64(pad));
        return success();
      });
}
