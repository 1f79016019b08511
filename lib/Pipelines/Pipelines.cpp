//===- Pipelines.cpp - the training and lowering pipelines -----------------===//
#include "ds/Pipelines/Pipelines.h"

#include "ds/IR/DSDialect.h"
#include "ds/Transforms/Passes.h"
#include "ds/Transforms/Mesh.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Transforms/Passes.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::ds;

TrainingOptions TrainingOptions::fromConfig(const ::ds::DeepSpeedConfig &config) {
  TrainingOptions o;
  o.gradientAccumulationSteps = config.gradientAccumulationSteps;
  o.dataParallelSize = config.worldSize;
  o.tensorParallelSize = config.tensorParallelSize;
  o.tensorParallelSpecs = config.tensorParallelSpecs;
  o.sequenceParallelSize = config.sequenceParallelSize;
  o.expertParallelSize = config.expertParallelSize;
  o.moe = config.moe;
  o.sequenceParallelMode = config.sequenceParallelMode;
  o.lossTiles = config.lossTiles;
  o.mlpTiles = config.mlpTiles;
  o.pipeline = config.pipeline;
  o.optimizer = config.optimizer;
  o.gradientClipping = config.gradientClipping;
  o.zeroStage = config.zeroStage;
  o.zero = config.zero;
  o.checkpointing = config.checkpointing;
  o.precision = config.precision.dtype;
  return o;
}

