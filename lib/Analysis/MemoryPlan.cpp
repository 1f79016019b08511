//===- MemoryPlan.cpp - the plan of a module: its functions in the driver's order ---===//
#include "MemoryPlanner.h"

#include "ds/IR/DSDialect.h"
#include "ds/Transforms/DeepSpeedDefaults.h"
#include "dsrt/dsrt.h"

using namespace mlir;
using namespace mlir::ds;

void mlir::ds::prepareForPlanning(ModuleOp module) {
  module.walk([](func::FuncOp func) {
    Block &body = func.getBody().front();
    for (auto c : llvm::to_vector(body.getOps<ConstantOp>())) {
      auto attr = dyn_cast<DenseElementsAttr>(c.getValue());
      if (!attr || !attr.isSplat() || c->use_empty())
        continue;
      SmallVector<OpOperand *> uses;
      for (OpOperand &use : c->getUses())
        uses.push_back(&use);
      for (OpOperand *use : uses) {
        OpBuilder cb(use->getOwner());
        Operation *clone = cb.clone(*c);
        clone->setLoc(use->getOwner()->getLoc()); // the trace names the line that uses it
        use->set(clone->getResult(0));
      }
      c.erase();
    }
  });
}

const OpPlan &FunctionPlan::of(Operation *op) const {
  static const OpPlan none;
  auto it = ops.find(op);
  return it == ops.end() ? none : it->second;
}

const FunctionPlan &MemoryPlan::function(func::FuncOp f) const {
  return plans_.find(f)->second;
}

std::vector<std::pair<int64_t, std::string>> MemoryPlan::largest(size_t count) const {
  std::vector<std::pair<int64_t, std::string>> all = buffers_;
  std::stable_sort(all.begin(), all.end(), [](auto &x, auto &y) { return x.first > y.first; });
  if (all.size() > count)
    all.resize(count);
  return all;
}

FailureOr<MemoryPlan> MemoryPlan::compute(ModuleOp module) {
  MemoryPlan plan;
  if (failed(MemoryPlanner(module, plan).run()))
    return failure();
  return plan;
}

// --- the planner's module part ---------------------------------------------------------------

namespace {
/// @optimizer_step's signature, as ds-optimizer builds it.
LogicalResult checkOptimizerType(func::FuncOp opt) {
  MLIRContext *ctx = opt.getContext();
  auto f32 = RankedTensorType::get({}, Float32Type::get(ctx));
  auto f64 = RankedTensorType::get({}, Float64Type::get(ctx));
  if (opt.getFunctionType() != FunctionType::get(ctx, {f32, f32, f64, f32}, {}))
    return opt.emitError() << "ds-lower-to-runtime: @" << opt.getSymName()
                           << " must take (lr: tensor<f32>, step: tensor<f32>, beta1: "
                              "tensor<f64>, aux_lr: tensor<f32>) as ds-optimizer builds it; got "
                           << opt.getFunctionType();
  return success();
}

/// The bytes of the step's inputs (one micro-batch's), or a diagnostic on a type the runtime
/// cannot take.
FailureOr<int64_t> inputBytesOf(func::FuncOp f) {
  int64_t bytes = 0;
  for (Type t : f.getArgumentTypes()) {
    auto rt = dyn_cast<RankedTensorType>(t);
    if (!rt || dtypeCodeOf(rt.getElementType()) < 0)
      return f.emitError() << "ds-lower-to-runtime: unsupported input type " << t;
    bytes += storedBytes(rt);
  }
  return bytes;
}
} // namespace

void MemoryPlanner::allocateSlots(int64_t ppRank) {
  arena = ArenaModel();
  slotStorage.clear();
  persistentBytes = hostPersistent = nvmePersistent = 0;
  const SlotTable &table = plan.slots_;
  for (const PlannedSlot &s : table.slots()) {
    if (!s.owned() || (ppRank >= 0 && !s.heldBy(ppRank))) {
      slotStorage.push_back(-1); // a view, a member of a shard, or another stage's
      continue;
    }
    int64_t bytes = storedBytes(s.type);
    slotStorage.push_back(arena.allocIn(s.space, bytes, "slot " + s.name));
    if (s.space == MemorySpace::device)
      persistentBytes += bytes;
    else
      (s.space == MemorySpace::host ? hostPersistent : nvmePersistent) += bytes;
  }
  for (auto [i, s] : llvm::enumerate(table.slots()))
    if (s.viewOf >= 0 && slotStorage[s.viewOf] >= 0) {
      slotStorage[i] = slotStorage[s.viewOf];
      arena.retain(slotStorage[i]);
    }
}

