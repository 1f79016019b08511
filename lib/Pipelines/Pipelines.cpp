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
  o.sequenceParallelSize = config.sequenceParallelSize;
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
  if (options.tensorParallelSize > 1) {
    DSTensorParallelOptions tp;
    tp.autotpSize = options.tensorParallelSize;
    pm.addPass(createDSTensorParallel(tp));
  }
  if (options.sequenceParallelSize > 1) {
    DSSequenceParallelOptions sp;
    sp.sequenceParallelSize = options.sequenceParallelSize;
    pm.addPass(createDSSequenceParallel(sp));
  }
  if (mixed) {
    DSMixedPrecisionOptions mp;
    mp.dtype = options.precision;
    mp.lossScaling = options.precision == Precision::fp16;
    pm.addPass(createDSMixedPrecision(mp));
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
  if (options.checkpointing.enabled) {
    DSActivationCheckpointOptions ckpt;
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

LogicalResult mlir::ds::buildTrainingStep(ModuleOp module, const ::ds::DeepSpeedConfig &config) {
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward)
    return module.emitError() << "no func.func @forward to train";
  for (auto [i, type] : llvm::enumerate(forward.getArgumentTypes())) {
    auto rt = dyn_cast<RankedTensorType>(type);
    auto name = forward.getArgAttrOfType<StringAttr>(i, kInputNameAttrName);
    if (!rt || rt.getRank() == 0 || rt.getShape()[0] != config.microBatchSize)
      return forward.emitError()
             << "input '" << (name ? name.getValue() : StringRef("?")) << "' has type " << type
             << " but train_micro_batch_size_per_gpu is " << config.microBatchSize
             << "; its leading dimension must be the micro-batch size (fix --input or the "
                "config)";
  }
  module->setAttr(kRunAttrName, runAttrOf(module.getContext(), config));
  module->setAttr(kMeshAttrName, buildMesh(module.getContext(), config.worldSize,
                                           config.tensorParallelSize,
                                           config.sequenceParallelSize,
                                           config.pipeline.stages));
  PassManager pm(module.getContext());
  buildTrainingPipeline(pm, TrainingOptions::fromConfig(config));
  return pm.run(module);
}

void mlir::ds::buildRuntimeLoweringPipeline(OpPassManager &pm) {
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createDSLowerToRuntime());
}

LogicalResult mlir::ds::lowerStepToLLVM(ModuleOp module) {
  PassManager pm(module.getContext());
  buildRuntimeLoweringPipeline(pm);
  return pm.run(module);
}
