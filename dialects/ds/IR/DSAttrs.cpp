//===- DSAttrs.cpp - verifiers of the mesh, sharding and run attributes ----===//
#include "ds/IR/DSDialect.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/JSON.h"

using namespace mlir;
using namespace mlir::ds;

LogicalResult MeshAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               ArrayRef<StringAttr> axes, ArrayRef<int64_t> shape) {
  if (axes.size() != shape.size())
    return emitError() << "mesh has " << axes.size() << " axes but " << shape.size()
                       << " sizes";
  llvm::StringSet<> seen;
  for (auto [name, size] : llvm::zip(axes, shape)) {
    if (name.getValue().empty())
      return emitError() << "mesh axis names must not be empty";
    if (!symbolizeMeshAxis(name.getValue()))
      return emitError() << "mesh axis '" << name.getValue()
                         << "' is not a role: name axes dp, pp, tp, sp or ep";
    if (!seen.insert(name.getValue()).second)
      return emitError() << "mesh axis '" << name.getValue() << "' appears twice";
    if (size < 1)
      return emitError() << "mesh axis '" << name.getValue() << "' has size " << size
                         << "; sizes must be >= 1";
  }
  return success();
}

int64_t MeshAttr::getNumRanks() const {
  int64_t n = 1;
  for (int64_t s : getShape())
    n *= s;
  return n;
}

int64_t MeshAttr::findAxis(StringRef name) const {
  for (auto [i, axis] : llvm::enumerate(getAxes()))
    if (axis.getValue() == name)
      return i;
  return -1;
}

int64_t MeshAttr::findAxis(MeshAxis role) const { return findAxis(stringifyMeshAxis(role)); }

int64_t MeshAttr::getSize(MeshAxis role) const {
  int64_t i = findAxis(role);
  return i < 0 ? 1 : getShape()[i];
}

std::string MeshAttr::str() const {
  std::string s;
  for (auto [i, axis] : llvm::enumerate(getAxes()))
    s += (i ? " x " : "") + axis.getValue().str() + "=" + std::to_string(getShape()[i]);
  return s;
}

LogicalResult ShardingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   ArrayAttr dims, ArrayRef<int64_t> segments,
                                   ArrayRef<int64_t> sizes) {
  if (!segments.empty() && segments.size() != dims.size())
    return emitError() << "sharding has " << segments.size() << " segment counts for "
                       << dims.size() << " dimensions";
  for (int64_t s : segments)
    if (s < 1)
      return emitError() << "sharding segment counts must be >= 1, not " << s;
  if (!sizes.empty()) {
    auto several = llvm::count_if(segments, [](int64_t s) { return s > 1; });
    int64_t count = several == 1 ? *llvm::find_if(segments, [](int64_t s) { return s > 1; }) : 0;
    if (count != static_cast<int64_t>(sizes.size()))
      return emitError() << "sharding segment sizes need one dimension of several segments, "
                            "one size each";
    for (int64_t s : sizes)
      if (s < 1)
        return emitError() << "sharding segment sizes must be >= 1, not " << s;
  }
  llvm::StringSet<> seen;
  for (Attribute dim : dims) {
    auto axes = dyn_cast<ArrayAttr>(dim);
    if (!axes)
      return emitError() << "each sharding entry must be a list of mesh axis names";
    for (Attribute axis : axes) {
      auto name = dyn_cast<StringAttr>(axis);
      if (!name || name.getValue().empty())
        return emitError() << "mesh axis names in a sharding must be non-empty strings";
      if (!seen.insert(name.getValue()).second)
        return emitError() << "mesh axis '" << name.getValue()
                           << "' shards more than one dimension";
    }
  }
  return success();
}

LogicalResult LossScalerAttr::verify(function_ref<InFlightDiagnostic()> emitError, bool dynamic,
                                     APFloat scale, int64_t window, int64_t hysteresis,
                                     bool consecutiveHysteresis, APFloat minScale) {
  if (!(scale.convertToDouble() > 0) || !(minScale.convertToDouble() > 0))
    return emitError() << "the loss scale and its minimum must be positive";
  if (window < 1 || hysteresis < 1)
    return emitError() << "the loss scale window and hysteresis must be >= 1";
  return success();
}

