//===- PipelineOptimizer.h - @optimizer_step split over pipeline ranks -*- C++ -*-===//
#ifndef DS_TRANSFORMS_PIPELINEOPTIMIZER_H
#define DS_TRANSFORMS_PIPELINEOPTIMIZER_H

#include "mlir/IR/BuiltinOps.h"

namespace mlir::ds {

/// On a module that ds-pipeline made into per-rank programs: replaces @optimizer_step by
/// @optimizer_step_R, rank R's update of the parameters it holds, with the transfers that
/// clipping's norm and tied parameters' gradients need (PipelineOptimizer.cpp). Does nothing
/// on other modules.
LogicalResult splitOptimizerForPipeline(ModuleOp module);

} // namespace mlir::ds

#endif
