// The training driver's command-line flags (ds-run's and a compiled executable's).
#ifndef DSRT_DRIVER_OPTIONS_H
#define DSRT_DRIVER_OPTIONS_H

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dsrt::driver {

struct Options {
  std::vector<std::pair<std::string, std::string>> data;
  int64_t steps = -1;
  std::string log, weights, config, saveWeights, dumpGrads, tokens, save, resume;
  int64_t saveEvery = 0;
  int64_t seqLen = 0;
  int tokenBytes = 2;
  std::string device; ///< "cpu", "cuda", or "" for dsrt_default_device()
  uint64_t deviceMemory = 0;
  int32_t threads = 0;
  double commTimeout = 1800; ///< seconds; torch.distributed's default for gloo
  bool help = false;
  std::string trace;                                   ///< --trace FILE
  std::vector<std::pair<int64_t, int64_t>> traceSteps; ///< ranges; empty: the last step
  /// Whether step `step` is traced.
  bool traced(int64_t step) const;
};

/// The usage text (printf format with one %s: the tool's name).
extern const char *const kUsage;

/// Parses argv[1..argc); on failure sets `err` to a message naming the flag and the fix.
bool parseFlags(int argc, char **argv, Options &opt, std::string &err);

} // namespace dsrt::driver

#endif
