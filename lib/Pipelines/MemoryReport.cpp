//===- MemoryReport.cpp - each rank's memory from the compiler's plan -------===//
//
// ds-opt --memory-report: the step's memory plan (MemoryPlan, the one ds-lower-to-runtime
// emits), its peaks split into DeepSpeed's categories on every rank of the mesh.
//
#include "ds/Pipelines/Pipelines.h"

#include "dsrt/dsrt.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Format.h"

#include <set>
#include <tuple>

using namespace mlir;
using namespace mlir::ds;

namespace {
using Row = RankMemory;
} // namespace

RankMemory mlir::ds::rankMemory(const MemoryPlan &plan, int64_t ppRank) {
  Row row;
  for (const PlannedSlot &s : plan.slots().slots()) {
    if (!s.owned() || s.space != MemorySpace::device || (ppRank >= 0 && !s.heldBy(ppRank)))
      continue;
    int64_t bytes = storedBytes(s.type);
    // The runtime's categories (the log's ranks entries).
    switch (dsrt_slot_role_category(static_cast<dsrt_slot_role>(s.role))) {
    case DSRT_CATEGORY_PARAMETERS:
      row.params += bytes;
      break;
    case DSRT_CATEGORY_GRADIENTS:
      row.grads += bytes;
      break;
    case DSRT_CATEGORY_OPTIMIZER_STATE:
      row.optim += bytes;
      break;
    case DSRT_CATEGORY_BUFFERS:
      row.buffers += bytes;
      break;
    case DSRT_CATEGORY_KV_CACHE:
      row.cache += bytes;
      break;
    case DSRT_CATEGORY_NONE:
      break;
    }
  }
  int64_t micro = plan.microPeak, opt = plan.optimizerPeak;
  int64_t microComm = plan.microCommAtPeak, optComm = plan.optimizerCommAtPeak;
  if (ppRank >= 0 && ppRank < static_cast<int64_t>(plan.ranks.size())) {
    const RankPlan &r = plan.ranks[ppRank];
    micro = r.step, opt = r.optimizer, microComm = r.stepComm, optComm = r.optimizerComm;
  }
  row.microPeak = micro >= opt;
  row.peak = std::max(micro, opt);
  row.comm = row.microPeak ? microComm : optComm;
  row.inputs = row.microPeak ? plan.inputBytes : 0;
  row.activations = row.peak - row.params - row.grads - row.optim - row.buffers - row.cache -
                    row.comm - row.inputs;
  return row;
}

