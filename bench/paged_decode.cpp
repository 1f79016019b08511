// Decoding's attention against the paged key/value cache (dsrt_paged_attention), beside a
// copy of the same bytes (dsrt_copy): is one decode step's attention bound by reading the
// cache, as it should be? Built and run by bench/paged_decode.sh against build/lib/libdsrt.so.
// A Llama-style layer of a ~100M model (12 query heads over 4 key/value heads of width 64),
// pages of 16 positions scattered over the cache, f32 and bf16, at batch 1 and 8 and contexts
// of 512 to 8192 positions: microseconds per call (median of 21) and the cache bytes read per
// second, against the copy's bytes (read and written) per second. usage: paged_decode [THREADS]
#include "dsrt/dsrt.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

template <class F> static double medianSeconds(F &&f) {
  std::vector<double> t;
  for (int i = 0; i < 21; ++i) {
    const double t0 = now();
    f();
    t.push_back(now() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main(int argc, char **argv) {
  const int64_t Hq = 12, Hk = 4, E = 64, P = 16;
  const int threads = argc > 1 ? std::atoi(argv[1]) : 0; // 0: the runtime's default
  dsrt_context *ctx = dsrt_context_create(0, threads, 1);
  std::printf("%-5s %5s %7s %12s %14s %14s %7s\n", "dtype", "batch", "context", "us/call",
              "cache GB/s", "copy GB/s", "ratio");
  for (int32_t dt : {(int32_t)DSRT_F32, (int32_t)DSRT_BF16}) {
    for (int64_t B : {1, 8}) {
      for (int64_t context : {512, 2048, 8192}) {
        const int64_t maxPages = context / P, N = B * maxPages;
        int64_t cacheDims[4] = {N, Hk, P, E}, qDims[4] = {B, Hq, 1, E};
        int64_t pageDims[2] = {B, maxPages}, lenDims[1] = {B};
        dsrt_tensor *kc = dsrt_tensor_alloc(ctx, dt, 4, cacheDims);
        dsrt_tensor *vc = dsrt_tensor_alloc(ctx, dt, 4, cacheDims);
        dsrt_tensor *q = dsrt_tensor_alloc(ctx, dt, 4, qDims);
        dsrt_tensor *out = dsrt_tensor_alloc(ctx, dt, 4, qDims);
        dsrt_tensor *pages = dsrt_tensor_alloc(ctx, DSRT_I64, 2, pageDims);
        dsrt_tensor *cls = dsrt_tensor_alloc(ctx, DSRT_I64, 1, lenDims);
        dsrt_tensor *qls = dsrt_tensor_alloc(ctx, DSRT_I64, 1, lenDims);
        dsrt_fill(ctx, kc, 0.01);
        dsrt_fill(ctx, vc, 0.02);
        dsrt_fill(ctx, q, 0.5);
        std::vector<int64_t> order(N), ones(B, 1), full(B, context);
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), std::mt19937(7));
        dsrt_tensor_from_host(ctx, pages, order.data());
        dsrt_tensor_from_host(ctx, cls, full.data());
        dsrt_tensor_from_host(ctx, qls, ones.data());
        const double s = medianSeconds([&] {
          dsrt_paged_attention(ctx, out, q, kc, vc, pages, cls, qls, 0.125);
        });
        dsrt_tensor *copy = dsrt_tensor_alloc(ctx, dt, 4, cacheDims);
        const double c = medianSeconds([&] {
          dsrt_copy(ctx, copy, kc);
          dsrt_copy(ctx, copy, vc);
        });
        const double bytes = 2.0 * kc->numel * dsrt_dtype_size(dt);
        std::printf("%-5s %5lld %7lld %12.1f %14.2f %14.2f %7.2f\n",
                    dt == DSRT_F32 ? "f32" : "bf16", (long long)B, (long long)context, s * 1e6,
                    bytes / s / 1e9, 2 * bytes / c / 1e9, (bytes / s) / (2 * bytes / c));
        for (dsrt_tensor *t : {kc, vc, q, out, pages, cls, qls, copy})
          dsrt_tensor_free(ctx, t);
      }
    }
  }
  dsrt_context_destroy(ctx);
  return 0;
}
