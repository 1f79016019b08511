//===- Mesh.h - the module's mesh and its grid, found by axis role -*- C++ -*-===//
//
// `ds.mesh` on the module is the one source of the mesh; the passes that emit collectives
// ask here for an axis by role and get the grid `@mesh` (upstream `shard.grid`, created from
// the mesh on first use, same axes in the same order) and the axis's index on it.
//
#ifndef DS_TRANSFORMS_MESH_H
#define DS_TRANSFORMS_MESH_H

#include "ds/IR/DSDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::ds {

/// Name of the grid that mirrors the module's mesh.
inline constexpr llvm::StringLiteral kMeshGridName = "mesh";

/// The module's mesh, or null.
MeshAttr getMesh(ModuleOp module);

/// The mesh of a run with these sizes, in Megatron's placement (world rank = (((pp_i * DP +
/// dp_i) * EP + ep_i) * SP + sp_i) * TP + tp_i): axes pp, dp, ep, sp, tp; pp, ep, sp and tp
/// only where larger than 1. `dp` counts every rank that reads other samples: with expert
/// parallelism over `ep` of them, the dp axis has dp / ep ranks (the expert-data-parallel
/// size) and the ep axis ep, the fastest of the two, so that an expert group is consecutive
/// ranks.
MeshAttr buildMesh(MLIRContext *ctx, int64_t dp, int64_t tp, int64_t sp, int64_t pp = 1,
                   int64_t ep = 1);

/// The ranks that read different samples: dp x ep.
int64_t dataParallelRanks(MeshAttr mesh);

/// Sets the module's mesh to one data-parallel axis of `dp` ranks unless it has a mesh; with
/// a mesh, checks that its dp size is `dp` (or `dp` is 1, the passes' default). `pass` names
/// the caller in the error.
LogicalResult ensureDataParallelMesh(ModuleOp module, int64_t dp, llvm::StringRef pass);

/// One axis of the grid, or a group of axes: what a shard collective over them names.
struct MeshAxisRef {
  llvm::StringRef grid = kMeshGridName;
  int16_t axis = 0; ///< the (first) axis
  int64_t size = 1; ///< the ranks in the group
  /// The grid axes, ascending (the runtime's group order: the last one fastest).
  llvm::SmallVector<int16_t, 2> list;
  /// The `grid_axes` operand of a shard collective over the group.
  llvm::ArrayRef<int16_t> axes() const { return list; }
};

/// The grid axis of `role`, creating `shard.grid @mesh` at the module's start on first use.
/// Fails with a diagnostic naming `pass` when the module has no mesh or no such axis, or
/// has a @mesh grid that disagrees with the mesh.
FailureOr<MeshAxisRef> getMeshAxis(ModuleOp module, MeshAxis role, llvm::StringRef pass);

/// The ranks that hold replicas of the parameters, over which ZeRO partitions and gradients
/// are summed: the dp axis, with the ep and sp axes where larger than 1 (each ep rank reads
/// other samples; each sp rank differentiates its block of the sequences, DeepSpeed-Ulysses
/// partitions over dp x sp likewise).
FailureOr<MeshAxisRef> getReplicaGroup(ModuleOp module, llvm::StringRef pass);

/// The replicas of an expert split over ep (expert parallelism's expert-data-parallel
/// group): the replica group without ep. Its size is 1 when the experts split over every
/// data-parallel rank.
FailureOr<MeshAxisRef> getExpertReplicaGroup(ModuleOp module, llvm::StringRef pass);

/// Whether `sharding` (a parameter's) splits a dimension over the axis of `role`: the ranks
/// along it hold different parts (tensor parallelism's tp, expert parallelism's dp).
bool splitsOver(ShardingAttr sharding, MeshAxis role);

} // namespace mlir::ds

#endif // DS_TRANSFORMS_MESH_H
