//===- CommReport.cpp - each rank's collectives per step, by mesh axis --------===//
//
// ds-opt --comm-report: reads the training step's collectives (upstream shard ops on the
// mesh's grid) and counts, per mesh axis group, how many each rank issues in one optimizer
// step (gradient_accumulation_steps micro-steps, then the update) and their message bytes.
// Every rank runs the same program on parts of the same sizes (ds-verify-collectives), so the
// rows are every rank's.
//
#include "ds/Pipelines/Pipelines.h"

#include "ds/IR/DSDialect.h"
#include "ds/IR/DSShapes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"

#include <map>

using namespace mlir;
using namespace mlir::ds;

namespace {
using Rows = std::map<std::pair<std::string, std::string>, std::pair<int64_t, int64_t>>;

/// The table of (axis, collective) -> calls and bytes, each line after `indent`; with a
/// cluster, each row's modelled seconds.
void printRows(const Rows &rows, llvm::raw_ostream &os, llvm::StringRef indent = "",
               MeshAttr mesh = {}, const ClusterSpec *cluster = nullptr) {
  os << indent << llvm::format("%-8s %-20s %10s %16s", "axis", "collective", "calls", "bytes");
  if (cluster)
    os << llvm::format(" %12s", "seconds");
  os << "\n";
  int64_t calls = 0, total = 0;
  double seconds = 0;
  for (auto &[key, row] : rows) {
    os << indent
       << llvm::format("%-8s %-20s %10lld %16lld", key.first.c_str(), key.second.c_str(),
                       (long long)row.first, (long long)row.second);
    if (cluster) {
      double t = collectiveSeconds(key.second, row.first, static_cast<double>(row.second),
                                   placementOf(mesh, key.first, *cluster), *cluster);
      if (t >= 0)
        os << llvm::format(" %12.6f", t);
      else
        os << llvm::format(" %12s", "-");
      seconds += std::max(t, 0.0);
    }
    os << "\n";
    calls += row.first;
    total += row.second;
  }
  os << indent << llvm::format("%-8s %-20s %10lld %16lld", "total", "", (long long)calls,
                               (long long)total);
  if (cluster)
    os << llvm::format(" %12.6f", seconds);
  os << "\n";
}

/// The cluster line of a report, or why the mesh does not fit the cluster.
LogicalResult describeCluster(ModuleOp module, MeshAttr mesh, const ClusterSpec *cluster,
                              llvm::raw_ostream &os) {
  if (!cluster)
    return success();
  int64_t ranks = mesh ? mesh.getNumRanks() : 1;
  if (ranks > cluster->devices())
    return module.emitError() << "--cluster: the step runs on " << ranks << " ranks but "
                              << cluster->name << " has " << cluster->devices() << " devices ("
                              << cluster->nodes << " nodes of " << cluster->devicesPerNode
                              << "); give more nodes (a preset takes NAME:NODES)";
  os << "seconds: the communication model on " << cluster->name << " (" << cluster->nodes
     << " nodes of " << cluster->devicesPerNode << " devices; docs/design/comm-model.md), "
     << "each row alone, not overlapped with compute\n";
  return success();
}

/// The mesh axes of a collective's group, as "dp" or "dp+sp"; "all" without a mesh.
std::string axesName(MeshAttr mesh, Operation *op) {
  auto axes = op->getAttrOfType<DenseI16ArrayAttr>("grid_axes");
  std::string s;
  if (!mesh || !axes || axes.empty())
    return std::string("all");
  for (int16_t a : axes.asArrayRef())
    s += (s.empty() ? "" : "+") +
         (a < static_cast<int64_t>(mesh.getAxes().size()) ? mesh.getAxes()[a].getValue().str()
                                                           : std::to_string(a));
  return s;
}
/// The exchanges of a ring attention op (count, bytes of each): the forward passes its keys
/// and values on group-1 times, the backward passes them with their gradients group times
/// (runtime/src/core/ring_attention.cpp). Zero exchanges for other ops.
std::pair<int64_t, int64_t> ringExchanges(MeshAttr mesh, Operation *op) {
  if (!isa<RingAttentionOp, RingAttentionGradOp>(op) || !mesh)
    return {0, 0};
  int64_t group = 1;
  for (int16_t a : op->getAttrOfType<DenseI16ArrayAttr>("grid_axes").asArrayRef())
    group *= mesh.getShape()[a];
  int64_t kv = tensorBytes(op->getOperand(1).getType()) + tensorBytes(op->getOperand(2).getType());
  if (isa<RingAttentionOp>(op))
    return {group - 1, kv};
  return {group, 2 * kv};
}

/// The most an expert exchange's all-to-all-v sends from a rank (its counts are decided at
/// run time): the route, its ids and one count per rank; dispatch, every row it routes; combine,
/// as many rows back. 0 for other ops.
int64_t expertExchangeBytes(MeshAttr mesh, Operation *op) {
  if (!mesh || !isa<ExpertRouteOp, ExpertDispatchOp, ExpertCombineOp>(op))
    return 0;
  if (auto route = dyn_cast<ExpertRouteOp>(op)) {
    int64_t group = 1;
    for (int16_t a : route.getGridAxes())
      group *= mesh.getShape()[a];
    return tensorBytes(route.getExpertIds().getType()) + group * 8;
  }
  return tensorBytes((isa<ExpertDispatchOp>(op) ? op->getOperand(0) : op->getResult(0)).getType());
}

/// The calls and bytes of one execution of `op` as --comm-report counts them: each call's
/// whole tensor (an all-reduce's, reduce-scatter's, all-to-all's or send's input; an
/// all-gather's or receive's result), a ring attention's exchanges, an expert exchange's most;
/// {0, 0} for what is not communication (all_slice is a view).
std::pair<int64_t, int64_t> commOf(MeshAttr mesh, Operation *op) {
  if (isa<shard::AllReduceOp, shard::ReduceScatterOp, shard::AllToAllOp, shard::SendOp>(op))
    return {1, tensorBytes(op->getOperand(0).getType())};
  if (isa<shard::AllGatherOp, shard::RecvOp>(op))
    return {1, tensorBytes(op->getResult(0).getType())};
  if (auto ring = ringExchanges(mesh, op); ring.first > 0)
    return ring; // send_recv inside the op
  if (int64_t most = expertExchangeBytes(mesh, op))
    return {1, most};
  return {0, 0};
}

/// The (axes, collective) rows of the functions in `functions`, each run its number of times.
Rows rowsOf(MeshAttr mesh, ArrayRef<std::pair<func::FuncOp, int64_t>> functions) {
  Rows rows;
  for (auto [f, times] : functions)
    f.walk([&](Operation *op) {
      auto [calls, bytes] = commOf(mesh, op);
      if (calls == 0)
        return;
      auto &row = rows[{axesName(mesh, op), op->getName().stripDialect().str()}];
      row.first += times * calls;
      row.second += times * calls * bytes;
    });
  return rows;
}

} // namespace

