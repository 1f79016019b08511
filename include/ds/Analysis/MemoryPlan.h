//===- MemoryPlan.h - every rank's buffers, exactly, before the step runs ---*- C++ -*-===//
//
// The runtime gives each tensor of a step storage from the device arena (or host memory, or
// the NVMe swap file) right before the op that makes it, and frees it after its last use;
// views share storage, and an op may write over an operand that dies there. The MemoryPlan is
// that schedule, computed once as an analysis: for every op, what its results are (a fresh
// allocation, a view of another value's storage, a slot's value), which transfers' events it
// waits for, what it frees; and from the running totals the exact peak of each function and
// each pipeline rank, split into DeepSpeed's categories. ds-lower-to-runtime emits the calls
// it says; the program's descriptor, ds-opt's --memory-report and --device-memory, and the
// runtime's budget check read its numbers: nothing lowers a copy of the step to learn them.
//
// It plans a module prepared for it (prepareForPlanning: every splat constant its own buffer
// at its use), as ds-lower-to-runtime prepares the module it lowers.
//
#ifndef DS_ANALYSIS_MEMORYPLAN_H
#define DS_ANALYSIS_MEMORYPLAN_H

#include "ds/Analysis/MatmulViews.h"
#include "ds/Analysis/SlotTable.h"

#include <algorithm>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

#include <array>
#include <string>
#include <utility>
#include <vector>

namespace mlir::ds {

/// Where a result of an op lives.
struct Placement {
  enum Kind {
    /// None: an optional result nobody uses (the kernel skips it: a null tensor), or a value
    /// with no tensor of its own (absorbed by a matmul on views, a constant that only types a
    /// receive).
    None,
    Alloc,     ///< a fresh tensor in the device arena
    AllocHost, ///< a fresh tensor in host memory (the offloaded optimizer's work, NVMe reads)
    ViewOf,    ///< a view of `source`'s storage (in-place updates, a dying operand's reuse)
    SlotValue, ///< the value of slot `slot` itself (a flat buffer written in place)
    Op,        ///< made by the op's own lowering (views, constants, a slot read)
  };
  Kind kind = None;
  Value source;
  int slot = -1;
};

/// Before an op: the compute stream waits for the event of `value` (a collective's, a move's,
/// a receive's, an NVMe read's) and releases it, and the events chained to it.
struct EventWait {
  Value value;
  SmallVector<Value, 1> alsoRelease;
};

/// What the lowering of one op does besides its own calls.
struct OpPlan {
  Operation *owner = nullptr;
  SmallVector<EventWait, 1> waits;    ///< before the op
  SmallVector<Placement, 1> results;  ///< per result
  SmallVector<Value, 2> frees;        ///< after the op, in order
  unsigned storesWaited = 0;          ///< NVMe writes waited for (oldest first) after the op
  int32_t group = -1; ///< a collective's, transfer's or slice's runtime group (mesh axes mask)
};

/// Bytes moved between the tiers, by dsrt_move_kind.
using MovedBytes = std::array<int64_t, 4>;

/// One function's plan (@micro_step, @optimizer_step, a pipeline rank's programs).
struct FunctionPlan {
  func::FuncOp owner;
  llvm::DenseMap<Operation *, OpPlan> ops;
  /// A matmul on views that writes into a concatenation's buffer (the first piece allocates
  /// it): the concatenation's placement.
  llvm::DenseMap<Value, Placement> bufferPlacements;
  /// Matmuls on strided views, and the transposes the other matmuls take as flags.
  MatmulViews views;
  llvm::DenseSet<Operation *> fusedTransposes;
  /// Values the runtime holds a tensor handle for (the others are absorbed or never made).
  llvm::DenseSet<Value> handled;
  int64_t peak = 0, commAtPeak = 0;
  MovedBytes moved{};
  /// The arena over the function: per op of its body, in order, the most bytes in use while
  /// it runs (the peak, where it reaches a new one) and the communication buffers' after it.
  std::vector<std::array<int64_t, 2>> timeline;
  const OpPlan &of(Operation *op) const;
  bool isFusedTranspose(Value v) const {
    return v.getDefiningOp() && fusedTransposes.contains(v.getDefiningOp());
  }
};

/// A pipeline rank's plan: its slots, its step and its update.
struct RankPlan {
  int64_t persistent = 0, step = 0, optimizer = 0, stepComm = 0, optimizerComm = 0;
  /// The device allocator's padding at the step's and the update's peaks.
  int64_t stepPadding = 0, optimizerPadding = 0;
  int64_t peak() const { return std::max(step, optimizer); }
  int64_t paddingAtPeak() const { return step >= optimizer ? stepPadding : optimizerPadding; }
};

/// What DeepSpeed's offload keys would move off the device (a step compiled without them):
/// the bytes of optimizer state and gradients (stage >= 1) and of parameters (stage 3).
struct Offloadable {
  bool optimizerKey = false, paramKey = false;
  int64_t optimizer = 0, param = 0;
};

class MemoryPlan {
public:
  /// Plans `module`, prepared for it: a training step (@micro_step and @optimizer_step, or
  /// ds-pipeline's per-rank programs), or generation's programs (@prefill and @decode). Fails,
  /// with a diagnostic, on a step it cannot plan.
  static FailureOr<MemoryPlan> compute(ModuleOp module);

