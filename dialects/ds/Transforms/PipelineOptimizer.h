//===- PipelineOptimizer.h - @optimizer_step split over pipeline ranks -*- C++ -*-===//
#ifndef DS_TRANSFORMS_PIPELINEOPTIMIZER_H
#define DS_TRANSFORMS_PIPELINEOPTIMIZER_H

#include "Mesh.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::ds {

/// On a module that ds-pipeline made into per-rank programs: replaces @optimizer_step by
/// @optimizer_step_R, rank R's update of the parameters it holds, with the transfers that
/// clipping's norm and tied parameters' gradients need (PipelineOptimizer.cpp). Does nothing
/// on other modules.
LogicalResult splitOptimizerForPipeline(ModuleOp module);

/// A transfer between pipeline ranks on the mesh's pp axis (ds-pipeline's and the update's):
/// `x` sent to pp rank `to`, and a value of `type` received from pp rank `from` (scalars
/// travel as one-element tensors).
void emitPipelineSend(OpBuilder &b, const MeshAxisRef &pp, Value x, int64_t to);
Value emitPipelineRecv(OpBuilder &b, const MeshAxisRef &pp, Type type, int64_t from,
                       Location loc);

} // namespace mlir::ds

#endif
