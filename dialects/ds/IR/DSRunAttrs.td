//===- DSRunAttrs.td - how a training step runs: the program's own config --===//
//
// A training step carries, as one typed attribute (`ds.run = #ds.run<...>`), every value its
// driver needs, resolved by ds-opt from the user's DeepSpeed config (lib/Config): batch sizes,
// seed, the learning-rate schedule, the loss scaler, the NVMe tier. ds-lower-to-runtime writes
// them into the program's descriptor, under the descriptor's own field names; the runtime
// never reads a DeepSpeed key.
//
//===----------------------------------------------------------------------===//
#ifndef DS_RUN_ATTRS_TD
#define DS_RUN_ATTRS_TD

include "ds/IR/DSBase.td"
include "mlir/IR/EnumAttr.td"
include "ds/IR/DSRuntimeEnums.td"

// Doubles, held as APFloat (hashed, compared bit for bit) and printed so that they read back
// bit for bit (AsmPrinter::printFloat; parsed by FieldParser<APFloat> in DSDialect.h); the
// defaulted ones are not printed when 0.
class DS_F64<string unused = ""> : AttrOrTypeParameter<"::llvm::APFloat", ""> {
  let printer = "$_printer.printFloat($_self)";
  let comparator = "$_lhs.bitwiseIsEqual($_rhs)";
}
class DS_F64OrZero<string unused = ""> : DS_F64<> {
  let defaultValue = "::llvm::APFloat(0.0)";
}

// DeepSpeed's optimizer types that ds implements, named as DeepSpeed names them.
def DS_OptimizerKind : I32EnumAttr<"OptimizerKind", "an optimizer (DeepSpeed's optimizer.type)", [
    I32EnumAttrCase<"adamw", 0, "AdamW">, I32EnumAttrCase<"adam", 1, "Adam">,
    I32EnumAttrCase<"sgd", 2, "SGD">, I32EnumAttrCase<"muon", 3, "Muon">]> {
  let cppNamespace = "::mlir::ds";
  let genSpecializedAttr = 0;
}
// A pipeline's schedule (pipeline.schedule, ds's key).
def DS_PipelineSchedule : I32EnumAttr<"PipelineSchedule", "a pipeline schedule", [
    I32EnumAttrCase<"one_f_one_b", 0, "1f1b">, I32EnumAttrCase<"interleaved", 1>]> {
  let cppNamespace = "::mlir::ds";
  let genSpecializedAttr = 0;
  // "1f1b" is not a keyword: printed quoted.
  let parameterPrinter = "$_printer.printKeywordOrString(stringifyPipelineSchedule($_self))";
}
def DS_PipelineScheduleAttr : EnumAttr<DS_Dialect, DS_PipelineSchedule, "pipeline_schedule">;
// How ds-sequence-parallel splits attention (sequence_parallel_mode): Ulysses' all-to-all
// of heads, ring attention, or Ulysses where the heads divide and ring elsewhere.
def DS_SequenceParallelMode : I32EnumAttr<"SequenceParallelMode", "a sequence-parallel mode", [
    I32EnumAttrCase<"automatic", 0, "auto">, I32EnumAttrCase<"ulysses", 1>,
    I32EnumAttrCase<"ring", 2>]> {
  let cppNamespace = "::mlir::ds";
  let genSpecializedAttr = 0;
}
// Where ZeRO-Offload puts a state (zero_optimization.offload_*.device).
def DS_OffloadDevice : I32EnumAttr<"OffloadDevice", "an offload device", [
    I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"cpu", 1>, I32EnumAttrCase<"nvme", 2>]> {
  let cppNamespace = "::mlir::ds";
  let genSpecializedAttr = 0;
}
def DS_OffloadDeviceAttr : EnumAttr<DS_Dialect, DS_OffloadDevice, "offload_device">;

