//===- FitBudget.cpp - ds-opt --device-memory: tiling, recomputation, offload ===//
//
// A plan over the device budget is made to fit by the cheapest mix the compiler knows of:
// sequence tiling first ("auto" tiles of the MLPs and of the LM head's loss: each tile
// recomputed once), then recomputation of whole segments (it costs FLOPs and no memory
// elsewhere), both together, then the optimizer state on the host, then the parameters too
// (stage 3), each also with recomputation and tiling. Every candidate is compiled and its
// exact plan read; the first that fits is kept, and what it costs is said.
//
//===----------------------------------------------------------------------===//
#include "ds/Pipelines/Pipelines.h"

#include "ds/IR/DSDialect.h"
#include "ds/IR/DSOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

using namespace mlir;
using namespace mlir::ds;

namespace {
struct Candidate {
  const char *what;
  bool tile, recompute, optimizer, param;
};

/// What sequence tiling cut in a built step: the MLP tiles (slices marked as tiles) and the
/// tiles of the LM head's loss (ds.linear_cross_entropy's count), in @micro_step.
std::pair<int64_t, int64_t> tilesOf(ModuleOp step) {
  int64_t mlp = 0, loss = 0;
  if (auto micro = step.lookupSymbol<func::FuncOp>(kMicroStepName))
    micro.walk([&](Operation *op) {
      if (isa<SliceOp>(op) && op->hasAttr(kTileAttrName) && !op->hasAttr(kRecomputeAttrName))
        ++mlp;
      if (auto lce = dyn_cast<LinearCrossEntropyOp>(op))
        loss += lce.getTiles();
    });
  return {mlp, loss};
}

/// The device peak, and the bytes moved per step, of a built step's plan.
FailureOr<std::pair<int64_t, int64_t>> planOf(ModuleOp step) {
  FailureOr<PlannedStep> planned = planStep(step);
  if (failed(planned))
    return failure();
  const MemoryPlan &plan = planned->plan;
  int64_t moved = 0;
  for (int64_t bytes : plan.movedPerStep)
    moved += bytes;
  return std::make_pair(plan.peakBytes(), moved);
}
} // namespace

int64_t mlir::ds::recomputedFlops(ModuleOp step) {
  auto recomputed = [](func::FuncOp f) {
    int64_t flops = 0;
    f.walk([&](CostOpInterface c) {
      if (c->hasAttr(kRecomputeAttrName))
        flops += c.getFlops();
    });
    return flops;
  };
  if (auto micro = step.lookupSymbol<func::FuncOp>(kMicroStepName))
    return recomputed(micro) * gradientAccumulationSteps(step);
  // A pipeline rank's program holds every micro-batch: the rank that recomputes the most.
  int64_t most = 0;
  if (PipelineAttr info = getPipeline(step))
    for (int64_t r = 0; r < info.getStages(); ++r)
      if (auto f = step.lookupSymbol<func::FuncOp>(pipelineStepName(r)))
        most = std::max(most, recomputed(f));
  return most;
}

FailureOr<OwningOpRef<ModuleOp>> mlir::ds::fitDeviceMemory(ModuleOp imported,
                                                          ::ds::DeepSpeedConfig &config,
                                                          uint64_t budget,
                                                          llvm::raw_ostream &note) {
  const bool offloadable = !config.precision.mixed() && config.pipeline.stages == 1 &&
                           config.tensorParallelSize == 1 && config.sequenceParallelSize == 1 &&
                           (config.optimizer.type == ::ds::OptimizerKind::adam ||
                            config.optimizer.type == ::ds::OptimizerKind::adamw);
  // Tiling candidates only where the config leaves both counts at 1 (none asked for).
  const bool tileable = config.lossTiles == 1 && config.mlpTiles == 1;
  const Candidate candidates[] = {
      {"as configured", false, false, false, false},
      {"sequence_tiling auto", true, false, false, false},
      {"activation checkpointing", false, true, false, false},
      {"sequence_tiling auto + activation checkpointing", true, true, false, false},
      {"zero_optimization.offload_optimizer {\"device\": \"cpu\"}", false, false, true, false},
      {"activation checkpointing + offload_optimizer cpu", false, true, true, false},
      {"sequence_tiling auto + activation checkpointing + offload_optimizer cpu", true, true,
       true, false},
      {"offload_optimizer + offload_param cpu", false, false, true, true},
      {"activation checkpointing + offload_optimizer + offload_param cpu", false, true, true,
       true},
      {"sequence_tiling auto + activation checkpointing + offload_optimizer + offload_param "
       "cpu",
       true, true, true, true}};
  int64_t basePeak = -1, bestPeak = -1;
  for (const Candidate &c : candidates) {
    ::ds::DeepSpeedConfig cfg = config;
    if (c.tile) {
      if (!tileable)
        continue;
      cfg.lossTiles = cfg.mlpTiles = 0;
    }
    if (c.recompute) {
      if (cfg.checkpointing.enabled)
        continue;
      cfg.checkpointing.enabled = true;
    }
    if (c.optimizer) {
      if (!offloadable || cfg.zero.stage == 0 || cfg.zero.offloadOptimizer.on())
        continue;
      cfg.zero.offloadOptimizer.device = ::ds::OffloadDevice::cpu;
    }
    if (c.param) {
      if (cfg.zero.stage != 3 || cfg.zero.offloadParam.on())
        continue;
      cfg.zero.offloadParam.device = ::ds::OffloadDevice::cpu;
    }
    OwningOpRef<ModuleOp> step = imported.clone();
    if (failed(buildTrainingStep(*step, cfg)))
      return failure();
    FailureOr<std::pair<int64_t, int64_t>> plan = planOf(*step);
    if (failed(plan))
      return imported.emitError() << "--device-memory: the plan of the step " << c.what
                                  << " could not be read";
    int64_t peak = plan->first;
    std::pair<int64_t, int64_t> tiles = tilesOf(*step);
    if (c.tile && tiles.first == 0 && tiles.second == 0)
      continue; // "auto" found nothing to tile: the candidate without tiling is the same
    if (basePeak < 0)
      basePeak = peak;
    bestPeak = bestPeak < 0 ? peak : std::min(bestPeak, peak);
    if (peak > static_cast<int64_t>(budget))
      continue;
    if (&c != &candidates[0]) {
      note << "ds-opt: --device-memory " << budget << ": the plan as configured needs "
           << basePeak << " bytes; chose " << c.what << ": " << peak << " bytes";
      if (c.tile)
        note << ", " << tiles.first << " MLP tiles and " << tiles.second
             << " loss tiles in all (each recomputed for its gradient)";
      if (c.recompute)
        note << ", recomputing " << recomputedFlops(*step) << " FLOPs per step";
      if (c.optimizer)
        note << ", moving " << plan->second << " bytes per step between device and host";
      note << " (recorded in the program's config)\n";
    }
    config = cfg;
    return step;
  }
  return imported.emitError() << "--device-memory " << budget << ": no plan fits: as "
                              << "configured it needs " << basePeak << " bytes and the least "
                              << "that tiling, recomputation and offload reach is " << bestPeak
                              << "; raise the budget, lower train_micro_batch_size_per_gpu, or "
                                 "shard over more ranks (zero_optimization.stage, --world-size)";
}
