//===- RunDescriptor.cpp - the program descriptor's "run": how the step runs --===//
//
// The step's #ds.run, written for the runtime under the descriptor's own field names (the
// attributes' parameter names): the runtime's driver reads these and no DeepSpeed key.
//
#include "RunDescriptor.h"

#include "ds/Config/DeepSpeedConfig.h"



using namespace mlir;
using namespace mlir::ds;

namespace {
double f64(const APFloat &v) { return v.convertToDouble(); }

llvm::json::Object scheduleOf(RunAttr run) {
  LRScheduleAttr s = run.getSchedule();
  return llvm::json::Object{
      {"base", f64(run.getLr())},
      {"aux_base", f64(run.getAuxLr())},
      {"beta1", f64(run.getBeta1())},
      {"kind", stringifyLRSchedule(s.getKind())},
      {"warmup_from", f64(s.getWarmupMinLr())},
      {"warmup_to", f64(s.getWarmupMaxLr())},
      {"warmup_steps", s.getWarmupNumSteps()},
      {"warmup_linear", s.getWarmupLinear()},
      {"total_steps", s.getTotalNumSteps()},
      {"warmup_from_ratio", f64(s.getWarmupMinRatio())},
      {"cosine_floor_ratio", f64(s.getCosMinRatio())},
      {"cycle_low", f64(s.getCycleMinLr())},
      {"cycle_high", f64(s.getCycleMaxLr())},
      {"decay_rate", f64(s.getDecayLrRate())},
      {"cycle_rise_steps", f64(s.getCycleFirstStepSize())},
      {"cycle_fall_steps", f64(s.getCycleSecondStepSize())},
      {"cycle_rise_stairs", s.getCycleFirstStairCount()},
      {"cycle_fall_stairs", s.getCycleSecondStairCount()},
      {"decay_interval", f64(s.getDecayStepSize())},
      {"cycle_beta1", s.getCycleMomentum()},
      {"momentum_low", f64(s.getCycleMinMom())},
      {"momentum_high", f64(s.getCycleMaxMom())},
      {"momentum_decay_rate", f64(s.getDecayMomRate())},
      {"range_start", f64(s.getRangeTestMinLr())},
      {"range_interval", f64(s.getRangeTestStepSize())},
      {"range_rate", f64(s.getRangeTestStepRate())},
      {"range_staircase", s.getRangeTestStaircase()}};
}

/// `text` (a JSON object the attribute's verifier checked) as a value.
llvm::json::Value parsed(StringRef text) {
  llvm::Expected<llvm::json::Value> v = llvm::json::parse(text);
  if (!v) {
    llvm::consumeError(v.takeError());
    return llvm::json::Object{};
  }
  return std::move(*v);
}
} // namespace

void mlir::ds::runtime::describeRun(RunAttr run, llvm::json::Object &root) {
  llvm::json::Object r{{"global_batch", run.getTrainBatchSize()},
                       {"micro_batch", run.getMicroBatchSize()},
                       {"accumulation", run.getGradientAccumulationSteps()},
                       {"replicas", run.getDataParallelSize()},
                       {"log_every", run.getStepsPerPrint()},
                       {"rng_seed", run.getSeed()},
                       {"precision", stringifyPrecision(run.getPrecision())},
                       {"zero_stage", run.getZeroStage()},
                       {"lr", scheduleOf(run)}};
  if (LossScalerAttr s = run.getLossScaler())
    r["loss_scaler"] = llvm::json::Object{{"dynamic", s.getDynamic()},
                                          {"scale", f64(s.getScale())},
                                          {"window", s.getWindow()},
                                          {"absorbed_overflows", s.getHysteresis()},
                                          {"consecutive", s.getConsecutiveHysteresis()},
                                          {"min_scale", f64(s.getMinScale())}};
  if (NvmeAttr n = run.getNvme())
    r["nvme"] = llvm::json::Object{{"path", n.getPath()},
                                   {"request_bytes", n.getBlockSize()},
                                   {"requests_in_flight", n.getQueueDepth()},
                                   {"submit_singly", n.getSingleSubmit()}};
  root["run"] = std::move(r);
  root["config"] = parsed(run.getDeepspeed());
  root["config_precision"] = parsed(::ds::kPrecisionKeys);
  root["numeric_config"] = parsed(run.getNumbers());
}