AxisPlacement mlir::ds::placementOf(MeshAttr mesh, llvm::StringRef axesName,
                                    const ClusterSpec &cluster) {
  SmallVector<size_t> axes;
  SmallVector<llvm::StringRef> names;
  axesName.split(names, '+');
  for (llvm::StringRef n : names)
    if (int64_t a = mesh ? mesh.findAxis(n) : -1; a >= 0)
      axes.push_back(static_cast<size_t>(a));
  return placeGroup(mesh ? mesh.getShape() : ArrayRef<int64_t>{}, axes, cluster.devicesPerNode);
}

SmallVector<std::pair<func::FuncOp, int64_t>> mlir::ds::stepFunctions(ModuleOp module,
                                                                       int64_t r) {
  SmallVector<std::pair<func::FuncOp, int64_t>> fs;
  if (PipelineAttr info = getPipeline(module); info && info.isScheduled()) {
    for (StringRef name : {StringRef(kPipelineStepPrefix), StringRef(kOptimizerStepPrefix)})
      if (auto f = module.lookupSymbol<func::FuncOp>((name + Twine(r)).str()))
        fs.push_back({f, 1});
    return fs.size() == 2 ? fs : SmallVector<std::pair<func::FuncOp, int64_t>>{};
  }
  auto micro = module.lookupSymbol<func::FuncOp>(kMicroStepName);
  auto opt = module.lookupSymbol<func::FuncOp>(kOptimizerStepName);
  if (micro && opt)
    fs = {{micro, gradientAccumulationSteps(module)}, {opt, 1}};
  return fs;
}

