//===- DataMovement.cpp - kernel patterns: transpose, broadcast, slices, concat ---===//
//
// (Reshapes, contiguous 1-D slices and parameter reads are views, and insert_slice writes in
// place when it can: MemoryPatterns.cpp.)
//
#include "RuntimeLowering.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::runtime;

void mlir::ds::runtime::populateDataMovementKernels(KernelPatterns &p) {
  p.add<TransposeOp>(
      [](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
        auto o = cast<TransposeOp>(op);
        e.kernel(fn::dsrt_transpose, outs[0], e.operand(o.getInput()),
                 e.i64Array(o.getPermutation()));
        return success();
      });
  p.add<BroadcastToOp>(
      [](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
        e.kernel(fn::dsrt_broadcast, outs[0],
                 e.operand(cast<BroadcastToOp>(op).getInput()));
        return success();
      });
  p.add<SliceOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    auto o = cast<SliceOp>(op);
    e.kernel(fn::dsrt_slice, outs[0], e.operand(o.getInput()),
             e.i64(o.getDim()), e.i64(o.getStart()), e.i64(o.getStep()));
    return success();
  });
  p.add<ConcatOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    // Each input into its place along the dim.
    auto o = cast<ConcatOp>(op);
    int64_t offset = 0;
    for (Value in : o.getInputs()) {
      e.kernel(fn::dsrt_insert_slice, outs[0], e.operand(in), e.i64(o.getDim()),
               e.i64(offset), e.i64(1));
      offset += cast<RankedTensorType>(in.getType()).getShape()[o.getDim()];
    }
    return success();
  });
}