LogicalResult MemoryPlanner::run() {
  FailureOr<SlotTable> table = SlotTable::build(module);
  if (failed(table))
    return failure();
  plan.slots_ = std::move(*table);
  LogicalResult planned = failure();
  SmallVector<func::FuncOp> calls;
  for (StringRef name : {kPrefillName, kDecodeName})
    if (auto f = module.lookupSymbol<func::FuncOp>(name))
      calls.push_back(f);
  if (PipelineAttr info = getPipeline(module)) {
    planned = runPipeline(info);
  } else if (!module.lookupSymbol<func::FuncOp>(kMicroStepName) && !calls.empty()) {
    return runGeneration(calls);
  } else {
    auto micro = module.lookupSymbol<func::FuncOp>(kMicroStepName);
    auto opt = module.lookupSymbol<func::FuncOp>(kOptimizerStepName);
    if (!micro || !opt)
      return module.emitError() << "ds-lower-to-runtime needs @micro_step and @optimizer_step "
                                   "(run ds-autodiff and ds-optimizer first), or generation's "
                                   "@prefill and @decode (ds-derive-generation)";
    planned = runSingle(micro, opt);
  }
  if (failed(planned))
    return failure();
  // A pipeline's step takes every micro-batch's inputs: the first micro-batch's name them.
  func::FuncOp micro = plan.functions_.front().func;
  unsigned perMicroBatch =
      micro.getNumArguments() / std::max<int64_t>(1, plan.pipelineMicroBatches);
  for (auto [i, t] : llvm::enumerate(micro.getArgumentTypes().take_front(perMicroBatch))) {
    auto name = micro.getArgAttrOfType<StringAttr>(i, kInputNameAttrName);
    plan.inputs.push_back({name ? name.getValue().str() : ("input" + Twine(i)).str(),
                           cast<RankedTensorType>(t)});
  }
  plan.hostPeak = arena.hostPeak;
  plan.hostPersistent = hostPersistent;
  plan.nvmePersistent = nvmePersistent;
  // The swap file holds each NVMe slot at a 4096-byte boundary (O_DIRECT's alignment).
  for (const PlannedSlot &s : plan.slots_.slots())
    if (s.space == MemorySpace::nvme)
      plan.nvmeFileBytes += (storedBytes(s.type) + 4095) / 4096 * 4096;
  plan.offloaded = module->hasAttr(kOffloadAttrName);
  if (!plan.offloaded)
    computeOffloadable();
  collectBuffers();
  return success();
}

LogicalResult MemoryPlanner::runSingle(func::FuncOp micro, func::FuncOp opt) {
  if (failed(checkOptimizerType(opt)))
    return failure();
  FailureOr<int64_t> inputs = inputBytesOf(micro);
  if (failed(inputs))
    return failure();
  plan.inputBytes = *inputs;
  // Persistent slots, then the two functions, in the driver's order.
  allocateSlots(-1);
  plan.persistentBytes = persistentBytes;
  ArenaModel::Mark base = arena.mark();
  int inputsStorage = arena.alloc(plan.inputBytes, "inputs");
  arena.restartPeak();
  temporaries.clear();
  // Bytes moved between spaces: the micro-step's once per micro-batch.
  auto run = module->getAttrOfType<RunAttr>(kRunAttrName);
  int64_t gas = run ? run.getGradientAccumulationSteps() : 1;
  if (failed(planFunction(micro, entryPointName(kMicroStepName), true)))
    return failure();
  for (int k = 0; k < 4; ++k)
    plan.movedPerStep[k] = movedNow[k] * std::max<int64_t>(1, gas);
  plan.microPeak = arena.peak;
  plan.microCommAtPeak = arena.commAtPeak;
  plan.microPaddingAtPeak = arena.paddingAtPeak;
  arena.release(inputsStorage);
  // The returned loss is freed by the driver.
  arena.resetTo(base);
  // The driver's step scalars: lr, step and aux_lr (f32), beta1 (f64).
  int scalars = arena.alloc(3 * 4 + 8, "step scalars");
  if (failed(planFunction(opt, entryPointName(kOptimizerStepName), false)))
    return failure();
  plan.optimizerPeak = arena.peak;
  plan.optimizerCommAtPeak = arena.commAtPeak;
  plan.optimizerPaddingAtPeak = arena.paddingAtPeak;
  arena.release(scalars);
  for (int k = 0; k < 4; ++k)
    plan.movedPerStep[k] += movedNow[k];
  return success();
}

