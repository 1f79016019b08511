//===- FitBudget.cpp - ds-opt --device-memory: recomputation and offload ----===//
//
// A plan over the device budget is made to fit by the cheapest mix the compiler knows of:
// recomputation first (it costs FLOPs and no memory elsewhere), then the optimizer state on
// the host, then the parameters too (stage 3), each also with recomputation. Every candidate
// is compiled and its exact plan read; the first that fits is kept, and what it costs is said.
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
  bool recompute, optimizer, param;
};

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
  auto micro = step.lookupSymbol<func::FuncOp>("micro_step");
  if (!micro)
    return 0;
  int64_t flops = 0;
  micro.walk([&](CostOpInterface c) {
    if (c->hasAttr(kRecomputeAttrName))
      flops += c.getFlops();
  });
  return flops * gradientAccumulationSteps(step);
}

FailureOr<OwningOpRef<ModuleOp>> mlir::ds::fitDeviceMemory(ModuleOp imported,
                                                          ::ds::DeepSpeedConfig &config,
                                                          uint64_t budget,
                                                          llvm::raw_ostream &note) {
  const bool offloadable = !config.precision.mixed() && config.pipeline.stages == 1 &&
                           config.tensorParallelSize == 1 && config.sequenceParallelSize == 1 &&
                           (config.optimizer.type == ::ds::OptimizerKind::adam ||
                            config.optimizer.type == ::ds::OptimizerKind::adamw);
  const bool recomputable = config.pipeline.stages == 1;
  const Candidate candidates[] = {
      {"as configured", false, false, false},
      {"activation checkpointing", true, false, false},
      {"zero_optimization.offload_optimizer {\"device\": \"cpu\"}", false, true, false},
      {"activation checkpointing + offload_optimizer cpu", true, true, false},
      {"offload_optimizer + offload_param cpu", false, true, true},
      {"activation checkpointing + offload_optimizer + offload_param cpu", true, true, true}};
  int64_t basePeak = -1, bestPeak = -1;
  for (const Candidate &c : candidates) {
    ::ds::DeepSpeedConfig cfg = config;
    if (c.recompute) {
      if (!recomputable || cfg.checkpointing.enabled)
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
    if (basePeak < 0)
      basePeak = peak;
    bestPeak = bestPeak < 0 ? peak : std::min(bestPeak, peak);
    if (peak > static_cast<int64_t>(budget))
      continue;
    if (&c != &candidates[0]) {
      note << "ds-opt: --device-memory " << budget << ": the plan as configured needs "
           << basePeak << " bytes; chose " << c.what << ": " << peak << " bytes";
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
                              << "that recomputation and offload reach is " << bestPeak
                              << "; raise the budget, lower train_micro_batch_size_per_gpu, or "
                                 "shard over more ranks (zero_optimization.stage, --world-size)";
}