LogicalResult NvmeAttr::verify(function_ref<InFlightDiagnostic()> emitError, StringRef path,
                               int64_t blockSize, int64_t queueDepth, bool singleSubmit) {
  if (path.empty())
    return emitError() << "the NVMe tier needs a directory (nvme_path)";
  if (blockSize < 4096 || queueDepth < 1)
    return emitError() << "the NVMe tier's block_size must be >= 4096 and queue_depth >= 1";
  return success();
}

LogicalResult ZeroAttr::verify(function_ref<InFlightDiagnostic()> emitError, int64_t stage) {
  if (stage < 0 || stage > 3)
    return emitError() << "ZeRO stage " << stage << " is not 0, 1, 2 or 3";
  return success();
}

LogicalResult PipelineAttr::verify(function_ref<InFlightDiagnostic()> emitError, int64_t stages,
                                   int64_t virtualStages, PipelineScheduleAttr schedule,
                                   int64_t microBatches, DenseI64ArrayAttr phaseFlops) {
  if (stages < 1 || virtualStages < 1)
    return emitError() << "pipeline stages (" << stages << ") and virtual_stages ("
                       << virtualStages << ") must be >= 1";
  if (!schedule) {
    if (microBatches != 0 || phaseFlops)
      return emitError() << "micro_batches and phase_flops come with the schedule (ds-pipeline "
                            "sets them together)";
    return success();
  }
  if (microBatches < 1)
    return emitError() << "a scheduled pipeline needs micro_batches >= 1";
  if (!phaseFlops || phaseFlops.size() != 2 * stages * virtualStages)
    return emitError() << "phase_flops needs " << 2 * stages * virtualStages
                       << " entries (a forward and a backward per chunk)";
  return success();
}

LogicalResult RunAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                              int64_t trainBatchSize, int64_t microBatchSize,
                              int64_t gradientAccumulationSteps, int64_t dataParallelSize,
                              int64_t stepsPerPrint, int64_t seed, Precision precision,
                              int64_t zeroStage, int64_t persistenceThreshold,
                              OptimizerKind optimizer, APFloat lr, APFloat auxLr, APFloat beta1,
                              LRScheduleAttr schedule, LossScalerAttr lossScaler, NvmeAttr nvme,
                              StringRef deepspeed, StringRef numbers) {
  if (microBatchSize < 1 || gradientAccumulationSteps < 1 || dataParallelSize < 1 ||
      trainBatchSize != microBatchSize * gradientAccumulationSteps * dataParallelSize)
    return emitError() << "train_batch_size " << trainBatchSize << " must be micro_batch_size "
                       << microBatchSize << " x gradient_accumulation_steps "
                       << gradientAccumulationSteps << " x data_parallel_size "
                       << dataParallelSize << " (all >= 1)";
  if (stepsPerPrint < 0 || seed < 0 || persistenceThreshold < 0)
    return emitError() << "steps_per_print, seed and param_persistence_threshold must be >= 0";
  if (zeroStage < 0 || zeroStage > 3)
    return emitError() << "zero_stage must be 0, 1, 2 or 3";
  if (!schedule)
    return emitError() << "needs a schedule (kind = constant without a scheduler)";
  if (static_cast<bool>(lossScaler) != (precision == Precision::fp16))
    return emitError() << "has a loss scaler exactly when the precision is fp16";
  for (auto [what, text] : {std::pair{"deepspeed", deepspeed}, std::pair{"numbers", numbers}}) {
    llvm::Expected<llvm::json::Value> v = llvm::json::parse(text);
    if (!v) {
      llvm::consumeError(v.takeError());
      return emitError() << "'" << what << "' is not JSON";
    }
    if (!v->getAsObject())
      return emitError() << "'" << what << "' must be a JSON object";
  }
  return success();
}
