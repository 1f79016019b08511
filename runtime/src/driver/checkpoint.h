// Checkpoints of a training run: the model's logical tensors (parameters, buffers, optimizer
// state by parameter, whatever the ZeRO layout), the step, the random state, and what a resume
// must agree with (the tensors and the config keys that change the numbers).
#ifndef DSRT_DRIVER_CHECKPOINT_H
#define DSRT_DRIVER_CHECKPOINT_H

#include "dsrt/dsrt.h"
#include "dsrt/io.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dsrt::driver {

struct CheckpointSlot {
  std::string name;
  int32_t dtype = 0;
  std::vector<int64_t> dims;
  const void *data = nullptr; ///< what saveCheckpoint writes
};

/// Writes DIR/step-NNNNNNNN atomically: into a partial directory, synced, then renamed, so a
/// kill at any point leaves the previous complete checkpoint as it was. Keeps the newest two.
bool saveCheckpoint(dsrt_context *ctx, const std::string &dir, int64_t step,
                    const std::vector<CheckpointSlot> &slots, const io::Json &config,
                    std::string &err);

/// Reads the newest complete checkpoint in DIR: the tensors' bytes in `slots` order into
/// `data`, the random state into the context; sets `step` to its step. Refuses, naming the difference, a checkpoint of another model or
/// of a config whose numbers differ (optimizer, scheduler, train_batch_size, clipping, seed,
/// precision). Damaged checkpoints are skipped with a warning when an older one is complete.
bool loadCheckpoint(dsrt_context *ctx, const std::string &dir,
                    const std::vector<CheckpointSlot> &slots, const io::Json &config,
                    int64_t &step, std::vector<std::vector<char>> &data, std::string &err);

} // namespace dsrt::driver

#endif