std::vector<CommRow> mlir::ds::commRows(ModuleOp module, int64_t pipelineRank) {
  return commRows(module, stepFunctions(module, pipelineRank));
}

std::vector<CommRow>
mlir::ds::commRows(ModuleOp module, ArrayRef<std::pair<func::FuncOp, int64_t>> functions) {
  std::vector<CommRow> out;
  auto mesh = module->getAttrOfType<MeshAttr>(kMeshAttrName);
  for (auto &[key, row] : rowsOf(mesh, functions))
    out.push_back({key.first, key.second, row.first, row.second});
  return out;
}

int64_t mlir::ds::gradientAccumulationSteps(ModuleOp module) {
  auto run = module->getAttrOfType<RunAttr>(kRunAttrName);
  return run ? run.getGradientAccumulationSteps() : 1;
}

SmallVector<SmallVector<PipelineSpan>> mlir::ds::simulatePipeline(ModuleOp module,
                                                                  PipelineAttr info) {
  DenseI64ArrayAttr flops = info.getPhaseFlops();
  const int64_t p = info.getStages();
  if (!flops)
    return {};
  const int64_t chunks = static_cast<int64_t>(flops.size()) / 2;
  SmallVector<SmallVector<std::string>> items(p);
  for (int64_t r = 0; r < p; ++r) {
    auto fn = module.lookupSymbol<func::FuncOp>(pipelineStepName(r));
    auto text = fn ? fn->getAttrOfType<StringAttr>(kScheduleAttrName) : StringAttr();
    if (!text)
      return {};
    SmallVector<StringRef> parts;
    text.getValue().split(parts, ' ', -1, false);
    for (StringRef t : parts)
      items[r].push_back(t.str());
  }
  SmallVector<SmallVector<PipelineSpan>> spans(p);
  SmallVector<double> clock(p, 0.0);
  SmallVector<size_t> next(p, 0);
  std::map<std::pair<int64_t, int64_t>, SmallVector<double>> sent; // (from, to) -> times
  std::map<std::pair<int64_t, int64_t>, size_t> received;
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t r = 0; r < p; ++r)
      while (next[r] < items[r].size()) {
        StringRef t = items[r][next[r]];
        int64_t peer = 0;
        if (t.consume_front(">")) {
          t.getAsInteger(10, peer);
          sent[{r, peer}].push_back(clock[r]);
        } else if (t.consume_front("<")) {
          t.getAsInteger(10, peer);
          auto &times = sent[{peer, r}];
          size_t &k = received[{peer, r}];
          if (k >= times.size())
            break; // not sent yet
          clock[r] = std::max(clock[r], times[k++]);
        } else {
          bool backward = t.front() == 'B';
          int64_t chunk = 0;
          t.drop_front().split('.').first.getAsInteger(10, chunk);
          double cost = static_cast<double>(flops[backward ? 2 * chunks - 1 - chunk : chunk]);
          spans[r].push_back({clock[r], clock[r] + cost, t.str(), backward});
          clock[r] += cost;
        }
        ++next[r];
        progress = true;
      }
  }
  return spans;
}

