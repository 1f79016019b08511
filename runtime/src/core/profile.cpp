//===- profile.cpp - per-kernel wall time under DSRT_PROFILE ----------------===//
#include "internal.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace {
bool enabled() {
  static const bool on = std::getenv("DSRT_PROFILE") != nullptr;
  return on;
}
int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
struct Entry {
  int64_t ns = 0, calls = 0;
};
std::map<std::pair<std::string, int32_t>, Entry> &table() {
  static std::map<std::pair<std::string, int32_t>, Entry> t;
  return t;
}
} // namespace

dsrt::ProfileScope::ProfileScope(const char *n, int32_t o) : name(n), op(o) {
  if (enabled())
    start = nowNs();
}

dsrt::ProfileScope::~ProfileScope() {
  if (start < 0)
    return;
  Entry &e = table()[{name, op}];
  e.ns += nowNs() - start;
  ++e.calls;
}

void dsrt::printProfile() {
  if (!enabled() || table().empty())
    return;
  std::vector<std::pair<std::pair<std::string, int32_t>, Entry>> rows(table().begin(),
                                                                      table().end());
  std::sort(rows.begin(), rows.end(),
            [](const auto &a, const auto &b) { return a.second.ns > b.second.ns; });
  int64_t total = 0;
  for (auto &r : rows)
    total += r.second.ns;
  std::fprintf(stderr, "dsrt profile: %-22s %8s %10s %6s\n", "kernel (op)", "calls", "ms", "%");
  for (auto &r : rows) {
    std::string name = r.first.first;
    if (r.first.second >= 0)
      name += " (" + std::to_string(r.first.second) + ")";
    std::fprintf(stderr, "dsrt profile: %-22s %8lld %10.1f %6.1f\n", name.c_str(),
                 (long long)r.second.calls, r.second.ns / 1e6, 100.0 * r.second.ns / total);
  }
  table().clear();
}
