//===- DeepSpeedConfig.cpp - DeepSpeed JSON config, validated ---------------===//
#include "ds/Config/DeepSpeedConfig.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/raw_ostream.h"
#include <cmath>
#include <cstdio>

using namespace llvm;

namespace ds {
namespace {

// Top-level keys of DeepSpeed's config (deepspeed/runtime/config.py and its sub-configs).
const char *const kDeepSpeedKeys[] = {
    "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
    "optimizer", "scheduler", "fp16", "bf16", "amp", "torch_autocast", "gradient_clipping",
    "prescale_gradients", "gradient_predivide_factor", "sparse_gradients", "zero_optimization",
    "zero_allow_untested_optimizer", "zero_force_ds_cpu_optimizer", "steps_per_print",
    "wall_clock_breakdown", "memory_breakdown", "dump_state", "flops_profiler", "tensorboard",
    "wandb", "csv_monitor", "comet", "comms_logger", "activation_checkpointing",
    "sparse_attention", "data_efficiency", "curriculum_learning", "elasticity",
    "communication_data_type", "seq_parallel_communication_data_type", "autotuning",
    "checkpoint", "data_types", "aio", "compression_training", "pipeline",
    "disable_allgather", "eigenvalue", "progressive_layer_drop", "quantize_training",
    "load_universal_checkpoint", "graph_harvesting", "hybrid_engine", "nebula",
    "weight_quantization", "use_data_before_expert_parallelism", "mics_shard_size",
    "mics_hierarchical_params_gather", "zero_quantized_weights", "zero_quantized_gradients",
    "seed", "fp32_allreduce", "timers", "compile", "tensor_parallel", "sequence_parallel_size",
    "bfloat16", "sequence_tiling", "sequence_parallel_mode", "expert_parallel", "moe",
};
// Keys that DeepSpeed documents as not affecting the numbers: accepted with a warning.
const char *const kWarnOnlyKeys[] = {
    "wall_clock_breakdown", "memory_breakdown", "dump_state", "flops_profiler", "tensorboard",
    "wandb", "csv_monitor", "comet", "comms_logger", "timers", "autotuning",
};
// Keys ds implements in this build.
const char *const kImplementedKeys[] = {
    "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
    "optimizer", "scheduler", "gradient_clipping", "steps_per_print", "seed",
    "zero_optimization", "fp16", "bf16", "bfloat16", "tensor_parallel", "sequence_parallel_size",
    "pipeline", "aio", "activation_checkpointing", "sequence_tiling", "sequence_parallel_mode",
    "expert_parallel", "moe",
};
// activation_checkpointing's keys (runtime/activation_checkpointing/config.py).
const char *const kCheckpointingKeys[] = {"partition_activations", "contiguous_memory_optimization",
                                          "cpu_checkpointing", "number_checkpoints",
                                          "synchronize_checkpoint_boundary", "profile"};
// offload_optimizer's and offload_param's keys (runtime/zero/offload_config.py).
const char *const kOffloadOptimizerKeys[] = {"device", "nvme_path", "buffer_count", "pin_memory",
                                             "pipeline_read", "pipeline_write", "fast_init",
                                             "ratio"};
const char *const kOffloadParamKeys[] = {"device", "nvme_path", "buffer_count", "buffer_size",
                                         "max_in_cpu", "pin_memory"};
// aio's keys (deepspeed/runtime/swap_tensor/aio_config.py); thread_count is
// intra_op_parallelism's old name.
const char *const kAioKeys[] = {"block_size", "queue_depth", "intra_op_parallelism",
                                "thread_count", "single_submit", "overlap_events", "use_gds"};
// pipeline's keys: DeepSpeed's (runtime/config.py, get_pipeline_config) and ds's own
// (schedule, virtual_stages).
const char *const kPipelineKeys[] = {"stages", "partition", "seed_layers",
                                     "activation_checkpoint_interval", "pipe_partitioned",
                                     "grad_partitioned", "schedule", "virtual_stages"};
// tensor_parallel's keys (runtime/tensor_parallel/config.py, TPTrainingConfig), and ds's
// tp_plan (an HF model's base_model_tp_plan, which DeepSpeed reads from the model).
const char *const kTensorParallelKeys[] = {
    "autotp_size", "tp_overlap_comm", "dtype", "tensor_parallel", "injection_policy_tuple",
    "keep_module_on_host", "replace_with_kernel_inject", "partition_config", "preset_model",
    "tp_plan",
};
// partition_config's keys and a layer spec's (runtime/tensor_parallel/config.py).
const char *const kPartitionConfigKeys[] = {"use_default_specs", "layer_specs"};
const char *const kLayerSpecKeys[] = {"patterns", "partition_type", "shape", "partition_dim",
                                      "model_types"};
// expert_parallel's keys (DeepSpeed's AutoEP, module_inject/auto_ep_config.py): the ones that
// find the experts in a module (ds finds them in the graph: ignored with a warning), and the
// ones that replace the model's own routing (refused: ds trains the routing as exported).
const char *const kExpertParallelFindKeys[] = {
    "preset_model", "moe_layer_pattern", "expert_pattern", "router_pattern", "use_grouped_mm",
    "grouped_mm_backend", "expert_w1", "expert_w2", "expert_w3", "num_experts_attr",
    "top_k_attr", "has_shared_experts", "shared_experts_pattern"};
const char *const kExpertParallelRoutingKeys[] = {
    "route_norm", "route_scale", "score_apply", "num_expert_groups", "num_limited_groups",
    "score_func", "top_k", "load_balance_coeff", "routed_scaling_factor"};
// moe's keys: deepspeed.moe.layer.MoE's gating arguments (moe/layer.py).
const char *const kMoeKeys[] = {"capacity_factor", "eval_capacity_factor", "min_capacity",
                                "drop_tokens", "use_rts", "top2_2nd_expert_sampling",
                                "noisy_gate_policy"};
// fp16's and bf16's keys (runtime/precision_config.py).
const char *const kFp16Keys[] = {"enabled", "auto_cast", "loss_scale", "initial_scale_power",
                                 "loss_scale_window", "hysteresis", "consecutive_hysteresis",
                                 "min_loss_scale", "fp16_master_weights_and_grads"};
const char *const kBf16Keys[] = {"enabled", "immediate_grad_update", "check_grad_overflow",
                                 "bf16_master_weights_and_grads", "bf16_optimizer_states"};
// zero_optimization's keys (zero/config.py): field names and their stage3_ aliases.
const char *const kZeroKeys[] = {
    "stage", "contiguous_gradients", "reduce_scatter", "reduce_bucket_size",
    "use_multi_rank_bucket_allreduce", "allgather_partitions", "allgather_bucket_size",
    "overlap_comm", "load_from_fp32_weights", "elastic_checkpoint", "offload_param",
    "offload_optimizer", "zenflow", "sub_group_size", "cpu_offload_param",
    "cpu_offload_use_pin_memory", "cpu_offload", "prefetch_bucket_size",
    "stage3_prefetch_bucket_size", "param_persistence_threshold",
    "stage3_param_persistence_threshold", "model_persistence_threshold",
    "stage3_model_persistence_threshold", "max_live_parameters", "stage3_max_live_parameters",
    "max_reuse_distance", "stage3_max_reuse_distance", "gather_16bit_weights_on_model_save",
    "stage3_gather_16bit_weights_on_model_save", "module_granularity_threshold",
    "stage3_module_granularity_threshold", "use_all_reduce_for_fetch_params",
    "stage3_use_all_reduce_for_fetch_params", "allgather_sequential",
    "stage3_allgather_sequential", "stage3_gather_fp16_weights_on_model_save",
    "ignore_unused_parameters", "legacy_stage1", "round_robin_gradients",
    "zero_hpz_partition_size", "zero_quantized_weights", "zero_quantized_nontrainable_weights",
    "zero_quantized_gradients", "zeropp_loco_param", "mics_shard_size",
    "mics_hierarchical_params_gather", "memory_efficient_linear", "pipeline_loading_checkpoint",
    "override_module_apply", "log_trace_cache_warnings", "enable_sanity_checks",
    "save_muon_momentum_buffer_in_memory", "leaf_module"};
// Keys that change what runs and that ds does not implement: an error unless off.
const char *const kZeroUnimplemented[] = {
    "zenflow", "cpu_offload", "cpu_offload_param", "zero_hpz_partition_size", "zero_quantized_weights", "zero_quantized_nontrainable_weights",
    "zero_quantized_gradients", "mics_shard_size"};
// Each scheduler's parameters (lr_schedules.py); last_batch_iteration is common to all.
const char *const kWarmupParams[] = {"warmup_min_lr", "warmup_max_lr", "warmup_num_steps",
                                     "warmup_type", "last_batch_iteration"};
const char *const kWarmupDecayParams[] = {"warmup_min_lr",    "warmup_max_lr",
                                          "warmup_num_steps", "warmup_type",
                                          "total_num_steps",  "last_batch_iteration"};
const char *const kWarmupCosineParams[] = {"warmup_min_ratio", "warmup_num_steps",
                                           "warmup_type",      "total_num_steps",
                                           "cos_min_ratio",    "last_batch_iteration"};
const char *const kOneCycleParams[] = {
    "cycle_min_lr",          "cycle_max_lr",   "decay_lr_rate",          "cycle_first_step_size",
    "cycle_second_step_size", "cycle_first_stair_count", "cycle_second_stair_count",
    "decay_step_size",       "cycle_momentum", "cycle_min_mom",          "cycle_max_mom",
    "decay_mom_rate",        "last_batch_iteration"};
const char *const kRangeTestParams[] = {"lr_range_test_min_lr", "lr_range_test_step_size",
                                        "lr_range_test_step_rate", "lr_range_test_staircase",
                                        "last_batch_iteration"};
const char *const kAllSchedulerParams[] = {
    "warmup_min_lr", "warmup_max_lr", "warmup_num_steps", "warmup_type", "total_num_steps",
    "warmup_min_ratio", "cos_min_ratio", "cycle_min_lr", "cycle_max_lr", "decay_lr_rate",
    "cycle_first_step_size", "cycle_second_step_size", "cycle_first_stair_count",
    "cycle_second_stair_count", "decay_step_size", "cycle_momentum", "cycle_min_mom",
    "cycle_max_mom", "decay_mom_rate", "lr_range_test_min_lr", "lr_range_test_step_size",
    "lr_range_test_step_rate", "lr_range_test_staircase", "last_batch_iteration"};
const char *const kSgdParams[] = {"lr", "momentum", "dampening", "weight_decay", "nesterov"};
const char *const kOptimizerTypes[] = {"Adam", "AdamW", "Lamb", "OneBitAdam", "ZeroOneAdam",
                                       "OneBitLamb", "Lion", "Muon", "SGD", "Adagrad",
                                       "MuAdam", "MuAdamW", "MuSGD"};
const char *const kAdamParams[] = {"lr", "betas", "eps", "weight_decay", "bias_correction",
                                   "adam_w_mode", "amsgrad", "torch_adam", "fused"};
// DeepSpeed's Muon (engine.py): Muon's group takes lr (or muon_lr), momentum, weight_decay and
// ns_method; the AdamW group lr (or adam_lr), betas, eps and weight_decay.
const char *const kMuonParams[] = {"lr",    "muon_lr", "adam_lr",     "momentum",
                                   "betas", "eps",     "weight_decay", "ns_method"};

bool contains(ArrayRef<const char *> list, StringRef key) {
  for (const char *k : list)
    if (key == k)
      return true;
  return false;
}

/// The valid key most like `key`: the most shared `_`-separated words, then the smallest edit
/// distance ("warmup_steps" -> "warmup_num_steps", not "warmup_type").
std::string nearest(ArrayRef<const char *> list, StringRef key) {
  SmallVector<StringRef> words;
  key.split(words, '_', -1, /*KeepEmpty=*/false);
  std::string best;
  int bestShared = -1;
  unsigned bestDist = ~0u;
  for (const char *k : list) {
    SmallVector<StringRef> kw;
    StringRef(k).split(kw, '_', -1, false);
    int shared = 0;
    for (StringRef w : words)
      shared += llvm::is_contained(kw, w);
    unsigned d = key.edit_distance(k, /*AllowReplacements=*/true);
    if (shared > bestShared || (shared == bestShared && d < bestDist)) {
      bestShared = shared;
      bestDist = d;
      best = k;
    }
  }
  return best;
}

Error fail(const Twine &msg) { return createStringError(inconvertibleErrorCode(), msg); }

/// A JSON number with no fraction that fits in int64 (DeepSpeed configs often write 5e8);
/// none for anything else, 1e30 included.
std::optional<int64_t> integralValue(const json::Value &v) {
  if (std::optional<int64_t> i = v.getAsInteger())
    return i;
  std::optional<double> d = v.getAsNumber();
  if (!d || std::floor(*d) != *d || !(*d >= -9223372036854775808.0 && *d < 9223372036854775808.0))
    return std::nullopt;
  return static_cast<int64_t>(*d);
}

/// A positive integer value (JSON number with no fraction).
Expected<int64_t> getPositiveInt(const json::Value &v, StringRef key) {
  std::optional<int64_t> i = integralValue(v);
  if (!i || *i <= 0)
    return fail("'" + key + "' must be a positive integer");
  return *i;
}

Expected<double> getNumber(const json::Value &v, StringRef key) {
  std::optional<double> d = v.getAsNumber();
  if (!d)
    return fail("'" + key + "' must be a number");
  return *d;
}

Error parseOptimizer(const json::Value &v, OptimizerConfig &opt) {
  const json::Object *obj = v.getAsObject();
  if (!obj)
    return fail("'optimizer' must be an object {\"type\": ..., \"params\": {...}}");
  for (const auto &kv : *obj)
    if (kv.first != "type" && kv.first != "params")
      return fail("'optimizer." + kv.first.str() + "' is not a DeepSpeed key; valid: type, params");
  std::optional<StringRef> type = obj->getString("type");
  if (!type)
    return fail("'optimizer.type' is missing; set it to \"AdamW\"");
  // DeepSpeed matches optimizer names case-insensitively.
  StringRef known;
  for (const char *t : kOptimizerTypes)
    if (StringRef(t).equals_insensitive(*type))
      known = t;
  if (known.empty())
    return fail("'optimizer.type' \"" + *type + "\" is not a DeepSpeed optimizer; did you mean \"" +
                nearest(kOptimizerTypes, *type) + "\"?");
  std::optional<OptimizerKind> kind = mlir::ds::symbolizeOptimizerKind(known);
  if (!kind)
    return fail("'optimizer.type' \"" + known +
                "\" is a DeepSpeed optimizer that ds does not implement yet; use \"AdamW\", "
                "\"Adam\", \"SGD\" or \"Muon\"");
  opt.type = *kind;
  bool adam = opt.type == OptimizerKind::adam || opt.type == OptimizerKind::adamw;
  bool muon = opt.type == OptimizerKind::muon;
  ArrayRef<const char *> valid = adam   ? ArrayRef<const char *>(kAdamParams)
                                 : muon ? ArrayRef<const char *>(kMuonParams)
                                        : ArrayRef<const char *>(kSgdParams);
  std::optional<double> lr, muonLr, adamLr;
  if (muon) { // MuonWithAuxAdam's defaults
    opt.momentum = defaults::kMuonMomentum;
    opt.beta1 = defaults::kMuonBeta1;
    opt.beta2 = defaults::kMuonBeta2;
    opt.eps = defaults::kMuonEps;
  }
  const json::Value *params = obj->get("params");
  const json::Object *p = params ? params->getAsObject() : nullptr;
  if (params && !p)
    return fail("'optimizer.params' must be an object");
  bool hasLr = false;
  for (const auto &kv : p ? *p : json::Object()) {
    StringRef key = kv.first;
    std::string full = ("optimizer.params." + key).str();
    if (!contains(valid, key))
      return fail("'" + full + "' is not a parameter of DeepSpeed's " + opt.name() +
                  "; did you mean '" + nearest(valid, key) + "'?");
    auto number = [&](double lo, double hi, double &out) -> Error {
      auto d = getNumber(kv.second, full);
      if (!d)
        return d.takeError();
      if (*d < lo || *d > hi)
        return fail("'" + full + "' must be >= 0");
      out = *d;
      return Error::success();
    };
    auto flag = [&](bool &out) -> Error {
      std::optional<bool> v = kv.second.getAsBoolean();
      if (!v)
        return fail("'" + full + "' must be true or false");
      out = *v;
      return Error::success();
    };
    Error e = Error::success();
    if (key == "lr" || key == "muon_lr" || key == "adam_lr") {
      double v = 0;
      e = number(0, 1e30, v);
      (key == "lr" ? lr : key == "muon_lr" ? muonLr : adamLr) = v;
      hasLr = true;
    } else if (key == "ns_method") {
      std::optional<StringRef> m = kv.second.getAsString();
      if (m != std::optional<StringRef>("standard"))
        return fail("'" + full + "': ds runs the standard quintic Newton-Schulz iteration "
                    "(\"standard\"); DeepSpeed's \"gram\" variant is not implemented yet. Set "
                    "it to \"standard\" or remove the key");
    } else if (key == "eps") {
      e = number(0, 1e30, opt.eps);
    } else if (key == "weight_decay") {
      e = number(0, 1e30, opt.weightDecay);
    } else if (key == "momentum") {
      e = number(0, 1e30, opt.momentum);
    } else if (key == "dampening") {
      e = number(-1e30, 1e30, opt.dampening);
    } else if (key == "nesterov") {
      e = flag(opt.nesterov);
    } else if (key == "betas") {
      const json::Array *arr = kv.second.getAsArray();
      if (!arr || arr->size() != 2 || !(*arr)[0].getAsNumber() || !(*arr)[1].getAsNumber())
        return fail("'" + full + "' must be a list of two numbers, e.g. [0.9, 0.999]");
      opt.beta1 = *(*arr)[0].getAsNumber();
      opt.beta2 = *(*arr)[1].getAsNumber();
      if (opt.beta1 < 0 || opt.beta1 >= 1 || opt.beta2 < 0 || opt.beta2 >= 1)
        return fail("'" + full + "' must be in [0, 1)");
    } else if (key == "adam_w_mode") {
      e = flag(opt.adamWMode);
    } else if (key == "bias_correction") {
      if (kv.second.getAsBoolean() != std::optional<bool>(true))
        return fail("'" + full + "': false is not implemented yet; remove the key");
    } else if (key == "amsgrad") {
      if (kv.second.getAsBoolean() != std::optional<bool>(false))
        return fail("'" + full + "': true is not implemented yet; remove the key");
    }
    // torch_adam and fused choose DeepSpeed's kernel, not the numbers.
    if (e)
      return e;
  }
  if (muon) {
    // muon_lr and adam_lr override lr for their group; MuonWithAuxAdam's defaults otherwise.
    opt.lr = muonLr ? *muonLr : lr ? *lr : defaults::kMuonLr;
    opt.auxLr = adamLr ? *adamLr : lr ? *lr : defaults::kMuonAuxLr;
    if (opt.momentum >= 1)
      return fail("'optimizer.params.momentum' must be in [0, 1) for Muon");
  } else if (lr) {
    opt.lr = *lr;
  }
  // DeepSpeed: the AdamW type is always decoupled; Adam follows adam_w_mode (default true).
  if (opt.type == OptimizerKind::adamw || muon)
    opt.adamWMode = true;
  if (opt.type == OptimizerKind::sgd) {
    if (!hasLr)
      return fail("'optimizer.params.lr' is required by SGD (torch.optim.SGD has no default)");
    if (opt.nesterov && (opt.momentum <= 0 || opt.dampening != 0))
      return fail("'optimizer.params.nesterov' needs momentum > 0 and dampening 0 (as "
                  "torch.optim.SGD)");
  }
  return Error::success();
}

/// DeepSpeed's schedulers: the enum of each, its name and its parameters.
struct SchedulerType {
  LRSchedule kind;
  const char *name;
  ArrayRef<const char *> params;
};
const SchedulerType kSchedulerTypes[] = {
    {LRSchedule::range_test, "LRRangeTest", kRangeTestParams},
    {LRSchedule::one_cycle, "OneCycle", kOneCycleParams},
    {LRSchedule::warmup, "WarmupLR", kWarmupParams},
    {LRSchedule::warmup_decay, "WarmupDecayLR", kWarmupDecayParams},
    {LRSchedule::warmup_cosine, "WarmupCosineLR", kWarmupCosineParams}};
const SchedulerType *schedulerType(StringRef name) {
  for (const SchedulerType &t : kSchedulerTypes)
    if (name == t.name)
      return &t;
  return nullptr;
}
std::vector<const char *> schedulerNames() {
  std::vector<const char *> names;
  for (const SchedulerType &t : kSchedulerTypes)
    names.push_back(t.name);
  return names;
}

/// What a scheduler's params said, for the checks after them.
struct SchedulerParamsSeen {
  bool hasTotal = false, hasMin = false, hasMax = false;
  std::optional<double> secondSize;
  std::optional<int64_t> secondStairs;
};

/// One of `scheduler.params` (`full` is its path), a valid key of the scheduler.
Error parseSchedulerParam(StringRef key, const json::Value &value, const std::string &full,
                          SchedulerConfig &sch, SchedulerParamsSeen &seen,
                          std::vector<std::string> &warnings) {
  auto flag = [&](bool &out) -> Error {
    std::optional<bool> b = value.getAsBoolean();
    if (!b)
      return fail("'" + full + "' must be true or false");
    out = *b;
    return Error::success();
  };
  if (key == "warmup_type") {
    std::optional<StringRef> t = value.getAsString();
    if (!t)
      return fail("'" + full + "' must be \"log\" or \"linear\"");
    if (*t != "log" && *t != "linear") {
      // DeepSpeed warns and uses log.
      warnings.push_back("'" + full + "' \"" + t->str() +
                         "\" is unknown; DeepSpeed and ds use \"log\"");
      sch.warmupLinear = false;
    } else {
      sch.warmupLinear = *t == "linear";
    }
    return Error::success();
  }
  if (key == "cycle_momentum" || key == "lr_range_test_staircase") {
    if (Error e = flag(key == "cycle_momentum" ? sch.cycleMomentum : sch.lrRangeTestStaircase))
      return e;
    return Error::success();
  }
  if (key == "last_batch_iteration") {
    if (value.getAsInteger() != std::optional<int64_t>(-1))
      return fail("'" + full + "': only -1 (a fresh start) is supported; resume restores "
                  "the schedule's position");
    return Error::success();
  }
  if (key == "warmup_num_steps" || key == "total_num_steps" || key.ends_with("_stair_count")) {
    std::optional<int64_t> i = value.getAsInteger();
    bool stairs = key.ends_with("_stair_count");
    if (!i || *i < (stairs ? 0 : 1))
      return fail("'" + full + "' must be a " + (stairs ? "non-negative" : "positive") +
                  " integer");
    if (key == "warmup_num_steps")
      sch.warmupNumSteps = *i;
    else if (key == "total_num_steps") {
      sch.totalNumSteps = *i;
      seen.hasTotal = true;
    } else if (key == "cycle_first_stair_count")
      sch.cycleFirstStairCount = *i;
    else
      seen.secondStairs = *i;
    return Error::success();
  }
  auto d = getNumber(value, full);
  if (!d)
    return d.takeError();
  // Sizes divide the batch position: they must be positive.
  bool size = key.ends_with("_step_size");
  if (size && *d <= 0)
    return fail("'" + full + "' must be > 0 (it divides the step count)");
  if (*d < 0)
    return fail("'" + full + "' must be >= 0");
  if ((key == "cycle_min_mom" || key == "cycle_max_mom") && *d >= 1)
    return fail("'" + full + "' must be in [0, 1): it becomes Adam's beta1");
  if (key == "warmup_min_lr")
    sch.warmupMinLr = *d;
  else if (key == "warmup_max_lr")
    sch.warmupMaxLr = *d;
  else if (key == "warmup_min_ratio")
    sch.warmupMinRatio = *d;
  else if (key == "cos_min_ratio")
    sch.cosMinRatio = *d;
  else if (key == "cycle_min_lr")
    sch.cycleMinLr = *d, seen.hasMin = true;
  else if (key == "cycle_max_lr")
    sch.cycleMaxLr = *d, seen.hasMax = true;
  else if (key == "decay_lr_rate")
    sch.decayLrRate = *d;
  else if (key == "cycle_first_step_size")
    sch.cycleFirstStepSize = *d;
  else if (key == "cycle_second_step_size")
    seen.secondSize = *d;
  else if (key == "decay_step_size")
    sch.decayStepSize = *d;
  else if (key == "cycle_min_mom")
    sch.cycleMinMom = *d;
  else if (key == "cycle_max_mom")
    sch.cycleMaxMom = *d;
  else if (key == "decay_mom_rate")
    sch.decayMomRate = *d;
  else if (key == "lr_range_test_min_lr")
    sch.lrRangeTestMinLr = *d;
  else if (key == "lr_range_test_step_size")
    sch.lrRangeTestStepSize = *d;
  else if (key == "lr_range_test_step_rate")
    sch.lrRangeTestStepRate = *d;
  return Error::success();
}

/// The checks and defaults after the params: required keys, OneCycle's second half and
/// cycle_momentum's hold on the optimizer's betas.
Error finishScheduler(const std::string &name, OptimizerConfig &opt, SchedulerConfig &sch,
                      const SchedulerParamsSeen &seen, std::vector<std::string> &warnings) {
  if ((sch.type == LRSchedule::warmup_decay || sch.type == LRSchedule::warmup_cosine) &&
      !seen.hasTotal)
    return fail("'scheduler.params.total_num_steps' is required by " + name +
                " (the step at which the decay ends)");
  if (sch.type == LRSchedule::one_cycle) {
    if (!seen.hasMin || !seen.hasMax)
      return fail("'scheduler.params." +
                  std::string(seen.hasMin ? "cycle_max_lr" : "cycle_min_lr") +
                  "' is required by OneCycle (the lr at the cycle's ends and peak)");
    // The second half and its stairs default to the first's.
    sch.cycleSecondStepSize = seen.secondSize ? *seen.secondSize : sch.cycleFirstStepSize;
    sch.cycleSecondStairCount =
        seen.secondStairs ? *seen.secondStairs : sch.cycleFirstStairCount;
    if (sch.cycleMomentum) {
      if (opt.type == OptimizerKind::adam || opt.type == OptimizerKind::adamw) {
        // DeepSpeed sets each group's betas to (cycled momentum, 0.99).
        if (opt.beta2 != defaults::kCycleMomentumBeta2) {
          char b2[32];
          std::snprintf(b2, sizeof b2, "%g", opt.beta2);
          warnings.push_back("OneCycle's cycle_momentum sets Adam's betas to (momentum, 0.99) as "
                             "DeepSpeed does; optimizer.params.betas[1] " + std::string(b2) +
                             " is not used");
        }
        opt.beta2 = defaults::kCycleMomentumBeta2;
        opt.beta1 = sch.cycleMinMom;
        opt.scheduledBeta1 = true;
      } else {
        warnings.push_back("OneCycle's cycle_momentum is disabled because " + opt.name().str() +
                           " has no betas (as DeepSpeed does)");
        sch.cycleMomentum = false;
      }
    }
  }
  return Error::success();
}

/// `scheduler {type, params}`; `opt` is the parsed optimizer, whose lr is the default of some
/// maxima and whose betas OneCycle's cycle_momentum takes over.
Error parseScheduler(const json::Value &v, OptimizerConfig &opt, SchedulerConfig &sch,
                     std::vector<std::string> &warnings) {
  const json::Object *obj = v.getAsObject();
  if (!obj)
    return fail("'scheduler' must be an object {\"type\": ..., \"params\": {...}}");
  for (const auto &kv : *obj)
    if (kv.first != "type" && kv.first != "params")
      return fail("'scheduler." + kv.first.str() + "' is not a DeepSpeed key; valid: type, params");
  std::optional<StringRef> type = obj->getString("type");
  if (!type)
    return fail("'scheduler.type' is missing; e.g. \"WarmupLR\"");
  const SchedulerType *known = schedulerType(*type);
  if (!known)
    return fail("'scheduler.type' \"" + *type + "\" is not a DeepSpeed scheduler; did you mean \"" +
                nearest(schedulerNames(), *type) + "\"?");
  sch.type = known->kind;
  const std::string name = known->name;
  // DeepSpeed's defaults: WarmupLR warms up to the optimizer's lr, WarmupDecayLR to 0.001.
  sch.warmupMaxLr = sch.type == LRSchedule::warmup_decay ? defaults::kWarmupDecayMaxLr : opt.lr;
  const json::Object *p = obj->getObject("params");
  if (obj->get("params") && !p)
    return fail("'scheduler.params' must be an object");
  ArrayRef<const char *> valid = known->params;
  SchedulerParamsSeen seen;
  for (const auto &kv : p ? *p : json::Object()) {
    StringRef key = kv.first;
    std::string full = ("scheduler.params." + key).str();
    if (!contains(kAllSchedulerParams, key))
      return fail("'" + full + "' is not a parameter of DeepSpeed's schedulers; did you mean '" +
                  nearest(valid, key) + "'?");
    if (!contains(valid, key)) {
      std::string owner;
      for (const SchedulerType &t : kSchedulerTypes)
        if (contains(t.params, key))
          owner += (owner.empty() ? "" : ", ") + std::string(t.name);
      return fail("'" + full + "' is not a parameter of " + name + " (it belongs to " + owner +
                  "); " + name + " takes: " + join(valid.begin(), valid.end(), ", "));
    }
    if (Error e = parseSchedulerParam(key, kv.second, full, sch, seen, warnings))
      return e;
  }
  return finishScheduler(name, opt, sch, seen, warnings);
}

/// One rule of TensorParallelSpecs, its regular expression checked; `where` names the key.
Error addTensorParallelRule(TensorParallelSpecs &specs, StringRef role, StringRef regex,
                            const Twine &where) {
  std::string why;
  if (!llvm::Regex(regex).isValid(why))
    return fail("'" + where + "' is not a regular expression ds can read (" + why + "): '" +
                regex + "'");
  specs.rules.push_back((Twine(role) + "=" + regex).str());
  return Error::success();
}

/// `partition_config`: use_default_specs and layer_specs, each a list of patterns with a
/// partition_type (column, row or skip). partition_dim must be the one ds splits (0 for
/// column, 1 for row: a linear's weight is [out, in]); shape is not needed (ds finds a fused
/// projection's segments in the graph), so it gets a warning; model_types is ignored.
Error parsePartitionConfig(const json::Value &v, TensorParallelSpecs &specs,
                           std::vector<std::string> &warnings) {
  const json::Object *obj = v.getAsObject();
  if (!obj)
    return fail("'tensor_parallel.partition_config' must be an object with layer_specs");
  for (const auto &kv : *obj) {
    StringRef key = kv.first;
    std::string full = ("tensor_parallel.partition_config." + key).str();
    if (!contains(kPartitionConfigKeys, key))
      return fail("'" + full + "' is not a DeepSpeed partition_config key; did you mean '" +
                  nearest(kPartitionConfigKeys, key) + "'?");
    if (key == "use_default_specs") {
      std::optional<bool> b = kv.second.getAsBoolean();
      if (!b)
        return fail("'" + full + "' must be true or false");
      specs.useDefaultSpecs = *b;
      continue;
    }
    const json::Array *list = kv.second.getAsArray();
    if (!list)
      return fail("'" + full + "' must be a list of {\"patterns\": [...], \"partition_type\": "
                  "\"column\" | \"row\" | \"skip\"}");
    for (auto [i, spec] : llvm::enumerate(*list)) {
      std::string at = full + "[" + std::to_string(i) + "]";
      const json::Object *so = spec.getAsObject();
      if (!so)
        return fail("'" + at + "' must be an object with patterns and partition_type");
      for (const auto &skv : *so)
        if (!contains(kLayerSpecKeys, skv.first))
          return fail("'" + at + "." + StringRef(skv.first) + "' is not a DeepSpeed layer spec "
                      "key; did you mean '" + nearest(kLayerSpecKeys, skv.first) + "'?");
      std::optional<StringRef> type = so->getString("partition_type");
      if (!type || (*type != "column" && *type != "row" && *type != "skip"))
        return fail("'" + at + ".partition_type' must be \"column\", \"row\" or \"skip\"");
      if (const json::Value *pd = so->get("partition_dim")) {
        std::optional<int64_t> d = pd->getAsInteger();
        int64_t want = *type == "row" ? 1 : 0;
        if (!d || (*type != "skip" && *d != want))
          return fail("'" + at + ".partition_dim' must be " + std::to_string(want) + ": ds " +
                      "splits a " + *type + "-parallel linear's weight [out, in] along " +
                      "dimension " + std::to_string(want));
      }
      if (so->get("shape"))
        warnings.push_back("'" + at + ".shape' is not needed: ds finds a fused projection's "
                           "segments in the graph (ds-opt's summary lists them)");
      const json::Array *patterns = so->getArray("patterns");
      if (!patterns || patterns->empty())
        return fail("'" + at + ".patterns' must be a non-empty list of regular expressions");
      for (const json::Value &p : *patterns) {
        std::optional<StringRef> re = p.getAsString();
        if (!re)
          return fail("'" + at + ".patterns' must hold strings");
        if (Error e = addTensorParallelRule(specs, *type, *re, at + ".patterns"))
          return e;
      }
    }
  }
  return Error::success();
}

/// An HF base_model_tp_plan: {"layers.*.self_attn.q_proj": "colwise", ...}, module names with
/// `*` for an index, relative to the base model; colwise and rowwise, as DeepSpeed converts.
Error parseTpPlan(const json::Value &v, TensorParallelSpecs &specs) {
  const json::Object *obj = v.getAsObject();
  if (!obj)
    return fail("'tensor_parallel.tp_plan' must be an object of module patterns, e.g. "
                "{\"layers.*.self_attn.q_proj\": \"colwise\"}");
  for (const auto &kv : *obj) {
    std::string full = ("tensor_parallel.tp_plan." + kv.first).str();
    std::optional<StringRef> style = kv.second.getAsString();
    if (!style || (*style != "colwise" && *style != "rowwise"))
      return fail("'" + full + "' must be \"colwise\" or \"rowwise\" (the other tp_plan "
                  "styles, such as colwise_rep or sequence_parallel, are not supported, as in "
                  "DeepSpeed)");
    std::string re = "(.*\\.)?";
    for (char c : StringRef(kv.first))
      re += c == '*' ? std::string("[^.]+") : c == '.' ? std::string("\\.") : std::string(1, c);
    re += "\\.(weight|bias)$";
    if (Error e = addTensorParallelRule(specs, *style == "colwise" ? "column" : "row", re, full))
      return e;
  }
  return Error::success();
}

/// `tensor_parallel`: autotp_size, and the layer rules of partition_config (which, as in
/// DeepSpeed, takes precedence over a tp_plan).
Error parseTensorParallel(const json::Value &v, int64_t &size, TensorParallelSpecs &specs,
                          std::vector<std::string> &warnings) {
  const json::Object *obj = v.getAsObject();
  if (!obj)
    return fail("'tensor_parallel' must be an object, e.g. {\"autotp_size\": 2}");
  for (const auto &kv : *obj) {
    StringRef key = kv.first;
    if (!contains(kTensorParallelKeys, key))
      return fail("'tensor_parallel." + key + "' is not a DeepSpeed tensor_parallel key; did "
                  "you mean '" + nearest(kTensorParallelKeys, key) + "'?");
    if (key == "partition_config" || key == "tp_plan")
      continue;
    if (key != "autotp_size")
      return fail("'tensor_parallel." + key + "' is not implemented by ds yet (ds-tensor-parallel "
                  "finds the layers to split in the graph, or follows partition_config); "
                  "remove it");
    auto i = getPositiveInt(kv.second, "tensor_parallel.autotp_size");
    if (!i)
      return i.takeError();
    size = *i;
  }
  if (const json::Value *pc = obj->get("partition_config")) {
    if (Error e = parsePartitionConfig(*pc, specs, warnings))
      return e;
    if (obj->get("tp_plan"))
      warnings.push_back("'tensor_parallel.tp_plan' is ignored: partition_config takes "
                         "precedence over it, as in DeepSpeed");
  } else if (const json::Value *plan = obj->get("tp_plan")) {
    if (Error e = parseTpPlan(*plan, specs))
      return e;
  }
  return Error::success();
}

/// `expert_parallel` (AutoEP): `enabled` and `autoep_size` decide the experts' ranks.
Error parseExpertParallel(const json::Value &v, int64_t &size,
                          std::vector<std::string> &warnings) {
  const json::Object *obj = v.getAsObject();
  if (!obj)
    return fail("'expert_parallel' must be an object, e.g. {\"enabled\": true, "
                "\"autoep_size\": 2}");
  bool enabled = false;
  int64_t ranks = 1;
  for (const auto &kv : *obj) {
    StringRef key = kv.first;
    std::string full = ("expert_parallel." + key).str();
    if (key == "enabled") {
      std::optional<bool> b = kv.second.getAsBoolean();
      if (!b)
        return fail("'" + full + "' must be true or false");
      enabled = *b;
    } else if (key == "autoep_size") {
      auto i = getPositiveInt(kv.second, full);
      if (!i)
        return i.takeError();
      ranks = *i;
    } else if (contains(kExpertParallelFindKeys, key)) {
      warnings.push_back("'" + full + "' is ignored: ds finds the experts in the graph (the "
                         "parameters that only the routed experts' products read)");
    } else if (contains(kExpertParallelRoutingKeys, key)) {
      return fail("'" + full + "' would replace the model's own routing, which ds trains as "
                  "exported; it is not implemented: remove it");
    } else {
      return fail("'" + full + "' is not an expert_parallel key (ds reads enabled and "
                  "autoep_size)");
    }
  }
  size = enabled ? ranks : 1;
  return Error::success();
}

/// `moe` (ds's block, deepspeed.moe.layer.MoE's arguments): capacity-based token dropping.
Error parseMoe(const json::Value &v, MoeConfig &moe, std::vector<std::string> &warnings) {
  const json::Object *obj = v.getAsObject();
  if (!obj)
    return fail("'moe' must be an object, e.g. {\"capacity_factor\": 1.0, \"min_capacity\": 4, "
                "\"drop_tokens\": true}");
  moe.dropTokens = true; // DeepSpeed's MoE drops by default
  for (const auto &kv : *obj) {
    StringRef key = kv.first;
    std::string full = ("moe." + key).str();
    const json::Value &val = kv.second;
    auto flag = [&]() -> Expected<bool> {
      std::optional<bool> b = val.getAsBoolean();
      if (!b)
        return fail("'" + full + "' must be true or false");
      return *b;
    };
    if (!contains(kMoeKeys, key))
      return fail("'" + full + "' is not a moe key; did you mean '" + nearest(kMoeKeys, key) +
                  "'?");
    if (key == "capacity_factor") {
      std::optional<double> d = val.getAsNumber();
      if (!d || !(*d > 0))
        return fail("'" + full + "' must be a number > 0");
      moe.capacityFactor = *d;
    } else if (key == "min_capacity") {
      std::optional<int64_t> i = integralValue(val);
      if (!i || *i < 0)
        return fail("'" + full + "' must be an integer >= 0");
      moe.minCapacity = *i;
    } else if (key == "drop_tokens") {
      Expected<bool> b = flag();
      if (!b)
        return b.takeError();
      moe.dropTokens = *b;
    } else if (key == "eval_capacity_factor") {
      warnings.push_back("'" + full + "' is ignored: ds compiles the training step, where "
                         "capacity_factor applies");
    } else if (key == "noisy_gate_policy") {
      if (!val.getAsNull() && val.getAsString() != std::optional<StringRef>("None"))
        return fail("'" + full + "' would add noise to the model's own router, which ds trains "
                    "as exported; it is not implemented: remove it");
    } else { // use_rts, top2_2nd_expert_sampling: random choices the model's routing lacks
      Expected<bool> b = flag();
      if (!b)
        return b.takeError();
      if (*b)
        return fail("'" + full + "' would make the model's routing random (DeepSpeed's gate "
                    "samples it); ds keeps the exported router's choices: set it to false");
    }
  }
  return Error::success();
}

/// What expert parallelism composes with so far: the experts split over groups of
/// autoep_size data-parallel ranks, at any ZeRO stage, without tp, sp or pipeline stages.
Error checkExpertParallel(const DeepSpeedConfig &cfg, int64_t dataParallel) {
  if (cfg.expertParallelSize == 1)
    return Error::success();
  auto notYet = [&](StringRef what) {
    return fail("expert_parallel with " + what + " is not implemented by ds yet; expert "
                "parallelism runs over data-parallel ranks alone");
  };
  if (cfg.tensorParallelSize > 1)
    return notYet("tensor_parallel.autotp_size > 1");
  if (cfg.sequenceParallelSize > 1)
    return notYet("sequence_parallel_size > 1");
  if (cfg.pipeline.stages > 1)
    return notYet("pipeline.stages > 1");
  if (dataParallel % cfg.expertParallelSize != 0)
    return fail(formatv("expert_parallel.autoep_size {0} does not divide the data-parallel "
                        "size {1}: the experts split over groups of autoep_size of the "
                        "data-parallel ranks; choose a divisor of {1}",
                        cfg.expertParallelSize, dataParallel));
  return Error::success();
}

Error parsePipeline(const json::Value &v, PipelineConfig &p, std::vector<std::string> &warnings) {
  const json::Object *obj = v.getAsObject();
  if (!obj)
    return fail("'pipeline' must be an object, e.g. {\"stages\": 2}");
  for (const auto &kv : *obj) {
    StringRef key = kv.first;
    std::string full = ("pipeline." + key).str();
    if (!contains(kPipelineKeys, key))
      return fail("'" + full + "' is not a pipeline key; did you mean '" +
                  nearest(kPipelineKeys, key) + "'?");
    const json::Value &val = kv.second;
    if (key == "stages") {
      if (auto s = val.getAsString(); s && *s == "auto") {
        p.stages = 1; // DeepSpeed takes the count from a PipelineModule; an export has none
        continue;
      }
      auto i = getPositiveInt(val, full);
      if (!i)
        return i.takeError();
      p.stages = *i;
    } else if (key == "partition") {
      auto s = val.getAsString();
      if (!s || (*s != "best" && *s != "parameters" && *s != "uniform" &&
                 !s->starts_with("type:")))
        return fail("'pipeline.partition' must be \"best\" (the cost model), \"parameters\", "
                    "\"uniform\" or \"type:REGEX\" (a module path pattern)");
      if (s->starts_with("type:")) {
        std::string error;
        if (!llvm::Regex(s->drop_front(5)).isValid(error))
          return fail("'pipeline.partition' \"" + *s + "\": the pattern is not a valid "
                      "regular expression (" + error + ")");
      }
      p.partition = s->str();
    } else if (key == "schedule") {
      auto s = val.getAsString();
      std::optional<PipelineSchedule> schedule =
          s ? mlir::ds::symbolizePipelineSchedule(*s) : std::nullopt;
      if (!schedule)
        return fail("'pipeline.schedule' (a ds key) must be \"1f1b\" or \"interleaved\"");
      p.schedule = *schedule;
    } else if (key == "virtual_stages") {
      auto i = getPositiveInt(val, full);
      if (!i)
        return i.takeError();
      p.virtualStages = *i;
    } else if (key == "activation_checkpoint_interval") {
      std::optional<int64_t> i = val.getAsInteger();
      if (!i || *i != 0)
        return fail("'pipeline.activation_checkpoint_interval' (layers per checkpoint) is not "
                    "implemented by ds yet; remove it and add \"activation_checkpointing\": {} "
                    "(each stage recomputes its blocks; \"number_checkpoints\" groups them)");
    } else if (key == "seed_layers") {
      if (val.getAsBoolean().value_or(false))
        warnings.push_back("'pipeline.seed_layers' is ignored: ds starts from the exported "
                           "weights, not from per-layer random seeds");
    } else { // pipe_partitioned, grad_partitioned: how DeepSpeed moves tp-split activations
      if (!val.getAsBoolean())
        return fail("'" + full + "' must be true or false");
    }
  }
  if (p.schedule == PipelineSchedule::interleaved && p.virtualStages < 2)
    return fail("'pipeline.schedule' \"interleaved\" needs 'pipeline.virtual_stages' >= 2 "
                "(model chunks per rank)");
  if (p.schedule == PipelineSchedule::one_f_one_b && p.virtualStages != 1)
    return fail("'pipeline.virtual_stages' " + std::to_string(p.virtualStages) +
                " needs 'pipeline.schedule': \"interleaved\" (1f1b runs one chunk per rank)");
  return Error::success();
}

/// zero_optimization.offload_optimizer or .offload_param (`section`).
/// Why an offload or aio key that DeepSpeed reads changes nothing in ds (printed as a note).
std::string noEffectReason(StringRef key) {
  if (key == "pin_memory")
    return "host memory is the CPU device's own (pinning matters for a GPU's copies)";
  if (key == "buffer_count" || key == "buffer_size" || key == "max_in_cpu")
    return "the compiler's plan places every offloaded tensor, so there is no staging pool "
           "to size";
  if (key == "intra_op_parallelism" || key == "thread_count")
    return "each rank's swap file is driven by one io_uring queue on its transfer stream "
           "(queue_depth requests in flight)";
  if (key == "overlap_events")
    return "transfers always overlap compute on the transfer stream";
  return "DeepSpeed's initialization detail, with no counterpart in a compiled step";
}

Error parseOffload(StringRef section, const json::Value &v, OffloadConfig &o,
                   std::vector<std::string> &warnings) {
  bool isParam = section == "offload_param";
  std::string where = ("zero_optimization." + section).str();
  if (v.kind() == json::Value::Null)
    return Error::success();
  const json::Object *obj = v.getAsObject();
  if (!obj)
    return fail("'" + where + "' must be an object, e.g. {\"device\": \"cpu\"}");
  ArrayRef<const char *> keys = isParam ? ArrayRef<const char *>(kOffloadParamKeys)
                                        : ArrayRef<const char *>(kOffloadOptimizerKeys);
  for (const auto &kv : *obj) {
    StringRef key = kv.first;
    std::string full = where + "." + key.str();
    const json::Value &val = kv.second;
    if (!contains(keys, key))
      return fail("'" + full + "' is not a DeepSpeed " + section + " key; did you mean '" +
                  nearest(keys, key) + "'?");
    auto integer = [&](int64_t &out, int64_t min) -> Error {
      std::optional<int64_t> i = integralValue(val);
      if (!i || *i < min)
        return fail("'" + full + "' must be an integer >= " + std::to_string(min));
      out = *i;
      return Error::success();
    };
    Error e = Error::success();
    if (key == "device") {
      std::optional<StringRef> d = val.getAsString();
      std::optional<OffloadDevice> device = d ? mlir::ds::symbolizeOffloadDevice(*d) : std::nullopt;
      if (!device)
        return fail("'" + full + "' must be \"none\", \"cpu\" or \"nvme\"");
      o.device = *device;
    } else if (key == "nvme_path") {
      std::optional<StringRef> p = val.getAsString();
      if (!p && val.kind() != json::Value::Null)
        return fail("'" + full + "' must be a directory path");
      o.nvmePath = p ? p->str() : "";
    } else if (key == "pin_memory" || key == "fast_init" || key == "pipeline_read" ||
               key == "pipeline_write") {
      std::optional<bool> b = val.getAsBoolean();
      if (!b)
        return fail("'" + full + "' must be true or false");
      if (key == "pin_memory")
        o.pinMemory = *b;
    } else if (key == "buffer_count") {
      e = integer(o.bufferCount, 1);
    } else if (key == "buffer_size") {
      e = integer(o.bufferSize, 1);
    } else if (key == "max_in_cpu") {
      e = integer(o.maxInCpu, 0);
    } else if (key == "ratio") {
      std::optional<double> r = val.getAsNumber();
      if (!r || *r <= 0 || *r > 1)
        return fail("'" + full + "' must be in (0, 1]");
      if (*r != 1.0)
        return fail("'" + full + "' below 1 (ZeRO-Offload++'s partial offload) is not "
                    "implemented by ds yet; remove it or set 1.0");
    }
    if (e)
      return e;
    // Keys that shape DeepSpeed's CUDA-side staging, which ds's plan makes unneeded: the
    // plan places every byte, and the runtime moves each value in one request stream.
    if (key == "pin_memory" || key == "fast_init" || key == "pipeline_read" ||
        key == "pipeline_write" || key == "buffer_count" || key == "buffer_size" ||
        key == "max_in_cpu")
      warnings.push_back("'" + full + "' has no effect in ds: " + noEffectReason(key));
  }
  return Error::success();
}

Error parseAio(const json::Value &v, AioConfig &a, std::vector<std::string> &warnings) {
  const json::Object *obj = v.getAsObject();
  if (!obj)
    return fail("'aio' must be an object, e.g. {\"block_size\": 1048576}");
  for (const auto &kv : *obj) {
    StringRef key = kv.first;
    std::string full = ("aio." + key).str();
    const json::Value &val = kv.second;
    if (!contains(kAioKeys, key))
      return fail("'" + full + "' is not a DeepSpeed aio key; did you mean '" +
                  nearest(kAioKeys, key) + "'?");
    if (key == "single_submit" || key == "overlap_events" || key == "use_gds") {
      std::optional<bool> b = val.getAsBoolean();
      if (!b)
        return fail("'" + full + "' must be true or false");
      if (key == "use_gds" && *b)
        return fail("'aio.use_gds' (GPUDirect Storage) is not implemented by ds; remove it");
      (key == "single_submit" ? a.singleSubmit : a.overlapEvents) = *b;
      if (key == "overlap_events")
        warnings.push_back("'aio.overlap_events' has no effect in ds: " + noEffectReason(key));
      continue;
    }
    std::optional<int64_t> i = integralValue(val);
    if (!i || *i < 1)
      return fail("'" + full + "' must be a positive integer");
    if (key == "block_size")
      a.blockSize = *i;
    else if (key == "queue_depth")
      a.queueDepth = *i;
    else
      a.intraOpParallelism = *i;
    if (key == "intra_op_parallelism" || key == "thread_count")
      warnings.push_back("'" + full + "' has no effect in ds: " + noEffectReason(key));
  }
  return Error::success();
}

/// `activation_checkpointing`: present, it turns on the compiler's recomputation
/// (ds-activation-checkpoint) at the model's repeated blocks.
Error parseCheckpointing(const json::Value &v, CheckpointingConfig &c,
                         std::vector<std::string> &warnings) {
  const json::Object *obj = v.getAsObject();
  if (!obj)
    return fail("'activation_checkpointing' must be an object, e.g. {\"cpu_checkpointing\": "
                "false}");
  c.enabled = true;
  for (const auto &kv : *obj) {
    StringRef key = kv.first;
    std::string full = ("activation_checkpointing." + key).str();
    const json::Value &val = kv.second;
    if (!contains(kCheckpointingKeys, key))
      return fail("'" + full + "' is not a DeepSpeed activation_checkpointing key; did you "
                  "mean '" + nearest(kCheckpointingKeys, key) + "'?");
    if (key == "number_checkpoints") {
      if (val.kind() == json::Value::Null)
        continue;
      std::optional<int64_t> i = integralValue(val);
      if (!i || *i < 1)
        return fail("'" + full + "' must be a positive integer (segments; null: one per "
                    "repeated block)");
      c.segments = *i;
      continue;
    }
    std::optional<bool> b = val.getAsBoolean();
    if (!b)
      return fail("'" + full + "' must be true or false");
    if (key == "cpu_checkpointing")
      c.cpu = *b;
    else if (key == "partition_activations" && *b)
      return fail("'" + full + "' (sharding the checkpoints over the tensor-parallel group) is "
                  "not implemented by ds yet; set it to false");
    else if (*b && key != "partition_activations")
      warnings.push_back("'" + full + "' is ignored: ds plans every buffer at compile time "
                         "(contiguous, synchronized and measured by construction)");
  }
  return Error::success();
}

/// The offload blocks against the rest of the config (DeepSpeed's rules, and what ds has).
Error checkOffload(const DeepSpeedConfig &cfg) {
  const OffloadConfig &o = cfg.zero.offloadOptimizer, &p = cfg.zero.offloadParam;
  if (!o.on() && !p.on())
    return Error::success();
  int64_t stage = cfg.zero.stage;
  if (o.on() && stage == 0)
    return fail("'zero_optimization.offload_optimizer' needs ZeRO stage 1, 2 or 3 "
                "(DeepSpeed's rule); set zero_optimization.stage");
  if (o.device == OffloadDevice::nvme && stage != 3)
    return fail("'zero_optimization.offload_optimizer.device' \"nvme\" needs ZeRO stage 3 "
                "(ZeRO-Infinity); set zero_optimization.stage to 3 or use \"cpu\"");
  if (p.on() && stage != 3)
    return fail("'zero_optimization.offload_param' needs ZeRO stage 3 (DeepSpeed's rule); set "
                "zero_optimization.stage to 3");
  for (auto [name, c] : {std::pair<const char *, const OffloadConfig *>{"offload_optimizer", &o},
                         {"offload_param", &p}})
    if (c->device == OffloadDevice::nvme && c->nvmePath.empty())
      return fail(std::string("'zero_optimization.") + name + "' on \"nvme\" needs "
                  "'nvme_path': the directory of the swap files (on a fast local drive)");
  if (o.device == OffloadDevice::nvme && p.device == OffloadDevice::nvme &&
      o.nvmePath != p.nvmePath)
    return fail("offload_optimizer.nvme_path and offload_param.nvme_path differ; ds keeps one "
                "swap file per rank: give both the same directory");
  if (cfg.pipeline.stages > 1 || cfg.tensorParallelSize > 1 || cfg.sequenceParallelSize > 1)
    return fail("zero_optimization.offload_* with pipeline, tensor or sequence parallelism is "
                "not implemented by ds yet; offload runs with data parallelism alone");
  if (cfg.precision.mixed())
    return fail("zero_optimization.offload_* with " +
                mlir::ds::stringifyPrecision(cfg.precision.dtype) + " is not "
                "implemented by ds yet; offload trains in fp32 for now");
  if (o.on() && cfg.optimizer.type != OptimizerKind::adam &&
      cfg.optimizer.type != OptimizerKind::adamw)
    return fail("zero_optimization.offload_optimizer runs DeepSpeed's CPU Adam: the optimizer "
                "must be Adam or AdamW, not " + cfg.optimizer.name());
  return Error::success();
}

Error parseZero(const json::Value &v, ZeroConfig &z, std::vector<std::string> &warnings) {
  const json::Object *obj = v.getAsObject();
  if (!obj)
    return fail("'zero_optimization' must be an object, e.g. {\"stage\": 0}");
  for (const auto &kv : *obj) {
    StringRef key = kv.first;
    std::string full = ("zero_optimization." + key).str();
    if (!contains(kZeroKeys, key))
      return fail("'" + full + "' is not a DeepSpeed ZeRO key; did you mean '" +
                  nearest(kZeroKeys, key) + "'?");
    const json::Value &val = kv.second;
    if (contains(kZeroUnimplemented, key)) {
      bool off = val.kind() == json::Value::Null || val.getAsBoolean() == std::optional(false) ||
                 val.getAsInteger() == std::optional<int64_t>(0) ||
                 val.getAsInteger() == std::optional<int64_t>(-1);
      if (const json::Object *o = val.getAsObject())
        off = o->getString("device") == std::optional<StringRef>("none") || o->empty();
      if (!off)
        return fail("'" + full + "' is a DeepSpeed ZeRO feature that ds does not implement yet; "
                    "remove it");
      continue;
    }
    auto integer = [&](int64_t &out) -> Error {
      std::optional<int64_t> i = integralValue(val);
      if (!i || *i < 0)
        return fail("'" + full + "' must be a non-negative integer");
      out = *i;
      return Error::success();
    };
    auto flag = [&](bool &out) -> Error {
      std::optional<bool> b = val.getAsBoolean();
      if (!b)
        return fail("'" + full + "' must be true or false");
      out = *b;
      return Error::success();
    };
    StringRef k = key;
    k.consume_front("stage3_");
    Error e = Error::success();
    int64_t ignored = 0;
    if (key == "stage")
      e = integer(z.stage);
    else if (k == "reduce_bucket_size")
      e = integer(z.reduceBucketSize);
    else if (k == "allgather_bucket_size")
      e = integer(z.allgatherBucketSize);
    else if (k == "prefetch_bucket_size")
      e = integer(z.prefetchBucketSize);
    else if (k == "param_persistence_threshold")
      e = integer(z.paramPersistenceThreshold);
    else if (k == "max_live_parameters")
      e = integer(z.maxLiveParameters);
    else if (k == "max_reuse_distance")
      e = integer(z.maxReuseDistance);
    else if (k == "overlap_comm")
      e = flag(z.overlapComm);
    else if (k == "reduce_scatter")
      e = flag(z.reduceScatter);
    else if (k == "contiguous_gradients")
      e = flag(z.contiguousGradients);
    else if (key == "offload_optimizer" || key == "offload_param")
      e = parseOffload(key, val, key == "offload_param" ? z.offloadParam : z.offloadOptimizer,
                       warnings);
    else if (k == "sub_group_size" || k == "model_persistence_threshold" ||
             k == "module_granularity_threshold")
      e = integer(ignored);
    if (e)
      return e;
    if (key == "stage" && z.stage > 3)
      return fail("'zero_optimization.stage' must be 0, 1, 2 or 3");
  }
  return Error::success();
}

/// `fp16` or `bf16` (alias `bfloat16`): 16-bit training, off unless `enabled`.
Error parsePrecision(StringRef section, const json::Value &v, PrecisionConfig &p) {
  const json::Object *obj = v.getAsObject();
  if (!obj)
    return fail("'" + section + "' must be an object, e.g. {\"enabled\": true}");
  bool fp16 = section == "fp16";
  ArrayRef<const char *> keys = fp16 ? ArrayRef<const char *>(kFp16Keys)
                                     : ArrayRef<const char *>(kBf16Keys);
  bool enabled = false;
  PrecisionConfig out = p;
  for (const auto &kv : *obj) {
    StringRef key = kv.first;
    std::string full = (section + "." + key).str();
    if (!contains(keys, key))
      return fail("'" + full + "' is not a DeepSpeed " + section + " key; did you mean '" +
                  nearest(keys, key) + "'?");
    const json::Value &val = kv.second;
    auto flag = [&]() -> Expected<bool> {
      if (std::optional<bool> b = val.getAsBoolean())
        return *b;
      return fail("'" + full + "' must be true or false");
    };
    auto number = [&](double lo) -> Expected<double> {
      std::optional<double> d = val.getAsNumber();
      if (!d || *d < lo)
        return fail(formatv("'{0}' must be a number >= {1}", full, lo).str());
      return *d;
    };
    auto integer = [&](int64_t lo) -> Expected<int64_t> {
      std::optional<int64_t> i = integralValue(val);
      if (!i || *i < lo)
        return fail(formatv("'{0}' must be an integer >= {1}", full, lo).str());
      return *i;
    };
    if (key == "enabled") {
      auto b = flag();
      if (!b)
        return b.takeError();
      enabled = *b;
    } else if (key == "auto_cast" || key == "fp16_master_weights_and_grads" ||
               key == "check_grad_overflow" || key == "bf16_master_weights_and_grads" ||
               key == "bf16_optimizer_states") {
      auto b = flag();
      if (!b)
        return b.takeError();
      if (*b)
        return fail("'" + full + "': true is not implemented yet; remove the key");
    } else if (key == "immediate_grad_update") {
      auto b = flag();
      if (!b)
        return b.takeError(); // either way: ds accumulates 16-bit gradients in place
    } else if (key == "loss_scale" || key == "min_loss_scale") {
      auto d = number(key == "loss_scale" ? 0.0 : 1e-30);
      if (!d)
        return d.takeError();
      (key == "loss_scale" ? out.lossScale : out.minLossScale) = *d;
    } else if (key == "consecutive_hysteresis") {
      auto b = flag();
      if (!b)
        return b.takeError();
      out.consecutiveHysteresis = *b;
    } else {
      auto i = integer(key == "initial_scale_power" ? 0 : 1);
      if (!i)
        return i.takeError();
      (key == "initial_scale_power" ? out.initialScalePower
       : key == "loss_scale_window" ? out.lossScaleWindow
                                    : out.hysteresis) = *i;
    }
  }
  if (!enabled)
    return Error::success();
  if (out.initialScalePower > 63)
    return fail("'" + section + ".initial_scale_power' must be at most 63");
  if (p.mixed())
    return fail("'fp16' and 'bf16' are both enabled; enable one of them");
  out.dtype = fp16 ? Precision::fp16 : Precision::bf16;
  p = out;
  return Error::success();
}

} // namespace

Expected<DeepSpeedConfig> parseDeepSpeedConfig(StringRef text, int64_t worldSize,
                                               int64_t ranks) {
  Expected<json::Value> parsed = json::parse(text);
  if (!parsed)
    return fail("not valid JSON: " + toString(parsed.takeError()));
  const json::Object *root = parsed->getAsObject();
  if (!root)
    return fail("the config must be a JSON object");
  DeepSpeedConfig cfg;
  std::optional<int64_t> tbs, mb, gas;
  for (const auto &kv : *root) {
    StringRef key = kv.first;
    if (!contains(kDeepSpeedKeys, key))
      return fail("'" + key + "' is not a DeepSpeed config key; did you mean '" +
                  nearest(kDeepSpeedKeys, key) + "'?");
    if (contains(kWarnOnlyKeys, key)) {
      cfg.warnings.push_back(("'" + key + "' is ignored by ds (it does not change the numbers)").str());
      continue;
    }
    if (!contains(kImplementedKeys, key))
      return fail("'" + key + "' is a DeepSpeed key that ds does not implement yet; remove it");
    const json::Value &v = kv.second;
    if (key == "train_batch_size" || key == "train_micro_batch_size_per_gpu" ||
        key == "gradient_accumulation_steps") {
      auto i = getPositiveInt(v, key);
      if (!i)
        return i.takeError();
      (key == "train_batch_size" ? tbs : key == "gradient_accumulation_steps" ? gas : mb) = *i;
    } else if (key == "optimizer") {
      if (Error e = parseOptimizer(v, cfg.optimizer))
        return std::move(e);
    } else if (key == "scheduler") {
      continue; // after the optimizer, whose lr it may default to
    } else if (key == "zero_optimization") {
      if (Error e = parseZero(v, cfg.zero, cfg.warnings))
        return std::move(e);
      cfg.zeroStage = cfg.zero.stage;
    } else if (key == "fp16" || key == "bf16" || key == "bfloat16") {
      if (key == "bfloat16" && root->get("bf16")) {
        cfg.warnings.push_back("'bfloat16' is ignored: 'bf16' is also set (DeepSpeed reads "
                               "'bf16')");
        continue;
      }
      if (Error e = parsePrecision(key == "fp16" ? "fp16" : "bf16", v, cfg.precision))
        return std::move(e);
    } else if (key == "gradient_clipping") {
      auto d = getNumber(v, key);
      if (!d)
        return d.takeError();
      if (*d < 0)
        return fail("'gradient_clipping' must be >= 0 (0 turns clipping off)");
      cfg.gradientClipping = *d;
    } else if (key == "tensor_parallel") {
      if (Error e = parseTensorParallel(v, cfg.tensorParallelSize, cfg.tensorParallelSpecs,
                                        cfg.warnings))
        return std::move(e);
    } else if (key == "pipeline") {
      if (Error e = parsePipeline(v, cfg.pipeline, cfg.warnings))
        return std::move(e);
    } else if (key == "expert_parallel") {
      if (Error e = parseExpertParallel(v, cfg.expertParallelSize, cfg.warnings))
        return std::move(e);
    } else if (key == "moe") {
      if (Error e = parseMoe(v, cfg.moe, cfg.warnings))
        return std::move(e);
    } else if (key == "aio") {
      if (Error e = parseAio(v, cfg.aio, cfg.warnings))
        return std::move(e);
    } else if (key == "activation_checkpointing") {
      if (Error e = parseCheckpointing(v, cfg.checkpointing, cfg.warnings))
        return std::move(e);
    } else if (key == "sequence_tiling") {
      // ds's own section (ALST's tiling, which DeepSpeed does in the model's code).
      const json::Object *o = v.getAsObject();
      if (!o)
        return fail("'sequence_tiling' must be an object such as {\"loss_tiles\": 8}");
      for (const auto &[k, x] : *o) {
        if (k != "loss_tiles" && k != "mlp_tiles")
          return fail("unknown key 'sequence_tiling." + k.str() +
                      "' (ds takes loss_tiles and mlp_tiles)");
        int64_t &tiles = k == "loss_tiles" ? cfg.lossTiles : cfg.mlpTiles;
        std::string name = "sequence_tiling." + k.str();
        if (std::optional<StringRef> str = x.getAsString()) {
          if (*str != "auto")
            return fail("'" + name + "' must be a positive integer or \"auto\", got \"" +
                        *str + "\"");
          tiles = 0; // ds-tile-sequence picks the count from the sizes
          continue;
        }
        auto i = getPositiveInt(x, name);
        if (!i)
          return i.takeError();
        tiles = *i;
      }
    } else if (key == "sequence_parallel_size") {
      auto i = getPositiveInt(v, key);
      if (!i)
        return i.takeError();
      cfg.sequenceParallelSize = *i;
    } else if (key == "sequence_parallel_mode") {
      // ds's own key: how attention is split over sp.
      auto s = v.getAsString();
      std::optional<mlir::ds::SequenceParallelMode> mode =
          s ? mlir::ds::symbolizeSequenceParallelMode(*s) : std::nullopt;
      if (!mode)
        return fail("'sequence_parallel_mode' (a ds key) must be \"auto\", \"ulysses\" or "
                    "\"ring\"");
      cfg.sequenceParallelMode = *mode;
    } else if (key == "steps_per_print") {
      auto i = getPositiveInt(v, key);
      if (!i)
        return i.takeError();
      cfg.stepsPerPrint = *i;
    } else if (key == "seed") {
      std::optional<int64_t> i = v.getAsInteger();
      if (!i || *i < 0)
        return fail("'seed' must be a non-negative integer");
      cfg.seed = static_cast<uint64_t>(*i);
    }
  }

  if (const json::Value *sch = root->get("scheduler"))
    if (Error e = parseScheduler(*sch, cfg.optimizer, cfg.scheduler, cfg.warnings))
      return std::move(e);

  // A launched job: its ranks are pp x dp x sp x tp.
  if (ranks > 0) {
    const int64_t mp =
        cfg.pipeline.stages * cfg.tensorParallelSize * cfg.sequenceParallelSize;
    if (ranks % mp != 0)
      return fail(formatv("the job has {0} ranks, not a multiple of pipeline.stages {1} x "
                          "tensor_parallel.autotp_size {2} x sequence_parallel_size {3}; "
                          "launch a multiple of {4} ranks or change the config",
                          ranks, cfg.pipeline.stages, cfg.tensorParallelSize,
                          cfg.sequenceParallelSize, mp));
    worldSize = ranks / mp;
  }
  // DeepSpeed's rule (runtime/config.py, _configure_train_batch_size).
  if (worldSize < 0)
    return fail("--world-size must be >= 1");
  if (tbs && mb && gas) {
    int64_t perRank = *mb * *gas;
    if (worldSize == 0) {
      if (*tbs % perRank != 0)
        return fail(formatv("train_batch_size {0} is not a multiple of "
                            "train_micro_batch_size_per_gpu {1} x gradient_accumulation_steps {2}",
                            *tbs, *mb, *gas));
      worldSize = *tbs / perRank;
    } else if (*tbs != perRank * worldSize) {
      return fail(formatv("train_batch_size {0} != train_micro_batch_size_per_gpu {1} x "
                          "gradient_accumulation_steps {2} x world size {3}; fix one of them",
                          *tbs, *mb, *gas, worldSize));
    }
  } else {
    if (worldSize == 0) {
      worldSize = 1;
      // DeepSpeed splits train_batch_size over the ranks it was launched on; ds compiles for
      // one mesh, so a split the keys leave open is taken at one rank, and said.
      int64_t per = mb ? *mb : gas ? *gas : 1;
      if (tbs && *tbs > per && *tbs % per == 0)
        cfg.warnings.push_back(formatv(
            "the world size is not stated: train_batch_size {0} with {1} leaves it open, so "
            "ds compiles for 1 data-parallel rank ({2}); DeepSpeed derives it from the ranks "
            "it is launched on: for N ranks pass --world-size N, or set "
            "train_batch_size, train_micro_batch_size_per_gpu and "
            "gradient_accumulation_steps together",
            *tbs,
            mb    ? formatv("train_micro_batch_size_per_gpu {0}", *mb).str()
            : gas ? formatv("gradient_accumulation_steps {0}", *gas).str()
                  : std::string("neither train_micro_batch_size_per_gpu nor "
                                "gradient_accumulation_steps"),
            mb    ? formatv("gradient_accumulation_steps {0}", *tbs / *mb).str()
            : gas ? formatv("train_micro_batch_size_per_gpu {0}", *tbs / *gas).str()
                  : formatv("train_micro_batch_size_per_gpu {0}", *tbs).str()));
    }
    if (tbs && mb) {
      if (*tbs % (*mb * worldSize) != 0)
        return fail(formatv("train_batch_size {0} is not divisible by "
                            "train_micro_batch_size_per_gpu {1} x world size {2}",
                            *tbs, *mb, worldSize));
      gas = *tbs / (*mb * worldSize);
    } else if (tbs && gas) {
      if (*tbs % (*gas * worldSize) != 0)
        return fail(formatv("train_batch_size {0} is not divisible by "
                            "gradient_accumulation_steps {1} x world size {2}",
                            *tbs, *gas, worldSize));
      mb = *tbs / (*gas * worldSize);
    } else if (mb && gas) {
      tbs = *mb * *gas * worldSize;
    } else if (tbs) {
      gas = 1;
      if (*tbs % worldSize != 0)
        return fail(formatv("train_batch_size {0} is not divisible by world size {1}", *tbs,
                            worldSize));
      mb = *tbs / worldSize;
    } else if (mb) {
      gas = 1;
      tbs = *mb * worldSize;
    } else {
      return fail("set train_batch_size or train_micro_batch_size_per_gpu (DeepSpeed needs "
                  "one of them)");
    }
  }
  if (Error e = checkOffload(cfg))
    return std::move(e);
  if (Error e = checkExpertParallel(cfg, worldSize))
    return std::move(e);
  cfg.trainBatchSize = *tbs;
  cfg.microBatchSize = *mb;
  cfg.gradientAccumulationSteps = *gas;
  cfg.worldSize = worldSize;
  return cfg;
}

Expected<DeepSpeedConfig> loadDeepSpeedConfig(StringRef path, int64_t worldSize,
                                              int64_t ranks) {
  ErrorOr<std::unique_ptr<MemoryBuffer>> buf = MemoryBuffer::getFile(path);
  if (!buf)
    return fail(path + ": cannot read the config: " + buf.getError().message());
  Expected<DeepSpeedConfig> cfg = parseDeepSpeedConfig((*buf)->getBuffer(), worldSize, ranks);
  if (!cfg)
    return fail(path + ": " + toString(cfg.takeError()));
  return cfg;
}

StringRef SchedulerConfig::name() const {
  for (const SchedulerType &t : kSchedulerTypes)
    if (t.kind == type)
      return t.name;
  return "";
}

json::Object DeepSpeedConfig::toObject() const {
  json::Object optParams{{"lr", optimizer.lr}, {"weight_decay", optimizer.weightDecay}};
  if (optimizer.type == OptimizerKind::sgd) {
    optParams["momentum"] = optimizer.momentum;
    optParams["dampening"] = optimizer.dampening;
    optParams["nesterov"] = optimizer.nesterov;
  } else {
    optParams["betas"] = json::Array{optimizer.beta1, optimizer.beta2};
    optParams["eps"] = optimizer.eps;
    optParams["adam_w_mode"] = optimizer.adamWMode;
  }
  if (optimizer.type == OptimizerKind::muon) {
    optParams["momentum"] = optimizer.momentum;
    optParams["adam_lr"] = optimizer.auxLr;
    optParams["ns_method"] = "standard";
  }
  json::Object opt{{"type", optimizer.name()}, {"params", std::move(optParams)}};
  json::Object root{{"train_batch_size", trainBatchSize},
                    {"train_micro_batch_size_per_gpu", microBatchSize},
                    {"gradient_accumulation_steps", gradientAccumulationSteps},
                    {"world_size", worldSize},
                    {"tensor_parallel", json::Object{{"autotp_size", tensorParallelSize}}},
                    {"sequence_parallel_size", sequenceParallelSize},
                    {"expert_parallel", json::Object{{"enabled", expertParallelSize > 1},
                                                     {"autoep_size", expertParallelSize}}},
                    {"moe", json::Object{{"drop_tokens", moe.dropTokens},
                                         {"capacity_factor", moe.capacityFactor},
                                         {"min_capacity", moe.minCapacity}}},
                    {"optimizer", std::move(opt)},
                    {"gradient_clipping", gradientClipping},
                    {"steps_per_print", stepsPerPrint},
                    {"seed", static_cast<int64_t>(seed)},
                    {"zero_optimization",
                     json::Object{{"stage", zero.stage},
                                  {"reduce_bucket_size", zero.reduceBucketSize},
                                  {"allgather_bucket_size", zero.allgatherBucketSize},
                                  {"overlap_comm", zero.overlapComm},
                                  {"reduce_scatter", zero.reduceScatter},
                                  {"contiguous_gradients", zero.contiguousGradients},
                                  {"stage3_prefetch_bucket_size", zero.prefetchBucketSize},
                                  {"stage3_param_persistence_threshold",
                                   zero.paramPersistenceThreshold},
                                  {"stage3_max_live_parameters", zero.maxLiveParameters},
                                  {"stage3_max_reuse_distance", zero.maxReuseDistance}}}};
  auto offloadJSON = [](const OffloadConfig &o, bool isParam) {
    json::Object j{{"device", mlir::ds::stringifyOffloadDevice(o.device)},
                   {"nvme_path", o.nvmePath},
                   {"pin_memory", o.pinMemory}, {"buffer_count", o.bufferCount}};
    if (isParam) {
      j["buffer_size"] = o.bufferSize;
      j["max_in_cpu"] = o.maxInCpu;
    }
    return j;
  };
  if (zero.offloadOptimizer.on() || zero.offloadParam.on()) {
    json::Object &z = *root.getObject("zero_optimization");
    if (zero.offloadOptimizer.on())
      z["offload_optimizer"] = offloadJSON(zero.offloadOptimizer, false);
    if (zero.offloadParam.on())
      z["offload_param"] = offloadJSON(zero.offloadParam, true);
    root["aio"] = json::Object{{"block_size", aio.blockSize},
                               {"queue_depth", aio.queueDepth},
                               {"intra_op_parallelism", aio.intraOpParallelism},
                               {"single_submit", aio.singleSubmit},
                               {"overlap_events", aio.overlapEvents}};
  }
  if (checkpointing.enabled)
    root["activation_checkpointing"] = json::Object{
        {"cpu_checkpointing", checkpointing.cpu},
        {"number_checkpoints",
         checkpointing.segments ? json::Value(checkpointing.segments) : json::Value(nullptr)}};
  if (pipeline.stages > 1)
    root["pipeline"] = json::Object{{"stages", pipeline.stages},
                                    {"partition", pipeline.partition},
                                    {"schedule",
                                     mlir::ds::stringifyPipelineSchedule(pipeline.schedule)},
                                    {"virtual_stages", pipeline.virtualStages}};
  if (precision.dtype == Precision::bf16)
    root["bf16"] = json::Object{{"enabled", true}};
  if (precision.dtype == Precision::fp16)
    root["fp16"] = json::Object{{"enabled", true},
                                {"loss_scale", precision.lossScale},
                                {"initial_scale_power", precision.initialScalePower},
                                {"loss_scale_window", precision.lossScaleWindow},
                                {"hysteresis", precision.hysteresis},
                                {"consecutive_hysteresis", precision.consecutiveHysteresis},
                                {"min_loss_scale", precision.minLossScale}};
  switch (scheduler.type) {
  case LRSchedule::constant:
    break;
  case LRSchedule::one_cycle: {
    json::Object params{{"cycle_min_lr", scheduler.cycleMinLr},
                        {"cycle_max_lr", scheduler.cycleMaxLr},
                        {"decay_lr_rate", scheduler.decayLrRate},
                        {"cycle_first_step_size", scheduler.cycleFirstStepSize},
                        {"cycle_second_step_size", scheduler.cycleSecondStepSize},
                        {"cycle_first_stair_count", scheduler.cycleFirstStairCount},
                        {"cycle_second_stair_count", scheduler.cycleSecondStairCount},
                        {"decay_step_size", scheduler.decayStepSize},
                        {"cycle_momentum", scheduler.cycleMomentum},
                        {"cycle_min_mom", scheduler.cycleMinMom},
                        {"cycle_max_mom", scheduler.cycleMaxMom},
                        {"decay_mom_rate", scheduler.decayMomRate}};
    root["scheduler"] = json::Object{{"type", scheduler.name()}, {"params", std::move(params)}};
    break;
  }
  case LRSchedule::range_test: {
    json::Object params{{"lr_range_test_min_lr", scheduler.lrRangeTestMinLr},
                        {"lr_range_test_step_size", scheduler.lrRangeTestStepSize},
                        {"lr_range_test_step_rate", scheduler.lrRangeTestStepRate},
                        {"lr_range_test_staircase", scheduler.lrRangeTestStaircase}};
    root["scheduler"] = json::Object{{"type", scheduler.name()}, {"params", std::move(params)}};
    break;
  }
  case LRSchedule::warmup:
  case LRSchedule::warmup_decay:
  case LRSchedule::warmup_cosine: {
    json::Object params{{"warmup_num_steps", scheduler.warmupNumSteps},
                        {"warmup_type", scheduler.warmupLinear ? "linear" : "log"}};
    if (scheduler.type == LRSchedule::warmup_cosine) {
      params["warmup_min_ratio"] = scheduler.warmupMinRatio;
      params["cos_min_ratio"] = scheduler.cosMinRatio;
    } else {
      params["warmup_min_lr"] = scheduler.warmupMinLr;
      params["warmup_max_lr"] = scheduler.warmupMaxLr;
    }
    if (scheduler.type != LRSchedule::warmup)
      params["total_num_steps"] = scheduler.totalNumSteps;
    root["scheduler"] = json::Object{{"type", scheduler.name()}, {"params", std::move(params)}};
    break;
  }
  }
  return root;
}

namespace {
std::string text(json::Object o) {
  std::string out;
  raw_string_ostream os(out);
  os << json::Value(std::move(o));
  return out;
}
} // namespace

std::string DeepSpeedConfig::toJSON() const { return text(toObject()); }

std::string DeepSpeedConfig::checkJSON() const {
  json::Object root = toObject();
  for (const char *section : {"fp16", "bf16"})
    if (!root.get(section))
      root[section] = json::Object{{"enabled", false}};
  root["bfloat16"] = *root.get("bf16");
  return text(std::move(root));
}

std::string DeepSpeedConfig::numericJSON() const {
  json::Object root = toObject();
  json::Object numbers;
  for (const char *key : {"optimizer", "scheduler", "train_batch_size", "gradient_clipping",
                          "seed"}) {
    json::Value *v = root.get(key);
    numbers[key] = v ? std::move(*v) : json::Value(nullptr);
  }
  // fp16's settings (the loss scaler's) change the numbers.
  if (json::Value *fp16 = root.get("fp16"))
    numbers["precision"] = json::Object{{"fp16", std::move(*fp16)}};
  else
    numbers["precision"] = mlir::ds::stringifyPrecision(precision.dtype);
  return text(std::move(numbers));
}


} // namespace ds
