//===- rank_file.cpp - one rank's file of a sharded checkpoint -----------------===//
#include "rank_file.h"

#include "index.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace dsrt::ckpt {

size_t transferBufferBytes() {
  if (const char *v = std::getenv("DSRT_CHECKPOINT_BUFFER_BYTES")) {
    uint64_t b = 0;
    if (io::parseBytes(v, b) && b >= 64)
      return static_cast<size_t>(b);
  }
  return size_t(64) << 20;
}

namespace {
bool writeAll(int fd, const void *data, size_t n) {
  const char *p = static_cast<const char *>(data);
  while (n) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}
} // namespace

bool writeRankFile(const std::string &path, const std::vector<PieceSource> &pieces,
                   size_t bufferBytes, std::string &err) {
  std::vector<io::SafetensorsEntry> layout;
  uint64_t total = 0;
  for (const PieceSource &p : pieces) {
    uint64_t bytes = static_cast<uint64_t>(p.count) * io::elementSize(p.dtype);
    layout.push_back({p.name, p.dtype, {p.count}, nullptr, static_cast<size_t>(bytes)});
    total += bytes;
  }
  std::string prefix = io::safetensorsPrefix(layout, kFormat);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    err = "cannot write '" + path + "': " + std::strerror(errno);
    return false;
  }
  bool ok = writeAll(fd, prefix.data(), prefix.size());
  std::vector<char> buffer(std::min<uint64_t>(std::max<size_t>(bufferBytes, 64), total));
  for (const PieceSource &p : pieces) {
    size_t es = io::elementSize(p.dtype);
    int64_t per = static_cast<int64_t>(buffer.size() / es);
    for (int64_t at = 0; ok && at < p.count; at += per) {
      int64_t n = std::min(per, p.count - at);
      p.fill(at, n, buffer.data());
      ok = writeAll(fd, buffer.data(), static_cast<size_t>(n) * es);
    }
  }
  ok = ok && ::fsync(fd) == 0;
  int saved = errno;
  ok = ::close(fd) == 0 && ok;
  if (!ok)
    err = "cannot write '" + path + "': " + std::strerror(saved ? saved : errno);
  return ok;
}

RankFile::~RankFile() {
  if (fd_ >= 0)
    ::close(fd_);
}

bool RankFile::open(const std::string &path, std::string &err) {
  path_ = path;
  std::vector<io::SafetensorsEntryInfo> entries;
  if (!io::readSafetensorsHeader(path, entries, err))
    return false;
  for (io::SafetensorsEntryInfo &e : entries) {
    std::string name = e.name;
    entries_.emplace(std::move(name), std::move(e));
  }
  fd_ = ::open(path.c_str(), O_RDONLY);
  if (fd_ < 0) {
    err = "cannot read '" + path + "': " + std::strerror(errno);
    return false;
  }
  return true;
}

bool RankFile::entry(const std::string &name, int32_t &dtype, int64_t &count) const {
  auto it = entries_.find(name);
  if (it == entries_.end())
    return false;
  dtype = it->second.dtype;
  count = static_cast<int64_t>((it->second.end - it->second.begin) /
                               io::elementSize(it->second.dtype));
  return true;
}

bool RankFile::read(const std::string &name, int64_t offset, int64_t n, void *dst,
                    std::string &err) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    err = "'" + path_ + "' has no entry '" + name + "' (damaged checkpoint)";
    return false;
  }
  const io::SafetensorsEntryInfo &e = it->second;
  size_t es = io::elementSize(e.dtype);
  uint64_t from = e.begin + static_cast<uint64_t>(offset) * es;
  uint64_t bytes = static_cast<uint64_t>(n) * es;
  if (offset < 0 || n < 0 || from + bytes > e.end) {
    err = "'" + path_ + "': entry '" + name + "' is shorter than its index says (damaged "
          "checkpoint)";
    return false;
  }
  char *p = static_cast<char *>(dst);
  while (bytes) {
    ssize_t r = ::pread(fd_, p, bytes, static_cast<off_t>(from));
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0) {
      err = "cannot read '" + path_ + "': " + (r < 0 ? std::strerror(errno) : "truncated");
      return false;
    }
    p += r;
    from += static_cast<uint64_t>(r);
    bytes -= static_cast<uint64_t>(r);
  }
  return true;
}

bool TensorReader::readPart(const TensorEntry &t, int64_t part, int64_t begin, int64_t end,
                            void *dst, std::string &err) {
  size_t es = io::elementSize(t.dtype);
  for (const Piece &p : t.pieces) {
    int64_t a = std::max(begin, p.start), b = std::min(end, p.start + p.count);
    if (p.part != part || a >= b)
      continue;
    auto f = files_.find(p.file);
    if (f == files_.end()) {
      auto file = std::make_unique<RankFile>();
      if (!file->open(dir_ + "/" + index_.files[p.file], err))
        return false;
      f = files_.emplace(p.file, std::move(file)).first;
    }
    int32_t dtype;
    int64_t count;
    if (!f->second->entry(t.name, dtype, count) || dtype != t.dtype || count != p.count) {
      err = "'" + f->second->path() + "' does not hold '" + t.name + "' as its index says " +
            "(damaged checkpoint)";
      return false;
    }
    if (!f->second->read(t.name, a - p.start, b - a, static_cast<char *>(dst) + (a - begin) * es,
                         err))
      return false;
  }
  return true;
}

bool TensorReader::read(const TensorEntry &t, const Split &as, int64_t part, int64_t begin,
                        int64_t end, void *dst, std::string &err) {
  if (as == t.split)
    return readPart(t, as.whole() ? 0 : part, begin, end, dst, err);
  // Another split: the runs contiguous in the reader's part, each read from the parts of the
  // writers' split it falls in.
  char *out = static_cast<char *>(dst);
  const size_t es = io::elementSize(t.dtype);
  bool ok = true;
  forEachRun(t.dims, as, part, begin, end, [&](int64_t global, int64_t local, int64_t n) {
    for (int64_t done = 0; ok && done < n;) {
      int64_t q, at, following;
      locate(t.dims, t.split, global + done, q, at, following);
      int64_t m = std::min(n - done, following);
      ok = readPart(t, q, at, at + m, out + (local - begin + done) * es, err);
      done += m;
    }
  });
  return ok;
}

} // namespace dsrt::ckpt
