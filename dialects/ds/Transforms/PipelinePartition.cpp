//===- PipelinePartition.cpp - ds-pipeline-partition: @forward cut into chunks --===//
//
// The forward's computing ops, in program order, are cut into stages x virtual-stages
// contiguous chunks whose weights (DeepSpeed's pipeline.partition: FLOPs, parameters, ops or
// matching modules) balance. Constants and parameter reads weigh nothing and go with their
// users; a parameter read that several chunks use is copied into each.
//
#include "ds/Transforms/Passes.h"

#include "Mesh.h"

#include "CutBytes.h"
#include "PipelineReads.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Regex.h"

#include <cmath>
#include <functional>
#include <limits>
#include <vector>

namespace mlir::ds {
#define GEN_PASS_DEF_DSPIPELINEPARTITION
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {
struct PipelinePartitionPass
    : mlir::ds::impl::DSPipelinePartitionBase<PipelinePartitionPass> {
  using DSPipelinePartitionBase::DSPipelinePartitionBase;
  void runOnOperation() override;
};

/// Ops that are copied to where they are used rather than computed once and sent.
bool isFree(Operation *op) { return isCopiedToEachChunk(op); }

int64_t tensorBytes(Value v) { return mlir::ds::tensorBytes(v.getType()); }

/// The module path of a state_dict name: without its last component.
StringRef modulePath(StringRef name) {
  size_t dot = name.rfind('.');
  return dot == StringRef::npos ? StringRef() : name.take_front(dot);
}

/// ds-pipeline-partition on one module: the computing ops of @forward weighed, the cuts
/// chosen, each op marked with its chunk.
class Partitioner {
public:
  Partitioner(ModuleOp module, int64_t stages, int64_t virtualStages, std::string partition)
      : module(module), stages(stages), virtualStages(virtualStages),
        partition(std::move(partition)) {}
  LogicalResult build() {
    if (failed(check()) || failed(addPipelineAxis()))
      return failure();
    collectOps();
    if (failed(weigh()))
      return failure();
    measureCrossings();
    if (failed(chooseCuts()))
      return failure();
    markChunks();
    return success();
  }

private:
  /// The options and the module.
  LogicalResult check();
  /// The mesh gets its pp axis.
  LogicalResult addPipelineAxis();
  /// The computing ops of @forward, in order.
  void collectOps();
  /// Each computing op's weight for the partition.
  LogicalResult weigh();
  /// The bytes that cross each possible cut, and the weights' prefix sums.
  void measureCrossings();
  /// The cuts.
  LogicalResult chooseCuts();
  /// Each op's chunk (ds.stage), and the module's #ds.pipeline.
  void markChunks();

  ModuleOp module;
  const int64_t stages, virtualStages;
  const std::string partition;
  func::FuncOp func;
  int64_t chunks = 1, n = 0;
  bool byParameters = false, uniform = false, byType = false, best = false;
  llvm::Regex pattern;
  SmallVector<Operation *> ops; // the computing ops, in order
  llvm::DenseMap<Operation *, int64_t> index;
  SmallVector<double> weight, prefix;
  SmallVector<int64_t> crossing, cut;
};
} // namespace

void PipelinePartitionPass::runOnOperation() {
  if (failed(Partitioner(getOperation(), stages, virtualStages, partition).build()))
    signalPassFailure();
}

LogicalResult Partitioner::check() {
  func = module.lookupSymbol<func::FuncOp>(kForwardName);
  if (!func) {
    module.emitError() << "ds-pipeline-partition needs a func.func @forward (run it before "
                          "ds-autodiff)";
    return failure();
  }
  if (stages < 1 || virtualStages < 1) {
    module.emitError() << "ds-pipeline-partition: stages and virtual-stages must be >= 1";
    return failure();
  }
  if (module->hasAttr(kPipelineAttrName)) {
    module.emitError() << "ds-pipeline-partition: the module is already cut ("
                       << kPipelineAttrName << " is set); run the pass once";
    return failure();
  }
  chunks = stages * virtualStages;
  byParameters = partition == "parameters";
  uniform = partition == "uniform";
  byType = StringRef(partition).starts_with("type:");
  best = partition == "best";
  if (!byParameters && !uniform && !byType && !best) {
    module.emitError() << "ds-pipeline-partition: partition '" << partition
                       << "' is not best, parameters, uniform or type:REGEX";
    return failure();
  }
  pattern = llvm::Regex(byType ? StringRef(partition).drop_front(5) : StringRef());
  std::string regexError;
  if (byType && !pattern.isValid(regexError)) {
    module.emitError() << "ds-pipeline-partition: partition '" << partition
                       << "': not a valid regular expression (" << regexError << ")";
    return failure();
  }

  return success();
}

LogicalResult Partitioner::addPipelineAxis() {
  MeshAttr mesh = getMesh(module);
  if (!mesh) {
    module->setAttr(kMeshAttrName, buildMesh(module.getContext(), 1, 1, 1, stages));
  } else if (mesh.findAxis(MeshAxis::pp) >= 0) {
    if (mesh.getSize(MeshAxis::pp) != stages) {
      module.emitError() << "ds-pipeline-partition: stages " << static_cast<int64_t>(stages)
                         << " disagrees with the module's mesh " << mesh.str()
                         << " (drop the option; the mesh decides)";
      return failure();
    }
  } else if (stages > 1) {
    module->setAttr(kMeshAttrName,
                    buildMesh(module.getContext(), dataParallelRanks(mesh),
                              mesh.getSize(MeshAxis::tp), mesh.getSize(MeshAxis::sp), stages,
                              mesh.getSize(MeshAxis::ep)));
  }

  return success();
}

void Partitioner::collectOps() {
  Block &body = func.getBody().front();
  for (Operation &op : body.without_terminator())
    if (!isFree(&op)) {
      index[&op] = ops.size();
      ops.push_back(&op);
    }
  n = ops.size();

}

LogicalResult Partitioner::weigh() {
  weight.assign(n, 0.0);
  llvm::StringSet<> seenParams, seenModules;
  // The first op that reads `v`, through the free ops (a widened parameter read) between.
  std::function<int64_t(Value)> firstUser = [&](Value v) -> int64_t {
    int64_t first = n;
    for (Operation *u : v.getUsers()) {
      if (auto it = index.find(u); it != index.end())
        first = std::min(first, it->second);
      else if (isFree(u))
        first = std::min(first, firstUser(u->getResult(0)));
    }
    return first;
  };
  for (Operation &op : func.getBody().front().without_terminator()) {
    if (auto get = dyn_cast<GetParameterOp>(op)) {
      auto param = module.lookupSymbol<ParameterOp>(get.getNameAttr());
      if (!param || !param.getTrainable() || (!byParameters && !byType))
        continue;
      int64_t at = firstUser(get.getResult());
      if (at >= n)
        continue;
      if (byParameters && seenParams.insert(param.getSymName()).second)
        weight[at] += static_cast<double>(param.getTensorType().getNumElements());
      StringRef path = modulePath(param.getSymName());
      if (byType && pattern.match(path) && seenModules.insert(path).second)
        weight[at] += 1.0;
      continue;
    }
    if (isFree(&op))
      continue;
    int64_t flops = 0;
    if (auto cost = dyn_cast<CostOpInterface>(op))
      flops = cost.getFlops();
    if (best)
      weight[index[&op]] = static_cast<double>(flops);
    else if (uniform && flops > 0)
      weight[index[&op]] = 1.0;
  }
  // For parameters and type:, a chunk starts at a weighed op (a layer's first read).
  int64_t units = 0;
  double total = 0;
  for (double w : weight) {
    units += w > 0;
    total += w;
  }
  if (units < chunks) {
    module.emitError() << "ds-pipeline-partition: partition '" << partition << "' finds "
                       << units << " weighed "
                       << (byType ? "modules" : byParameters ? "parameter reads" : "ops")
                       << " but " << chunks << " chunks (stages x virtual_stages) need one each"
                       << (byType ? "; widen the pattern or use \"best\"" : "; use fewer stages");
    return failure();
  }

  return success();
}

void Partitioner::measureCrossings() {
  crossing = cutBytes(ops, index, func.getBody().front().getTerminator());
  prefix.assign(n + 1, 0.0);
  for (int64_t j = 0; j < n; ++j)
    prefix[j + 1] = prefix[j] + weight[j];

}

LogicalResult Partitioner::chooseCuts() {
  // The cuts: first the smallest possible heaviest chunk (DeepSpeed's balanced partition),
  // then, among the cuts whose heaviest chunk is within that (for `best`, 5% above it), the
  // ones whose crossing values have the fewest bytes. Chunks start at a weighed op for
  // parameters and type: (a layer's first read), and each weighs something.
  auto weightOf = [&](int64_t i, int64_t j) { return prefix[j] - prefix[i]; };
  auto canStart = [&](int64_t i) { return i == 0 || best || uniform || weight[i] > 0; };
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> heaviest(chunks + 1, std::vector<double>(n + 1, inf));
  heaviest[0][0] = 0;
  for (int64_t k = 1; k <= chunks; ++k)
    for (int64_t j = 1; j <= n; ++j)
      for (int64_t i = k - 1; i < j; ++i)
        if (heaviest[k - 1][i] < inf && canStart(i) && weightOf(i, j) > 0)
          heaviest[k][j] = std::min(heaviest[k][j], std::max(heaviest[k - 1][i], weightOf(i, j)));
  if (heaviest[chunks][n] == inf) {
    module.emitError() << "ds-pipeline-partition: no cut gives each of the " << chunks
                       << " chunks some work; use fewer stages";
    return failure();
  }
  const double bound = heaviest[chunks][n] * (best ? 1.05 : 1.0) * (1 + 1e-12);
  std::vector<std::vector<int64_t>> bytes(chunks + 1, std::vector<int64_t>(n + 1, -1));
  std::vector<std::vector<int64_t>> from(chunks + 1, std::vector<int64_t>(n + 1, -1));
  bytes[0][0] = 0;
  for (int64_t k = 1; k <= chunks; ++k)
    for (int64_t j = 1; j <= n; ++j)
      for (int64_t i = k - 1; i < j; ++i) {
        if (bytes[k - 1][i] < 0 || !canStart(i) || weightOf(i, j) <= 0 ||
            weightOf(i, j) > bound)
          continue;
        int64_t c = bytes[k - 1][i] + (k > 1 ? crossing[i] : 0);
        if (bytes[k][j] < 0 || c < bytes[k][j]) {
          bytes[k][j] = c;
          from[k][j] = i;
        }
      }
  cut.assign(chunks + 1, 0);
  cut[chunks] = n;
  for (int64_t k = chunks; k > 0; --k)
    cut[k - 1] = from[k][cut[k]];

  return success();
}

void Partitioner::markChunks() {
  Builder b(module.getContext());
  auto chunkOfIndex = [&](int64_t j) {
    return static_cast<int64_t>(std::upper_bound(cut.begin(), cut.end(), j) - cut.begin()) - 1;
  };
  for (int64_t j = 0; j < n; ++j)
    ops[j]->setAttr(kStageAttrName, b.getI64IntegerAttr(chunkOfIndex(j)));
  // Free ops: the chunk of their first user; a parameter read (widened or not) used by several
  // chunks becomes one per chunk. Users first, so that a read's users have their chunks.
  Block &body = func.getBody().front();
  SmallVector<Operation *> free;
  for (Operation &op : body.without_terminator())
    if (isFree(&op))
      free.push_back(&op);
  for (Operation *freeOp : llvm::reverse(free)) {
    Operation &op = *freeOp;
    llvm::MapVector<int64_t, SmallVector<OpOperand *>> byChunk;
    for (OpOperand &use : op.getResult(0).getUses()) {
      Operation *u = use.getOwner();
      int64_t c = chunks - 1; // the return: the last chunk
      if (auto it = index.find(u); it != index.end())
        c = chunkOfIndex(it->second);
      else if (auto at = u->getAttrOfType<IntegerAttr>(kStageAttrName))
        c = at.getInt(); // a free user, placed already
      byChunk[c].push_back(&use);
    }
    if (byChunk.empty())
      continue;
    bool first = true;
    for (auto &[c, uses] : byChunk) {
      Operation *target = &op;
      if (!first && !isa<ConstantOp>(op)) {
        Operation *earliest = uses.front()->getOwner();
        for (OpOperand *use : uses)
          if (use->getOwner()->isBeforeInBlock(earliest))
            earliest = use->getOwner();
        OpBuilder ob(earliest);
        target = ob.clone(op);
        for (OpOperand *use : uses)
          use->set(target->getResult(0));
      }
      target->setAttr(kStageAttrName, b.getI64IntegerAttr(c));
      first = false;
    }
  }
  module->setAttr(kPipelineAttrName, PipelineAttr::get(b.getContext(), stages, virtualStages,
                                                       PipelineScheduleAttr(), 0,
                                                       DenseI64ArrayAttr()));
}