  const SlotTable &slots() const { return slots_; }
  const FunctionPlan &function(func::FuncOp f) const;
  /// The functions in the order the runtime runs them (micro-step, then update; each pipeline
  /// rank's pair), with the entry point each becomes.
  struct PlannedFunction {
    func::FuncOp func;
    std::string symbol; ///< ds_micro_step, ds_optimizer_step, ds_pipeline_step_R, ...
    bool microStep = false;
    /// A generation program (@prefill, @decode): its inputs in an array like a micro-step's,
    /// its results written to a second array (the caller frees them).
    bool generation = false;
  };
  ArrayRef<PlannedFunction> functions() const { return functions_; }

  /// The step's inputs, one micro-batch's, by name (ds.input_name, else inputN).
  std::vector<std::pair<std::string, RankedTensorType>> inputs;

  /// The peak of the device arena over a step, and its parts.
  int64_t peakBytes() const { return std::max(microPeak, optimizerPeak); }
  int64_t persistentBytes = 0, inputBytes = 0;
  int64_t microPeak = 0, optimizerPeak = 0;
  int64_t microCommAtPeak = 0, optimizerCommAtPeak = 0;
  /// The device allocator's padding (DSRT_ALLOCATION_GRANULE) of the storages live at each
  /// peak: what the device holds beyond the exact counts.
  int64_t microPaddingAtPeak = 0, optimizerPaddingAtPeak = 0;
  int64_t paddingAtPeak() const {
    return microPeak >= optimizerPeak ? microPaddingAtPeak : optimizerPaddingAtPeak;
  }
  /// Host memory and the swap file (ds-offload's spaces), and what moves per step.
  int64_t hostPeak = 0, hostPersistent = 0, nvmePersistent = 0, nvmeFileBytes = 0;
  MovedBytes movedPerStep{};
  /// A pipeline (ds-pipeline's programs): each rank's plan, the stages, micro-batches per
  /// call and the schedule.
  std::vector<RankPlan> ranks;
  int64_t pipelineStages = 1, pipelineMicroBatches = 1;
  PipelineSchedule pipelineSchedule = PipelineSchedule::one_f_one_b;
  int64_t ppAxis = -1;
  /// Generation's programs (@prefill, @decode; none for a training step), each with its
  /// inputs and results and the peak while it runs (its inputs and results included).
  struct GenerationCall {
    std::string name;
    std::vector<std::pair<std::string, RankedTensorType>> inputs;
    std::vector<RankedTensorType> results;
    int64_t inputBytes = 0, peak = 0;
  };
  std::vector<GenerationCall> generation;
  /// The largest buffers (persistent and temporaries), by bytes then plan order.
  std::vector<std::pair<int64_t, std::string>> largest(size_t count) const;
  /// Without offload: what its keys would move (ZeRO stage from #ds.run).
  Offloadable offloadable;
  bool offloaded = false; ///< ds-offload ran

private:
  SlotTable slots_;
  std::vector<PlannedFunction> functions_;
  llvm::DenseMap<Operation *, FunctionPlan> plans_;
  std::vector<std::pair<int64_t, std::string>> buffers_;
  friend class MemoryPlanner;
};

/// Gives every use of a splat constant in the step's functions its own constant right before
/// the use (canonicalization hoists them to the top), so that each is a buffer filled where it
/// is needed, alive only until that use.
void prepareForPlanning(ModuleOp module);

/// What a temporary the lowering makes for `op` is called in the plan ("ds.dropout result
/// 4x16 at model.py:12").
std::string describeForPlan(Operation *op);

} // namespace mlir::ds

#endif // DS_ANALYSIS_MEMORYPLAN_H
