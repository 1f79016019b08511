//===- PipelineReads.h - what each pipeline chunk copies rather than receives -*- C++ -*-===//
//
// Shared by ds-pipeline-partition (which chunk each op runs in) and ds-pipeline (each rank's
// program): the ops that every chunk using them gets a copy of, instead of one chunk computing
// the value and sending it on.
//
#ifndef DS_TRANSFORMS_PIPELINEREADS_H
#define DS_TRANSFORMS_PIPELINEREADS_H

#include "ds/IR/DSOps.h"

namespace mlir::ds {

/// Constants, parameter reads, and a parameter read widened from 16 bits (how
/// ds-mixed-precision reads a bf16 or fp16 parameter): a copy costs a read or a conversion
/// where a send would move the whole tensor, and keeps each parameter on the ranks that use it.
inline bool isCopiedToEachChunk(Operation *op) {
  if (isa<ConstantOp, GetParameterOp>(op))
    return true;
  auto convert = dyn_cast<ConvertOp>(op);
  return convert && convert.getInput().getDefiningOp<GetParameterOp>();
}

} // namespace mlir::ds

#endif
