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
  /// Joins the context's group (exits naming both sizes when the program was compiled for
  /// another size) and arms the collectives' timeout.
  void join(dsrt_context *ctx, int64_t expectedSize, double timeoutSeconds);
  int32_t rank() const { return rank_; }
  int32_t size() const { return size_; }
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
  /// and returns false: every rank then exits non-zero.
  bool agree(const std::string &tool, const std::string &error) const;

private:
  dsrt_context *ctx_ = nullptr;
  int32_t rank_ = 0, size_ = 1;
};

} // namespace dsrt::driver

#endif
