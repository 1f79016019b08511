//===- ProgramDescriptor.cpp - ds_metadata: what the driver knows of a program ---===//
//
// The compiled program describes itself to the driver in one JSON document, returned by
// ds_metadata: its inputs, trace sites and slots (the SlotTable), the memory plan's figures
// (the MemoryPlan: peaks, parts, largest buffers, what offload would move, each pipeline
// rank's), how the step runs (#ds.run, RunDescriptor.cpp) and the mesh it joins.
//
#include "RunDescriptor.h"
#include "RuntimeLowering.h"

#include "ds/Config/DeepSpeedConfig.h"

#include "llvm/Support/JSON.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::runtime;

namespace {
const char *dtypeName(Type element) { return dsrt_dtype_name(dtypeCodeOf(element)); }

llvm::json::Array describeInputs(
    ArrayRef<std::pair<std::string, RankedTensorType>> named) {
  llvm::json::Array inputs;
  for (auto &[name, type] : named)
    inputs.push_back(llvm::json::Object{{"name", name},
                                        {"dtype", dtypeName(type.getElementType())},
                                        {"dims", llvm::json::Array(type.getShape())}});
  return inputs;
}

llvm::json::Array describeSlots(const SlotTable &slots) {
  llvm::json::Array out;
  for (const PlannedSlot &s : slots.slots()) {
    llvm::json::Object o{{"name", s.name},
                         {"role", stringifySlotRole(s.role)},
                         {"dtype", dtypeName(s.type.getElementType())},
                         {"dims", llvm::json::Array(s.type.getShape())}};
    if (!s.aliases.empty())
      o["aliases"] = llvm::json::Array(s.aliases);
    if (!s.of.empty())
      o["of"] = s.of;
    if (s.viewOf >= 0) {
      o["view_of"] = slots[s.viewOf].name;
      o["offset"] = s.offset;
    }
    if (s.shardOf >= 0) {
      o["sharded_by"] = slots[s.shardOf].name;
      o["offset"] = s.offset;
    }
    if (s.sharded)
      o["sharded"] = true;
    if (s.splitDim >= 0) {
      llvm::json::Object split{{"dim", s.splitDim},
                               {"segments", s.splitSegments},
                               {"axis", s.splitAxis},
                               {"parts", s.splitParts}};
      if (!s.splitSizes.empty())
        split["segment_sizes"] = llvm::json::Array(s.splitSizes);
      o["split"] = std::move(split);
    }
    if (!s.stages.empty())
      o["stages"] = llvm::json::Array(s.stages);
    if (s.space != MemorySpace::device)
      o["space"] = stringifyMemorySpace(s.space);
    out.push_back(std::move(o));
  }
  return out;
}

llvm::json::Object describePlan(const MemoryPlan &plan) {
  llvm::json::Array buffers;
  for (auto &[bytes, name] : plan.largest(8))
    buffers.push_back(llvm::json::Object{{"name", name}, {"bytes", bytes}});
  llvm::json::Object p{{"peak_bytes", plan.peakBytes()},
                       {"persistent_bytes", plan.persistentBytes},
                       {"input_bytes", plan.inputBytes},
                       {"micro_step_peak_bytes", plan.microPeak},
                       {"optimizer_step_peak_bytes", plan.optimizerPeak},
                       {"micro_step_communication_bytes", plan.microCommAtPeak},
                       {"optimizer_step_communication_bytes", plan.optimizerCommAtPeak},
                       {"buffers", std::move(buffers)}};
  // Without offload: the persistent bytes that DeepSpeed's offload keys would move off the
  // device, so that a plan over --device-memory can name the keys.
  llvm::json::Object off;
  const Offloadable &o = plan.offloadable;
  if (o.optimizerKey)
    off["optimizer"] =
        llvm::json::Object{{"bytes", o.optimizer}, {"keys", ::ds::kOffloadOptimizerKeys}};
  if (o.paramKey)
    off["param"] = llvm::json::Object{{"bytes", o.param}, {"keys", ::ds::kOffloadParamKeys}};
  if (!plan.offloaded && !off.empty())
    p["offloadable"] = std::move(off);
  // ds-offload's spaces: host memory and the swap file, and what moves between the tiers.
  if (plan.hostPeak || plan.nvmePersistent) {
    p["host_peak_bytes"] = plan.hostPeak;
    p["host_persistent_bytes"] = plan.hostPersistent;
    p["nvme_bytes"] = plan.nvmePersistent;
    p["nvme_file_bytes"] = plan.nvmeFileBytes;
    const MovedBytes &m = plan.movedPerStep;
    p["moved_bytes_per_step"] = llvm::json::Object{{"device_to_host", m[DSRT_MOVE_DEVICE_TO_HOST]},
                                                   {"host_to_device", m[DSRT_MOVE_HOST_TO_DEVICE]},
                                                   {"host_to_nvme", m[DSRT_MOVE_HOST_TO_NVME]},
                                                   {"nvme_to_host", m[DSRT_MOVE_NVME_TO_HOST]}};
  }
  return p;
}

/// Generation's programs: each one's entry point, inputs and results (in the arrays' order)
/// and its peak.
llvm::json::Array describeGeneration(const MemoryPlan &plan) {
  llvm::json::Array calls;
  for (const MemoryPlan::GenerationCall &c : plan.generation) {
    llvm::json::Array results;
    for (RankedTensorType t : c.results)
      results.push_back(llvm::json::Object{{"dtype", dtypeName(t.getElementType())},
                                           {"dims", llvm::json::Array(t.getShape())}});
    calls.push_back(llvm::json::Object{{"name", c.name},
                                       {"symbol", entryPointName(c.name)},
                                       {"inputs", describeInputs(c.inputs)},
                                       {"results", std::move(results)},
                                       {"input_bytes", c.inputBytes},
                                       {"peak_bytes", c.peak}});
  }
  return calls;
}

llvm::json::Object describePipeline(const MemoryPlan &plan) {
  llvm::json::Array ranks;
  for (const RankPlan &r : plan.ranks)
    ranks.push_back(llvm::json::Object{
        {"peak_bytes", std::max(r.step, r.optimizer)},
        {"persistent_bytes", r.persistent},
        {"step_peak_bytes", r.step},
        {"optimizer_step_peak_bytes", r.optimizer},
        {"step_communication_bytes", r.stepComm},
        {"optimizer_step_communication_bytes", r.optimizerComm}});
  return llvm::json::Object{{"stages", plan.pipelineStages},
                            {"micro_batches", plan.pipelineMicroBatches},
                            {"schedule", stringifyPipelineSchedule(plan.pipelineSchedule)},
                            {"ranks", std::move(ranks)}};
}
} // namespace

