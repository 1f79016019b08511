// The context's oneDNN engine and stream, shared by every kernel file that uses oneDNN.
#ifndef DSRT_CPU_DNNL_STATE_H
#define DSRT_CPU_DNNL_STATE_H

#include "cpu_device.h"

#include <oneapi/dnnl/dnnl.hpp>

namespace dsrt {
struct DnnlState {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
};

inline DnnlState &dnnlState(dsrt_context *ctx) {
  if (!cpuDevice(ctx).dnnl)
    cpuDevice(ctx).dnnl = std::make_shared<DnnlState>();
  return *static_cast<DnnlState *>(cpuDevice(ctx).dnnl.get());
}
} // namespace dsrt

#endif
