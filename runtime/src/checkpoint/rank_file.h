// A rank's file of a sharded checkpoint: a safetensors file of 1-D entries, one per piece,
// written and read through one bounded transfer buffer so that saving or resuming never holds
// more than the buffer beyond the model state.
#ifndef DSRT_CHECKPOINT_RANK_FILE_H
#define DSRT_CHECKPOINT_RANK_FILE_H

#include "dsrt/io.h"
#include "index.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace dsrt::ckpt {

/// The transfer buffer's default size (64 MiB); DSRT_CHECKPOINT_BUFFER_BYTES overrides it.
size_t transferBufferBytes();

/// One piece to write: `count` elements of `dtype`, copied on demand by `fill` (elements
/// [offset, offset + n) into host memory at `dst`).
struct PieceSource {
  std::string name;
  int32_t dtype = 0;
  int64_t count = 0;
  std::function<void(int64_t offset, int64_t n, void *dst)> fill;
};

/// Writes `pieces` into `path` and syncs it; the data pass through one buffer of at most
/// `bufferBytes`.
bool writeRankFile(const std::string &path, const std::vector<PieceSource> &pieces,
                   size_t bufferBytes, std::string &err);

/// Ranged reads of a rank file's entries (only the header is read on open).
class RankFile {
public:
  RankFile() = default;
  RankFile(const RankFile &) = delete;
  RankFile &operator=(const RankFile &) = delete;
  ~RankFile();
  bool open(const std::string &path, std::string &err);
  /// The entry `name`: its dtype and element count; false if absent.
  bool entry(const std::string &name, int32_t &dtype, int64_t &count) const;
  /// Elements [offset, offset + n) of entry `name` into `dst`.
  bool read(const std::string &name, int64_t offset, int64_t n, void *dst, std::string &err) const;
  const std::string &path() const { return path_; }

private:
  int fd_ = -1;
  std::string path_;
  std::map<std::string, io::SafetensorsEntryInfo> entries_;
};


/// Reads ranges of a checkpoint's tensors (directory `dir`, index `index`) from the pieces
/// that hold them, opening each rank file once and checking its entries against the index.
class TensorReader {
public:
  TensorReader(std::string dir, const Index &index) : dir_(std::move(dir)), index_(index) {}
  /// Elements [begin, end) of part `part` of tensor `t` (an entry of the index) split as
  /// `as` (whatever split its writers held it in) into `dst`.
  bool read(const TensorEntry &t, const Split &as, int64_t part, int64_t begin, int64_t end,
            void *dst, std::string &err);
  /// Elements [begin, end) of the whole tensor.
  bool read(const TensorEntry &t, int64_t begin, int64_t end, void *dst, std::string &err) {
    return read(t, Split{}, 0, begin, end, dst, err);
  }

private:
  /// Elements [begin, end) of part `part` of `t` in the writers' split.
  bool readPart(const TensorEntry &t, int64_t part, int64_t begin, int64_t end, void *dst,
                std::string &err);
  std::string dir_;
  const Index &index_;
  std::map<int32_t, std::unique_ptr<RankFile>> files_;
};

} // namespace dsrt::ckpt

#endif
