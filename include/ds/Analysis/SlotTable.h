//===- SlotTable.h - a step's persistent slots, as the runtime holds them ---*- C++ -*-===//
//
// The parameters, buffers, gradients, optimizer state and ZeRO's flat buffers of a training
// step, in the order the runtime defines them (the index of dsrt_slot_define): each with its
// role and space, and where it lives inside another slot (a member of a flat buffer, a
// parameter kept only in a stage-3 shard). The lowering, the memory plan, the program's
// descriptor and the reports all read this one table.
//
#ifndef DS_ANALYSIS_SLOTTABLE_H
#define DS_ANALYSIS_SLOTTABLE_H

#include "ds/IR/DSOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"

#include <string>
#include <vector>

namespace mlir::ds {

/// One persistent slot.
struct PlannedSlot {
  std::string name;
  std::string of; ///< a state's parameter (or the flat buffer it partitions)
  SmallVector<std::string> aliases;
  RankedTensorType type;
  SlotRole role = SlotRole::parameter;
  MemorySpace space = MemorySpace::device; ///< ds.memory_space
  int viewOf = -1;      ///< a member of this flat buffer's slot
  int shardOf = -1;     ///< stage 3: a parameter that exists only as part of this shard slot
  int64_t offset = 0;   ///< elements into it
  bool pinned = false;  ///< a view or a viewed buffer: assignments copy into it
  bool sharded = false; ///< differs between ranks (a ZeRO shard)
  /// A parameter split over a mesh axis (ds-tensor-parallel): its type is this rank's part of
  /// dimension `splitDim` of the state_dict tensor, in `splitSegments` segments (of
  /// `splitSizes` rows when unequal).
  int64_t splitDim = -1, splitSegments = 1, splitParts = 1;
  SmallVector<int64_t> splitSizes;
  std::string splitAxis;
  /// A pipeline: the pp ranks that hold it (empty: every rank).
  SmallVector<int64_t> stages;
  bool heldBy(int64_t ppRank) const {
    return stages.empty() || llvm::is_contained(stages, ppRank);
  }
  /// Whether it has storage of its own (not a view of a flat buffer, not inside a shard).
  bool owned() const { return viewOf < 0 && shardOf < 0; }
};

class SlotTable {
public:
  /// The slots of `module`'s ds.parameter, ds.state and ds.flat_buffer symbols (a flat
  /// buffer kept only as its shards has none); fails, with a diagnostic, on what the runtime
  /// cannot hold.
  static FailureOr<SlotTable> build(ModuleOp module);

  ArrayRef<PlannedSlot> slots() const { return slots_; }
  const PlannedSlot &operator[](int index) const { return slots_[index]; }
  size_t size() const { return slots_.size(); }
  /// The index of the slot named `name`, or -1.
  int indexOf(StringRef name) const {
    auto it = index_.find(name);
    return it == index_.end() ? -1 : it->second;
  }

private:
  std::vector<PlannedSlot> slots_;
  llvm::StringMap<int> index_;
};

/// Bytes of a tensor as the runtime stores it (i1: a byte per element).
int64_t storedBytes(RankedTensorType type);
/// dsrt.h's code (dsrt_dtype) of element type `t`, whose name in DSRT_DTYPES is its MLIR
/// spelling; -1 for a type the runtime does not store.
int32_t dtypeCodeOf(Type t);

} // namespace mlir::ds

#endif // DS_ANALYSIS_SLOTTABLE_H