LogicalResult MemoryPlanner::runGeneration(ArrayRef<func::FuncOp> calls) {
  // The weights and caches, then each program on its own: its inputs (the caller's), its
  // work, and its results (handed to the caller, who frees them).
  allocateSlots(-1);
  plan.persistentBytes = persistentBytes;
  temporaries.clear();
  for (func::FuncOp f : calls) {
    FailureOr<int64_t> inputs = inputBytesOf(f);
    if (failed(inputs))
      return failure();
    MemoryPlan::GenerationCall call;
    call.name = f.getSymName().str();
    call.inputBytes = *inputs;
    for (auto [i, t] : llvm::enumerate(f.getArgumentTypes())) {
      auto name = f.getArgAttrOfType<StringAttr>(i, kInputNameAttrName);
      call.inputs.push_back({name ? name.getValue().str() : ("input" + Twine(i)).str(),
                             cast<RankedTensorType>(t)});
    }
    for (Type t : f.getResultTypes()) {
      auto rt = dyn_cast<RankedTensorType>(t);
      if (!rt || dtypeCodeOf(rt.getElementType()) < 0)
        return f.emitError() << "ds-lower-to-runtime: unsupported result type " << t;
      call.results.push_back(rt);
    }
    ArenaModel::Mark base = arena.mark();
    int inputsStorage = arena.alloc(call.inputBytes, "inputs");
    arena.restartPeak();
    if (failed(planFunction(f, entryPointName(f.getSymName()), true, true)))
      return failure();
    call.peak = arena.peak;
    plan.microPeak = std::max(plan.microPeak, arena.peak);
    plan.inputBytes = std::max(plan.inputBytes, call.inputBytes);
    arena.release(inputsStorage);
    arena.resetTo(base);
    plan.generation.push_back(std::move(call));
  }
  plan.hostPeak = arena.hostPeak;
  collectBuffers();
  return success();
}

