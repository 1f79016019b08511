// Offline views of a sharded checkpoint, for ds-checkpoint (as DeepSpeed's zero_to_fp32.py):
// reading any range of a tensor from its pieces, and writing the fp32 state_dict that the
// TorchScript module loads, streamed one tensor at a time.
#ifndef DSRT_CHECKPOINT_EXPORT_H
#define DSRT_CHECKPOINT_EXPORT_H

#include "index.h"
#include "rank_file.h"

#include <map>
#include <memory>
#include <string>

namespace dsrt::ckpt {

/// Reads tensors of one checkpoint (directory `dir`, index `index`) from its rank files,
/// opening each file once.
class TensorReader {
public:
  TensorReader(std::string dir, const Index &index) : dir_(std::move(dir)), index_(index) {}
  /// Elements [begin, end) of tensor `t` into `dst` (its dtype).
  bool read(const TensorEntry &t, int64_t begin, int64_t end, void *dst, std::string &err);

private:
  std::string dir_;
  const Index &index_;
  std::map<int32_t, std::unique_ptr<RankFile>> files_;
};

/// Writes the model's state_dict: every parameter (its fp32 master when it has one, else
/// widened to f32) and buffer under its name and aliases. Holds at most the largest tensor.
/// `tensors` and `bytes` get what was written.
bool exportStateDict(const std::string &dir, const Index &index, const std::string &out,
                     int64_t &tensors, uint64_t &bytes, std::string &err);

} // namespace dsrt::ckpt

#endif
