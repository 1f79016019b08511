// The context's oneDNN engine and stream, shared by every kernel file that uses oneDNN.
#ifndef DSRT_CPU_DNNL_STATE_H
#define DSRT_CPU_DNNL_STATE_H

#include "cpu_device.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <vector>

namespace dsrt {
struct DnnlState {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};

  /// Scratch slot `slot` (0-2) of at least `bytes`, 64-byte aligned: the blocked copies of a
  /// convolution's operands (cpu/conv_onednn.cpp). Kernels run one at a time, so one set
  /// serves every call; each slot grows to the largest operand it has held. Kernel workspace,
  /// as oneDNN's own scratchpad: outside the arena's count.
  void *scratch(int slot, size_t bytes) {
    std::vector<float> &b = scratchSlots[slot];
    if (b.size() * sizeof(float) < bytes + 64)
      b.assign((bytes + 64) / sizeof(float) + 1, 0.f);
    return reinterpret_cast<void *>((reinterpret_cast<uintptr_t>(b.data()) + 63) & ~uintptr_t(63));
  }
  std::vector<float> scratchSlots[3];
};

inline DnnlState &dnnlState(dsrt_context *ctx) {
  if (!cpuDevice(ctx).dnnl)
    cpuDevice(ctx).dnnl = std::make_shared<DnnlState>();
  return *static_cast<DnnlState *>(cpuDevice(ctx).dnnl.get());
}
} // namespace dsrt

#endif
