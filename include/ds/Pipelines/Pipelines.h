//===- Pipelines.h - pass pipelines as plain C++ functions -------*- C++ -*-===//
#ifndef DS_PIPELINES_PIPELINES_H
#define DS_PIPELINES_PIPELINES_H

#include "ds/Analysis/Cluster.h"
#include "ds/Analysis/MemoryPlan.h"
#include "ds/Config/DeepSpeedConfig.h"
#include "ds/IR/DSDialect.h"
#include "llvm/ADT/StringMap.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

namespace mlir::ds {

/// What the training pipeline needs from a DeepSpeed config.
struct TrainingOptions {
  int64_t gradientAccumulationSteps = 1;
  int64_t dataParallelSize = 1;
  int64_t tensorParallelSize = 1;   ///< tensor_parallel.autotp_size
  ::ds::TensorParallelSpecs tensorParallelSpecs; ///< partition_config, tp_plan
  int64_t sequenceParallelSize = 1; ///< sequence_parallel_size (Ulysses)
  int64_t expertParallelSize = 1;   ///< expert_parallel.autoep_size (ds-expert-parallel)
  ::ds::MoeConfig moe;              ///< moe.drop_tokens etc. (ds-expert-capacity)
  SequenceParallelMode sequenceParallelMode = SequenceParallelMode::automatic;
  int64_t lossTiles = 1;            ///< sequence_tiling.loss_tiles (0: auto; ds-tile-sequence)
  int64_t mlpTiles = 1;             ///< sequence_tiling.mlp_tiles (0: auto; ds-tile-sequence)
  ::ds::PipelineConfig pipeline;    ///< pipeline.stages > 1: ds-pipeline-partition, ds-pipeline
  ::ds::OptimizerConfig optimizer;
  double gradientClipping = 0.0;
  int64_t zeroStage = 0;
  ::ds::ZeroConfig zero; ///< buckets, persistence and stage 3's gather schedule
  ::ds::CheckpointingConfig checkpointing; ///< ds-activation-checkpoint
  /// DeepSpeed's bf16 / fp16 sections.
  Precision precision = Precision::fp32;

