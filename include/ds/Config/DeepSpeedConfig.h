//===- DeepSpeedConfig.h - DeepSpeed JSON config, validated -----*- C++ -*-===//
#ifndef DS_CONFIG_DEEPSPEEDCONFIG_H
#define DS_CONFIG_DEEPSPEEDCONFIG_H

#include "ds/IR/DSEnums.h"
#include "ds/Transforms/DeepSpeedDefaults.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"
#include <cstdint>
#include <string>
#include <vector>

namespace ds {
namespace defaults = mlir::ds::deepspeed;
using mlir::ds::LRSchedule;
using mlir::ds::OffloadDevice;
using mlir::ds::OptimizerKind;
using mlir::ds::PipelineSchedule;
using mlir::ds::Precision;

/// `optimizer {type, params}` with DeepSpeed's defaults for its type.
struct OptimizerConfig {
  OptimizerKind type = OptimizerKind::adamw;
  double lr = defaults::kLr;
  double beta1 = defaults::kAdamBeta1, beta2 = defaults::kAdamBeta2;
  double eps = defaults::kAdamEps;
  double weightDecay = 0.0;
  bool adamWMode = true;   ///< Adam: decoupled weight decay (true) or L2 on the gradient
  double momentum = 0.0;   ///< SGD; Muon (default 0.95)
  double dampening = 0.0;  ///< SGD
  bool nesterov = false;   ///< SGD
  /// Muon: `lr` is the Muon group's (muon_lr, else lr, else 0.02), `auxLr` the AdamW group's
  /// (adam_lr, else lr, else 3e-4); beta1, beta2 and eps are the AdamW group's.
  double auxLr = 0.0;
  /// Adam's beta1 comes from the schedule at every step (OneCycle's cycle_momentum).
  bool scheduledBeta1 = false;
  /// DeepSpeed's name of the type ("AdamW").
  llvm::StringRef name() const { return mlir::ds::stringifyOptimizerKind(type); }
};

/// `scheduler {type, params}` (DeepSpeed's lr_schedules.py), resolved: every parameter has
/// its value, defaults included. `type` is `constant` without a scheduler.
struct SchedulerConfig {
  LRSchedule type = LRSchedule::constant;
  double warmupMinLr = 0.0, warmupMaxLr = 0.0;
  int64_t warmupNumSteps = defaults::kWarmupNumSteps;
  bool warmupLinear = false; ///< warmup_type "linear" (else DeepSpeed's default, "log")
  int64_t totalNumSteps = 0;
  double warmupMinRatio = 0.0, cosMinRatio = defaults::kCosMinRatio;
  // OneCycle (cycle_min_lr and cycle_max_lr are required; second sizes default to the first).
  double cycleMinLr = 0.0, cycleMaxLr = 0.0, decayLrRate = 0.0;
  double cycleFirstStepSize = defaults::kCycleStepSize;
  double cycleSecondStepSize = defaults::kCycleStepSize;
  int64_t cycleFirstStairCount = 0, cycleSecondStairCount = 0;
  double decayStepSize = 0;
  bool cycleMomentum = true; ///< false when the optimizer has no betas (SGD, Muon)
  double cycleMinMom = defaults::kCycleMinMom, cycleMaxMom = defaults::kCycleMaxMom;
  double decayMomRate = 0.0;
  // LRRangeTest.
  double lrRangeTestMinLr = defaults::kRangeTestMinLr;
  double lrRangeTestStepSize = defaults::kRangeTestStepSize;
  double lrRangeTestStepRate = defaults::kRangeTestStepRate;
  bool lrRangeTestStaircase = false;
  /// DeepSpeed's name of the type ("WarmupLR"; "" for constant).
  llvm::StringRef name() const;
};

/// `zero_optimization` with DeepSpeed's defaults (deepspeed/runtime/zero/config.py). Keys of
/// other stages are accepted and ignored, as in DeepSpeed.
/// zero_optimization.offload_optimizer / offload_param (DeepSpeed's offload_config.py).
struct OffloadConfig {
  OffloadDevice device = OffloadDevice::none;
  std::string nvmePath; ///< nvme: the directory of the swap files
  bool pinMemory = true;
  int64_t bufferCount = defaults::kOptimizerBufferCount; ///< optimizer's; param's below
  int64_t bufferSize = defaults::kParamBufferSize;       ///< param: elements per staging buffer
  int64_t maxInCpu = defaults::kParamMaxInCpu;           ///< param
  bool on() const { return device != OffloadDevice::none; }
};

/// The `aio` block: the NVMe tier's asynchronous I/O (DeepSpeed's aio config).
struct AioConfig {
  int64_t blockSize = defaults::kAioBlockSize, queueDepth = defaults::kAioQueueDepth;
  int64_t intraOpParallelism = defaults::kAioIntraOpParallelism;
  bool singleSubmit = false, overlapEvents = true;
};

/// `activation_checkpointing` (DeepSpeed's block; present means on): ds-activation-checkpoint.
struct CheckpointingConfig {
  bool enabled = false;
  bool cpu = false;     ///< cpu_checkpointing
  int64_t segments = 0; ///< number_checkpoints (0: one per repeated block)
};

struct ZeroConfig {
  int64_t stage = 0;
  int64_t reduceBucketSize = defaults::kReduceBucketSize;
  int64_t allgatherBucketSize = defaults::kAllgatherBucketSize;
  bool overlapComm = false, reduceScatter = true, contiguousGradients = true;
  int64_t prefetchBucketSize = defaults::kPrefetchBucketSize;
  int64_t paramPersistenceThreshold = defaults::kParamPersistenceThreshold;
  int64_t maxLiveParameters = defaults::kMaxLiveParameters;
  int64_t maxReuseDistance = defaults::kMaxReuseDistance;
  OffloadConfig offloadOptimizer,
      offloadParam{OffloadDevice::none, "", true, defaults::kParamBufferCount};
};

/// `fp16` / `bf16` (deepspeed/runtime/precision_config.py) with DeepSpeed's defaults: 16-bit
/// parameters, gradients and activations with fp32 master weights and optimizer state; fp16
/// adds dynamic loss scaling (loss_scale 0) or a static scale.
struct PrecisionConfig {
  Precision dtype = Precision::fp32;
  double lossScale = 0; ///< fp16: 0 = dynamic
  int64_t initialScalePower = defaults::kInitialScalePower;
  int64_t lossScaleWindow = defaults::kLossScaleWindow, hysteresis = defaults::kHysteresis;
  bool consecutiveHysteresis = false;
  double minLossScale = defaults::kMinLossScale;
  bool mixed() const { return dtype != Precision::fp32; }
};

/// ds's `moe` block: deepspeed.moe.layer.MoE's capacity arguments (DeepSpeed takes them in the
/// model's code; an exported HF model routes dropless unless the config sets them).
struct MoeConfig {
  bool dropTokens = false; ///< drop_tokens (true once the block is given, as DeepSpeed's)
  double capacityFactor = mlir::ds::deepspeed::kCapacityFactor;
  int64_t minCapacity = mlir::ds::deepspeed::kMinCapacity;
};

/// DeepSpeed's `pipeline` block (runtime/config.py, get_pipeline_config), and ds's own keys.
struct PipelineConfig {
  int64_t stages = 1;             ///< pipeline stages (pp ranks); DeepSpeed's "auto" is 1
  std::string partition = "best"; ///< best | parameters | uniform | type:REGEX
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b; ///< ds: 1f1b | interleaved
  int64_t virtualStages = 1;      ///< ds: model chunks per rank (interleaved)
};

/// One rule of which linears ds-tensor-parallel splits: DeepSpeed's
/// tensor_parallel.partition_config layer_specs (and an HF tp_plan's entries, converted), as
/// the pass's `layer-specs` option takes it: "ROLE=REGEX", ROLE column, row or skip, REGEX
/// matched from the start of a parameter's name (Python's re.match).
struct TensorParallelSpecs {
  std::vector<std::string> rules;
  bool useDefaultSpecs = true; ///< partition_config.use_default_specs: the graph's split too
};

/// The keys of a DeepSpeed config that ds implements, after DeepSpeed's batch-size rule
/// (two of train_batch_size, train_micro_batch_size_per_gpu, gradient_accumulation_steps
/// determine the third; all three agree with the data-parallel size).
struct DeepSpeedConfig {
  int64_t trainBatchSize = 0;
  int64_t microBatchSize = 0;
  int64_t gradientAccumulationSteps = 0;
  int64_t worldSize = 1; ///< data-parallel size (the job has pp x dp x sp x tp ranks)
  int64_t tensorParallelSize = 1;   ///< tensor_parallel.autotp_size
  TensorParallelSpecs tensorParallelSpecs; ///< partition_config, tp_plan
  int64_t sequenceParallelSize = 1; ///< sequence_parallel_size (Ulysses)
  /// expert_parallel.autoep_size when enabled (the experts split over dp ranks); else 1.
  int64_t expertParallelSize = 1;
  MoeConfig moe; ///< capacity-based token dropping (ds-expert-capacity)
  /// sequence_parallel_mode (ds's own key): Ulysses, ring, or auto.
  mlir::ds::SequenceParallelMode sequenceParallelMode = mlir::ds::SequenceParallelMode::automatic;
  /// sequence_tiling.loss_tiles (ds-tile-sequence; ds's own key); 0: "auto".
  int64_t lossTiles = 1;
  /// sequence_tiling.mlp_tiles (ds-tile-sequence: each MLP in tiles of rows); 0: "auto".
  int64_t mlpTiles = 1;
  PipelineConfig pipeline;          ///< pipeline.stages etc. (pp, the outermost mesh axis)
  OptimizerConfig optimizer;
  SchedulerConfig scheduler;
  double gradientClipping = 0.0; ///< global norm; 0 = off
  ZeroConfig zero;
  int64_t zeroStage = 0; ///< zero.stage
  PrecisionConfig precision;
  AioConfig aio;
  CheckpointingConfig checkpointing;
  int64_t stepsPerPrint = defaults::kStepsPerPrint;
  uint64_t seed = defaults::kSeed;
  std::vector<std::string> warnings; ///< keys ignored because they don't affect the numbers

