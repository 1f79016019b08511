//===- device.cpp - the CPU device: host memory and its kernel table ---------===//
#include "cpu_device.h"

#include <cstdlib>
#include <cstring>

namespace dsrt {

void *CpuDevice::allocate(size_t bytes) { return std::aligned_alloc(64, bytes); }
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
