//===- ZeroUpdate.h - ZeRO's part of the update: buckets and collectives -*- C++ -*-===//
//
// ds-zero decides the partitioning and hands it on typed: `#ds.zero<stage = N>` on the module
// and the flat buffers and shards it declares (ds.flat_buffer and ds.state with their roles).
// Everything @optimizer_step does because of ZeRO is built here: reading that layout into
// buckets, summing the gradients over the replicas (all-reduce at stage 0, reduce-scatter at
// stage 1, the shard stage 2's backward reduced into), the replica sums of the norm and the
// overflow check, and writing each updated shard back (all-gather into the buffer, or the
// stage-3 shard itself) with the gradients zeroed. ds-optimizer builds the arithmetic of the
// update in between.
//
#ifndef DS_TRANSFORMS_ZEROUPDATE_H
#define DS_TRANSFORMS_ZEROUPDATE_H

#include "Mesh.h"

#include "ds/IR/DSOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir::ds {

/// One flat parameter buffer of ds-zero and what belongs to it.
struct ZeroBucket {
  FlatBufferOp params;
  FlatBufferOp grads;  ///< stage 1 (and pipelines): the flat gradients to reduce-scatter
  StateOp gradShard;   ///< stages 2-3: the shard the backward reduced into
  StateOp paramShard;  ///< stage 3: the parameters exist only as this shard
  RankedTensorType shardType;
  bool split = false;  ///< its members are tensor-parallel parts (distinct on the tp ranks)
  /// The last declaration that belongs to the bucket (the optimizer's states follow it).
  Operation *lastDeclaration() const;
};

/// ds-zero's layout as the update finds it.
struct ZeroLayout {
  int64_t stage = -1; ///< -1: no #ds.zero (one replica, nothing to communicate)
  MeshAxisRef dp;     ///< the replica group (dp, and sp)
  SmallVector<ZeroBucket> buckets;
  /// The parameters that are members of a flat buffer (updated as part of their shard).
  llvm::DenseSet<StringAttr> members;

  /// Stages 1-3: the update works on shards of flat buffers.
  bool flat() const { return stage >= 1; }
  /// Reads #ds.zero and, for stages 1-3, the buckets; errors name `pass`.
  static FailureOr<ZeroLayout> read(ModuleOp module, llvm::StringRef pass);
};

/// ZeRO's collectives in @optimizer_step, built at `b`.
class ZeroCollectives {
public:
  ZeroCollectives(OpBuilder &b, Location loc, const ZeroLayout &layout)
      : b(b), loc(loc), layout(layout) {}

  /// Stage 0, and the parameters outside the flat buffers at stages 1-3: each gradient state
  /// summed over the replicas and written back (all the all-reduces first, so that the
  /// channel runs them back to back). Without #ds.zero, nothing.
  void sumWholeGradients(ArrayRef<std::pair<StateOp, RankedTensorType>> grads);
  /// This rank's shard of each bucket's gradients, summed over the replicas: stage 1
  /// reduce-scatters the flat gradients now; stage 2's backward already did.
  SmallVector<Value> gradientShards();
  /// A scalar summed over the replicas.
  Value sumOverReplicas(Value local);
  /// Writes the bucket's updated shard back: `update` maps a reader of this rank's current
  /// parameter shard to its new value. Stage 3 assigns the shard; stages 1-2 gather every
  /// rank's into the flat buffer (which the parameters are views of). Then the bucket's
  /// gradients are zeroed.
  void writeBack(ZeroBucket bucket,
                 llvm::function_ref<Value(llvm::function_ref<Value()>)> update);

private:
  Value get(StringRef sym, RankedTensorType type);
  void assign(StringRef sym, Value v);
  Value zeros(RankedTensorType type);

  OpBuilder &b;
  Location loc;
  const ZeroLayout &layout;
};

} // namespace mlir::ds

#endif // DS_TRANSFORMS_ZEROUPDATE_H
