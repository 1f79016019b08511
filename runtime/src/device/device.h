//===- device.h - one table of memory, copies, streams, events and kernels ----===//
//
// Every dsrt context runs on one Device (as IREE's HAL device, or a PyTorch device with its
// allocator and stream). The core keeps what is the same on every device: the arena's budget,
// its exact byte count and block reuse, tensor handles, slots, the random generator and the
// communication group. A device supplies raw memory, the copies between it and the host, its
// compute stream with events, and one function per kernel of dsrt.h (kernels.def).
//
// Devices: "cpu" (src/cpu, always built) and "cuda" (src/cuda, a plugin library loaded on
// demand, so that a runtime built with CUDA still starts where CUDA is missing).
//
#ifndef DSRT_DEVICE_DEVICE_H
#define DSRT_DEVICE_DEVICE_H

#include "dsrt/dsrt.h"

#include <cstddef>
#include <string>

namespace dsrt {

/// One pointer per kernel, the signature of its dsrt_* entry point.
struct Kernels {
#define DSRT_KERNEL(name, params, args) void(*name) params = nullptr;
#include "kernels.def"
#undef DSRT_KERNEL
};

class Device {
public:
  virtual ~Device() = default;
  /// "cpu" or "cuda".
  virtual const char *name() const = 0;
  /// Whether kernels and the host may both address this device's memory (the CPU): the MPI
  /// channel and the driver's zero-copy paths need it.
  virtual bool hostAddressable() const = 0;

  // --- Memory: raw blocks. The context's arena counts them against the budget and reuses
  // freed blocks of the same size, in compute-stream order (every allocation and free is
  // ordered on the compute stream, and storages that another stream uses are held by its
  // event until it completes).
  /// A block of `bytes` (a multiple of 64), or nullptr when the device has no room.
  virtual void *allocate(size_t bytes) = 0;
  virtual void deallocate(void *block) = 0;
  /// Device memory holding `bytes` of constant host data for the device's lifetime (the
  /// program's compiled-in constants); the host pointer itself where the device reads host
  /// memory. Not counted by the arena.
  virtual const void *constant(const void *host, size_t bytes) = 0;

  // --- Copies, in compute-stream order. toHost and fromHost return when the host buffer may
  // be read or reused.
  virtual void toHost(void *host, const void *src, size_t bytes) = 0;
  virtual void fromHost(void *dst, const void *host, size_t bytes) = 0;
  /// Within the device; the ranges may overlap.
  virtual void copy(void *dst, const void *src, size_t bytes) = 0;
  virtual void zero(void *dst, size_t bytes) = 0;

  // --- The compute stream and its events. A device event lives in dsrt_event::native.
  /// Marks `event` at the end of the work enqueued so far (sets native, or completes it).
  virtual void record(dsrt_event *event) = 0;
  virtual bool query(dsrt_event *event) = 0;
  virtual void synchronize(dsrt_event *event) = 0;
  /// The compute stream waits for `event` before its next work.
  virtual void streamWait(dsrt_event *event) = 0;
  virtual void destroy(dsrt_event *event) = 0;
  /// Blocks the host until the compute stream's work has finished.
  virtual void synchronize() = 0;

  // --- For channels that move this device's memory themselves (nccl).
  /// The stream collectives run on (a cudaStream_t), or null.
  virtual void *collectivesStream() { return nullptr; }
  /// The GPU's ordinal on this machine, or -1.
  virtual int ordinal() const { return -1; }

  Kernels kernels;
};

/// The CPU device (src/cpu/device.cpp).
Device *createCpuDevice(dsrt_context *ctx);

/// Loads the plugin of device `name` ("cuda") and creates it, or returns nullptr with the
/// reason in `why` ("libcudart.so.13: cannot open shared object file", "no CUDA device").
Device *createPluginDevice(const char *name, dsrt_context *ctx, std::string &why);

/// One line per device or channel for ds-report, from the plugin when it loads.
std::string pluginReport(const char *name);

} // namespace dsrt

/// The C entry points a device plugin exports (extern "C", looked up with dlsym).
extern "C" {
typedef dsrt::Device *(*dsrt_plugin_create_fn)(dsrt_context *ctx, char *why, size_t cap);
typedef size_t (*dsrt_plugin_report_fn)(char *buf, size_t cap);
namespace dsrt {
class Channel;
struct CommControl;
} // namespace dsrt
/// A channel plugin's constructor: takes ownership of `host` (also on failure).
typedef dsrt::Channel *(*dsrt_plugin_channel_fn)(dsrt::Channel *host, dsrt::CommControl *control,
                                                 void *stream, int ordinal, char *why,
                                                 size_t cap);
}

#endif // DSRT_DEVICE_DEVICE_H
