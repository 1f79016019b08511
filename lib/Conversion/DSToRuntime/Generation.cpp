//===- Generation.cpp - kernel patterns: attention against the paged cache, token choice ---===//
//
// Generation's ops that are kernels. ds.cache_write, an in-place update of the cache, is
// lowered with the other in-place updates (MemoryPatterns.cpp).
//
#include "RuntimeLowering.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::runtime;

void mlir::ds::runtime::populateGenerationKernels(KernelPatterns &p) {
  p.add<PagedAttentionOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    auto o = cast<PagedAttentionOp>(op);
    e.kernel(fn::dsrt_paged_attention, outs[0], e.operand(o.getQuery()), e.operand(o.getKCache()),
             e.operand(o.getVCache()), e.operand(o.getPages()), e.operand(o.getContextLens()),
             e.operand(o.getQLens()), e.f64(o.getScale().convertToDouble()));
    return success();
  });
  p.add<SampleOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    auto o = cast<SampleOp>(op);
    e.kernel(fn::dsrt_sample, outs[0], e.operand(o.getLogits()), e.operand(o.getTemperature()),
             e.operand(o.getTopK()), e.operand(o.getTopP()), e.operand(o.getSeeds()),
             e.operand(o.getSteps()));
    return success();
  });
}
