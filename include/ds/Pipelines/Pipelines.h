//===- Pipelines.h - pass pipelines as plain C++ functions -------*- C++ -*-===//
#ifndef DS_PIPELINES_PIPELINES_H
#define DS_PIPELINES_PIPELINES_H

#include "ds/Analysis/Cluster.h"
#include "ds/Analysis/MemoryPlan.h"
#include "ds/Config/DeepSpeedConfig.h"
#include "ds/IR/DSDialect.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/JSON.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

#include <functional>

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
/// The FLOPs per step of the ops that recompute forward values (ds.recompute); of a
/// pipeline, those of the rank that recomputes the most.
int64_t recomputedFlops(ModuleOp step);

/// One rank's memory at its peak by DeepSpeed's categories (what --memory-report prints):
/// the persistent bytes it holds, and the peak's parts.
struct RankMemory {
  int64_t params = 0, grads = 0, optim = 0, buffers = 0, peak = 0, comm = 0, inputs = 0;
  int64_t activations = 0;
  int64_t cache = 0; ///< generation's key/value cache
  bool microPeak = true; ///< the peak is in the step (not the update)
};
/// The rank of pipeline stage `ppRank` (-1: the whole step's, every rank alike off a pipeline).
RankMemory rankMemory(const MemoryPlan &plan, int64_t ppRank);

/// Prints each rank's memory from the compiler's buffer plan (planStep):
/// parameters, gradients, optimizer state, activations, inputs and communication buffers at
/// the peak, and the peak itself (ds-opt --memory-report).
/// With `rates`, also the offload schedule's predicted stall per step.
LogicalResult printMemoryReport(ModuleOp module, llvm::raw_ostream &os,
                                const TierRates *rates = nullptr);

/// The micro-steps per optimizer step of a training step: its `ds.run`'s
/// gradient_accumulation_steps (1 without one).
int64_t gradientAccumulationSteps(ModuleOp module);

/// One row of --comm-report: the calls per step of one collective on one group of mesh axes
/// ("dp", "dp+sp"), and their bytes (each call's whole tensor).
struct CommRow {
  std::string axes, kind;
  int64_t calls = 0, bytes = 0;
};
/// The rows of one rank per optimizer step: pipeline rank `pipelineRank`'s program and
/// update on a pipeline, else the micro-steps and the update (every rank's); empty without a
/// training step.
std::vector<CommRow> commRows(ModuleOp module, int64_t pipelineRank = 0);
/// The rows of `functions` of `module`, each run its number of times.
std::vector<CommRow> commRows(ModuleOp module,
                              ArrayRef<std::pair<func::FuncOp, int64_t>> functions);

/// A step's functions with their runs per step: pipeline rank `r`'s program and update, or
/// gradient_accumulation_steps micro-steps and the update; empty if the module has neither.
SmallVector<std::pair<func::FuncOp, int64_t>> stepFunctions(ModuleOp module, int64_t r = 0);
/// Where the groups of the mesh axes named "dp" or "dp+sp" sit on `cluster`'s nodes.
AxisPlacement placementOf(MeshAttr mesh, llvm::StringRef axesName, const ClusterSpec &cluster);

