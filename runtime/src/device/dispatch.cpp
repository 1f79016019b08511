//===- dispatch.cpp - the dsrt_* kernel entry points ---------------------------===//
//
// The compiled program calls one C symbol per kernel; each forwards to its context's device.
// A device that lacks a kernel says which, on which device, and what to do instead.
//
#include "../core/internal.h"

namespace {
[[noreturn]] void missing(dsrt_context *ctx, const char *kernel) {
  dsrt::fail(kernel, "not implemented on device %s (run with --device cpu)",
             ctx->device->name());
}
} // namespace

#define DSRT_KERNEL(name, params, args)                                                        \
  extern "C" void dsrt_##name params {                                                         \
    DSRT_TRACE(ctx, "kernel", #name);                                                          \
    auto fn = ctx->device->kernels.name;                                                       \
    if (!fn)                                                                                   \
      missing(ctx, #name);                                                                     \
    fn args;                                                                                   \
  }
#include "kernels.def"
#undef DSRT_KERNEL
