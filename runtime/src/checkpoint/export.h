// The fp32 state_dict of a sharded checkpoint, for ds-checkpoint (as DeepSpeed's
// zero_to_fp32.py): what the TorchScript module loads, streamed one tensor at a time.
#ifndef DSRT_CHECKPOINT_EXPORT_H
#define DSRT_CHECKPOINT_EXPORT_H

#include "index.h"

#include <string>

namespace dsrt::ckpt {

/// Writes the model's state_dict: every parameter (its fp32 master when it has one) and
/// buffer under its name and aliases. Holds at most the largest tensor.
/// `tensors` and `bytes` get what was written.
bool exportStateDict(const std::string &dir, const Index &index, const std::string &out,
                     int64_t &tensors, uint64_t &bytes, std::string &err);

} // namespace dsrt::ckpt

#endif
