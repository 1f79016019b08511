//===- probe.cpp - ds-run --probe-bandwidth: this machine's rates -----------===//
//
// Measures what the offload stall prediction (ds-opt --memory-report --rates) and a cluster
// file for the planner (ds-opt --plan --cluster) need: the transfer stream's device<->host
// bandwidth, the NVMe tier's write and read bandwidth through the same swap file and engine as
// training, the arena's copy bandwidth, the GEMM rate of the compute threads in f32, bf16 and
// f16, and the collectives' ring-step bandwidth and latency between the job's ranks. Under
// mpirun every rank measures at once (the rates a step sees when all ranks compute): the
// compute rates over a one-second window that every rank spends working, the transfers and
// collectives as the mean of a few in a row; each figure averaged over the ranks.
//
//===----------------------------------------------------------------------===//
#include "dsrt/dsrt.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

namespace {
double seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
/// Seconds of one of `reps` runs of `f` (which returns an event to wait for, or null) in a
/// row, after one more, every rank starting together: on ranks that share cores, the rate
/// each sees while all of them work.
template <class F> double mean(int reps, dsrt_context *ctx, F &&f) {
  auto once = [&] {
    if (dsrt_event *e = f()) {
      dsrt_event_wait(ctx, e);
      dsrt_event_release(e);
    }
  };
  once();
  dsrt_stream_synchronize(ctx);
  dsrt_comm_barrier(ctx);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i)
    once();
  dsrt_stream_synchronize(ctx);
  return seconds(t0) / reps;
}
/// Runs of `f` per second over a window of `window` seconds that every rank spends running
/// it (they start together and each stops at the window's end): on ranks that share cores,
/// the rate each sees while all of them work.
template <class F> double rate(double window, dsrt_context *ctx, F &&f) {
  f();
  dsrt_stream_synchronize(ctx);
  dsrt_comm_barrier(ctx);
  auto t0 = std::chrono::steady_clock::now();
  int64_t runs = 0;
  do {
    f();
    dsrt_stream_synchronize(ctx);
    ++runs;
  } while (seconds(t0) < window);
  return static_cast<double>(runs) / seconds(t0);
}
/// FLOP/s of an m x m x m product in `dtype`.
double gemmRate(dsrt_context *ctx, int32_t dtype) {
  const int64_t m = 1024;
  int64_t mm[2] = {m, m};
  dsrt_tensor *a = dsrt_tensor_alloc(ctx, dtype, 2, mm);
  dsrt_tensor *b = dsrt_tensor_alloc(ctx, dtype, 2, mm);
  dsrt_tensor *c = dsrt_tensor_alloc(ctx, dtype, 2, mm);
  dsrt_fill(ctx, a, 0.5);
  dsrt_fill(ctx, b, 0.25);
  double runs = rate(1.0, ctx, [&] { dsrt_matmul(ctx, c, a, b, 0, 0); });
  for (dsrt_tensor *x : {a, b, c})
    dsrt_tensor_free(ctx, x);
  return 2.0 * m * m * m * runs;
}
/// Seconds of one all-reduce of `n` f32 over every rank.
double allReduceSeconds(dsrt_context *ctx, int64_t n, int reps) {
  int64_t dims[1] = {n};
  dsrt_tensor *t = dsrt_tensor_alloc(ctx, DSRT_F32, 1, dims);
  dsrt_fill(ctx, t, 1.0);
  double s = mean(reps, ctx, [&] { return dsrt_all_reduce(ctx, DSRT_GROUP_WORLD, t, t, 0); });
  dsrt_tensor_free(ctx, t);
  return s;
}
} // namespace

