// CPU kernel: the next token of each sequence from its logits (dsrt_sample), a row per task;
// the choice itself is kernels/sampling.h, shared with the CUDA kernel.
#include "cpu_device.h"
#include "../core/half.h"
#include "../kernels/checks.h"
#include "../kernels/sampling.h"

#include <vector>

using namespace dsrt;

void dsrt::cpu::sample(dsrt_context *, dsrt_tensor *tokens, const dsrt_tensor *logits,
                       const dsrt_tensor *temperature, const dsrt_tensor *topK,
                       const dsrt_tensor *topP, const dsrt_tensor *seeds,
                       const dsrt_tensor *steps) {
  const checks::SampleShape s =
      checks::sample(tokens, logits, temperature, topK, topP, seeds, steps);
  const float *temp = (const float *)temperature->data, *pp = (const float *)topP->data;
  const int64_t *kk = (const int64_t *)topK->data, *seed = (const int64_t *)seeds->data,
                *step = (const int64_t *)steps->data;
  for (int64_t b = 0; b < s.B; ++b)
    if (!sampling::validParameters(temp[b], kk[b], pp[b]))
      fail("sample",
           "sequence %lld asks for temperature %g, top_k %lld, top_p %g: a temperature >= 0 "
           "(0: greedy), a top_k >= 0 (0: all) and a top_p in (0, 1] (1: all)",
           (long long)b, (double)temp[b], (long long)kk[b], (double)pp[b]);
  int64_t *out = (int64_t *)tokens->data;
  const int32_t dt = logits->dtype;
#pragma omp parallel
  {
    std::vector<int32_t> order;
#pragma omp for schedule(dynamic)
    for (int64_t b = 0; b < s.B; ++b) {
      const bool sorts = temp[b] != 0.f && ((kk[b] > 0 && kk[b] < s.V) || pp[b] < 1.f);
      if (sorts && (int64_t)order.size() < s.V)
        order.resize(s.V);
      const double u = sampling::uniform(seed[b], step[b]);
      if (dt == DSRT_F32) {
        const float *row = (const float *)logits->data + b * s.V;
        out[b] = sampling::choose([&](int64_t i) { return row[i]; }, s.V, temp[b], kk[b], pp[b],
                                  u, order.data());
      } else {
        const uint16_t *row = (const uint16_t *)logits->data + b * s.V;
        out[b] = sampling::choose([&](int64_t i) { return halfToFloat(dt, row[i]); }, s.V,
                                  temp[b], kk[b], pp[b], u, order.data());
      }
    }
  }
}
