// The cluster file and the communication model (ds/Analysis/Cluster.h) against values worked
// out by hand from docs/design/comm-model.md's formulas.
#include "ds/Analysis/Cluster.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

using namespace mlir::ds;

namespace {

ClusterSpec twoByFour() {
  ClusterSpec c;
  c.nodes = 2, c.devicesPerNode = 4;
  c.intraNodeBandwidth = 1e9, c.intraNodeLatency = 1e-6;
  c.interNodeBandwidth = 1e8, c.interNodeLatency = 1e-5;
  return c;
}

TEST(Cluster, GroupsSitOnNodesInMeshOrder) {
  // pp=16 x dp=8 x tp=8 on nodes of 8: tp inside a node, dp and pp a member per node.
  auto pp = placeGroup({16, 8, 8}, {0}, 8), dp = placeGroup({16, 8, 8}, {1}, 8),
       tp = placeGroup({16, 8, 8}, {2}, 8);
  EXPECT_EQ(tp.perNode, 8);
  EXPECT_EQ(tp.nodes, 1);
  EXPECT_EQ(dp.perNode, 1);
  EXPECT_EQ(dp.nodes, 8);
  EXPECT_EQ(pp.perNode, 1);
  EXPECT_EQ(pp.nodes, 16);
  // dp=8 x tp=2: four dp members share a node, two nodes.
  auto half = placeGroup({8, 2}, {0}, 8);
  EXPECT_EQ(half.perNode, 4);
  EXPECT_EQ(half.nodes, 2);
  // A group over two axes (dp+sp of dp=4 x sp=4): 8 members a node, two nodes.
  auto both = placeGroup({4, 4}, {0, 1}, 8);
  EXPECT_EQ(both.perNode, 8);
  EXPECT_EQ(both.nodes, 2);
}

TEST(Cluster, HierarchicalRing) {
  ClusterSpec c = twoByFour();
  AxisPlacement at{4, 2};
  // One pass of 1e9 bytes: 3/4 of it inside at 1e9 B/s (0.75 s), 1/2 of each quarter across
  // at 1e8 B/s (1.25 s); latency 3 steps inside and 1 across.
  double pass = 0.75 + 1.25 + 3e-6 + 1e-5;
  EXPECT_NEAR(collectiveSeconds("all_gather", 1, 1e9, at, c), pass, 1e-12);
  EXPECT_NEAR(collectiveSeconds("reduce_scatter", 1, 1e9, at, c), pass, 1e-12);
  EXPECT_NEAR(collectiveSeconds("all_reduce", 1, 1e9, at, c), 2 * pass, 1e-12);
  // Ten calls of 1e8 bytes each move the same bytes with ten times the latency.
  EXPECT_NEAR(collectiveSeconds("all_reduce", 10, 1e9, at, c), 2 * (2.0 + 10 * 1.3e-5), 1e-12);
  // All-to-all of 8e8 bytes over 8 ranks: 3/8 inside, 4/8 across.
  EXPECT_NEAR(collectiveSeconds("all_to_all", 1, 8e8, at, c),
              0.3e9 / 1e9 + 0.4e9 / 1e8 + 3e-6 + 4e-5, 1e-12);
  // Inside one node only the node's links count; a group of one costs nothing.
  EXPECT_NEAR(collectiveSeconds("all_reduce", 1, 1e9, AxisPlacement{4, 1}, c),
              2 * (0.75 + 3e-6), 1e-12);
  EXPECT_EQ(collectiveSeconds("all_reduce", 1, 1e9, AxisPlacement{1, 1}, c), 0);
  // Pipeline sends: across nodes when each node holds one member, else inside.
  EXPECT_NEAR(collectiveSeconds("send", 2, 1e8, AxisPlacement{1, 2}, c), 1.0 + 2e-5, 1e-12);
  EXPECT_NEAR(collectiveSeconds("send", 2, 1e8, AxisPlacement{2, 1}, c), 0.1 + 2e-6, 1e-12);
  EXPECT_EQ(collectiveSeconds("recv", 2, 1e8, AxisPlacement{1, 2}, c), 0);
  EXPECT_EQ(collectiveSeconds("broadcast", 1, 1e8, at, c), -1);
}

std::string load(const std::string &text, ClusterSpec *out = nullptr) {
  std::string path = testing::TempDir() + "/cluster.json";
  std::ofstream(path) << text;
  auto c = loadCluster(path);
  if (!c)
    return llvm::toString(c.takeError());
  if (out)
    *out = *c;
  return "";
}

const char *kFile = R"({"name": "two", "nodes": 2, "devices_per_node": 4,
  "device_memory_bytes": 8e10, "peak_flops": {"bf16": 1e15, "fp16": 1e15, "fp32": 6e13},
  "memory_bandwidth_bytes_per_s": 3e12, "intra_node_bandwidth_bytes_per_s": 4.5e11,
  "intra_node_latency_s": 3e-6, "inter_node_bandwidth_bytes_per_s": 5e10,
  "inter_node_latency_s": 1e-5, "host_memory_bytes": 2e12, "nvme_bandwidth_bytes_per_s": 2.5e10})";

