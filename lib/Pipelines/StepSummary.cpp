//===- StepSummary.cpp - what ds-opt compiled, in a few lines ----------------===//
//
// ds-opt --config prints this to stderr: the mesh, the batch as DeepSpeed's rule resolved it,
// the ZeRO stage and what else the config turned on, and under tensor parallelism which
// parameters split and which stayed whole, with the reason ds-tensor-parallel gave.
//
#include "ds/Pipelines/Pipelines.h"

#include "ds/Transforms/Mesh.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include <map>
#include <set>

using namespace mlir;
using namespace mlir::ds;

namespace {
/// Parameters by (layer pattern, how they split), in first-seen order: how many, and the
/// first one's name (what a group of one prints).
using Key = std::pair<std::string, std::string>;
struct Group {
  int n = 0;
  std::string first;
  void add(StringRef name) {
    if (!n++)
      first = name.str();
  }
  std::string str(StringRef pattern) const {
    return n == 1 ? first : (pattern + " (" + Twine(n) + ")").str();
  }
};
using Groups = llvm::MapVector<Key, Group, std::map<Key, unsigned>>;

/// `name` with every numeric path component as `*` (layer indices), so that the layers'
/// parameters share one line.
std::string layerPattern(StringRef name) {
  SmallVector<StringRef> parts;
  name.split(parts, '.');
  std::string out;
  for (auto [i, p] : llvm::enumerate(parts)) {
    out += i ? "." : "";
    out += !p.empty() && llvm::all_of(p, llvm::isDigit) ? "*" : p.str();
  }
  return out;
}

/// How a parameter's sharding splits it over tp, or "" when it does not.
std::string tpSplit(ParameterOp param) {
  ShardingAttr sharding = param.getShardingAttr();
  if (!sharding)
    return "";
  ArrayRef<int64_t> segments = sharding.getSegments();
  for (auto [d, axes] : llvm::enumerate(sharding.getDims()))
    for (Attribute a : cast<ArrayAttr>(axes))
      if (cast<StringAttr>(a).getValue() == stringifyMeshAxis(MeshAxis::tp)) {
        std::string s = "dimension " + std::to_string(d);
        if (d < segments.size() && segments[d] > 1)
          s += " in " + std::to_string(segments[d]) + " segments";
        if (ArrayRef<int64_t> sizes = sharding.getSizesOf(d); !sizes.empty()) {
          s += " of ";
          for (auto [k, z] : llvm::enumerate(sizes))
            s += (k ? ", " : "") + std::to_string(z);
          s += " rows";
        }
        return s;
      }
  return "";
}

} // namespace

