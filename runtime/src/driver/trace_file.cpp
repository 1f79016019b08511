//===- trace_file.cpp - ds-run --trace: the Chrome trace of the traced steps ===//
#include "trace_file.h"

#include "dsrt/dsrt.h"
#include "dsrt/io.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <vector>

namespace dsrt::driver {
namespace {

/// This rank's spans (dsrt_trace_take's JSON array).
std::string takeSpans(dsrt_context *ctx) {
  for (;;) {
    size_t n = dsrt_trace_take(ctx, nullptr, 0);
    std::vector<char> buf(n + 64);
    if (dsrt_trace_take(ctx, buf.data(), buf.size()) < buf.size())
      return buf.data();
  }
}

/// Every rank's text, at rank 0 (the others get an empty list).
std::vector<std::string> gatherText(const Group &group, const std::string &mine) {
  if (group.size() == 1)
    return {mine};
  int64_t len = static_cast<int64_t>(mine.size());
  std::vector<char> lens = group.gather(&len, sizeof len);
  int64_t most = 0;
  for (int32_t q = 0; q < group.size(); ++q) {
    int64_t l;
    std::memcpy(&l, lens.data() + q * sizeof l, sizeof l);
    most = std::max(most, l);
  }
  std::string padded = mine;
  padded.resize(static_cast<size_t>(most), ' ');
  std::vector<char> all = group.gather(padded.data(), most);
  std::vector<std::string> out;
  if (group.rank() == 0)
    for (int32_t q = 0; q < group.size(); ++q)
      out.emplace_back(all.data() + q * most, static_cast<size_t>(most));
  return out;
}

} // namespace

std::string checkTracePath(const std::string &path) {
  std::FILE *f = std::fopen(path.c_str(), "w");
  if (!f)
    return "cannot write --trace '" + path + "': " + std::strerror(errno) +
           " (choose a writable path)";
  std::fclose(f);
  return "";
}

std::string writeTrace(dsrt_context *ctx, const Group &group, const ProgramSpec &p,
                       const std::string &path) {
  std::vector<std::string> ranks = gatherText(group, takeSpans(ctx));
  if (group.rank() != 0)
    return "";
  std::vector<std::string> sites;
  if (const io::Json *s = p.meta.get("sites"); s && s->isArray())
    for (const io::Json &site : s->items)
      sites.push_back(site.isString() ? site.text : "");

  std::vector<io::Json> parsed(ranks.size());
  int64_t origin = INT64_MAX;
  for (size_t r = 0; r < ranks.size(); ++r) {
    std::string err;
    if (!io::parseJson(ranks[r], parsed[r], err) || !parsed[r].isArray())
      return "--trace: rank " + std::to_string(r) + "'s spans are malformed (" + err +
             "); this is a bug in dsrt";
    for (const io::Json &span : parsed[r].items)
      origin = std::min(origin, static_cast<int64_t>(span.items[4].number));
  }

  std::string out = "{\"displayTimeUnit\": \"ms\", \"otherData\": {\"tool\": \"ds-run --trace\", "
                    "\"ranks\": " + std::to_string(ranks.size()) + "},\n\"traceEvents\": [";
  bool first = true;
  auto emit = [&](const std::string &event) {
    out += (first ? "\n" : ",\n") + event;
    first = false;
  };
  char num[64];
  auto us = [&](double ns) {
    std::snprintf(num, sizeof num, "%.3f", ns / 1e3);
    return std::string(num);
  };
  for (size_t r = 0; r < parsed.size(); ++r) {
    const std::string pid = std::to_string(r);
    emit("{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": " + pid +
         ", \"args\": {\"name\": \"rank " + pid + "\"}}");
    emit("{\"name\": \"process_sort_index\", \"ph\": \"M\", \"pid\": " + pid +
         ", \"args\": {\"sort_index\": " + pid + "}}");
    // Streams as threads: compute first, then the transfer stream, then the groups.
    std::map<std::string, int> tids;
    auto tidOf = [&](const std::string &stream) {
      auto it = tids.find(stream);
      if (it != tids.end())
        return it->second;
      int tid = stream == "compute" ? 1 : stream == "transfer" ? 2 : 3 + (int)tids.size();
      tids[stream] = tid;
      emit("{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": " + pid +
           ", \"tid\": " + std::to_string(tid) + ", \"args\": {\"name\": " +
           io::jsonQuote(stream) + "}}");
      emit("{\"name\": \"thread_sort_index\", \"ph\": \"M\", \"pid\": " + pid +
           ", \"tid\": " + std::to_string(tid) + ", \"args\": {\"sort_index\": " +
           std::to_string(tid) + "}}");
      return tid;
    };
    for (const io::Json &span : parsed[r].items) {
      // [stream, category, call, site, start_ns, dur_ns, detail]
      const std::string &stream = span.items[0].text, &cat = span.items[1].text,
                        &call = span.items[2].text, &detail = span.items[6].text;
      int64_t site = static_cast<int64_t>(span.items[3].number);
      std::string where = site >= 0 && site < (int64_t)sites.size() ? sites[site] : "";
      std::string args = "\"call\": " + io::jsonQuote(call);
      if (!where.empty())
        args += ", \"site\": " + io::jsonQuote(where);
      if (!detail.empty())
        args += ", \"detail\": " + io::jsonQuote(detail);
      emit("{\"name\": " + io::jsonQuote(where.empty() ? call : call + " " + where) +
           ", \"cat\": " + io::jsonQuote(cat) + ", \"ph\": \"X\", \"ts\": " +
           us(span.items[4].number - origin) + ", \"dur\": " + us(span.items[5].number) +
           ", \"pid\": " + pid + ", \"tid\": " + std::to_string(tidOf(stream)) +
           ", \"args\": {" + args + "}}");
    }
  }
  out += "\n]}\n";
  std::FILE *f = std::fopen(path.c_str(), "w");
  bool ok = f && std::fwrite(out.data(), 1, out.size(), f) == out.size();
  if (f)
    ok = std::fclose(f) == 0 && ok;
  if (!ok)
    return "cannot write --trace '" + path + "': " + std::strerror(errno);
  return "";
}

} // namespace dsrt::driver
