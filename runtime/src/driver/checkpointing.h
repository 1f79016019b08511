// The driver's checkpoints: the program's logical tensors (parameters and buffers by name,
// optimizer state by parameter, whatever the ZeRO layout), saved with every rank writing only
// the pieces it owns and resumed with every rank reading only the ranges it holds, both through
// one bounded transfer buffer (src/checkpoint holds the format).
#ifndef DSRT_DRIVER_CHECKPOINTING_H
#define DSRT_DRIVER_CHECKPOINTING_H

#include "group.h"
#include "program.h"

#include "../checkpoint/index.h"

#include <map>
#include <string>
#include <vector>

namespace dsrt::driver {

class Checkpointer {
public:
  Checkpointer(const ProgramSpec &p, const Group &g, std::string tool);

  /// The loss scaler's state (fp16: six doubles) travels with the tensors.
  void setScalerState(double *state) { scaler_ = state; }

  /// Gives this run a new identity (rank 0's, on every rank); a resume takes the checkpoint's.
  void startRun();

  /// Saves `step` into `dir`; every rank takes part and writes only its own rank file, rank 0
  /// the index and `latest`, then prunes this run's older checkpoints. False (its message
  /// printed on every rank) when any rank failed. `hostPeak` gets this rank's host memory
  /// growth during the save.
  bool save(const std::string &dir, int64_t step, uint64_t &hostPeak);

  /// Resumes from `dir`'s latest checkpoint (or the one before it, when the latest is
  /// damaged), or from the checkpoint `dir` is the directory of (DIR/TAG). Refuses a checkpoint of another model or of a config that changes the
  /// numbers. False (printed on every rank) on failure.
  bool resume(const std::string &dir, int64_t &step, uint64_t &hostPeak);

private:
  enum class Where { Slot, Shard, Host };
  struct Logical {
    ckpt::TensorEntry entry;
    Where where = Where::Slot;
    int32_t slot = -1;  ///< the slot that holds it whole, or the shard state it is part of
    int64_t offset = 0; ///< Shard: its first element in the unsharded state
    /// What it is written as part of: a storage (a slot, a flat buffer of views, a sharded
    /// state) split among the ranks; its first element there, and the storage's size.
    std::string storage;
    int64_t storageOffset = 0, storageTotal = 0;
    bool storageSharded = false;
    int64_t shardNumel = 0; ///< Shard: elements per rank
    /// Tensor parallelism: how the ranks hold it, split over mesh axis `splitAxis`
    /// (`entry.dims` are the whole tensor's); the ranges above and below are of this rank's
    /// part, of `localNumel` elements.
    ckpt::Split split;
    dsrt_mesh_axis splitAxis = DSRT_AXIS_TP;
    int64_t localNumel = 0;
    /// A pipeline: the stages (pp indices) whose ranks hold it; empty: every rank.
    std::vector<int64_t> stages;
  };
  /// Whether world rank `r` holds `t` (its pipeline stage does).
  bool holds(const Logical &t, int32_t r) const;

  const ProgramSpec &p_;
  const Group &g_;
  std::string tool_;
  double *scaler_ = nullptr;
  std::vector<Logical> tensors_;
  std::string run_;
  std::map<std::string, std::string> lastTag_; ///< per directory: this run's newest tag there

  void collect();
  /// The elements [begin, end) of its part `part` of tensor `t` that world rank `r` writes.
  void writtenBy(const Logical &t, int32_t r, int64_t &begin, int64_t &end, int64_t &part) const;
  /// The elements of `t` this rank holds (and so must read on resume).
  void heldHere(const Logical &t, int64_t &begin, int64_t &end) const;
  /// Copies elements [e, e + n) of `t`, as this rank holds them, to or from host memory: an
  /// explicit copy between the device and the host (the driver never addresses device
  /// memory). `slots` keeps the slot views.
  void copyOut(const Logical &t, int64_t e, int64_t n, void *host,
               std::map<int32_t, dsrt_tensor *> &slots) const;
  void copyIn(const Logical &t, int64_t e, int64_t n, const void *host,
              std::map<int32_t, dsrt_tensor *> &slots) const;
  /// A view of elements [e, e + n) of `t`'s slot (free it), or null when `t` lives on the host
  /// (then `hostAt` points at element e).
  dsrt_tensor *viewOf(const Logical &t, int64_t e, int64_t n, char *&hostAt,
                      std::map<int32_t, dsrt_tensor *> &slots) const;
  std::string writeRankFile(const std::string &path) const;
  /// Checks `x` against this program; "" when it matches, else a message ending in the fix.
  std::string compatible(const ckpt::Index &x, const std::string &where) const;
  std::string readTensors(const std::string &dir, const ckpt::Index &x) const;
};

} // namespace dsrt::driver

#endif
