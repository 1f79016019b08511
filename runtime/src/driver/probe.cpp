//===- probe.cpp - ds-run --probe-bandwidth: the offload tiers' rates -------===//
//
// Measures what the offload stall prediction needs (ds-opt --memory-report --rates): the
// transfer stream's device<->host bandwidth, the NVMe tier's write and read bandwidth through
// the same swap file and engine as training, the arena's copy bandwidth and the f32 GEMM rate
// of the compute threads. Each figure is the best of a few repetitions.
//
//===----------------------------------------------------------------------===//
#include "dsrt/dsrt.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace {
double seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
/// The best of `reps` timings of `f` (which returns an event to wait for, or null).
template <class F> double best(int reps, dsrt_context *ctx, F &&f) {
  double t = 1e30;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    if (dsrt_event *e = f()) {
      dsrt_event_wait(ctx, e);
      dsrt_event_release(e);
    }
    dsrt_stream_synchronize(ctx);
    t = std::min(t, seconds(t0));
  }
  return t;
}
} // namespace

extern "C" int dsrt_probe_bandwidth(const char *dir, int32_t threads) {
  dsrt_context *ctx = dsrt_context_create(0, threads, 0);
  const int64_t n = 64ll << 20; // 256 MiB of f32
  int64_t dims[1] = {n};
  const double bytes = static_cast<double>(n) * 4;
  dsrt_tensor *dev = dsrt_tensor_alloc(ctx, DSRT_F32, 1, dims);
  dsrt_tensor *dev2 = dsrt_tensor_alloc(ctx, DSRT_F32, 1, dims);
  dsrt_tensor *host = dsrt_tensor_alloc_host(ctx, DSRT_F32, 1, dims);
  dsrt_fill(ctx, dev, 1.0);
  dsrt_fill(ctx, host, 1.0);
  dsrt_fill(ctx, dev2, 1.0);
  double d2h = bytes / best(3, ctx, [&] { return dsrt_move(ctx, host, dev); });
  double h2d = bytes / best(3, ctx, [&] { return dsrt_move(ctx, dev, host); });
  double memory = 2 * bytes / best(3, ctx, [&] {
                    dsrt_copy(ctx, dev2, dev);
                    return static_cast<dsrt_event *>(nullptr);
                  });
  const int64_t m = 1024;
  int64_t mm[2] = {m, m};
  dsrt_tensor *a = dsrt_tensor_alloc(ctx, DSRT_F32, 2, mm);
  dsrt_tensor *b = dsrt_tensor_alloc(ctx, DSRT_F32, 2, mm);
  dsrt_tensor *c = dsrt_tensor_alloc(ctx, DSRT_F32, 2, mm);
  dsrt_fill(ctx, a, 0.5);
  dsrt_fill(ctx, b, 0.25);
  double flops = 2.0 * m * m * m / best(5, ctx, [&] {
                   dsrt_matmul(ctx, c, a, b, 0, 0);
                   return static_cast<dsrt_event *>(nullptr);
                 });
  char err[1024] = {0};
  if (dsrt_nvme_open(ctx, dir, static_cast<uint64_t>(bytes), 1 << 20, 8, 0, err, sizeof err)) {
    std::fprintf(stderr, "ds-run: error: --probe-bandwidth: %s\n", err);
    dsrt_context_destroy(ctx);
    return 1;
  }
  dsrt_slot_define_in(ctx, 0, DSRT_SPACE_NVME, DSRT_F32, 1, dims);
  double write = bytes / best(3, ctx, [&] { return dsrt_slot_store(ctx, 0, host); });
  double read = bytes / best(3, ctx, [&] { return dsrt_slot_fetch(ctx, 0, host); });
  std::fprintf(stderr, "ds-run: probed with %s NVMe I/O in '%s' (256 MiB per transfer)\n",
               dsrt_nvme_engine(ctx), dir);
  std::printf("--rates d2h=%.2f,h2d=%.2f,nvme_read=%.2f,nvme_write=%.2f,memory=%.2f,"
              "flops=%.1f\n",
              d2h / 1e9, h2d / 1e9, read / 1e9, write / 1e9, memory / 1e9, flops / 1e9);
  for (dsrt_tensor *t : {dev, dev2, host, a, b, c})
    dsrt_tensor_free(ctx, t);
  dsrt_context_destroy(ctx);
  return 0;
}
