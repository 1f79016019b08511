//===- tokens.cpp - memory-mapped token files ---------------------------------===//
#include "dsrt/io.h"
#include "dsrt/dsrt.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace dsrt::io {

TokenFile::~TokenFile() {
  if (map_)
    munmap(map_, bytes_);
}

bool TokenFile::open(const std::string &path, int tokenBytes, std::string &err) {
  if (tokenBytes != 2 && tokenBytes != 4) {
    err = "token size must be 2 (uint16) or 4 (uint32) bytes";
    return false;
  }
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) {
    err = "cannot open '" + path + "': " + std::strerror(errno);
    return false;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size <= 0) {
    err = "'" + path + "' is empty or unreadable";
    ::close(fd);
    return false;
  }
  if (st.st_size % tokenBytes != 0) {
    err = "'" + path + "' has " + std::to_string(st.st_size) + " bytes, not a whole number of " +
          (tokenBytes == 2 ? "uint16" : "uint32") + " tokens (wrong --token-dtype?)";
    ::close(fd);
    return false;
  }
  void *m = mmap(nullptr, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (m == MAP_FAILED) {
    err = "cannot map '" + path + "': " + std::strerror(errno);
    return false;
  }
  map_ = m;
  bytes_ = static_cast<size_t>(st.st_size);
  tokenBytes_ = tokenBytes;
  return true;
}

void TokenFile::window(int64_t j, int64_t seqLen, int64_t shift, int32_t dtype,
                       void *dst) const {
  int64_t first = j * seqLen + shift;
  for (int64_t t = 0; t < seqLen; ++t) {
    uint32_t v = tokenBytes_ == 2 ? static_cast<const uint16_t *>(map_)[first + t]
                                  : static_cast<const uint32_t *>(map_)[first + t];
    if (dtype == DSRT_I32)
      static_cast<int32_t *>(dst)[t] = static_cast<int32_t>(v);
    else
      static_cast<int64_t *>(dst)[t] = static_cast<int64_t>(v);
  }
}

} // namespace dsrt::io
