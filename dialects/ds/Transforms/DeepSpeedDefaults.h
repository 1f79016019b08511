//===- DeepSpeedDefaults.h - the values DeepSpeed gives keys a config omits -===//
//
// DeepSpeed's defaults, written once: the config parser (lib/Config) starts from them, and
// the passes' options default to them (Passes.td), so that a pass run alone behaves as the
// config's default. Sources: deepspeed/runtime/config.py, zero/config.py, precision_config.py,
// swap_tensor/aio_config.py, lr_schedules.py, torch.optim's Adam, DeepSpeed's Muon and
// moe/layer.py.
//
#ifndef DS_TRANSFORMS_DEEPSPEEDDEFAULTS_H
#define DS_TRANSFORMS_DEEPSPEEDDEFAULTS_H

#include <cstdint>

namespace mlir::ds::deepspeed {
// optimizer.params
inline constexpr double kLr = 1e-3;
inline constexpr double kAdamBeta1 = 0.9, kAdamBeta2 = 0.999, kAdamEps = 1e-8;
/// Muon (MuonWithAuxAdam): the Muon group's lr and momentum, its AdamW group's lr and betas.
inline constexpr double kMuonLr = 0.02, kMuonMomentum = 0.95, kMuonAuxLr = 3e-4;
inline constexpr double kMuonBeta1 = 0.9, kMuonBeta2 = 0.95, kMuonEps = 1e-10;
// zero_optimization
inline constexpr int64_t kReduceBucketSize = 500000000, kAllgatherBucketSize = 500000000;
inline constexpr int64_t kPrefetchBucketSize = 50000000, kParamPersistenceThreshold = 100000;
inline constexpr int64_t kMaxLiveParameters = 1000000000, kMaxReuseDistance = 1000000000;
/// offload_optimizer's and offload_param's buffer_count; offload_param's buffer_size and
/// max_in_cpu.
inline constexpr int64_t kOptimizerBufferCount = 4, kParamBufferCount = 5;
inline constexpr int64_t kParamBufferSize = 100000000, kParamMaxInCpu = 1000000000;
// aio
inline constexpr int64_t kAioBlockSize = 1048576, kAioQueueDepth = 8, kAioIntraOpParallelism = 1;
// fp16
inline constexpr int64_t kInitialScalePower = 16, kLossScaleWindow = 1000, kHysteresis = 2;
inline constexpr double kMinLossScale = 1;
// top level
inline constexpr int64_t kStepsPerPrint = 10;
inline constexpr uint64_t kSeed = 1234;
// scheduler.params
inline constexpr int64_t kWarmupNumSteps = 1000;
/// WarmupDecayLR warms up to this lr (WarmupLR to the optimizer's).
inline constexpr double kWarmupDecayMaxLr = 0.001;
inline constexpr double kCosMinRatio = 0.0001;
inline constexpr double kCycleStepSize = 2000, kCycleMinMom = 0.8, kCycleMaxMom = 0.9;
inline constexpr double kRangeTestMinLr = 1e-3, kRangeTestStepSize = 2000;
inline constexpr double kRangeTestStepRate = 1.0;
/// OneCycle's cycle_momentum sets Adam's betas to (the cycled momentum, this).
inline constexpr double kCycleMomentumBeta2 = 0.99;
// moe (deepspeed.moe.layer.MoE's arguments, ds's `moe` block)
inline constexpr double kCapacityFactor = 1.0;
inline constexpr int64_t kMinCapacity = 4;
} // namespace mlir::ds::deepspeed

#endif // DS_TRANSFORMS_DEEPSPEEDDEFAULTS_H
