//===- DSDialect.h - the ds dialect and its attributes ---------------------===//
#ifndef DS_IR_DSDIALECT_H
#define DS_IR_DSDIALECT_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/Twine.h"

#include <string>

#include "mlir/IR/DialectImplementation.h"

#include "ds/IR/DSDialect.h.inc"
#include "ds/IR/DSEnums.h"

namespace mlir {
/// The doubles of ds's attributes (#ds.run, #ds.lr_schedule), read back from
/// AsmPrinter::printFloat.
template <> struct FieldParser<llvm::APFloat> {
  static FailureOr<llvm::APFloat> parse(AsmParser &parser) {
    llvm::APFloat value(0.0);
    if (parser.parseFloat(llvm::APFloat::IEEEdouble(), value))
      return failure();
    return value;
  }
};
} // namespace mlir

#define GET_ATTRDEF_CLASSES
#include "ds/IR/DSAttrs.h.inc"

namespace mlir::ds {
/// Attaches ds's gradients to the upstream `shard` collectives that @forward may contain
/// (ShardGradients.cpp).
void registerShardGradients(DialectRegistry &registry);
/// The cost model (CostOpInterface, DSCost.cpp): attached to every ds op when the dialect
/// initializes; registerShardCosts adds the shard collectives'.
void attachCostModels(MLIRContext *ctx);
void registerShardCosts(DialectRegistry &registry);

/// Marks the inner ops of one fused computation (a decomposed op): ds-mixed-precision leaves
/// their f32 results unrounded, as the op they stand for computes in f32.
inline constexpr llvm::StringLiteral kFusedAttrName = "ds.fused";
/// Marks a rounding to 16 bits that the model's author wrote (x.to(torch.bfloat16) in a model
/// exported in bf16), not one ds-mixed-precision inserted: ds-autodiff then keeps the f32
/// value for the backward, as PyTorch's autograd saves it (HF's softmax in f32).
inline constexpr llvm::StringLiteral kModelCastAttrName = "ds.model_cast";
/// Marks a module that ds-mixed-precision has made 16-bit (a unit attribute): it runs once.
inline constexpr llvm::StringLiteral kMixedPrecisionAttrName = "ds.mixed_precision";
/// Name of the module attribute that holds the device mesh (`#ds.mesh`).
inline constexpr llvm::StringLiteral kMeshAttrName = "ds.mesh";
/// Name of the module attribute of a training step that says how it runs (`#ds.run`).
inline constexpr llvm::StringLiteral kRunAttrName = "ds.run";
/// Name of the module attribute by which ds-zero hands its stage to ds-optimizer (`#ds.zero`).
inline constexpr llvm::StringLiteral kZeroAttrName = "ds.zero";

// Pipeline parallelism: ds-pipeline-partition marks each op of @forward with its chunk,
// ds-autodiff carries the mark to the backward, ds-pipeline turns the marked step into each
// pipeline rank's program, and the lowering and reports read what it leaves.
/// On the module: a #ds.pipeline, {stages, virtual_stages} (ds-pipeline-partition), then also
/// the schedule, micro-batches and work per phase (ds-pipeline).
inline constexpr llvm::StringLiteral kPipelineAttrName = "ds.pipeline";
/// On an op: its chunk (i64); chunk c runs on pipeline rank c mod stages.
inline constexpr llvm::StringLiteral kStageAttrName = "ds.stage";
/// On an op that ds-autodiff built: part of its chunk's backward.
inline constexpr llvm::StringLiteral kBackwardAttrName = "ds.backward";
/// On a parameter or state: the pipeline ranks that hold it (i64 array).
inline constexpr llvm::StringLiteral kStagesAttrName = "ds.stages";
/// On a pipeline rank's function: its rank (i64), and its order as text.
inline constexpr llvm::StringLiteral kPipelineRankAttrName = "ds.pipeline_rank";
inline constexpr llvm::StringLiteral kScheduleAttrName = "ds.schedule";

/// The model's forward as the importer names it, which the training passes and
/// ds-derive-generation start from.
inline constexpr llvm::StringLiteral kForwardName = "forward";
// The training step's functions, as ds-autodiff, ds-optimizer and ds-pipeline name them and
// the later passes, the memory plan and the reports find them.
inline constexpr llvm::StringLiteral kMicroStepName = "micro_step";
inline constexpr llvm::StringLiteral kOptimizerStepName = "optimizer_step";
/// A pipeline rank's micro-steps and update: the prefix and the rank.
inline constexpr llvm::StringLiteral kPipelineStepPrefix = "pipeline_step_";
inline constexpr llvm::StringLiteral kOptimizerStepPrefix = "optimizer_step_";
inline std::string pipelineStepName(int64_t rank) {
  return (kPipelineStepPrefix + llvm::Twine(rank)).str();
}
inline std::string optimizerStepName(int64_t rank) {
  return (kOptimizerStepPrefix + llvm::Twine(rank)).str();
}
/// Generation's programs (ds-derive-generation): a prompt's chunk and one token, for each of
/// the batch's sequences.
inline constexpr llvm::StringLiteral kPrefillName = "prefill";
inline constexpr llvm::StringLiteral kDecodeName = "decode";
/// The C symbol ds-lower-to-runtime gives a step function (ds_micro_step, ...), which the
/// driver calls.
inline std::string entryPointName(llvm::StringRef function) { return ("ds_" + function).str(); }

// Memory spaces (ds-offload): where a state lives and where an op runs.
/// On a parameter, state or flat buffer: a MemorySpaceAttr, device (the default, also when
/// absent), host or nvme (DeepSpeed's offload_optimizer / offload_param devices).
inline constexpr llvm::StringLiteral kMemorySpaceAttrName = "ds.memory_space";
/// On an op: it runs on the host, over host tensors (the offloaded optimizer).
inline constexpr llvm::StringLiteral kOnHostAttrName = "ds.on_host";
/// On an op: a clone that recomputes a forward value in the backward
/// (ds-activation-checkpoint); CSE must not fold it into the forward op. Unit, or on a
/// tile's clone (ds.tile) the i64 round of its recomputation, which keeps rounds apart.
inline constexpr llvm::StringLiteral kRecomputeAttrName = "ds.recompute";
/// On a forward op: the tile (i64) of a position-wise region that ds-tile-sequence cut into
/// tiles of rows; ds-activation-checkpoint recomputes each tile's values in the backward.
inline constexpr llvm::StringLiteral kTileAttrName = "ds.tile";
/// On the module: {optimizer, param} offload devices, as ds-offload applied them.
inline constexpr llvm::StringLiteral kOffloadAttrName = "ds.offload";

/// On the module: imported from an export that holds shapes and no weights (a model on the
/// meta device or under FakeTensorMode). Everything up to the memory plan and the reports
/// works on it; running it needs weights from elsewhere (ds-run --weights).
inline constexpr llvm::StringLiteral kWeightFreeAttrName = "ds.weight_free";

/// Name of the function-argument attribute that holds the PyTorch input name.
inline constexpr llvm::StringLiteral kInputNameAttrName = "ds.input_name";

/// The runtime group (dsrt.h) of a collective's grid axes, the grid mirroring the module's
/// mesh: bit i for axis i; DSRT_GROUP_WORLD (-1) for none.
inline int32_t runtimeGroupOf(llvm::ArrayRef<int16_t> gridAxes) {
  if (gridAxes.empty())
    return -1;
  int32_t mask = 0;
  for (int16_t a : gridAxes)
    mask |= 1 << a;
  return mask;
}

/// The module's #ds.pipeline (null when it is not cut into pipeline stages).
inline PipelineAttr getPipeline(Operation *module) {
  return module->getAttrOfType<PipelineAttr>(kPipelineAttrName);
}
/// The module's #ds.zero (null before ds-zero).
inline ZeroAttr getZero(Operation *module) {
  return module->getAttrOfType<ZeroAttr>(kZeroAttrName);
}
} // namespace mlir::ds

#endif // DS_IR_DSDIALECT_H
