//===- events.cpp - stream events -------------------------------------------===//
//
// A compute-stream event belongs to the context's device (complete when recorded on the CPU,
// a cudaEvent_t on CUDA). Collectives' events complete on the communication thread (src/comm);
// waiting for one blocks the host, and releasing it returns the storages it held.
//
#include "internal.h"

#include <chrono>

extern "C" dsrt_event *dsrt_event_record(dsrt_context *ctx) {
  auto *e = new dsrt_event();
  e->ctx = ctx;
  ctx->device->record(e);
  return e;
}
extern "C" int32_t dsrt_event_query(dsrt_event *event) {
  if (event->native)
    return event->ctx->device->query(event) ? 1 : 0;
  return event->done.load();
}
extern "C" void dsrt_event_synchronize(dsrt_event *event) {
  if (event->native)
    event->ctx->device->synchronize(event);
  else
    event->wait();
}
extern "C" void dsrt_event_wait(dsrt_context *ctx, dsrt_event *event) {
  DSRT_TRACE(ctx, "wait", event->transfer ? "wait (transfer)" : "wait (collective)");
  if (event->native)
    ctx->device->streamWait(event);
  else {
    // The host waits for the communication thread: timed, so that the driver can tell
    // computation from waiting (a pipeline's bubble).
    auto t0 = std::chrono::steady_clock::now();
    event->wait();
    (event->transfer ? ctx->transferWaitNs : ctx->waitNs) += static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                             std::chrono::steady_clock::now() - t0)
                                             .count());
  }
}
extern "C" double dsrt_wait_seconds(dsrt_context *ctx) { return ctx->waitNs * 1e-9; }
extern "C" void dsrt_event_release(dsrt_event *event) {
  if (event->native) {
    event->ctx->device->destroy(event);
  } else {
    event->wait(); // the communication thread may still be using the buffers
  }
  for (dsrt_storage *s : event->held)
    dsrt::releaseStorage(event->ctx, s);
  delete event;
}
extern "C" void dsrt_stream_synchronize(dsrt_context *ctx) {
  DSRT_TRACE(ctx, "wait", "stream_synchronize");
  ctx->device->synchronize();
}