extern "C" int dsrt_probe_measure(const char *dir, int32_t threads, dsrt_probe_rates *out,
                                  char *err, size_t cap) {
  dsrt_context *ctx = dsrt_context_create(0, threads, 0);
  dsrt_comm_init(ctx, 0);
  dsrt_probe_rates r{};
  r.rank = dsrt_comm_rank(ctx);
  r.ranks = dsrt_comm_size(ctx);
  const int64_t n = 64ll << 20; // 256 MiB of f32
  int64_t dims[1] = {n};
  const double bytes = static_cast<double>(n) * 4;
  dsrt_tensor *dev = dsrt_tensor_alloc(ctx, DSRT_F32, 1, dims);
  dsrt_tensor *dev2 = dsrt_tensor_alloc(ctx, DSRT_F32, 1, dims);
  dsrt_tensor *host = dsrt_tensor_alloc_host(ctx, DSRT_F32, 1, dims);
  dsrt_fill(ctx, dev, 1.0);
  dsrt_fill(ctx, host, 1.0);
  dsrt_fill(ctx, dev2, 1.0);
  r.d2h = bytes / mean(3, ctx, [&] { return dsrt_move(ctx, host, dev); });
  r.h2d = bytes / mean(3, ctx, [&] { return dsrt_move(ctx, dev, host); });
  r.memory = 2 * bytes * rate(1.0, ctx, [&] { dsrt_copy(ctx, dev2, dev); });
  dsrt_tensor_free(ctx, dev2);
  r.flops_f32 = gemmRate(ctx, DSRT_F32);
  r.flops_bf16 = gemmRate(ctx, DSRT_BF16);
  r.flops_f16 = gemmRate(ctx, DSRT_F16);
  // The ring model's step (docs/design/comm-model.md): an all-reduce of S bytes over k ranks
  // takes 2 (k-1) a + 2 (k-1)/k S / B: a from 8-byte ones, B from the slope between two sizes
  // of message a step sends, 256 KiB and 64 MiB (the latency cancels).
  if (r.ranks > 1) {
    double k = r.ranks, ring = 2 * (k - 1) / k;
    const int64_t small = 64ll << 10, big = 16ll << 20; // f32 elements
    r.link_latency = allReduceSeconds(ctx, 2, 200) / (2 * (k - 1));
    double t1 = allReduceSeconds(ctx, small, 100), t2 = allReduceSeconds(ctx, big, 8);
    double s1 = static_cast<double>(small) * 4, s2 = static_cast<double>(big) * 4;
    r.link_bandwidth = ring * (s2 - s1) / std::max(t2 - t1, 1e-9);
  }
  int rc = dsrt_nvme_open(ctx, dir, static_cast<uint64_t>(bytes), 1 << 20, 8, 0, err, cap);
  if (rc == 0) {
    dsrt_slot_define_in(ctx, 0, DSRT_SPACE_NVME, DSRT_F32, 1, dims);
    r.nvme_write = bytes / mean(3, ctx, [&] { return dsrt_slot_store(ctx, 0, host); });
    r.nvme_read = bytes / mean(3, ctx, [&] { return dsrt_slot_fetch(ctx, 0, host); });
    std::snprintf(r.nvme_engine, sizeof r.nvme_engine, "%s", dsrt_nvme_engine(ctx));
  }
  // Every rank's figures, averaged (a rank whose swap file failed fails the probe).
  std::vector<double> mine = {r.d2h,       r.h2d,        r.memory,        r.flops_f32,
                              r.flops_bf16, r.flops_f16, r.nvme_write,    r.nvme_read,
                              rc == 0 ? 0.0 : 1.0};
  int64_t count[1] = {static_cast<int64_t>(mine.size())};
  dsrt_tensor *sums = dsrt_tensor_alloc(ctx, DSRT_F64, 1, count);
  dsrt_tensor_from_host(ctx, sums, mine.data());
  if (dsrt_event *e = dsrt_all_reduce(ctx, DSRT_GROUP_WORLD, sums, sums, 0)) {
    dsrt_event_wait(ctx, e);
    dsrt_event_release(e);
  }
  dsrt_tensor_to_host(ctx, mine.data(), sums);
  for (double &x : mine)
    x /= r.ranks;
  double *fields[] = {&r.d2h,       &r.h2d,      &r.memory,     &r.flops_f32,
                      &r.flops_bf16, &r.flops_f16, &r.nvme_write, &r.nvme_read};
  for (size_t i = 0; i < std::size(fields); ++i)
    *fields[i] = mine[i];
  bool failed = mine.back() > 0;
  if (failed && rc == 0)
    std::snprintf(err, cap, "another rank could not open its swap file in '%s'", dir);
  for (dsrt_tensor *t : {dev, host, sums})
    dsrt_tensor_free(ctx, t);
  dsrt_context_destroy(ctx);
  *out = r;
  return failed ? 1 : 0;
}

extern "C" void dsrt_probe_print(const dsrt_probe_rates *r, const char *dir) {
  std::fprintf(stderr,
               "ds-run: probed %d rank%s at once, with %s NVMe I/O in '%s' (256 MiB per "
               "transfer)\n",
               r->ranks, r->ranks == 1 ? "" : "s", r->nvme_engine, dir);
  std::printf("--rates d2h=%.2f,h2d=%.2f,nvme_read=%.2f,nvme_write=%.2f,memory=%.2f,"
              "flops=%.1f\n",
              r->d2h / 1e9, r->h2d / 1e9, r->nvme_read / 1e9, r->nvme_write / 1e9,
              r->memory / 1e9, r->flops_f32 / 1e9);
  std::fflush(stdout);
}

extern "C" int dsrt_probe_bandwidth(const char *dir, int32_t threads) {
  dsrt_probe_rates r;
  char err[1024] = {0};
  if (dsrt_probe_measure(dir, threads, &r, err, sizeof err)) {
    std::fprintf(stderr, "ds-run: error: --probe-bandwidth: %s\n", err);
    return 1;
  }
  if (r.rank == 0)
    dsrt_probe_print(&r, dir);
  return 0;
}