TEST(Cluster, FileRoundTripsAndPresetsLoad) {
  ClusterSpec c;
  ASSERT_EQ(load(kFile, &c), "");
  EXPECT_EQ(c.devices(), 8);
  EXPECT_EQ(c.peakFlopsFp32, 6e13);
  ClusterSpec again;
  ASSERT_EQ(load(clusterToJSON(c), &again), "");
  EXPECT_EQ(clusterToJSON(again), clusterToJSON(c));
  for (const std::string &name : clusterPresets()) {
    auto p = loadCluster(name + ":16");
    ASSERT_TRUE(static_cast<bool>(p)) << llvm::toString(p.takeError());
    EXPECT_EQ(p->nodes, 16);
    EXPECT_EQ(p->devicesPerNode, 8);
    EXPECT_EQ(load(clusterToJSON(*p)), "") << name;
  }
  // The optional cores a node's devices share (a CPU's ranks under --oversubscribe).
  EXPECT_FALSE(c.sharesCores());
  std::string shared = kFile;
  shared.insert(1, "\"cores_per_node\": 2, ");
  ASSERT_EQ(load(shared, &c), "");
  EXPECT_EQ(c.coresPerNode, 2);
  EXPECT_TRUE(c.sharesCores());
  ASSERT_EQ(load(clusterToJSON(c), &again), "");
  EXPECT_EQ(again.coresPerNode, 2);
  shared.replace(shared.find(": 2, "), 5, ": 0, ");
  EXPECT_NE(load(shared).find("'cores_per_node' must be a positive integer"), std::string::npos);
}

TEST(Cluster, ErrorsNameTheFieldAndTheFix) {
  std::string text = kFile;
  auto without = [&](const std::string &key) {
    std::string t = text;
    size_t at = t.find("\"" + key + "\"");
    size_t end = t.find(',', at);
    return t.erase(at, end - at + 1);
  };
  EXPECT_NE(load(without("inter_node_latency_s")).find("missing 'inter_node_latency_s'"),
            std::string::npos);
  EXPECT_NE(load("{\"nodez\": 1, " + text.substr(1)).find("unknown field 'nodez'"),
            std::string::npos);
  std::string fractional = text;
  fractional.replace(fractional.find("\"nodes\": 2"), 10, "\"nodes\": 2.5");
  EXPECT_NE(load(fractional).find("'nodes' must be a positive integer"), std::string::npos);
  EXPECT_NE(load("[1]").find("must be an object"), std::string::npos);
  auto bad = loadCluster("dgx-h100:0");
  ASSERT_FALSE(static_cast<bool>(bad));
  EXPECT_NE(llvm::toString(bad.takeError()).find("dgx-h100:128"), std::string::npos);
  auto missing = loadCluster("/no/such/cluster.json");
  ASSERT_FALSE(static_cast<bool>(missing));
  EXPECT_NE(llvm::toString(missing.takeError()).find("presets: dgx-h100, dgx-a100"),
            std::string::npos);
}

} // namespace