namespace {
/// ds-offload's spaces: what lives off the device and what moves per step.
LogicalResult printOffload(ModuleOp module, const MemoryPlan &plan, llvm::raw_ostream &os,
                           const TierRates *rates) {
  int64_t offParams = 0, offGrads = 0, offOptim = 0;
  for (const PlannedSlot &s : plan.slots().slots()) {
    if (s.space == MemorySpace::device)
      continue;
    int64_t bytes = storedBytes(s.type);
    switch (dsrt_slot_role_category(static_cast<dsrt_slot_role>(s.role))) {
    case DSRT_CATEGORY_PARAMETERS:
      offParams += bytes;
      break;
    case DSRT_CATEGORY_GRADIENTS:
      offGrads += bytes;
      break;
    case DSRT_CATEGORY_OPTIMIZER_STATE:
    case DSRT_CATEGORY_BUFFERS:
    case DSRT_CATEGORY_KV_CACHE:
    case DSRT_CATEGORY_NONE:
      offOptim += bytes;
      break;
    }
  }
  os << "offloaded per rank (bytes): parameters " << offParams << ", gradients " << offGrads
     << ", optimizer " << offOptim << "; host peak " << plan.hostPeak
     << " (offloaded state in host memory " << plan.hostPersistent
     << ", the rest staging and the host optimizer's work), NVMe " << plan.nvmePersistent
     << "\n";
  const MovedBytes &m = plan.movedPerStep;
  os << "moved per rank and step (bytes): device->host " << m[DSRT_MOVE_DEVICE_TO_HOST]
     << ", host->device " << m[DSRT_MOVE_HOST_TO_DEVICE] << ", host->NVMe "
     << m[DSRT_MOVE_HOST_TO_NVME] << ", NVMe->host " << m[DSRT_MOVE_NVME_TO_HOST] << "\n";
  if (!rates) {
    os << "(pass --rates to predict the stall; ds-run --probe-bandwidth DIR measures them)\n";
    return success();
  }
  FailureOr<StallPrediction> p = predictStall(module, *rates);
  if (failed(p))
    return failure();
  os << llvm::format("predicted per step at --rates: compute %.1f ms, transfers %.1f ms, "
                     "stall %.1f ms (compute waiting on a move)\n",
                     p->computeSeconds * 1e3, p->transferSeconds * 1e3, p->stallSeconds * 1e3);
  return success();
}

/// The parameters that each rank holds only a part of (ds-tensor-parallel).
void printSplits(const MemoryPlan &plan, llvm::raw_ostream &os) {
  bool header = false;
  for (const PlannedSlot &s : plan.slots().slots()) {
    if (s.splitDim < 0)
      continue;
    if (!header)
      os << "split parameters (each rank holds its part):\n";
    header = true;
    std::string local, whole;
    for (auto [i, d] : llvm::enumerate(s.type.getShape())) {
      local += (i ? "x" : "") + std::to_string(d);
      whole += (i ? "x" : "") +
               std::to_string(static_cast<int64_t>(i) == s.splitDim ? d * s.splitParts : d);
    }
    os << "  " << s.name << ": " << local << " of " << whole << ", dimension " << s.splitDim
       << " over " << s.splitAxis;
    if (s.splitSegments > 1)
      os << " in " << s.splitSegments << " segments";
    if (!s.splitSizes.empty()) {
      os << " of ";
      llvm::interleave(s.splitSizes, os, ", ");
      os << " rows";
    }
    os << "\n";
  }
}
} // namespace

