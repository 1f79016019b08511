//===- events.cpp - stream events -------------------------------------------===//
//
// The CPU backend executes compute work synchronously, so a compute-stream event is complete as
// soon as it is recorded. Collectives complete on the communication thread (src/comm); waiting
// for one blocks the host, and releasing it returns the storages it held.
//
#include "internal.h"

extern "C" dsrt_event *dsrt_event_record(dsrt_context *ctx) {
  auto *e = new dsrt_event();
  e->ctx = ctx;
  e->done = 1;
  return e;
}
extern "C" int32_t dsrt_event_query(dsrt_event *event) { return event->done.load(); }
extern "C" void dsrt_event_synchronize(dsrt_event *event) { event->wait(); }
extern "C" void dsrt_event_wait(dsrt_context *, dsrt_event *event) { event->wait(); }
extern "C" void dsrt_event_release(dsrt_event *event) {
  event->wait(); // the communication thread may still be using the buffers
  for (dsrt_storage *s : event->held)
    dsrt::releaseStorage(event->ctx, s);
  delete event;
}
extern "C" void dsrt_stream_synchronize(dsrt_context *) {}