/// ds-opt --plan (Plan.cpp): the job's ranks, samples per optimizer step and device memory,
/// on a cluster.
/// The axes a --plan search keeps (`--plan-fix`): 0 (ZeRO: -1) leaves one free.
struct PlanFixed {
  int64_t dp = 0, tp = 0, pp = 0, sp = 0, zero = -1, micro = 0;
  int64_t recompute = -1; ///< 0 or 1: activation checkpointing off or on; -1: free
  int64_t virtualStages = 0; ///< model chunks per pipeline rank (1: 1F1B; 0: free)
  /// Every axis given (dp follows from the ranks and tp, pp, sp): "will it fit".
  bool all() const { return tp && pp && sp && zero >= 0 && micro; }
};
/// Parses `--plan-fix` ("tp=2,pp=1,zero=3,micro=4": dp, tp, pp, sp, zero, micro, recompute,
/// virtual)
/// for a job of `ranks` ranks; the error names the key or value and the fix.
llvm::Expected<PlanFixed> parsePlanFixed(llvm::StringRef text, int64_t ranks);
struct PlanRequest {
  const ClusterSpec *cluster = nullptr;
  int64_t devices = 0, globalBatch = 0, deviceMemory = 0;
  PlanFixed fixed;
  /// Compile every pipelined layout at its own accumulation steps (--plan-exact), not at
  /// three accumulation steps past the warm-up, continued along their line (Plan.cpp).
  bool exact = false;
  /// Compile the layouts in the order of a lower bound on their step time (and skip those
  /// whose model states alone exceed the device memory) until this many fitting ones are
  /// known to be the fastest (--plan-keep); 0 compiles every layout (Plan.cpp).
  int64_t keep = 20;
  /// Called before each layout the search judges: how many it has judged (compiled or left
  /// out), of how many, how many of them fit, and the next ("dp=2 tp=1 pp=2 sp=1, ZeRO 1,
  /// micro-batch 4"); ds-opt prints it on a long search.
  std::function<void(int64_t judged, int64_t total, int64_t fitting, llvm::StringRef next)>
      progress;
};
/// One layout and what the compiler predicts of it.
struct PlanCandidate {
  int64_t dp = 1, tp = 1, pp = 1, sp = 1, zeroStage = 0, microBatch = 1, gas = 1;
  bool recompute = false; ///< activation checkpointing (every stage's blocks recomputed)
  int64_t virtualStages = 1; ///< model chunks per pipeline rank (> 1: interleaved schedule)
  /// Empty when it compiles and fits; else the compiler's refusal or the shortfall.
  std::string why;
  int64_t peakBytes = 0; ///< the fullest rank's device peak (0: not compiled)
  int64_t paddingBytes = 0; ///< the device allocator's padding at that peak
  double computeSeconds = 0, commSeconds = 0, stepSeconds = 0, mfu = 0;
  std::map<std::string, int64_t> bytesByAxis; ///< the busiest rank's, per step
  std::string config;                         ///< its DeepSpeed config (JSON)
  /// Its figures continued from three accumulation steps past the warm-up (a pipeline's).
  bool continued = false;
  /// Lower bounds from the model at one rank: the step (its matrix products at the peak FLOP
  /// rate, spread evenly over the ranks, stretched by the pipeline's fill and drain) and the
  /// fullest rank's model states (parameters, gradients, optimizer state, each split as the
  /// layout splits it at best); 0 where the model gave none.
  double boundSeconds = 0;
  int64_t boundBytes = 0;
  /// ...and what the fullest rank holds beyond them without recomputation: its share of one
  /// sample's activations.
  int64_t boundActivationBytes = 0;
  /// Not compiled: its bound says it is slower than `keep` compiled layouts, or its states
  /// alone exceed the device memory (`why` says which).
  bool pruned = false;
  double compileSeconds = 0; ///< the search's time judging it (its compiles, wall clock)
  bool fits() const { return why.empty(); }
};
/// Compiles every layout of `request.devices` ranks (pp x dp x tp x sp, ZeRO 0-3, each
/// micro-batch that divides the global batch over dp; with activation checkpointing where
/// the layout does not fit without it) from the user's config `baseConfig` and
/// the model `importAt(micro)` imports (null when it cannot, with a diagnostic); returns them
/// ranked, fitting ones first by predicted step time.
FailureOr<std::vector<PlanCandidate>>
searchLayouts(const llvm::json::Object &baseConfig, const PlanRequest &request,
              llvm::function_ref<OwningOpRef<ModuleOp>(int64_t)> importAt,
              MLIRContext *context);
/// The training step of layout `c` (its `config`, the model `importAt` its micro-batch).
FailureOr<OwningOpRef<ModuleOp>>
compileLayout(const PlanCandidate &c, llvm::function_ref<OwningOpRef<ModuleOp>(int64_t)> importAt,
              MLIRContext *context);
/// "Will it fit" (every axis fixed): the given layout's memory on every rank by category
/// (--memory-report), fit or the shortfall per rank counting the allocator's padding, and
/// what would fit: the nearest fitting layouts of a search with every axis free. Returns
/// whether it fits; fills `given` (its config, for --plan-out).
FailureOr<bool> printFitReport(const llvm::json::Object &baseConfig, const PlanRequest &request,
                               llvm::function_ref<OwningOpRef<ModuleOp>(int64_t)> importAt,
                               MLIRContext *context, PlanCandidate &given,
                               llvm::raw_ostream &os);
/// ds-opt --plan-report FILE.html (PlanReport.cpp): one self-contained page of `step`: each
/// rank's device memory over one step by category (the plan's timeline), each pipeline rank's
/// simulated schedule, the collectives per rank and axis (seconds on `cluster`, if given),
/// and `candidatesJSON`'s ranked layouts (planToJSON's, if given); `deviceMemory` (0: none)
/// is drawn as a line.
LogicalResult writePlanReport(ModuleOp step, const ClusterSpec *cluster,
                              const std::string *candidatesJSON, int64_t deviceMemory,
                              llvm::StringRef title, llvm::raw_ostream &os);
/// Every candidate, ranked, as JSON (ds-opt --plan-json): the request, and per layout its
/// axes, prediction, reason and DeepSpeed config, for tools and benchmarks.
std::string planToJSON(ArrayRef<PlanCandidate> ranked, const PlanRequest &request);
/// The ranked table of the first `rows` candidates.
void printPlanTable(ArrayRef<PlanCandidate> ranked, const PlanRequest &request, size_t rows,
                    llvm::raw_ostream &os);

/// One phase of a pipeline rank's program in time: `label` is its `ds.schedule` item
/// ("F<chunk>.<micro-batch>", "B..."), the times in the cost model's FLOPs.
struct PipelineSpan {
  double start = 0, end = 0;
  std::string label;
  bool backward = false;
};
/// Each pipeline rank's phases, its program (`ds.schedule`) simulated with each phase taking
/// its FLOPs (`phase_flops`) and transfers no time; empty without them.
SmallVector<SmallVector<PipelineSpan>> simulatePipeline(ModuleOp module, PipelineAttr info);

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
