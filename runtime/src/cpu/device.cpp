//===- device.cpp - the CPU device: host memory and its kernel table ---------===//
#include "cpu_device.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>

namespace dsrt {

// Blocks of 4 MiB and more are 2 MiB-aligned and asked to be backed by huge pages (where the
// kernel's transparent_hugepage is "madvise", as on Debian): the streaming kernels then miss
// the TLB far less (bench/kernels_vs_torch.py times the streaming kernels).
void *CpuDevice::allocate(size_t bytes) {
  constexpr size_t kHuge = size_t(2) << 20;
  if (bytes < 2 * kHuge)
    return std::aligned_alloc(64, bytes);
  void *p = std::aligned_alloc(kHuge, (bytes + kHuge - 1) / kHuge * kHuge);
  if (p)
    madvise(p, (bytes + kHuge - 1) / kHuge * kHuge, MADV_HUGEPAGE);
  return p;
}
void CpuDevice::deallocate(void *block) { std::free(block); }
void CpuDevice::toHost(void *host, const void *src, size_t bytes) {
  if (bytes && host != src)
    std::memcpy(host, src, bytes);
}
void CpuDevice::fromHost(void *dst, const void *host, size_t bytes) {
  if (bytes && host != dst)
    std::memcpy(dst, host, bytes);
}
void CpuDevice::copy(void *dst, const void *src, size_t bytes) {
  if (bytes && dst != src)
    std::memmove(dst, src, bytes);
}
void CpuDevice::zero(void *dst, size_t bytes) {
  if (bytes)
    std::memset(dst, 0, bytes);
}

Device *createCpuDevice(dsrt_context *) {
  auto *d = new CpuDevice();
#define DSRT_KERNEL(name, params, args) d->kernels.name = &cpu::name;
#include "../device/kernels.def"
#undef DSRT_KERNEL
  return d;
}

} // namespace dsrt
