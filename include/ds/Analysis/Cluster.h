//===- Cluster.h - the machines a plan is for, and what communication costs --===//
//
// A cluster description (`ds-opt --cluster FILE|PRESET`): nodes of identical devices, their
// memory and peak rates, and the links inside and between nodes. The communication model
// prices each collective of a mesh axis on it (docs/design/comm-model.md): ranks are laid on
// nodes in mesh order (row-major, the last axis fastest, devices_per_node consecutive ranks a
// node), and a group that spans nodes runs NCCL's hierarchical ring: a ring inside each node
// over the whole message, and a ring between nodes over each device's 1/k of it, every device
// on its own network link.
//
#ifndef DS_ANALYSIS_CLUSTER_H
#define DS_ANALYSIS_CLUSTER_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace mlir::ds {

/// A cluster file's fields, in bytes, bytes/s, FLOP/s and seconds.
struct ClusterSpec {
  std::string name;
  int64_t nodes = 0, devicesPerNode = 0;
  double deviceMemoryBytes = 0;
  double peakFlopsBf16 = 0, peakFlopsFp16 = 0, peakFlopsFp32 = 0;
  double memoryBandwidth = 0;
  /// Per device, one direction: a device's share of the links inside its node, and its own
  /// link to the network.
  double intraNodeBandwidth = 0, intraNodeLatency = 0;
  double interNodeBandwidth = 0, interNodeLatency = 0;
  double hostMemoryBytes = 0, nvmeBandwidth = 0;
  /// Optional (0: absent): the CPU cores a node's devices share, where ranks are processes on
  /// fewer cores than there are ranks (`mpirun --oversubscribe`); then one rank's idle time
  /// is another's compute.
  int64_t coresPerNode = 0;

  int64_t devices() const { return nodes * devicesPerNode; }
  /// Whether the node's devices share fewer cores than there are devices.
  bool sharesCores() const { return coresPerNode > 0 && coresPerNode < devicesPerNode; }
};

/// The presets' names (e.g. "dgx-h100"), for help and errors.
std::vector<std::string> clusterPresets();

/// The preset `nameOrPath` names, else the JSON file at that path: every field required, no
/// other field allowed, each error naming the field and the fix.
llvm::Expected<ClusterSpec> loadCluster(llvm::StringRef nameOrPath);

/// The cluster as its JSON file (the fields in the documented order).
std::string clusterToJSON(const ClusterSpec &c);

/// Where a mesh axis's groups sit: `perNode` ranks of a group on each of `nodes` nodes.
struct AxisPlacement {
  int64_t perNode = 1, nodes = 1;
};

/// The placement of the groups of mesh axes `axes` (indices into `shape`, a row-major mesh)
/// on nodes of `devicesPerNode` consecutive ranks.
AxisPlacement placeGroup(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<size_t> axes,
                         int64_t devicesPerNode);

/// The communication model's time for `calls` calls of collective `kind` (all_reduce,
/// reduce_scatter, all_gather, all_to_all, send, recv) moving `bytes` in all (each call's
/// whole tensor, as --comm-report counts them) on a group placed as `at`. A recv costs nothing
/// of its own (its send carries the time); -1 for a kind the model does not price.
double collectiveSeconds(llvm::StringRef kind, int64_t calls, double bytes, AxisPlacement at,
                         const ClusterSpec &c);

} // namespace mlir::ds

#endif