void mlir::ds::runtime::emitProgramDescriptor(RuntimeLowering &l, OpBuilder &b) {
  const MemoryPlan &plan = l.plan;
  llvm::json::Array sites;
  for (const std::string &site : l.siteNames())
    sites.push_back(site);
  llvm::json::Object root{{"inputs", describeInputs(plan.inputs)},
                          {"sites", std::move(sites)},
                          {"slots", describeSlots(plan.slots())},
                          {"plan", describePlan(plan)}};
  if (auto run = l.module->getAttrOfType<RunAttr>(kRunAttrName))
    describeRun(run, root);
  // A pipeline: one call of ds_micro_step runs the step's micro-batches on this rank's stage.
  if (plan.ppAxis >= 0)
    root["pipeline"] = describePipeline(plan);
  if (!plan.generation.empty())
    root["generation"] = describeGeneration(plan);
  // The runtime joins this mesh (its groups are masks of these axes).
  if (auto mesh = l.module->getAttrOfType<MeshAttr>(kMeshAttrName)) {
    llvm::json::Array axes;
    for (StringAttr a : mesh.getAxes())
      axes.push_back(a.getValue().str());
    root["mesh"] = llvm::json::Object{{"axes", std::move(axes)},
                                      {"shape", llvm::json::Array(mesh.getShape())}};
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::json::Value(std::move(root));
  text.push_back('\0');

  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(l.module.getBody());
  Location loc = l.module.getLoc();
  auto global = LLVM::GlobalOp::create(
      b, loc, LLVM::LLVMArrayType::get(IntegerType::get(b.getContext(), 8), text.size()), true,
      LLVM::Linkage::Internal, "__ds_metadata", b.getStringAttr(text));
  auto fn =
      LLVM::LLVMFuncOp::create(b, loc, "ds_metadata", LLVM::LLVMFunctionType::get(l.ptrTy, {}));
  b.setInsertionPointToStart(fn.addEntryBlock(b));
  Value addr = LLVM::AddressOfOp::create(b, loc, global);
  LLVM::ReturnOp::create(b, loc, ValueRange{addr});
}