  static TrainingOptions fromConfig(const ::ds::DeepSpeedConfig &config);
};

/// (tp > 1: Megatron regions, ds-tensor-parallel) (bf16/fp16: a 16-bit forward,
/// ds-mixed-precision) forward -> micro_step (ds-autodiff), the
/// data-parallel partitioning (ds-zero), the update with its collectives (ds-optimizer),
/// simplified, (bf16/fp16: f32 arithmetic for the CPU kernels, ds-widen-16bit) then the check
/// that ranks agree (ds-verify-collectives).
void buildTrainingPipeline(OpPassManager &pm, const TrainingOptions &options);

/// What the training loop needs from `config`, resolved: the step's `ds.run` (RunConfig.cpp).
RunAttr runAttrOf(MLIRContext *ctx, const ::ds::DeepSpeedConfig &config);
/// The program descriptor's "run" of a step built with `config` (what ds-lower-to-runtime
/// writes and the runtime reads), as JSON text: ds-reference and the contract tests read it
/// with the runtime's own reader.
std::string describeRun(const ::ds::DeepSpeedConfig &config);

/// The training step of an imported module as `config` asks: a first pass records how it runs
/// (`ds.run`) and its mesh (`ds.mesh`) and checks that every input's leading dimension is the
/// micro-batch size, then buildTrainingPipeline. The pipeline `ds-train-step{config=PATH}`.
void buildTrainingStepPipeline(OpPassManager &pm, const ::ds::DeepSpeedConfig &config);
LogicalResult buildTrainingStep(ModuleOp module, const ::ds::DeepSpeedConfig &config);

/// What ds-opt --config prints to stderr once the step is built (StepSummary.cpp): the mesh,
/// the batch as DeepSpeed's rule resolved it, the ZeRO stage, precision, optimizer, offload and
/// pipeline stages, and under tp which trainable parameters split (by layer pattern) and which
/// stayed whole, with `wholeWhy[name]` (ds-tensor-parallel's remark) where it gave a reason.
void printStepSummary(ModuleOp step, const ::ds::DeepSpeedConfig &config,
                      const llvm::StringMap<std::string> &wholeWhy, llvm::raw_ostream &os);

/// Registers ds's pass pipelines: ds-train-step{config=PATH world-size=N} (the training step)
/// and ds-lower-step (buildRuntimeLoweringPipeline).
void registerPipelines();

/// STEP.mlir -> LLVM dialect calls of the runtime (ds-lower-to-runtime and clean-ups), as
/// ds-run and ds-compile use it.
void buildRuntimeLoweringPipeline(OpPassManager &pm);
LogicalResult lowerStepToLLVM(ModuleOp module);

/// The memory plan of a training step, as ds-lower-to-runtime makes it: computed on a copy of
/// `module` cleaned up as the lowering pipeline cleans it up and prepared for planning. What
/// --memory-report and --device-memory read; nothing is lowered.
struct PlannedStep {
  OwningOpRef<ModuleOp> step;
  MemoryPlan plan;
};
FailureOr<PlannedStep> planStep(ModuleOp module);

/// Prints each rank's memory from the compiler's buffer plan (planStep):
/// parameters, gradients, optimizer state, activations, inputs and communication buffers at
/// the peak, and the peak itself (ds-opt --memory-report).
/// The tiers' bandwidths and the compute rates of one rank, in bytes (FLOP) per second, for
/// the offload stall prediction (ds-opt --rates; ds-run --probe-bandwidth measures them).
struct TierRates {
  double d2h = 0, h2d = 0, nvmeRead = 0, nvmeWrite = 0, flops = 0, memory = 0;
  /// "d2h=GB/s,h2d=GB/s,nvme_read=GB/s,nvme_write=GB/s,memory=GB/s,flops=GFLOP/s".
  bool parse(llvm::StringRef spec, std::string &err);
};
struct StallPrediction {
  double computeSeconds = 0, transferSeconds = 0, stallSeconds = 0;
};
/// One training step's compute, transfer and stall time (StallModel.cpp): the offload
/// schedule replayed on a compute and a transfer stream at `rates`.
FailureOr<StallPrediction> predictStall(ModuleOp module, const TierRates &rates);

/// ds-opt --device-memory (FitBudget.cpp): builds the step of `imported` with `config`, or,
/// when its plan's device peak is over `budget`, with the first of: activation
/// checkpointing, offload_optimizer cpu, both, offload_param too (stage 3), both with
/// recomputation, whose plan fits. `config` becomes the one chosen; the choice and its cost go
/// to `note`. Fails, naming the least peak reached, when none fits.
FailureOr<OwningOpRef<ModuleOp>> fitDeviceMemory(ModuleOp imported,
                                                 ::ds::DeepSpeedConfig &config,
                                                 uint64_t budget, llvm::raw_ostream &note);
/// The FLOPs per step of the ops that recompute forward values (ds.recompute).
int64_t recomputedFlops(ModuleOp step);

/// With `rates`, also the offload schedule's predicted stall per step.
LogicalResult printMemoryReport(ModuleOp module, llvm::raw_ostream &os,
                                const TierRates *rates = nullptr);

/// The micro-steps per optimizer step of a training step: its `ds.run`'s
/// gradient_accumulation_steps (1 without one).
int64_t gradientAccumulationSteps(ModuleOp module);

/// Prints the collectives each rank issues per optimizer step, by mesh axis and kind, with
/// their message bytes, from the training step (ds-opt --comm-report); with a cluster, each
/// row's time by the communication model (ds/Analysis/Cluster.h) too.
LogicalResult printCommReport(ModuleOp module, llvm::raw_ostream &os,
                              const ClusterSpec *cluster = nullptr);
/// --comm-report of a pipeline (ds-pipeline's per-rank programs): each pipeline rank's
/// collectives, sends and receives per step, and the predicted bubble.
LogicalResult printPipelineCommReport(ModuleOp module, PipelineAttr info,
                                      llvm::raw_ostream &os,
                                      const ClusterSpec *cluster = nullptr);

/// Prints each rank's floating-point operations per optimizer step, per function, with those
/// of the matrix products and the bytes read and written, and the ops with the most FLOPs,
/// from the cost model (ds-opt --flops-report).
LogicalResult printFlopsReport(ModuleOp module, llvm::raw_ostream &os);

} // namespace mlir::ds

#endif // DS_PIPELINES_PIPELINES_H
