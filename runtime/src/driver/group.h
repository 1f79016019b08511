// The driver's rank group: which rank this process is, the small collectives the driver
// itself needs (gathers of its own bytes, broadcasts), and agreement points that turn one
// rank's failure into every rank's exit with that rank's message.
#ifndef DSRT_DRIVER_GROUP_H
#define DSRT_DRIVER_GROUP_H

#include "dsrt/dsrt.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dsrt::driver {

class Group {
public:
  /// Joins the mesh the program was compiled for (exits naming it when the job has another
  /// size) and arms the collectives' timeout.
  void join(dsrt_context *ctx, const std::vector<dsrt_mesh_axis> &axes,
            const std::vector<int64_t> &shape, double timeoutSeconds);
  /// This rank in the world, and the world's size.
  int32_t rank() const { return rank_; }
  int32_t size() const { return size_; }
  /// This rank's data-parallel index (which samples it reads) and the number of them: over
  /// dp, and ep (expert parallelism's ranks read other samples too; ep fastest).
  int32_t dpIndex() const { return dpIndexOf(rank_); }
  int32_t dpSize() const { return dpSize_; }
  /// The group of the ranks that differ only along mesh axis `axis`, as the
  /// runtime names it (a mask of axes); DSRT_GROUP_WORLD's stand-in 0 (this rank alone) when
  /// the mesh has no such axis.
  int32_t groupOf(dsrt_mesh_axis axis) const;
  /// This rank's index along `axis` and its size (0 and 1 without it).
  int32_t indexOn(dsrt_mesh_axis axis) const { return indexOf(rank_, axis); }
  int32_t sizeOn(dsrt_mesh_axis axis) const;
  int32_t indexOf(int32_t q, dsrt_mesh_axis axis) const;
  /// World rank `q`'s data-parallel index.
  int32_t dpIndexOf(int32_t q) const;
  /// ZeRO's partitions are over the ranks that hold replicas of the parameters, dp x ep x sp
  /// (sp fastest): world rank `q`'s index among them, their number and their group.
  int32_t shardIndexOf(int32_t q) const {
    return dpIndexOf(q) * sizeOn(DSRT_AXIS_SP) + indexOf(q, DSRT_AXIS_SP);
  }
  int32_t shardIndex() const { return shardIndexOf(rank_); }
  int32_t shardCount() const { return dpSize_ * sizeOn(DSRT_AXIS_SP); }
  int32_t shardGroup() const {
    return groupOf(DSRT_AXIS_DP) | groupOf(DSRT_AXIS_EP) | groupOf(DSRT_AXIS_SP);
  }
  /// World rank `q`'s index among the ranks of the group `mask` (a mask of axes, as groupOf
  /// gives) that share its other coordinates (row-major, the last axis fastest), and their
  /// number. `everyAxis()` is the mask of every axis.
  int32_t indexWithin(int32_t q, int32_t mask) const;
  int32_t sizeWithin(int32_t mask) const;
  int32_t everyAxis() const { return (1 << axes_.size()) - 1; }
  /// The mesh as the messages name it: "dp=2 x tp=2".
  std::string meshString() const;
  /// Whether world rank `q` is the first of the ranks that share its samples (its index is 0
  /// on every axis but dp, and on pp the last stage, which computes the loss): the one whose
  /// losses the log counts.
  bool leadsItsSamples(int32_t q) const;
  /// Whether world rank `q` is the first rank of its pipeline stage (index 0 on every axis
  /// but pp): the one that gathers the stage's tensors for rank 0.
  bool leadsStage(int32_t q) const;
  dsrt_context *ctx() const { return ctx_; }

  /// Every rank's `n` bytes at `mine`, in rank order.
  std::vector<char> gather(const void *mine, int64_t n) const;
  /// Rank 0's `text` on every rank.
  std::string broadcast(const std::string &text) const;

  /// An agreement point that every rank reaches: `error` is this rank's failure ("" if none).
  /// Returns -1 when no rank failed, else the lowest failing rank, with its message in
  /// `message`. Prints nothing.
  int32_t agreeOn(const std::string &error, std::string &message) const;

  /// An agreement point that every rank reaches: `error` is this rank's failure ("" if
  /// none). Returns true when no rank failed. Otherwise prints, on the lowest failing rank,
  /// `tool: error: MESSAGE`, and on every other rank a line naming that rank and its message,
  /// and returns false: every rank then exits non-zero. Quiet, it prints nothing; either way
  /// lastError() holds the message (a library raises it).
  bool agree(const std::string &tool, const std::string &error) const;
  void setQuiet(bool quiet) { quiet_ = quiet; }
  /// Reports rank `who`'s failure `message` as agree() does (kept in lastError(); printed,
  /// unless quiet, by `who` as an error and by the others as the reason they stop).
  void report(const std::string &tool, int32_t who, const std::string &message) const;
  /// The last failed agreement's message: this rank's, or "rank W failed: ..." for another's.
  const std::string &lastError() const { return lastError_; }

private:
  dsrt_context *ctx_ = nullptr;
  int32_t rank_ = 0, size_ = 1, dpSize_ = 1;
  std::vector<dsrt_mesh_axis> axes_;
  std::vector<int64_t> shape_;
  bool quiet_ = false;
  mutable std::string lastError_;
  /// World rank `q`'s index along axis `axis` (row-major, the last axis fastest).
  int32_t coordinate(int32_t q, size_t axis) const;
};

} // namespace dsrt::driver

#endif
