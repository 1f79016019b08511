//===- memory.cpp - host memory of this process, and checked size arithmetic -===//
#include "dsrt/io.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <string>
#include <sys/resource.h>

namespace dsrt::io {

bool checkedMul(int64_t a, int64_t b, int64_t &out) {
  return a >= 0 && b >= 0 && !__builtin_mul_overflow(a, b, &out);
}

bool checkedAdd(int64_t a, int64_t b, int64_t &out) {
  return a >= 0 && b >= 0 && !__builtin_add_overflow(a, b, &out);
}

bool checkedNumel(const std::vector<int64_t> &dims, int64_t &out) {
  int64_t n = 1;
  for (int64_t d : dims)
    if (!checkedMul(n, d, n))
      return false;
  out = n;
  return true;
}

bool checkedBytes(int64_t numel, int32_t dtype, int64_t &out, int64_t limit) {
  size_t es = elementSize(dtype);
  return es && checkedMul(numel, static_cast<int64_t>(es), out) && out <= limit;
}

namespace {
/// A "Vm...:  N kB" line of /proc/self/status, in bytes (0 if absent).
uint64_t statusBytes(const char *key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  size_t n = std::strlen(key);
  while (std::getline(f, line))
    if (line.compare(0, n, key) == 0 && line.size() > n && line[n] == ':')
      return std::strtoull(line.c_str() + n + 1, nullptr, 10) * 1024;
  return 0;
}
/// The high-water marks that resets have cleared.
std::atomic<uint64_t> clearedPeak{0};
} // namespace

uint64_t hostPeakBytes() {
  uint64_t now = statusBytes("VmHWM");
  if (!now) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
      now = static_cast<uint64_t>(ru.ru_maxrss) * 1024;
  }
  return std::max(now, clearedPeak.load());
}

bool processDiskBytes(uint64_t &readBytes, uint64_t &writeBytes) {
  std::ifstream f("/proc/self/io");
  std::string line;
  int found = 0;
  while (std::getline(f, line)) {
    if (line.rfind("read_bytes:", 0) == 0)
      readBytes = std::strtoull(line.c_str() + 11, nullptr, 10), ++found;
    else if (line.rfind("write_bytes:", 0) == 0)
      writeBytes = std::strtoull(line.c_str() + 12, nullptr, 10), ++found;
  }
  return found == 2;
}

void HostMemoryWindow::begin() {
  uint64_t peak = hostPeakBytes();
  uint64_t seen = clearedPeak.load();
  while (peak > seen && !clearedPeak.compare_exchange_weak(seen, peak)) {
  }
  std::ofstream f("/proc/self/clear_refs");
  f << "5"; // resets the resident set's high-water mark to the current resident set
  f.flush();
  reset_ = static_cast<bool>(f);
  startRss_ = statusBytes("VmRSS");
}

uint64_t HostMemoryWindow::peakGrowth() const {
  uint64_t end = reset_ ? statusBytes("VmHWM") : statusBytes("VmRSS");
  return end > startRss_ ? end - startRss_ : 0;
}

} // namespace dsrt::io
