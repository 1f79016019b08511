//===- RunConfig.cpp - a DeepSpeed config as the step's #ds.run -------------===//
//
// What the training loop needs from the user's config, resolved once here into the typed
// attribute that ds-lower-to-runtime turns into the program's descriptor.
//
#include "ds/Pipelines/Pipelines.h"

#include "../Conversion/DSToRuntime/RunDescriptor.h"
#include "ds/IR/DSDialect.h"

#include "mlir/IR/MLIRContext.h"

using namespace mlir;
using namespace mlir::ds;

namespace {
APFloat f64(double v) { return APFloat(v); }

LRScheduleAttr scheduleOf(MLIRContext *ctx, const ::ds::SchedulerConfig &s) {
  return LRScheduleAttr::get(
      ctx, s.type, f64(s.warmupMinLr), f64(s.warmupMaxLr), s.warmupNumSteps, s.warmupLinear,
      s.totalNumSteps, f64(s.warmupMinRatio), f64(s.cosMinRatio), f64(s.cycleMinLr),
      f64(s.cycleMaxLr), f64(s.decayLrRate), f64(s.cycleFirstStepSize),
      f64(s.cycleSecondStepSize), s.cycleFirstStairCount, s.cycleSecondStairCount,
      f64(s.decayStepSize), s.cycleMomentum, f64(s.cycleMinMom), f64(s.cycleMaxMom),
      f64(s.decayMomRate), f64(s.lrRangeTestMinLr), f64(s.lrRangeTestStepSize),
      f64(s.lrRangeTestStepRate), s.lrRangeTestStaircase);
}

LossScalerAttr lossScalerOf(MLIRContext *ctx, const ::ds::PrecisionConfig &p) {
  if (p.dtype != Precision::fp16)
    return {};
  bool dynamic = p.lossScale == 0;
  double scale = dynamic ? std::ldexp(1.0, static_cast<int>(p.initialScalePower)) : p.lossScale;
  return LossScalerAttr::get(ctx, dynamic, f64(scale), p.lossScaleWindow, p.hysteresis,
                             p.consecutiveHysteresis, f64(p.minLossScale));
}

/// The NVMe tier: offload_param's or offload_optimizer's directory (the parser makes them
/// agree when both are on NVMe) and the aio block.
NvmeAttr nvmeOf(MLIRContext *ctx, const ::ds::DeepSpeedConfig &c) {
  for (const ::ds::OffloadConfig *o : {&c.zero.offloadParam, &c.zero.offloadOptimizer})
    if (o->device == OffloadDevice::nvme)
      return NvmeAttr::get(ctx, o->nvmePath, c.aio.blockSize, c.aio.queueDepth,
                           c.aio.singleSubmit);
  return {};
}
} // namespace

RunAttr mlir::ds::runAttrOf(MLIRContext *ctx, const ::ds::DeepSpeedConfig &c) {
  const ::ds::OptimizerConfig &o = c.optimizer;
  // Muon's AdamW group has its own lr; every other optimizer has one group.
  double auxLr = o.type == OptimizerKind::muon ? o.auxLr : o.lr;
  return RunAttr::get(ctx, c.trainBatchSize, c.microBatchSize, c.gradientAccumulationSteps,
                      c.worldSize, c.stepsPerPrint, static_cast<int64_t>(c.seed),
                      c.precision.dtype, c.zero.stage, c.zero.paramPersistenceThreshold, o.type,
                      f64(o.lr), f64(auxLr), f64(o.beta1),
                      scheduleOf(ctx, c.scheduler), lossScalerOf(ctx, c.precision),
                      nvmeOf(ctx, c), c.checkJSON(), c.numericJSON());
}

std::string mlir::ds::describeRun(const ::ds::DeepSpeedConfig &config) {
  MLIRContext ctx;
  ctx.loadDialect<DSDialect>();
  llvm::json::Object root;
  runtime::describeRun(runAttrOf(&ctx, config), root);
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::json::Value(std::move(*root.get("run")));
  return text;
}