void mlir::ds::printStepSummary(ModuleOp step, const ::ds::DeepSpeedConfig &config,
                                const llvm::StringMap<std::string> &wholeWhy,
                                llvm::raw_ostream &os) {
  MeshAttr mesh = getMesh(step);
  int64_t ranks = 1;
  if (mesh)
    for (int64_t s : mesh.getShape())
      ranks *= s;
  os << "ds-opt: compiled for " << ranks << (ranks == 1 ? " rank" : " ranks");
  if (mesh)
    os << " (mesh " << mesh.str() << ")";
  os << ": micro-batch " << config.microBatchSize << " x " << config.gradientAccumulationSteps
     << " accumulation step" << (config.gradientAccumulationSteps == 1 ? "" : "s") << " x "
     << config.worldSize << " data-parallel rank" << (config.worldSize == 1 ? "" : "s")
     << " = train batch " << config.trainBatchSize << "; ZeRO stage " << config.zeroStage
     << ", " << stringifyPrecision(config.precision.dtype) << ", "
     << config.optimizer.name();
  if (config.gradientClipping > 0)
    os << ", clipping at " << llvm::format("%g", config.gradientClipping);
  if (config.zero.offloadOptimizer.on())
    os << ", optimizer offloaded to " << stringifyOffloadDevice(config.zero.offloadOptimizer.device);
  if (config.zero.offloadParam.on())
    os << ", parameters offloaded to " << stringifyOffloadDevice(config.zero.offloadParam.device);
  if (config.checkpointing.enabled)
    os << ", activation checkpointing";
  if (config.pipeline.stages > 1)
    os << ", " << config.pipeline.stages << " pipeline stages";
  os << "\n";

  if (config.expertParallelSize > 1) {
    // Expert parallelism: which parameters hold experts, and how many each rank keeps.
    Groups experts;
    int64_t n = 0;
    for (ParameterOp param : step.getOps<ParameterOp>()) {
      if (!splitsOver(param.getShardingAttr(), MeshAxis::ep))
        continue;
      int64_t local = param.getTensorType().getShape()[0];
      experts[{layerPattern(param.getSymName()),
               std::to_string(local * config.expertParallelSize) + " experts, " +
                   std::to_string(local) + " per rank"}]
          .add(param.getSymName());
      ++n;
    }
    os << "ds-opt: expert parallelism over ep=" << config.expertParallelSize << ": " << n
       << " expert parameters split by expert, their rows exchanged by all-to-all:\n";
    for (const auto &[key, group] : experts)
      os << "  " << group.str(key.first) << ": " << key.second << "\n";
  }
  if (config.moe.dropTokens) {
    // Capacity dropping: each distinct capacity, with the routed rows it bounds.
    std::set<std::tuple<int64_t, int64_t, int64_t, int64_t>> drops;
    step.walk([&](ExpertCapacityOp c) {
      int64_t rows = cast<RankedTensorType>(c.getExpertIds().getType()).getShape()[0];
      drops.insert({c.getCapacity(), rows, c.getChoices(), c.getExperts()});
    });
    os << "ds-opt: token dropping (moe.capacity_factor " << llvm::format("%g", config.moe.capacityFactor)
       << ", min_capacity " << config.moe.minCapacity << ", DeepSpeed-MoE's rule):\n";
    for (auto [capacity, rows, choices, experts] : drops) {
      os << "  each of " << experts
         << " experts takes at most " << capacity << " of a micro-batch's " << rows
         << " routed rows (" << rows / choices << " tokens x " << choices
         << " choices) per rank, the rest give zeros";
      if (config.expertParallelSize > 1)
        os << "; a rank receives at most "
           << std::min(experts * capacity, rows * config.expertParallelSize) << " rows (dropless: "
           << rows * config.expertParallelSize << ")";
      os << "\n";
    }
  }
  if (config.tensorParallelSize <= 1)
    return;
  Groups split;
  // The parameters kept whole, by layer pattern under each reason.
  llvm::MapVector<std::string, Groups, std::map<std::string, unsigned>> whole;
  int64_t nSplit = 0, nWhole = 0;
  for (ParameterOp param : step.getOps<ParameterOp>()) {
    if (!param.getTrainable())
      continue;
    std::string how = tpSplit(param);
    std::string name = param.getSymName().str();
    if (!how.empty()) {
      split[{layerPattern(name), how}].add(name);
      ++nSplit;
      continue;
    }
    auto why = wholeWhy.find(name);
    whole[why != wholeWhy.end() ? why->second
                                : std::string("in no linear pair or vocabulary that "
                                              "ds-tensor-parallel splits (norms, positions, "
                                              "biases added after a tp sum)")][{
        layerPattern(name), ""}]
        .add(name);
    ++nWhole;
  }
  os << "ds-opt: tensor parallelism over tp=" << config.tensorParallelSize << ": " << nSplit
     << " of " << nSplit + nWhole << " trainable parameters split, each rank holding its part:\n";
  for (const auto &[key, group] : split)
    os << "  " << group.str(key.first) << ": " << key.second << "\n";
  if (!nWhole)
    return;
  os << "ds-opt: " << nWhole << " stay whole on every tp rank:\n";
  for (const auto &[why, groups] : whole) {
    os << "  ";
    llvm::interleaveComma(groups, os,
                          [&](const auto &g) { os << g.second.str(g.first.first); });
    os << ": " << why << "\n";
  }
}