LogicalResult mlir::ds::printMemoryReport(ModuleOp module, llvm::raw_ostream &os,
                                          const TierRates *rates) {
  bool pipelined =
      module.lookupSymbol(pipelineStepName(0)) && module.lookupSymbol(optimizerStepName(0));
  if (!pipelined &&
      (!module.lookupSymbol(kMicroStepName) || !module.lookupSymbol(kOptimizerStepName)))
    return module.emitError() << "--memory-report needs a training step (@micro_step and "
                                 "@optimizer_step): pass --config to a TorchScript input";
  FailureOr<PlannedStep> planned = planStep(module);
  if (failed(planned))
    return failure();
  const MemoryPlan &plan = planned->plan;
  const bool pipe = plan.ppAxis >= 0;
  Row whole = rankMemory(plan, -1);

  auto run = module->getAttrOfType<RunAttr>(kRunAttrName);
  int64_t stage = run ? run.getZeroStage() : 0;
  // The mesh: every rank and its coordinate (row-major, the last axis fastest).
  SmallVector<std::string> axes;
  SmallVector<int64_t> shape;
  if (auto mesh = module->getAttrOfType<MeshAttr>(kMeshAttrName)) {
    for (StringAttr a : mesh.getAxes())
      axes.push_back(a.getValue().str());
    shape.assign(mesh.getShape().begin(), mesh.getShape().end());
  }
  int64_t ranks = 1;
  std::string meshText;
  for (auto [i, a] : llvm::enumerate(axes)) {
    ranks *= shape[i];
    meshText += (i ? " x " : "") + a + "=" + std::to_string(shape[i]);
  }
  os << "memory plan per rank (bytes; ZeRO stage " << stage << ", " << ranks << " rank"
     << (ranks == 1 ? "" : "s");
  if (axes.size() > 1)
    os << ", mesh " << meshText;
  if (pipe)
    os << ", " << plan.pipelineMicroBatches << " micro-batches per step in each rank's "
       << stringifyPipelineSchedule(plan.pipelineSchedule) << " program";
  else
    os << ", peak in " << (whole.microPeak ? kMicroStepName : kOptimizerStepName);
  os << ")\n";
  // Columns only ever get added at the end, so that scripts reading them keep working.
  os << llvm::format("%-5s %14s %14s %14s %14s %14s %14s %14s %14s  %s\n", "rank", "parameters",
                     "gradients", "optimizer", "activations", "inputs", "communication",
                     "peak", "buffers", "mesh");
  // Every rank runs the same program (ds-verify-collectives) on parts of the same sizes, so
  // every rank has this plan; on a pipeline, its stage's (the coordinate's pp). Past
  // kMaxRankRows ranks, one row stands for each stage's (or every) rank: its first.
  constexpr int64_t kMaxRankRows = 64;
  bool fold = ranks > kMaxRankRows;
  int64_t alike = pipe ? ranks / plan.pipelineStages : ranks;
  std::set<int64_t> shown; // the stages printed, when folded
  Row fullest;
  int64_t fullestRank = -1;
  for (int64_t r = 0; r < ranks; ++r) {
    std::string coord;
    int64_t rest = r, pp = -1;
    for (size_t i = axes.size(); i-- > 0;) {
      coord = axes[i] + std::to_string(rest % shape[i]) + (coord.empty() ? "" : ",") + coord;
      if (static_cast<int64_t>(i) == plan.ppAxis)
        pp = rest % shape[i];
      rest /= shape[i];
    }
    Row row = pipe ? rankMemory(plan, pp) : whole;
    auto states = [](const Row &x) { return x.params + x.grads + x.optim; };
    if (fullestRank < 0 || states(row) > states(fullest))
      std::tie(fullest, fullestRank) = std::make_pair(row, r);
    if (fold && !shown.insert(pp).second)
      continue;
    if (fold)
      coord += " (and the " + std::to_string(alike - 1) + " other ranks" +
               (pipe ? " of stage " + std::to_string(pp) : "") + ", alike)";
    os << llvm::format("%-5lld %14lld %14lld %14lld %14lld %14lld %14lld %14lld %14lld  %s\n",
                       (long long)r, (long long)row.params, (long long)row.grads,
                       (long long)row.optim, (long long)row.activations, (long long)row.inputs,
                       (long long)row.comm, (long long)row.peak, (long long)row.buffers,
                       coord.c_str());
  }
  // ZeRO's measure: the model states (parameters, gradients, optimizer state) of the fullest
  // rank, in GB (1e9 bytes, as the ZeRO paper counts them).
  auto gb = [](int64_t bytes) { return static_cast<double>(bytes) / 1e9; };
  os << llvm::format("model states per rank (GB = 1e9 bytes): %.3g (parameters %.3g, "
                     "gradients %.3g, optimizer %.3g)",
                     gb(fullest.params + fullest.grads + fullest.optim), gb(fullest.params),
                     gb(fullest.grads), gb(fullest.optim));
  if (pipe)
    os << " on rank " << fullestRank << ", the fullest";
  os << "\n";
  // What a long sequence is bounded by: the activations per token of the micro-batch (the
  // first integer input of rank >= 2 is [batch, sequence, ...]).
  if (auto micro = module.lookupSymbol<func::FuncOp>(kMicroStepName); micro && !pipe) {
    for (Type t : micro.getArgumentTypes()) {
      auto rt = dyn_cast<RankedTensorType>(t);
      if (!rt || rt.getRank() < 2 || !isa<IntegerType>(rt.getElementType()))
        continue;
      int64_t tokens = rt.getShape()[0] * rt.getShape()[1];
      if (tokens > 0)
        os << "activations per token: " << whole.activations / tokens << " bytes ("
           << tokens << " tokens a micro-batch)\n";
      break;
    }
  }
  // ds-activation-checkpoint's cost.
  if (int64_t flops = recomputedFlops(module))
    os << "recomputed per rank and step (activation checkpointing): " << flops << " FLOPs\n";
  if (plan.hostPeak || plan.nvmePersistent) {
    if (failed(printOffload(module, plan, os, rates)))
      return failure();
  } else if (!plan.offloaded) {
    const Offloadable &off = plan.offloadable;
    bool any = false;
    for (auto [on, bytes, label] :
         {std::tuple{off.optimizerKey, off.optimizer, "offload_optimizer"},
          std::tuple{off.paramKey, off.param, "offload_param"}})
      if (on && bytes) {
        os << (any ? ", " : "offloadable per rank (bytes): ") << label << " " << bytes;
        any = true;
      }
    if (any)
      os << "\n";
  }
  printSplits(plan, os);
  return success();
}
