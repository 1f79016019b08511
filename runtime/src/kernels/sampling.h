//===- sampling.h - dsrt_sample's choice of one token, for every device -------===//
//
// One row of logits to one token, as HF's `generate` chooses it (greedy, or temperature, then
// top-k, then top-p, then a draw), written once for the CPU and the CUDA kernels (DSRT_HD:
// host and device functions under nvcc): the same thresholds and the same draw from the same
// counter-based uniform number.
//
#ifndef DSRT_KERNELS_SAMPLING_H
#define DSRT_KERNELS_SAMPLING_H

#include "scalar_ops.h"

#include <cstdint>

namespace dsrt::sampling {

DSRT_HD uint64_t splitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// The uniform number in [0, 1) of draw `step` of a request seeded `seed`.
DSRT_HD double uniform(int64_t seed, int64_t step) {
  const uint64_t bits = splitMix64(splitMix64((uint64_t)seed) ^ (uint64_t)step);
  return (double)(bits >> 11) * (1.0 / 9007199254740992.0); // 53 bits
}

/// Whether the parameters are ones dsrt_sample takes.
DSRT_HD bool validParameters(float temperature, int64_t topK, float topP) {
  return temperature >= 0.f && topK >= 0 && topP > 0.f && topP <= 1.f;
}

/// Sorts order[0..n) by key(order[i]) descending (a heap sort: no recursion, no allocation).
template <class Key> DSRT_HD void sortDescending(int32_t *order, int64_t n, Key key) {
  auto sift = [&](int64_t root, int64_t end) {
    while (2 * root + 1 < end) {
      int64_t child = 2 * root + 1;
      if (child + 1 < end && key(order[child + 1]) < key(order[child]))
        ++child;
      if (!(key(order[child]) < key(order[root])))
        return;
      const int32_t t = order[root];
      order[root] = order[child];
      order[child] = t;
      root = child;
    }
  };
  for (int64_t i = n / 2 - 1; i >= 0; --i) // a min-heap: the smallest go to the end
    sift(i, n);
  for (int64_t end = n - 1; end > 0; --end) {
    const int32_t t = order[0];
    order[0] = order[end];
    order[end] = t;
    sift(0, end);
  }
}

/// The token of one row: `logit(i)` its i-th logit as f32; `order` scratch of V indices (used
/// only where top-k or top-p applies); `u` the draw's uniform number.
template <class Logit>
DSRT_HD int64_t choose(Logit logit, int64_t V, float temperature, int64_t topK, float topP,
                       double u, int32_t *order) {
  int64_t best = 0;
  for (int64_t i = 1; i < V; ++i)
    if (logit(i) > logit(best))
      best = i;
  if (temperature == 0.f)
    return best;
  auto z = [&](int64_t i) { return logit(i) / temperature; }; // TemperatureLogitsWarper
  const float zMax = z(best);
  float threshold = 0.f; // kept: z >= threshold (every token where no warper applies)
  bool all = true;
  if ((topK > 0 && topK < V) || topP < 1.f) {
    for (int64_t i = 0; i < V; ++i)
      order[i] = (int32_t)i;
    sortDescending(order, V, z);
    int64_t kept = V;
    if (topK > 0 && topK < V) { // TopKLogitsWarper: z at least the k-th largest
      kept = topK;
      while (kept < V && z(order[kept]) >= z(order[topK - 1]))
        ++kept;
    }
    if (topP < 1.f) { // TopPLogitsWarper over what top-k kept, summed from the smallest up
      float sum = 0.f;
      for (int64_t j = 0; j < kept; ++j)
        sum += ops::m_exp(z(order[j]) - zMax);
      float cumulative = 0.f;
      int64_t keep = kept;
      for (int64_t j = kept - 1; j >= 1; --j) {
        cumulative += ops::m_exp(z(order[j]) - zMax) / sum;
        if (cumulative > 1.f - topP)
          break;
        keep = j;
      }
      kept = keep;
    }
    threshold = z(order[kept - 1]);
    all = false;
  }
  double total = 0.0;
  for (int64_t i = 0; i < V; ++i)
    if (all || z(i) >= threshold)
      total += (double)ops::m_exp(z(i) - zMax);
  const double target = u * total;
  double running = 0.0;
  int64_t last = best;
  for (int64_t i = 0; i < V; ++i)
    if (all || z(i) >= threshold) {
      running += (double)ops::m_exp(z(i) - zMax);
      last = i;
      if (running > target)
        return i;
    }
  return last; // rounding left the target past the sum
}

} // namespace dsrt::sampling

#endif // DSRT_KERNELS_SAMPLING_H
