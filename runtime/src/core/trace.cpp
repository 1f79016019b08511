//===- trace.cpp - spans of runtime calls for ds-run --trace -----------------===//
//
// The compute stream (the CPU device's kernels run on the calling thread) records its spans
// in dispatch.cpp; the transfer thread and each group's collectives thread record theirs
// when their jobs run, with the site that was current when the job was enqueued. The driver
// turns the spans into a Chrome trace (driver/trace_file.cpp).
//
#include "internal.h"
#include "dsrt/io.h"

#include <chrono>
#include <cstring>
#include <set>

namespace {
struct Span {
  const char *stream, *cat;
  const char *name;
  int32_t site;
  int64_t start, dur;
  std::string detail;
};
struct Trace {
  std::mutex mutex;
  std::vector<Span> spans;
};
Trace &traceOf(dsrt_context *ctx) {
  // Created with the context's first enable, before any thread records.
  return *static_cast<Trace *>(ctx->trace.get());
}
} // namespace

int64_t dsrt::traceNow() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void dsrt::traceRecord(dsrt_context *ctx, const char *stream, const char *cat, const char *name,
                       int32_t site, int64_t start, int64_t end, std::string detail) {
  Trace &t = traceOf(ctx);
  std::lock_guard<std::mutex> lock(t.mutex);
  t.spans.push_back(Span{stream, cat, name, site, start, end - start, std::move(detail)});
}

const char *dsrt::traceStreamName(const std::string &name) {
  static std::mutex mutex;
  static std::set<std::string> names; // nodes are stable
  std::lock_guard<std::mutex> lock(mutex);
  return names.insert(name).first->c_str();
}

extern "C" void dsrt_trace_site(dsrt_context *ctx, int32_t site) { ctx->site = site; }

extern "C" void dsrt_trace_enable(dsrt_context *ctx, int32_t on) {
  if (on && !ctx->trace)
    ctx->trace = std::make_shared<Trace>();
  ctx->tracing.store(on != 0);
}

extern "C" int64_t dsrt_trace_now(void) { return dsrt::traceNow(); }

extern "C" void dsrt_trace_span(dsrt_context *ctx, const char *name, int64_t start_ns,
                                int64_t end_ns) {
  if (ctx->tracing.load(std::memory_order_relaxed))
    dsrt::traceRecord(ctx, dsrt::kComputeStream, "driver", dsrt::traceStreamName(name), -1,
                      start_ns, end_ns);
}

extern "C" size_t dsrt_trace_take(dsrt_context *ctx, char *buf, size_t cap) {
  if (!ctx->trace) {
    if (cap)
      std::strncpy(buf, "[]", cap);
    return 2;
  }
  Trace &t = traceOf(ctx);
  std::lock_guard<std::mutex> lock(t.mutex);
  std::string out = "[";
  for (size_t i = 0; i < t.spans.size(); ++i) {
    const Span &s = t.spans[i];
    out += i ? ",\n[" : "\n[";
    out += dsrt::io::jsonQuote(s.stream) + "," + dsrt::io::jsonQuote(s.cat) + "," +
           dsrt::io::jsonQuote(s.name) + "," +
           std::to_string(s.site) + "," + std::to_string(s.start) + "," +
           std::to_string(s.dur) + "," + dsrt::io::jsonQuote(s.detail) + "]";
  }
  out += "]";
  if (cap > out.size()) {
    std::memcpy(buf, out.c_str(), out.size() + 1);
    t.spans.clear();
  } else if (cap) {
    buf[0] = '\0';
  }
  return out.size();
}
