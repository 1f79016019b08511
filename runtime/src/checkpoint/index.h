// The index of a sharded checkpoint (checkpoint.json, format ds-checkpoint-3): which logical
// tensors it holds (parameters and buffers by state_dict name, optimizer state by parameter
// and role, the loss scaler) and, for each, the pieces the ranks wrote: ranges of its
// row-major elements, each in one rank file. The pieces of a tensor cover it exactly once, so
// any layout can read the ranges it needs; a tensor-parallel layout will add the box a piece
// belongs to, keeping this form for whole tensors.
#ifndef DSRT_CHECKPOINT_INDEX_H
#define DSRT_CHECKPOINT_INDEX_H

#include "dsrt/io.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dsrt::ckpt {

constexpr const char *kFormat = "ds-checkpoint-3";

/// Elements [start, start + count) of a tensor, stored in rank file `file` under the tensor's
/// name.
struct Piece {
  int32_t file = 0;
  int64_t start = 0, count = 0;
};

struct TensorEntry {
  std::string name;
  /// "parameter", "buffer", "optimizer_state" (of the parameter `of`, role `role`: exp_avg,
  /// master, ...) or "loss_scaler".
  std::string kind, of, role;
  int32_t dtype = -1;
  std::vector<int64_t> dims;
  std::vector<std::string> aliases; ///< other state_dict names of a tied parameter
  std::vector<Piece> pieces;
  int64_t numel = 0; ///< set by parseIndex (checked)
};

struct Index {
  std::string tag;      ///< the directory's name, e.g. step-00000012
  int64_t step = 0;
  int64_t samplesConsumed = 0;
  std::string run;      ///< the run that wrote it (kept across resumes)
  std::string previous; ///< the checkpoint this run wrote before it in the same directory ("")
  int64_t worldSize = 1, zeroStage = 0;
  std::string precision = "fp32";
  std::string rng;           ///< the random generator's state
  std::string numericConfig; ///< the config keys that change the numbers, as JSON text
  std::vector<std::string> files;
  std::vector<TensorEntry> tensors;
};

/// The JSON text of `index`.
std::string formatIndex(const Index &index);
/// Parses and checks an index: every size in range, every piece inside its tensor and in a
/// listed file, the pieces of each tensor covering it exactly once. `what` names the file in
/// messages.
bool parseIndex(const std::string &text, const std::string &what, Index &out, std::string &err);

/// The name of the rank file of `rank` among `world`.
std::string rankFileName(int64_t rank, int64_t world);

/// Rank `rank`'s part of a storage of `total` elements written by `world` ranks: equal parts
/// of ceil(total / world) elements (the last may be shorter or empty), as ZeRO partitions.
void partOf(int64_t total, int64_t world, int64_t rank, int64_t &begin, int64_t &end);

} // namespace dsrt::ckpt

#endif