void mlir::ds::buildTrainingPipeline(OpPassManager &pm, const TrainingOptions &options) {
  bool mixed = options.precision != Precision::fp32;
  DSFuseAttentionOptions fuse;
  fuse.writtenOut = !mixed; // PyTorch rounds each op of a written-out 16-bit attention
  pm.addPass(createDSFuseAttention(fuse));
  pm.addPass(createDSFuseExperts());
  if (options.moe.dropTokens) {
    DSExpertCapacityOptions capacity;
    capacity.capacityFactor = options.moe.capacityFactor;
    capacity.minCapacity = options.moe.minCapacity;
    pm.addPass(createDSExpertCapacity(capacity));
  }
  if (!mixed) // PyTorch rounds each op of a 16-bit SwiGLU
    pm.addPass(createDSFuseSwiglu());
  if (options.expertParallelSize > 1) {
    DSExpertParallelOptions ep;
    ep.expertParallelSize = options.expertParallelSize;
    pm.addPass(createDSExpertParallel(ep));
  }
  if (options.tensorParallelSize > 1) {
    DSTensorParallelOptions tp;
    tp.autotpSize = options.tensorParallelSize;
    tp.layerSpecs.assign(options.tensorParallelSpecs.rules.begin(),
                         options.tensorParallelSpecs.rules.end());
    tp.useDefaultSpecs = options.tensorParallelSpecs.useDefaultSpecs;
    pm.addPass(createDSTensorParallel(tp));
  }
  if (options.sequenceParallelSize > 1) {
    DSSequenceParallelOptions sp;
    sp.sequenceParallelSize = options.sequenceParallelSize;
    sp.mode = options.sequenceParallelMode;
    pm.addPass(createDSSequenceParallel(sp));
  }
  { // fp32: only checks that the model is not 16-bit
    DSMixedPrecisionOptions mp;
    mp.dtype = options.precision;
    mp.lossScaling = options.precision == Precision::fp16;
    pm.addPass(createDSMixedPrecision(mp));
  }
  if (options.lossTiles != 1 || options.mlpTiles != 1) {
    DSTileSequenceOptions tiling;
    tiling.lossTiles = options.lossTiles;
    tiling.mlpTiles = options.mlpTiles;
    pm.addPass(createDSTileSequence(tiling));
  }
  bool pipelined = options.pipeline.stages > 1;
  if (pipelined) {
    DSPipelinePartitionOptions cut;
    cut.stages = options.pipeline.stages;
    cut.virtualStages = options.pipeline.virtualStages;
    cut.partition = options.pipeline.partition;
    pm.addPass(createDSPipelinePartition(cut));
  }
  DSAutodiffOptions ad;
  ad.gradientAccumulationSteps = options.gradientAccumulationSteps;
  ad.dataParallelSize = options.dataParallelSize;
  pm.addPass(createDSAutodiff(ad));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  if (options.checkpointing.enabled || options.mlpTiles != 1) {
    DSActivationCheckpointOptions ckpt;
    ckpt.blocks = options.checkpointing.enabled; // else only the MLPs' tiles
    ckpt.segments = options.checkpointing.segments;
    ckpt.cpu = options.checkpointing.cpu;
    pm.addPass(createDSActivationCheckpoint(ckpt));
  }
  if (pipelined) {
    DSPipelineOptions pipe;
    pipe.schedule = options.pipeline.schedule;
    pipe.microBatches = options.gradientAccumulationSteps;
    pm.addPass(createDSPipeline(pipe));
  }
  DSZeroOptions zero;
  zero.stage = options.zeroStage;
  zero.dataParallelSize = options.dataParallelSize;
  zero.reduceBucketSize = std::max<int64_t>(1, options.zero.reduceBucketSize);
  zero.persistenceThreshold = options.zero.paramPersistenceThreshold;
  zero.prefetchBucketSize = options.zero.prefetchBucketSize;
  zero.maxLiveParameters = options.zero.maxLiveParameters;
  zero.maxReuseDistance = options.zero.maxReuseDistance;
  pm.addPass(createDSZero(zero));
  DSOptimizerOptions opt;
  opt.type = options.optimizer.type;
  opt.beta1 = options.optimizer.beta1;
  opt.beta2 = options.optimizer.beta2;
  opt.eps = options.optimizer.eps;
  opt.weightDecay = options.optimizer.weightDecay;
  opt.gradientClipping = options.gradientClipping;
  opt.adamWMode = options.optimizer.adamWMode;
  opt.momentum = options.optimizer.momentum;
  opt.dampening = options.optimizer.dampening;
  opt.nesterov = options.optimizer.nesterov;
  opt.scheduledBeta1 = options.optimizer.scheduledBeta1;
  pm.addPass(createDSOptimizer(opt));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  if (mixed) {
    pm.addPass(createDSWiden16Bit());
    pm.addPass(createCSEPass());
  }
  if (options.zero.offloadOptimizer.on() || options.zero.offloadParam.on()) {
    DSOffloadOptions off;
    off.optimizer = options.zero.offloadOptimizer.device;
    off.param = options.zero.offloadParam.device;
    off.persistenceThreshold = options.zero.paramPersistenceThreshold;
    pm.addPass(createDSOffload(off));
  }
  pm.addPass(createDSVerifyCollectives());
}

namespace {
/// The first pass of a training step's pipeline: checks that every input's leading dimension
/// is the micro-batch size and records how the step runs (`ds.run`) and its mesh (`ds.mesh`).
struct ConfigureStepPass : PassWrapper<ConfigureStepPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(ConfigureStepPass)
  explicit ConfigureStepPass(const ::ds::DeepSpeedConfig &config) : config(config) {}
  StringRef getArgument() const override { return "ds-configure-step"; }
  StringRef getDescription() const override {
    return "Records the DeepSpeed config's run and mesh in a module to train";
  }
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (module->hasAttr(kRunAttrName)) {
      module.emitError() << "this module is already a training step (it has " << kRunAttrName
                         << "): build one from the imported model (ds-opt MODEL.pt or its "
                            "imported .mlir with --config)";
      return signalPassFailure();
    }
    auto forward = module.lookupSymbol<func::FuncOp>(kForwardName);
    if (!forward) {
      module.emitError() << "no func.func @forward to train";
      return signalPassFailure();
    }
    for (auto [i, type] : llvm::enumerate(forward.getArgumentTypes())) {
      auto rt = dyn_cast<RankedTensorType>(type);
      auto name = forward.getArgAttrOfType<StringAttr>(i, kInputNameAttrName);
      if (!rt || rt.getRank() == 0 || rt.getShape()[0] != config.microBatchSize) {
        forward.emitError() << "input '" << (name ? name.getValue() : StringRef("?"))
                            << "' has type " << type << " but train_micro_batch_size_per_gpu is "
                            << config.microBatchSize
                            << "; its leading dimension must be the micro-batch size (fix "
                               "--input or the config)";
        return signalPassFailure();
      }
    }
    module->setAttr(kRunAttrName, runAttrOf(module.getContext(), config));
    module->setAttr(kMeshAttrName,
                    buildMesh(module.getContext(), config.worldSize, config.tensorParallelSize,
                              config.sequenceParallelSize, config.pipeline.stages,
                              config.expertParallelSize));
  }
  ::ds::DeepSpeedConfig config;
};

