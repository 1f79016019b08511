//===- sample.cu - CUDA kernel: the next token of each sequence (dsrt_sample) --===//
//
// The reference form: one thread per sequence runs kernels/sampling.h's choice (the CPU's
// own), its sort in device scratch. Parameters out of range come back through the device's
// error word.
//
#include "../kernels/checks.h"
#include "../kernels/sampling.h"
#include "cuda_device.h"
#include "half_bits.cuh"

using namespace dsrt;
using namespace dsrt::cuda;

namespace {

template <class S>
__global__ void sampleKernel(int64_t *tokens, const S *logits, const float *temperature,
                             const int64_t *topK, const float *topP, const int64_t *seeds,
                             const int64_t *steps, int32_t *order, checks::SampleShape s,
                             int64_t *errors) {
  DSRT_GRID_STRIDE(b, s.B) {
    if (!sampling::validParameters(temperature[b], topK[b], topP[b])) {
      report(errors, kSampleParameters, b);
      continue;
    }
    const S *row = logits + b * s.V;
    tokens[b] = sampling::choose([&](int64_t i) { return (float)load(row[i]); }, s.V,
                                 temperature[b], topK[b], topP[b],
                                 sampling::uniform(seeds[b], steps[b]), order + b * s.V);
  }
}

} // namespace

void dsrt::cuda::sample(dsrt_context *ctx, dsrt_tensor *tokens, const dsrt_tensor *logits,
                        const dsrt_tensor *temperature, const dsrt_tensor *topK,
                        const dsrt_tensor *topP, const dsrt_tensor *seeds,
                        const dsrt_tensor *steps) {
  const char *kn = "sample";
  const checks::SampleShape s =
      checks::sample(tokens, logits, temperature, topK, topP, seeds, steps);
  if (!s.B)
    return;
  int32_t *order = (int32_t *)device(ctx).scratch(s.B * s.V * sizeof(int32_t));
  dispatchFloatOrHalf(kn, logits->dtype, [&](auto tag) {
    using S = decltype(tag);
    sampleKernel<S><<<blocksFor(s.B), kThreads, 0, stream(ctx)>>>(
        (int64_t *)tokens->data, (const S *)logits->data, (const float *)temperature->data,
        (const int64_t *)topK->data, (const float *)topP->data, (const int64_t *)seeds->data,
        (const int64_t *)steps->data, order, s, device(ctx).errors);
  });
  launched(kn);
}