def DS_LRScheduleAttr : DS_Attr<"LRSchedule", "lr_schedule"> {
  let summary = "A learning-rate schedule with every parameter resolved.";
  let description = [{
    DeepSpeed's scheduler (deepspeed/runtime/lr_schedules.py), its defaults applied by ds-opt:
    `#ds.lr_schedule<kind = warmup_decay, warmup_max_lr = 1.000000e-03, warmup_num_steps =
    10, total_num_steps = 100>`. Parameters that are 0 (false) are not printed. Each kind reads
    its own (as DeepSpeed's classes do): warmup and warmup_decay the warmup_* lrs, warmup_num_steps,
    warmup_linear (else log) and (warmup_decay) total_num_steps; warmup_cosine also
    warmup_min_ratio and cos_min_ratio; one_cycle the cycle_*, decay_* and momentum
    parameters; range_test the range_test_*. (ds-opt's config parser validates them.)
  }];
  let parameters = (ins EnumParameter<DS_LRSchedule>:$kind,
      DS_F64OrZero<>:$warmup_min_lr,
      DS_F64OrZero<>:$warmup_max_lr,
      DefaultValuedParameter<"int64_t", "0">:$warmup_num_steps,
      DefaultValuedParameter<"bool", "false">:$warmup_linear,
      DefaultValuedParameter<"int64_t", "0">:$total_num_steps,
      DS_F64OrZero<>:$warmup_min_ratio,
      DS_F64OrZero<>:$cos_min_ratio,
      DS_F64OrZero<>:$cycle_min_lr,
      DS_F64OrZero<>:$cycle_max_lr,
      DS_F64OrZero<>:$decay_lr_rate,
      DS_F64OrZero<>:$cycle_first_step_size,
      DS_F64OrZero<>:$cycle_second_step_size,
      DefaultValuedParameter<"int64_t", "0">:$cycle_first_stair_count,
      DefaultValuedParameter<"int64_t", "0">:$cycle_second_stair_count,
      DS_F64OrZero<>:$decay_step_size,
      DefaultValuedParameter<"bool", "false">:$cycle_momentum,
      DS_F64OrZero<>:$cycle_min_mom,
      DS_F64OrZero<>:$cycle_max_mom,
      DS_F64OrZero<>:$decay_mom_rate,
      DS_F64OrZero<>:$range_test_min_lr,
      DS_F64OrZero<>:$range_test_step_size,
      DS_F64OrZero<>:$range_test_step_rate,
      DefaultValuedParameter<"bool", "false">:$range_test_staircase);
  let assemblyFormat = "`<` struct(params) `>`";
}

def DS_LossScalerAttr : DS_Attr<"LossScaler", "loss_scaler"> {
  let summary = "fp16's loss scaler, resolved (DeepSpeed's fp16 section).";
  let description = [{
    A static scale (`dynamic = false`) or DeepSpeed's dynamic scaler, starting at `scale`
    (2^initial_scale_power), halving on an overflow once `hysteresis` overflows have been
    absorbed (with ZeRO), doubling after `window` steps without one, never below `min_scale`.

    **Constraints:** scale > 0, window >= 1, hysteresis >= 1, min_scale > 0.
  }];
  let parameters = (ins "bool":$dynamic, DS_F64<>:$scale, "int64_t":$window,
                        "int64_t":$hysteresis, "bool":$consecutive_hysteresis,
                        DS_F64<>:$min_scale);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def DS_NvmeAttr : DS_Attr<"Nvme", "nvme"> {
  let summary = "The NVMe tier's swap directory and asynchronous I/O (DeepSpeed's aio).";
  let description = [{
    **Constraints:** the path is not empty; block_size >= 4096 and queue_depth >= 1.
  }];
  let parameters = (ins StringRefParameter<>:$path, "int64_t":$block_size,
                        "int64_t":$queue_depth, "bool":$single_submit);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def DS_RunAttr : DS_Attr<"Run", "run"> {
  let summary = "How a training step runs: every value its driver needs, resolved.";
  let description = [{
    The module attribute `ds.run` of a training step, made by ds-opt from the DeepSpeed
    config: the batch (train_batch_size = micro_batch_size x gradient_accumulation_steps x
    data_parallel_size), steps_per_print, seed, the precision, the configured ZeRO stage (fp16's
    loss scaler follows DeepSpeed's optimizer of that stage) and persistence threshold (what
    offload would move, for a plan over the budget), the optimizer's base lr (and Muon's AdamW
    group's, aux_lr) and beta1, the schedule, fp16's loss scaler and the NVMe tier.
    `deepspeed` is the normalized config as JSON, with every precision section explicit (what
    `ds-run --config` compares a user's config with), and `numbers` the part of it that changes
    the numbers (what a checkpoint records): the runtime compares both without reading their
    keys.

    **Constraints:** sizes >= 1 and the batch rule; a loss scaler exactly when the precision
    is fp16; `deepspeed` and `numbers` are JSON objects.
  }];
  let parameters = (ins "int64_t":$train_batch_size, "int64_t":$micro_batch_size,
                        "int64_t":$gradient_accumulation_steps, "int64_t":$data_parallel_size,
                        "int64_t":$steps_per_print, "int64_t":$seed,
                        EnumParameter<DS_Precision>:$precision, "int64_t":$zero_stage,
                        "int64_t":$param_persistence_threshold,
                        EnumParameter<DS_OptimizerKind>:$optimizer, DS_F64<>:$lr, DS_F64<>:$aux_lr,
                        DS_F64<>:$beta1,
                        "LRScheduleAttr":$schedule,
                        OptionalParameter<"LossScalerAttr">:$loss_scaler,
                        OptionalParameter<"NvmeAttr">:$nvme,
                        StringRefParameter<>:$deepspeed, StringRefParameter<>:$numbers);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // DS_RUN_ATTRS_TD