/// ds-train-step's options.
struct TrainStepOptions : PassPipelineOptions<TrainStepOptions> {
  Option<std::string> config{*this, "config", llvm::cl::desc("the DeepSpeed JSON config")};
  Option<int64_t> worldSize{*this, "world-size",
                            llvm::cl::desc("data-parallel size (default: from the config's "
                                           "batch keys, else 1)"),
                            llvm::cl::init(0)};
};
} // namespace

void mlir::ds::buildTrainingStepPipeline(OpPassManager &pm,
                                         const ::ds::DeepSpeedConfig &config) {
  pm.addPass(std::make_unique<ConfigureStepPass>(config));
  buildTrainingPipeline(pm, TrainingOptions::fromConfig(config));
}

LogicalResult mlir::ds::buildTrainingStep(ModuleOp module, const ::ds::DeepSpeedConfig &config) {
  PassManager pm(module.getContext());
  buildTrainingStepPipeline(pm, config);
  return pm.run(module);
}

void mlir::ds::registerPipelines() {
  registerPassPipeline(
      "ds-train-step",
      "The training step of an imported module (forward, backward, ZeRO, the optimizer, "
      "parallelism, offload) as a DeepSpeed config asks: ds-opt --config runs it",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> errorHandler) {
        TrainStepOptions options;
        if (failed(options.parseFromString(text)))
          return failure();
        if (options.config.empty())
          return errorHandler("ds-train-step needs config=PATH (a DeepSpeed JSON config)");
        auto config = ::ds::loadDeepSpeedConfig(options.config, options.worldSize);
        if (!config)
          return errorHandler(llvm::toString(config.takeError()));
        for (const std::string &w : config->warnings)
          llvm::errs() << "warning: " << options.config << ": " << w << "\n";
        buildTrainingStepPipeline(pm, *config);
        return success();
      },
      [](function_ref<void(const ::mlir::detail::PassOptions &)> handler) {
        handler(TrainStepOptions());
      });
  PassPipelineRegistration<>(
      "ds-lower-step",
      "A training step (STEP.mlir) as LLVM-dialect calls of the runtime, as ds-run and "
      "ds-compile lower it: clean-ups, then ds-lower-to-runtime",
      [](OpPassManager &pm) { buildRuntimeLoweringPipeline(pm); });
}

namespace {
/// What the lowering pipeline runs before ds-lower-to-runtime plans the step.
void addCleanups(OpPassManager &pm) {
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}
} // namespace

void mlir::ds::buildRuntimeLoweringPipeline(OpPassManager &pm) {
  addCleanups(pm);
  pm.addPass(createDSLowerToRuntime());
}

FailureOr<PlannedStep> mlir::ds::planStep(ModuleOp module) {
  OwningOpRef<ModuleOp> step = module.clone();
  PassManager pm(module.getContext());
  addCleanups(pm);
  if (failed(pm.run(*step)))
    return failure();
  prepareForPlanning(*step);
  FailureOr<MemoryPlan> plan = MemoryPlan::compute(*step);
  if (failed(plan))
    return failure();
  return PlannedStep{std::move(step), std::move(*plan)};
}

LogicalResult mlir::ds::lowerStepToLLVM(ModuleOp module) {
  PassManager pm(module.getContext());
  buildRuntimeLoweringPipeline(pm);
  return pm.run(module);
}