  /// The normalized config as JSON (all resolved values).
  std::string toJSON() const;
  llvm::json::Object toObject() const;
  /// What a user's config is checked against (ds-run --config): toJSON() with every precision
  /// section explicit ({"enabled": false} when off; "bfloat16" as "bf16"), so that the
  /// runtime compares the keys both set without knowing any.
  std::string checkJSON() const;
  /// The keys that change the numbers of a run, as JSON (what a checkpoint records and a
  /// resume compares): optimizer, scheduler, train_batch_size, gradient_clipping, seed and
  /// the precision ("fp32", "bf16" or {"fp16": its section}).
  std::string numericJSON() const;
};

/// The config keys that offload (what a plan over --device-memory can name).
inline constexpr const char *kOffloadOptimizerKeys =
    "zero_optimization.offload_optimizer {\"device\": \"cpu\"} (or \"nvme\" with stage 3)";
inline constexpr const char *kOffloadParamKeys =
    "zero_optimization.offload_param {\"device\": \"cpu\"} (or \"nvme\")";

/// How a DeepSpeed config chooses its precision, for the runtime's --config check (the program
/// descriptor's "config_precision"): the first key path that is true names the precision; none
/// is fp32.
inline constexpr const char *kPrecisionKeys =
    R"([{"key": ["fp16", "enabled"], "precision": "fp16"},)"
    R"( {"key": ["bf16", "enabled"], "precision": "bf16"},)"
    R"( {"key": ["bfloat16", "enabled"], "precision": "bf16"}])";

/// Parses and validates `text`. `worldSize` is the data-parallel size from the command line
/// (0 = not given: derive it from the batch keys, else 1). Errors name the key, the cause and
/// the fix (an unknown key names the nearest valid one). `ranks`, when not 0, is the job's
/// rank count (what a launcher started, as DeepSpeed reads it): the data-parallel size is then
/// ranks / (tp x pp x sp), and `worldSize` must be 0.
llvm::Expected<DeepSpeedConfig> parseDeepSpeedConfig(llvm::StringRef text, int64_t worldSize,
                                                     int64_t ranks = 0);
/// Reads and parses a file; errors start with the path.
llvm::Expected<DeepSpeedConfig> loadDeepSpeedConfig(llvm::StringRef path, int64_t worldSize,
                                                    int64_t ranks = 0);

} // namespace ds

#endif // DS_CONFIG_DEEPSPEEDCONFIG_H