LogicalResult MemoryPlanner::runPipeline(PipelineAttr info) {
  plan.pipelineStages = info.getStages();
  plan.pipelineMicroBatches = info.getMicroBatches();
  auto mesh = module->getAttrOfType<MeshAttr>(kMeshAttrName);
  if (!info.isScheduled() || !mesh || mesh.findAxis(MeshAxis::pp) < 0)
    return module.emitError() << "ds-lower-to-runtime: a pipeline module needs ds-pipeline's "
                                 "per-rank programs (ds.pipeline with micro_batches and "
                                 "schedule) and a mesh with a pp axis";
  plan.pipelineSchedule = info.getSchedule().getValue();
  plan.ppAxis = mesh.findAxis(MeshAxis::pp);
  SmallVector<func::FuncOp> steps, opts;
  for (int64_t r = 0; r < plan.pipelineStages; ++r) {
    auto step = module.lookupSymbol<func::FuncOp>(pipelineStepName(r));
    auto opt = module.lookupSymbol<func::FuncOp>(optimizerStepName(r));
    if (!step || !opt)
      return module.emitError() << "ds-lower-to-runtime: pipeline rank " << r
                                << " lacks @pipeline_step_" << r << " or @optimizer_step_" << r
                                << " (run ds-pipeline, then ds-optimizer)";
    if (failed(checkOptimizerType(opt)))
      return failure();
    steps.push_back(step);
    opts.push_back(opt);
  }
  FailureOr<int64_t> inputs = inputBytesOf(steps[0]);
  if (failed(inputs))
    return failure();
  plan.inputBytes = *inputs;
  // Each rank's plan: its slots, then its step and its update, in the driver's order.
  for (int64_t r = 0; r < plan.pipelineStages; ++r) {
    allocateSlots(r);
    RankPlan rank;
    rank.persistent = persistentBytes;
    plan.persistentBytes = std::max(plan.persistentBytes, persistentBytes);
    ArenaModel::Mark base = arena.mark();
    int inputsStorage = arena.alloc(plan.inputBytes, "inputs");
    arena.restartPeak();
    if (failed(planFunction(steps[r], entryPointName(pipelineStepName(r)), true)))
      return failure();
    rank.step = arena.peak;
    rank.stepComm = arena.commAtPeak;
    rank.stepPadding = arena.paddingAtPeak;
    plan.microCommAtPeak = std::max(plan.microCommAtPeak, arena.commAtPeak);
    arena.release(inputsStorage);
    arena.resetTo(base);
    int scalars = arena.alloc(3 * 4 + 8, "step scalars");
    if (failed(planFunction(opts[r], entryPointName(optimizerStepName(r)), false)))
      return failure();
    rank.optimizer = arena.peak;
    rank.optimizerComm = arena.commAtPeak;
    rank.optimizerPadding = arena.paddingAtPeak;
    plan.optimizerCommAtPeak = std::max(plan.optimizerCommAtPeak, arena.commAtPeak);
    arena.release(scalars);
    plan.microPeak = std::max(plan.microPeak, rank.step);
    plan.optimizerPeak = std::max(plan.optimizerPeak, rank.optimizer);
    plan.ranks.push_back(rank);
  }
  return success();
}

void MemoryPlanner::computeOffloadable() {
  // The persistent bytes that DeepSpeed's offload keys would move off the device (ds-offload's
  // rules), so that a plan over --device-memory can name the keys.
  auto run = module->getAttrOfType<RunAttr>(kRunAttrName);
  int64_t stage = run ? run.getZeroStage() : 0;
  int64_t threshold =
      run ? run.getParamPersistenceThreshold() : deepspeed::kParamPersistenceThreshold;
  ArrayRef<PlannedSlot> slots = plan.slots_.slots();
  bool sharded =
      llvm::any_of(slots, [](const PlannedSlot &s) { return s.role == SlotRole::param_shard; });
  Offloadable &off = plan.offloadable;
  for (const PlannedSlot &s : slots) {
    if (!s.owned())
      continue;
    int64_t bytes = storedBytes(s.type);
    switch (s.role) {
    case SlotRole::parameter:
      if (!sharded && s.type.getNumElements() >= threshold)
        off.param += bytes;
      break;
    case SlotRole::param_shard:
      off.param += bytes;
      break;
    case SlotRole::grad:
    case SlotRole::grad_shard:
    case SlotRole::exp_avg:
    case SlotRole::exp_avg_sq:
    case SlotRole::momentum_buffer:
    case SlotRole::master:
      off.optimizer += bytes;
      break;
    case SlotRole::buffer:
    case SlotRole::loss_scale:
    case SlotRole::found_inf:
    case SlotRole::params:
    case SlotRole::grads:
    case SlotRole::params_sharded:
    case SlotRole::kv_cache: // generation's; no training offload moves it
      break;
    }
  }
  off.optimizerKey = stage >= 1;
  off.paramKey = stage == 3;
}

void MemoryPlanner::collectBuffers() {
  for (const PlannedSlot &s : plan.slots_.slots())
    plan.buffers_.push_back(
        {storedBytes(s.type),
         std::string(dsrt_slot_role_kind(static_cast<int32_t>(s.role))) + " " + s.name});
  for (auto &t : temporaries)
    plan.buffers_.push_back({t.first, "activation: " + t.second});
}
