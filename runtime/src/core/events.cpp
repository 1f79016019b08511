//===- events.cpp - stream events of the CPU backend ------------------------===//
//
// The CPU backend executes every enqueued call synchronously, so an event is complete as soon as
// it is recorded. The object still carries its state so that callers use the same protocol as
// on asynchronous backends (record, query or synchronize, release).
//
#include "dsrt/dsrt.h"

struct dsrt_event {
  int32_t done;
};

extern "C" dsrt_event *dsrt_event_record(dsrt_context *) { return new dsrt_event{1}; }
extern "C" int32_t dsrt_event_query(dsrt_event *event) { return event->done; }
extern "C" void dsrt_event_synchronize(dsrt_event *) {}
extern "C" void dsrt_event_release(dsrt_event *event) { delete event; }
extern "C" void dsrt_stream_synchronize(dsrt_context *) {}
