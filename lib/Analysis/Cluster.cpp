//===- Cluster.cpp - cluster files, presets and the communication model -----===//
#include "ds/Analysis/Cluster.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>
#include <map>

using namespace mlir::ds;
namespace json = llvm::json;

namespace {
/// The fields of a cluster file, in order, with where each lives in ClusterSpec.
struct Field {
  const char *key;
  double ClusterSpec::*real = nullptr;
  int64_t ClusterSpec::*count = nullptr;
};
const Field kFields[] = {
    {"nodes", nullptr, &ClusterSpec::nodes},
    {"devices_per_node", nullptr, &ClusterSpec::devicesPerNode},
    {"device_memory_bytes", &ClusterSpec::deviceMemoryBytes},
    {"memory_bandwidth_bytes_per_s", &ClusterSpec::memoryBandwidth},
    {"intra_node_bandwidth_bytes_per_s", &ClusterSpec::intraNodeBandwidth},
    {"intra_node_latency_s", &ClusterSpec::intraNodeLatency},
    {"inter_node_bandwidth_bytes_per_s", &ClusterSpec::interNodeBandwidth},
    {"inter_node_latency_s", &ClusterSpec::interNodeLatency},
    {"host_memory_bytes", &ClusterSpec::hostMemoryBytes},
    {"nvme_bandwidth_bytes_per_s", &ClusterSpec::nvmeBandwidth},
};
/// The optional field of nodes whose devices (ranks) share CPU cores.
const char *const kCoresKey = "cores_per_node";
/// peak_flops's keys.
const std::pair<const char *, double ClusterSpec::*> kPeaks[] = {
    {"bf16", &ClusterSpec::peakFlopsBf16},
    {"fp16", &ClusterSpec::peakFlopsFp16},
    {"fp32", &ClusterSpec::peakFlopsFp32},
};

/// One node of a preset (its node count comes from NAME:NODES, default 1). Sources:
/// NVIDIA's H100 and A100 datasheets (HBM size and bandwidth, fp32 peaks, NVLink per GPU, 900
/// and 600 GB/s both ways) and the DGX H100 / DGX A100 user guides (one 400 Gb/s
/// ConnectX-7 or 200 Gb/s HDR InfiniBand port per GPU, 2 TB of host memory). The latencies are
/// NCCL's per-step times for small messages, a few microseconds inside a node and about ten
/// across InfiniBand. The bf16 and fp16 rates are what a matrix product reaches, not the
/// datasheets' dense peaks (989.4 and 312 TFLOP/s), which no GEMM does: 790 TFLOP/s, measured
/// through PyTorch on the H200 this project was lent (FACTS.md; its GPU is the H100 SXM's),
/// and the A100's datasheet peak at the same fraction (0.80 of 312: not measured here).
struct Preset {
  const char *name;
  ClusterSpec node;
};
const Preset kPresets[] = {
    {"dgx-h100",
     {"8x H100-SXM5-80GB, NVLink 4, 400 Gb/s InfiniBand per GPU", 1, 8, 80.0 * (1ull << 30),
      790e12, 790e12, 66.9e12, 3.35e12, 450e9, 3e-6, 50e9, 10e-6, 2e12, 25e9}},
    {"dgx-a100",
     {"8x A100-SXM4-80GB, NVLink 3, 200 Gb/s InfiniBand per GPU", 1, 8, 80.0 * (1ull << 30),
      249e12, 249e12, 19.5e12, 2.039e12, 300e9, 3e-6, 25e9, 10e-6, 2e12, 25e9}},
};

llvm::Error error(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

std::string fieldList() {
  std::string s;
  for (const Field &f : kFields)
    s += std::string(s.empty() ? "" : ", ") + f.key;
  return s + ", peak_flops {bf16, fp16, fp32}, and optional name and cores_per_node";
}

llvm::Expected<ClusterSpec> parse(llvm::StringRef path, llvm::StringRef text) {
  auto where = [&](const llvm::Twine &what) {
    return error("cluster file '" + path + "': " + what);
  };
  llvm::Expected<json::Value> value = json::parse(text);
  if (!value)
    return where("not valid JSON (" + llvm::toString(value.takeError()) + ")");
  const json::Object *o = value->getAsObject();
  if (!o)
    return where("the top level must be an object with " + fieldList());
  ClusterSpec c;
  for (const auto &[key, v] : *o) {
    llvm::StringRef k = key;
    bool known = k == "name" || k == "peak_flops" || k == kCoresKey;
    for (const Field &f : kFields)
      known |= k == f.key;
    if (!known)
      return where("unknown field '" + k + "'; a cluster file has exactly " + fieldList());
  }
  if (auto name = o->getString("name"))
    c.name = name->str();
  else if (o->get("name"))
    return where("'name' must be a string");
  for (const Field &f : kFields) {
    const json::Value *v = o->get(f.key);
    if (!v)
      return where("missing '" + llvm::Twine(f.key) + "' (a cluster file has " + fieldList() +
                   ")");
    std::optional<double> x = v->getAsNumber();
    if (!x || !std::isfinite(*x) || *x < 0 || (f.count && (*x < 1 || *x != std::floor(*x))))
      return where("'" + llvm::Twine(f.key) + "' must be a " +
                   (f.count ? "positive integer" : "non-negative number") + " (in bytes, "
                   "bytes/s or seconds, as its name says)");
    if (f.count)
      c.*f.count = static_cast<int64_t>(*x);
    else
      c.*f.real = *x;
  }
  if (const json::Value *v = o->get(kCoresKey)) {
    std::optional<int64_t> x = v->getAsInteger();
    if (!x || *x < 1)
      return where("'" + llvm::Twine(kCoresKey) + "' must be a positive integer (the CPU cores "
                   "a node's devices share), or absent");
    c.coresPerNode = *x;
  }
  const json::Object *peaks = o->getObject("peak_flops");
  if (!peaks)
    return where("missing 'peak_flops', an object of FLOP/s by dtype: {\"bf16\": ..., "
                 "\"fp16\": ..., \"fp32\": ...}");
  for (const auto &[key, v] : *peaks) {
    bool known = false;
    for (auto &[name, member] : kPeaks)
      known |= key == name;
    if (!known)
      return where("unknown dtype '" + llvm::StringRef(key) + "' in peak_flops (bf16, fp16, fp32)");
  }
  for (auto &[name, member] : kPeaks) {
    std::optional<double> x = peaks->getNumber(name);
    if (!x || !(*x > 0))
      return where("peak_flops." + llvm::Twine(name) + " must be a positive number (FLOP/s)");
    c.*member = *x;
  }
  for (const Field &f : kFields)
    if (f.real && c.*f.real == 0 && llvm::StringRef(f.key).contains("bandwidth"))
      return where("'" + llvm::Twine(f.key) + "' must be positive");
  return c;
}
} // namespace

std::vector<std::string> mlir::ds::clusterPresets() {
  std::vector<std::string> names;
  for (const Preset &p : kPresets)
    names.push_back(p.name);
  return names;
}

llvm::Expected<ClusterSpec> mlir::ds::loadCluster(llvm::StringRef nameOrPath) {
  auto [name, nodes] = nameOrPath.split(':');
  for (const Preset &p : kPresets) {
    if (name != p.name)
      continue;
    ClusterSpec c = p.node;
    c.name = std::string(p.name) + ": " + c.name;
    if (!nodes.empty() && (nodes.getAsInteger(10, c.nodes) || c.nodes < 1))
      return error("--cluster " + nameOrPath + ": the node count after ':' must be a positive "
                   "integer (e.g. " + p.name + ":128)");
    return c;
  }
  auto buffer = llvm::MemoryBuffer::getFile(nameOrPath);
  if (!buffer)
    return error("--cluster " + nameOrPath + ": no such file and no such preset (presets: " +
                 llvm::join(clusterPresets(), ", ") + ", each with an optional :NODES)");
  return parse(nameOrPath, (*buffer)->getBuffer());
}

std::string mlir::ds::clusterToJSON(const ClusterSpec &c) {
  std::string s;
  llvm::raw_string_ostream os(s);
  json::OStream j(os, 2);
  j.object([&] {
    j.attribute("name", c.name);
    for (const Field &f : kFields) {
      if (f.count)
        j.attribute(f.key, c.*f.count);
      else
        j.attribute(f.key, c.*f.real);
    }
    j.attributeObject("peak_flops", [&] {
      for (auto &[name, member] : kPeaks)
        j.attribute(name, c.*member);
    });
    if (c.coresPerNode)
      j.attribute(kCoresKey, c.coresPerNode);
  });
  return s + "\n";
}

AxisPlacement mlir::ds::placeGroup(llvm::ArrayRef<int64_t> shape,
                                   llvm::ArrayRef<size_t> axes, int64_t devicesPerNode) {
  // Rank 0's group: every coordinate of `axes`, the others 0 (every group is placed alike).
  std::vector<int64_t> members{0};
  for (size_t a : axes) {
    int64_t stride = 1;
    for (size_t i = a + 1; i < shape.size(); ++i)
      stride *= shape[i];
    std::vector<int64_t> next;
    for (int64_t r : members)
      for (int64_t x = 0; x < shape[a]; ++x)
        next.push_back(r + x * stride);
    members = std::move(next);
  }
  std::map<int64_t, int64_t> perNode;
  for (int64_t r : members)
    ++perNode[r / devicesPerNode];
  AxisPlacement at;
  at.nodes = static_cast<int64_t>(perNode.size());
  at.perNode = static_cast<int64_t>(members.size()) / at.nodes;
  return at;
}

double mlir::ds::collectiveSeconds(llvm::StringRef kind, int64_t calls, double bytes,
                                   AxisPlacement at, const ClusterSpec &c) {
  const double k = static_cast<double>(at.perNode), m = static_cast<double>(at.nodes);
  const double n = k * m;
  if (n <= 1 || calls == 0)
    return 0;
  // One ring pass (reduce-scatter or all-gather) of `bytes` over the group: (k-1)/k of it
  // inside each node, then (m-1)/m of each device's 1/k share between nodes.
  auto ringPass = [&](double b, int64_t count) {
    return (k - 1) / k * b / c.intraNodeBandwidth + (m - 1) / m * (b / k) / c.interNodeBandwidth +
           count * ((k - 1) * c.intraNodeLatency + (m - 1) * c.interNodeLatency);
  };
  if (kind == "all_reduce")
    return 2 * ringPass(bytes, calls); // reduce-scatter, then all-gather
  if (kind == "reduce_scatter" || kind == "all_gather")
    return ringPass(bytes, calls);
  if (kind == "all_to_all") // each rank's 1/n to every other: (k-1)/n inside, (n-k)/n across
    return (k - 1) / n * bytes / c.intraNodeBandwidth +
           (n - k) / n * bytes / c.interNodeBandwidth +
           calls * ((k - 1) * c.intraNodeLatency + (n - k) * c.interNodeLatency);
  if (kind == "send") // pipeline neighbours: across nodes when the axis puts one per node
    return at.perNode == 1 ? bytes / c.interNodeBandwidth + calls * c.interNodeLatency
                        : bytes / c.intraNodeBandwidth + calls * c.intraNodeLatency;
  if (kind == "recv")
    return 0;
  return -1;
}
