//===- cpu_device.h - the CPU device and its kernels' declarations -----------===//
#ifndef DSRT_CPU_CPU_DEVICE_H
#define DSRT_CPU_CPU_DEVICE_H

#include "../core/internal.h"

#include <memory>
#include <string>
#include <unordered_map>

namespace dsrt {

/// The CPU device: host memory (64-byte aligned), synchronous kernels (OpenMP, oneDNN).
struct CpuDevice final : Device {
  const char *name() const override { return "cpu"; }
  bool hostAddressable() const override { return true; }
  void *allocate(size_t bytes) override;
  void deallocate(void *block) override;
  const void *constant(const void *host, size_t) override { return host; }
  void toHost(void *host, const void *src, size_t bytes) override;
  void fromHost(void *dst, const void *host, size_t bytes) override;
  void copy(void *dst, const void *src, size_t bytes) override;
  void zero(void *dst, size_t bytes) override;
  // Kernels run before their call returns: every event is complete when recorded.
  void record(dsrt_event *event) override { event->done = 1; }
  bool query(dsrt_event *) override { return true; }
  void synchronize(dsrt_event *) override {}
  void streamWait(dsrt_event *) override {}
  void destroy(dsrt_event *) override {}
  void synchronize() override {}

  /// oneDNN engine/stream and primitives keyed by kernel + shape, so repeated steps reuse them.
  /// Type-erased so that only the files that use oneDNN include its headers.
  std::shared_ptr<void> dnnl;
  std::unordered_map<std::string, std::shared_ptr<void>> primitives;
};

inline CpuDevice &cpuDevice(dsrt_context *ctx) { return static_cast<CpuDevice &>(*ctx->device); }

/// Built for AVX-512, AVX2 and the baseline, the best picked at run time (the library is built
/// without -march, so that one build runs on every x86-64). Put it on the function that holds
/// a hot loop, not on one that holds an OpenMP region: GCC outlines the region's body before it
/// clones, so the body keeps the baseline ISA.
#define DSRT_CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

/// The CPU kernels, one per entry of kernels.def.
namespace cpu {
#define DSRT_KERNEL(name, params, args) void name params;
#include "../device/kernels.def"
#undef DSRT_KERNEL
} // namespace cpu

} // namespace dsrt

#endif // DSRT_CPU_CPU_DEVICE_H
