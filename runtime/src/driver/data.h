// The training data: .npy arrays (one per input) or a nanoGPT token file feeding the first two
// inputs, checked against the step's inputs, and cut into each rank's micro-batches in the
// order dsrt/io.h defines (the one ds-reference uses).
#ifndef DSRT_DRIVER_DATA_H
#define DSRT_DRIVER_DATA_H

#include "options.h"
#include "program.h"

#include "dsrt/dsrt.h"
#include "dsrt/io.h"

#include <vector>

namespace dsrt::driver {

class DataFeed {
public:
  /// Opens and checks the data named by `opt` for `p`'s inputs and `opt.steps` steps.
  bool load(const Options &opt, const ProgramSpec &p, std::string &err);
  /// Fills `inputs` (one tensor per step input) with micro-batch `k` of `rank` at `step`.
  void fill(dsrt_context *ctx, int64_t step, int32_t rank, int64_t k,
            const std::vector<dsrt_tensor *> &inputs) const;

private:
  const ProgramSpec *p_ = nullptr;
  int64_t seqLen_ = 0;
  std::vector<io::Array> arrays_; // parallel to the inputs
  io::TokenFile tokens_;          // with --tokens: feeds inputs 0 and 1
  std::vector<size_t> rowBytes_;
  mutable std::vector<char> staging_; ///< one token input, before its copy to the device
  int64_t samples_ = 0; ///< samples every input has
};

} // namespace dsrt::driver

#endif