namespace {
/// The bubble of each pipeline rank that the cost model predicts (simulatePipeline): a
/// rank's bubble is the part of the step it is not computing.
SmallVector<double> predictBubbles(ModuleOp module, PipelineAttr info) {
  SmallVector<SmallVector<PipelineSpan>> spans = simulatePipeline(module, info);
  double end = 0;
  for (auto &rank : spans)
    for (const PipelineSpan &s : rank)
      end = std::max(end, s.end);
  SmallVector<double> bubbles;
  for (auto &rank : spans) {
    double busy = 0;
    for (const PipelineSpan &s : rank)
      busy += s.end - s.start;
    bubbles.push_back(end > 0 ? 1.0 - busy / end : 0.0);
  }
  return bubbles;
}
} // namespace

LogicalResult mlir::ds::printCommReport(ModuleOp module, llvm::raw_ostream &os,
                                        const ClusterSpec *cluster) {
  if (PipelineAttr info = getPipeline(module); info && info.isScheduled())
    return printPipelineCommReport(module, info, os, cluster);
  auto functions = stepFunctions(module, 0);
  if (functions.empty())
    return module.emitError() << "--comm-report needs a training step (@micro_step and "
                                 "@optimizer_step): pass --config to a TorchScript input";
  const int64_t gas = gradientAccumulationSteps(module);
  auto mesh = module->getAttrOfType<MeshAttr>(kMeshAttrName);
  // (axes, collective) -> count and bytes per step.
  Rows rows = rowsOf(mesh, functions);
  int64_t ranks = mesh ? mesh.getNumRanks() : 1;
  os << "collectives per rank and step (" << gas << " micro-step" << (gas == 1 ? "" : "s")
     << " and the update; " << ranks << " rank" << (ranks == 1 ? "" : "s");
  if (mesh)
    os << ", mesh " << mesh.str();
  os << "; bytes are each call's tensor, as DeepSpeed's comms logger counts them; expert "
        "exchanges are all-to-all-v with run-time counts: the most a rank sends)\n";
  if (failed(describeCluster(module, mesh, cluster, os)))
    return failure();
  printRows(rows, os, "", mesh, cluster);
  return success();
}

LogicalResult mlir::ds::printPipelineCommReport(ModuleOp module, PipelineAttr info,
                                                llvm::raw_ostream &os,
                                                const ClusterSpec *cluster) {
  const int64_t p = info.getStages(), m = info.getMicroBatches(), v = info.getVirtualStages();
  PipelineSchedule schedule = info.getSchedule().getValue();
  auto mesh = module->getAttrOfType<MeshAttr>(kMeshAttrName);
  int64_t ranks = mesh ? mesh.getNumRanks() : p;
  os << "collectives and transfers per rank and step (each pipeline rank's " << m
     << "-micro-batch " << stringifyPipelineSchedule(schedule) << " program and its update; "
     << ranks << " ranks, mesh " << (mesh ? mesh.str() : "") << "; bytes are each call's "
     << "tensor)\n";
  if (failed(describeCluster(module, mesh, cluster, os)))
    return failure();
  for (int64_t r = 0; r < p; ++r) {
    auto functions = stepFunctions(module, r);
    if (functions.empty())
      return module.emitError() << "--comm-report: no @pipeline_step_" << r
                                << " and @optimizer_step_" << r;
    Rows rows = rowsOf(mesh, functions);
    os << "pipeline rank " << r << ":\n";
    printRows(rows, os, "  ", mesh, cluster);
  }
  // The bubble: the schedule's formula, and the cost model's simulation of the programs.
  double formula = static_cast<double>(p - 1) / static_cast<double>(v * m + p - 1);
  os << llvm::format("bubble: (p-1)/(%sm+p-1) = %.3f", v > 1 ? "v*" : "", formula);
  SmallVector<double> predicted = predictBubbles(module, info);
  if (!predicted.empty()) {
    os << "; cost model per rank:";
    for (double b : predicted)
      os << llvm::format(" %.3f", b);
  }
  os << "\n";
  return success();
}
