// The index of a sharded checkpoint (checkpoint.json, format ds-checkpoint-4): which logical
// tensors it holds (parameters and buffers by state_dict name, optimizer state by parameter
// and role, the loss scaler) and, for each, the pieces the ranks wrote: ranges of the
// row-major elements of the tensor or, for a tensor the writers held split along a dimension
// (tensor parallelism), of one of its parts, each piece in one rank file. The pieces of each
// part cover it exactly once, so any layout, split or not, can read the ranges it needs.
// Format 3 is format 4 without splits; both are read.
#ifndef DSRT_CHECKPOINT_INDEX_H
#define DSRT_CHECKPOINT_INDEX_H

#include "dsrt/dsrt.h"
#include "dsrt/io.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <string>
#include <vector>

namespace dsrt::ckpt {

constexpr const char *kFormat = "ds-checkpoint-4";

/// The index's tensor kinds: a parameter's and a buffer's are their roles' words (dsrt.h's
/// dsrt_slot_role_kind); optimizer state (named by its role, dsrt_slot_role_name) and the loss
/// scaler are the checkpoint's own.
inline const char *parameterKind() { return dsrt_slot_role_kind(DSRT_ROLE_PARAMETER); }
inline const char *bufferKind() { return dsrt_slot_role_kind(DSRT_ROLE_BUFFER); }
constexpr const char *kOptimizerStateKind = "optimizer_state";
constexpr const char *kLossScalerKind = "loss_scaler";

/// How a tensor is split into parts along dimension `dim` (tensor parallelism, Megatron's
/// layout): the dimension is `segments` segments (a fused q/k/v projection's three), equal or
/// of `sizes` rows each (grouped-query heads: q's rows, then k's and v's), and part p holds the
/// p-th of `parts` equal blocks of every segment, back to back. A part's elements are
/// row-major in its own dims (`dims[dim] / parts`). `parts` 1: whole.
struct Split {
  int64_t dim = -1, segments = 1, parts = 1;
  std::vector<int64_t> sizes; ///< the segments' rows when unequal (empty: equal)
  bool whole() const { return parts == 1; }
  bool operator==(const Split &o) const {
    return whole() ? o.whole()
                   : dim == o.dim && segments == o.segments && parts == o.parts &&
                         sizes == o.sizes;
  }
};

/// Checks a split of a dimension of `n` rows (segments and sizes that add up, each segment a
/// multiple of `parts`); the cause in `why`.
bool validSplit(const Split &s, int64_t n, std::string &why);

/// Calls `run(global, local, n)` for each run of elements that are contiguous both in part
/// `part` of a tensor of `dims` split as `s` and in the tensor, covering the part's elements
/// [begin, end) in order: `global` is the run's first element in the tensor, `local` in the
/// part.
template <typename F>
void forEachRun(const std::vector<int64_t> &dims, const Split &s, int64_t part, int64_t begin,
                int64_t end, F run);

/// Where element `global` of a tensor of `dims` split as `s` lives: its part, its element
/// there, and how many elements from it on are contiguous in both (`following`).
void locate(const std::vector<int64_t> &dims, const Split &s, int64_t global, int64_t &part,
            int64_t &local, int64_t &following);

/// Elements [start, start + count) of part `part` of a tensor (of the tensor when it is whole),
/// stored in rank file `file` under the tensor's name.
struct Piece {
  int32_t file = 0;
  int64_t start = 0, count = 0;
  int64_t part = 0;
};

struct TensorEntry {
  std::string name;
  /// "parameter", "buffer", "optimizer_state" (of the parameter `of`, role `role`: exp_avg,
  /// master, ...) or "loss_scaler".
  std::string kind, of, role;
  int32_t dtype = -1;
  std::vector<int64_t> dims;
  std::vector<std::string> aliases; ///< other state_dict names of a tied parameter
  Split split;                      ///< how the writers held it
  std::vector<Piece> pieces;
  int64_t numel = 0; ///< set by parseIndex (checked)
  int64_t partNumel() const { return numel / split.parts; }
};

struct Index {
  std::string tag;      ///< the directory's name, e.g. step-00000012
  int64_t step = 0;
  int64_t samplesConsumed = 0;
  std::string run;      ///< the run that wrote it (kept across resumes)
  std::string previous; ///< the checkpoint this run wrote before it in the same directory ("")
  int64_t worldSize = 1, zeroStage = 0;
  std::string mesh; ///< the writers' mesh, e.g. "dp=2 x tp=2" ("" in format 3)
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

namespace detail {
/// The geometry of a split: outer (dims before `dim`), the dimension (`n` rows, `local` in a
/// part), each segment's first row and rows, and inner (dims after `dim`). A part's block of
/// segment k is size[k] / parts rows, at row start[k] / parts of the part.
struct SplitShape {
  int64_t outer = 1, n = 1, local = 1, inner = 1, parts = 1;
  std::vector<int64_t> start, size;
  SplitShape(const std::vector<int64_t> &dims, const Split &s);
  /// The segment holding row `l` of a part.
  size_t segmentOfLocal(int64_t l) const {
    size_t k = 0;
    while (k + 1 < start.size() && start[k + 1] / parts <= l)
      ++k;
    return k;
  }
};
} // namespace detail

template <typename F>
void forEachRun(const std::vector<int64_t> &dims, const Split &s, int64_t part, int64_t begin,
                int64_t end, F run) {
  if (begin >= end)
    return;
  if (s.whole()) {
    run(begin, begin, end - begin);
    return;
  }
  detail::SplitShape g(dims, s);
  for (int64_t at = begin; at < end;) { // a run: one part's block of one segment
    int64_t o = at / (g.local * g.inner), r = at % (g.local * g.inner);
    int64_t l = r / g.inner, i = r % g.inner;
    size_t k = g.segmentOfLocal(l);
    int64_t block = g.size[k] / g.parts, b = l - g.start[k] / g.parts;
    int64_t global = (o * g.n + g.start[k] + part * block + b) * g.inner + i;
    int64_t n = std::min((block - b) * g.inner - i, end - at);
    if (n <= 0) { // only a split that does not tile its dimension (validSplit refuses those)
      std::fprintf(stderr, "dsrt: a checkpoint split whose segments do not tile dimension %lld\n",
                   static_cast<long long>(s.dim));
      std::abort();
    }
    run(global, at, n);
    at += n;
  }
}

} // namespace dsrt::ckpt

#endif
