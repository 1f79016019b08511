//===- Plan.cpp - ds-opt --plan: the layout of a job on a cluster -----------===//
//
// Every layout of the job's ranks is compiled and judged by what the compiler knows of it:
// pp x dp x tp x sp (their product the ranks), the ZeRO stage, and the micro-batch (with the
// accumulation steps that keep the global batch, DeepSpeed's batch identity). Each candidate's
// DeepSpeed config is the user's with those keys set, parsed as a user's would be, and its step
// is built from the model imported at its micro-batch; so `--plan-out`'s config compiles to
// the same step. A candidate fits when its exact memory plan's fullest rank is within the
// device memory; a layout the passes refuse is listed with their reason.
//
// Predicted step time of the busiest rank (docs/design/plan.md):
//   compute: each op of the rank's programs at the slower of its FLOPs (matrix products at the
//     precision's peak, the rest at fp32's) and its bytes (at the memory bandwidth);
//   pipeline: the rank's compute stretched by 1F1B's fill and drain, (m + p - 1) / m (on a
//     node whose ranks share fewer cores, the ranks' mean compute instead: idle is shared);
//   communication: every collective by the cluster's model, not overlapped with compute.
//
#include "ds/Pipelines/Pipelines.h"

#include "ds/Config/DeepSpeedConfig.h"
#include "ds/IR/DSOps.h"
#include "dsrt/dsrt.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/Format.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <limits>
#include <map>
#include <optional>
#include <set>

using namespace mlir;
using namespace mlir::ds;
namespace json = llvm::json;

namespace {
/// The divisors of n, ascending.
SmallVector<int64_t> divisors(int64_t n) {
  SmallVector<int64_t> out;
  for (int64_t d = 1; d <= n; ++d)
    if (n % d == 0)
      out.push_back(d);
  return out;
}

/// Whether candidate `c` keeps the axes `f` fixes.
bool matches(const PlanFixed &f, const PlanCandidate &c) {
  return (!f.dp || f.dp == c.dp) && (!f.tp || f.tp == c.tp) && (!f.pp || f.pp == c.pp) &&
         (!f.sp || f.sp == c.sp) && (f.zero < 0 || f.zero == c.zeroStage) &&
         (!f.micro || f.micro == c.microBatch) &&
         (f.recompute < 0 || (f.recompute == 1) == c.recompute) &&
         (!f.virtualStages || f.virtualStages == c.virtualStages);
}

/// "dp=2 tp=1 pp=2 sp=1".
std::string layoutName(const PlanCandidate &c) {
  return "dp=" + std::to_string(c.dp) + " tp=" + std::to_string(c.tp) +
         " pp=" + std::to_string(c.pp) + " sp=" + std::to_string(c.sp);
}

/// "ZeRO 1, micro-batch 4" (", recomputing" with activation checkpointing, ", interleaved x2"
/// with two model chunks per pipeline rank).
std::string settingsName(const PlanCandidate &c) {
  return "ZeRO " + std::to_string(c.zeroStage) + ", micro-batch " +
         std::to_string(c.microBatch) + (c.recompute ? ", recomputing" : "") +
         (c.virtualStages > 1 ? ", interleaved x" + std::to_string(c.virtualStages) : "");
}

/// The model chunks per pipeline rank the user's config asks for (0: none asked; the search
/// tries 1F1B and interleaved x2).
int64_t askedVirtualStages(const json::Object &base) {
  const json::Object *p = base.getObject("pipeline");
  if (!p || !p->get("schedule"))
    return 0;
  return p->getInteger("virtual_stages").value_or(1);
}

/// Whether the user's config asks for activation checkpointing (every candidate keeps it).
bool asksRecompute(const json::Object &base) { return base.get("activation_checkpointing"); }

/// The user's config with the layout's keys set.
json::Object layoutConfig(const json::Object &base, const PlanCandidate &c) {
  json::Object cfg = base;
  if (c.recompute && !asksRecompute(base))
    cfg["activation_checkpointing"] = json::Object();
  cfg.erase("train_batch_size");
  cfg["train_micro_batch_size_per_gpu"] = c.microBatch;
  cfg["gradient_accumulation_steps"] = c.gas;
  auto block = [&](llvm::StringRef key) -> json::Object & {
    if (!cfg.getObject(key))
      cfg[key] = json::Object();
    return *cfg.getObject(key);
  };
  block("zero_optimization")["stage"] = c.zeroStage;
  block("tensor_parallel")["autotp_size"] = c.tp;
  block("pipeline")["stages"] = c.pp;
  if (c.pp > 1) {
    block("pipeline")["schedule"] = c.virtualStages > 1 ? "interleaved" : "1f1b";
    block("pipeline")["virtual_stages"] = c.virtualStages;
  }
  cfg["sequence_parallel_size"] = c.sp;
  return cfg;
}

/// The peak FLOP rate of `step`'s precision on `cl`.
double peakFlopsOf(ModuleOp step, const ClusterSpec &cl) {
  auto run = step->getAttrOfType<RunAttr>(kRunAttrName);
  Precision precision = run ? run.getPrecision() : Precision::fp32;
  return precision == Precision::bf16   ? cl.peakFlopsBf16
         : precision == Precision::fp16 ? cl.peakFlopsFp16
                                        : cl.peakFlopsFp32;
}

/// A pipeline's fill and drain: m micro-batches take m + p - 1 slots of 1F1B's m;
/// interleaved over v chunks, m v + p - 1 slots of a chunk's m v.
double pipelineStretch(const PlanCandidate &c) {
  double chunks = static_cast<double>(c.gas * c.virtualStages);
  return (chunks + static_cast<double>(c.pp - 1)) / chunks;
}

/// An op's seconds: its FLOPs (matrix products at `peak`, the rest at fp32's) or, where
/// slower, its bytes at the memory bandwidth.
double opSeconds(CostOpInterface op, double peak, const ClusterSpec &c) {
  double matmul = static_cast<double>(op.getMatmulFlops());
  double other = static_cast<double>(op.getFlops()) - matmul;
  double bytes = static_cast<double>(op.getMemoryBytes());
  return std::max(matmul / peak + other / c.peakFlopsFp32, bytes / c.memoryBandwidth);
}

/// A rank's compute seconds over `functions` (each run its number of times), and the FLOPs of
/// its matrix products not spent recomputing (the model's, for MFU).
std::pair<double, double> computeOf(ArrayRef<std::pair<func::FuncOp, int64_t>> functions,
                                    double peak, const ClusterSpec &c) {
  double seconds = 0, modelFlops = 0;
  for (auto [f, times] : functions)
    f.walk([&](CostOpInterface op) {
      seconds += times * opSeconds(op, peak, c);
      if (!op->hasAttr(kRecomputeAttrName))
        modelFlops += times * static_cast<double>(op.getMatmulFlops());
    });
  return {seconds, modelFlops};
}

/// One collective of a rank per step, placed on the cluster.
struct CommFigure {
  std::string kind, axes;
  int64_t calls = 0, bytes = 0;
  AxisPlacement where;
};
/// What a compiled step tells the prediction of one pipeline rank (of every rank off a
/// pipeline): its arena's peaks and their padding in the step and in the update (each a line
/// in the accumulation steps, their maximum not), its compute, and its collectives.
struct RankFigures {
  int64_t step = 0, stepPadding = 0, update = 0, updatePadding = 0;
  int64_t peak() const { return std::max(step, update); }
  int64_t padding() const { return step >= update ? stepPadding : updatePadding; }
  double computeSeconds = 0, modelFlops = 0;
  std::vector<CommFigure> comm;
};
struct StepFigures {
  double peakFlops = 0; ///< the step's precision's, on the cluster
  std::vector<RankFigures> ranks;
};

/// The figures of a built step from its memory plan, on `req`'s cluster.
StepFigures figuresOf(ModuleOp step, const MemoryPlan &plan, const PlanRequest &req,
                      int64_t pp) {
  const ClusterSpec &cl = *req.cluster;
  double peak = peakFlopsOf(step, cl);
  auto mesh = step->getAttrOfType<MeshAttr>(kMeshAttrName);
  StepFigures out{peak, {}};
  for (int64_t r = 0; r < pp; ++r) {
    RankFigures &f = out.ranks.emplace_back();
    if (plan.ranks.empty()) { // every rank alike
      f.step = plan.microPeak, f.stepPadding = plan.microPaddingAtPeak;
      f.update = plan.optimizerPeak, f.updatePadding = plan.optimizerPaddingAtPeak;
    } else {
      const RankPlan &p = plan.ranks[r];
      f.step = p.step, f.stepPadding = p.stepPadding;
      f.update = p.optimizer, f.updatePadding = p.optimizerPadding;
    }
    std::tie(f.computeSeconds, f.modelFlops) = computeOf(stepFunctions(step, r), peak, cl);
    for (const CommRow &row : commRows(step, r))
      f.comm.push_back({row.kind, row.axes, row.calls, row.bytes,
                        placementOf(mesh, row.axes, cl)});
  }
  return out;
}

/// The figures at `m` accumulation steps of a pipeline whose figures at m1, m1 + d and
/// m1 + 2d are `at`: each count continued along the line through the first two, or nothing
/// where the third is off that line (then the schedule is not yet periodic and the layout
/// compiles at m).
std::optional<StepFigures> extrapolate(ArrayRef<StepFigures> at, int64_t m1, int64_t d,
                                       int64_t m) {
  bool straight = at[0].ranks.size() == at[1].ranks.size() &&
                  at[1].ranks.size() == at[2].ranks.size();
  auto line = [&](auto x0, auto x1, auto x2) {
    auto slope = x1 - x0;
    double off = static_cast<double>(x2 - x1 - slope);
    straight &= std::abs(off) <= 1e-9 * std::max(1.0, std::abs(static_cast<double>(x2)));
    return x0 + slope * static_cast<decltype(slope)>((m - m1) / d);
  };
  StepFigures out = at[0];
  for (size_t r = 0; straight && r < out.ranks.size(); ++r) {
    const RankFigures &a = at[0].ranks[r], &b = at[1].ranks[r], &c = at[2].ranks[r];
    RankFigures &f = out.ranks[r];
    f.step = line(a.step, b.step, c.step);
    f.stepPadding = line(a.stepPadding, b.stepPadding, c.stepPadding);
    f.update = line(a.update, b.update, c.update);
    f.updatePadding = line(a.updatePadding, b.updatePadding, c.updatePadding);
    f.computeSeconds = line(a.computeSeconds, b.computeSeconds, c.computeSeconds);
    f.modelFlops = line(a.modelFlops, b.modelFlops, c.modelFlops);
    straight &= a.comm.size() == b.comm.size() && b.comm.size() == c.comm.size();
    for (size_t i = 0; straight && i < f.comm.size(); ++i) {
      straight &= a.comm[i].kind == b.comm[i].kind && b.comm[i].kind == c.comm[i].kind &&
                  a.comm[i].axes == b.comm[i].axes && b.comm[i].axes == c.comm[i].axes;
      f.comm[i].calls = line(a.comm[i].calls, b.comm[i].calls, c.comm[i].calls);
      f.comm[i].bytes = line(a.comm[i].bytes, b.comm[i].bytes, c.comm[i].bytes);
    }
  }
  if (!straight)
    return std::nullopt;
  return out;
}

/// Fills in candidate `c`'s prediction from its step's figures.
void predict(const StepFigures &figures, const PlanRequest &req, PlanCandidate &c) {
  const ClusterSpec &cl = *req.cluster;
  // The fullest rank (on a pipeline; every rank alike off one) and its padding.
  c.peakBytes = 0;
  for (const RankFigures &f : figures.ranks)
    if (f.peak() >= c.peakBytes)
      c.peakBytes = f.peak(), c.paddingBytes = f.padding();
  double modelFlops = 0;
  // Each pipeline rank's compute (unstretched) and communication.
  SmallVector<double> compute, comm;
  SmallVector<std::map<std::string, int64_t>> bytes;
  for (const RankFigures &f : figures.ranks) {
    modelFlops += f.modelFlops * static_cast<double>(req.devices / c.pp);
    compute.push_back(f.computeSeconds);
    comm.push_back(0);
    bytes.emplace_back();
    for (const CommFigure &row : f.comm) {
      comm.back() += std::max(0.0, collectiveSeconds(row.kind, row.calls,
                                                     static_cast<double>(row.bytes), row.where,
                                                     cl));
      if (row.kind != "recv")
        bytes.back()[row.axes] += row.bytes;
    }
  }
  // The busiest rank: its compute, stretched on a pipeline by its fill and drain, and its
  // communication, not overlapped.
  double stretch = pipelineStretch(c);
  size_t busiest = 0;
  for (size_t r = 0; r < compute.size(); ++r)
    if (compute[r] * stretch + comm[r] > compute[busiest] * stretch + comm[busiest])
      busiest = r;
  c.computeSeconds = compute[busiest] * stretch;
  if (cl.sharesCores()) {
    // Ranks that share cores (rates probed with every rank busy): a rank's idle time (the
    // fill and drain, a lighter stage) is another's compute, so the node's ranks take their
    // mean; a rank alone runs at most devices/cores times faster than with all busy.
    double mean = 0, most = 0;
    for (double x : compute)
      mean += x / static_cast<double>(compute.size()), most = std::max(most, x);
    c.computeSeconds = std::max(mean, most * static_cast<double>(cl.coresPerNode) /
                                          static_cast<double>(cl.devicesPerNode));
  }
  c.commSeconds = comm[busiest];
  c.stepSeconds = c.computeSeconds + c.commSeconds;
  c.bytesByAxis = std::move(bytes[busiest]);
  c.mfu = c.stepSeconds > 0
              ? modelFlops /
                    (c.stepSeconds * static_cast<double>(req.devices) * figures.peakFlops)
              : 0;
}

/// What the bounds start from: the model's step on one rank (micro-batch 1, nothing split).
struct ModelFigures {
  /// Seconds of its ops (opSeconds; not those recomputed) a sample, forward and backward, and
  /// in the update; `microStep`: the micro-step's whole.
  double perSample = 0, perUpdate = 0, microStep = 0;
  /// Its trainable parameters', gradients' and optimizer states' bytes, whole.
  int64_t paramBytes = 0, gradBytes = 0, optimizerBytes = 0;
  /// No offload in the config: the states are in the device's peak.
  bool statesOnDevice = false;
  /// What its step holds beyond the persistent slots at its peak (activations, inputs,
  /// temporaries): a micro-batch of 1 on one rank.
  int64_t activationBytes = 0;
  /// By (tp, sp): one rank's seconds in its update, and a sample's seconds and collectives'
  /// bytes over tp and sp by axes and kind (the step at dp = pp = 1 with that tp and sp):
  /// `slope` for every micro-batch (the slope between micro-batches 2 and 4), `atOne` for a
  /// micro-batch of 1 (its micro-step), each where the model imports there.
  struct Rate {
    double seconds = 0;
    std::map<std::pair<std::string, std::string>, double> bytes;
  };
  struct Split {
    double perUpdate = 0;
    std::optional<Rate> slope, atOne;
  };
  std::map<std::pair<int64_t, int64_t>, Split> bySplit;
};

ModelFigures modelFiguresOf(ModuleOp step, const json::Object &base, const ClusterSpec &cl) {
  ModelFigures m;
  double peak = peakFlopsOf(step, cl);
  // stepFunctions: the micro-step, then the update. A sample costs at least its FLOPs (the
  // micro-step's at micro-batch 1); searchLayouts() may raise it from two micro-batches.
  for (auto [i, f] : llvm::enumerate(stepFunctions(step)))
    f.first.walk([&](CostOpInterface op) {
      if (op->hasAttr(kRecomputeAttrName))
        return;
      double matmul = static_cast<double>(op.getMatmulFlops());
      (i == 0 ? m.microStep : m.perUpdate) += opSeconds(op, peak, cl);
      if (i == 0)
        m.perSample +=
            matmul / peak + (static_cast<double>(op.getFlops()) - matmul) / cl.peakFlopsFp32;
    });
  auto bytes = [](RankedTensorType t) {
    return (t.getNumElements() * t.getElementTypeBitWidth() + 7) / 8;
  };
  for (auto param : step.getOps<ParameterOp>())
    if (param.getTrainable())
      m.paramBytes += bytes(param.getTensorType());
  for (auto state : step.getOps<StateOp>()) {
    SlotRole role = state.getRole();
    if (role == SlotRole::grad)
      m.gradBytes += bytes(state.getTensorType());
    else if (role == SlotRole::exp_avg || role == SlotRole::exp_avg_sq ||
             role == SlotRole::momentum_buffer || role == SlotRole::master)
      m.optimizerBytes += bytes(state.getTensorType());
  }
  const json::Object *zero = base.getObject("zero_optimization");
  m.statesOnDevice = !zero || (!zero->get("offload_optimizer") && !zero->get("offload_param"));
  return m;
}

/// The seconds of one call of collective `kind` moving `bytes` over a group of `ranks` placed
/// as cheaply as the cluster allows (any number of them a node up to its devices).
double cheapestCall(llvm::StringRef kind, double bytes, int64_t ranks, const ClusterSpec &cl) {
  double best = std::numeric_limits<double>::infinity();
  for (int64_t k : divisors(ranks))
    if (k <= cl.devicesPerNode)
      best = std::min(best, collectiveSeconds(kind, 1, bytes, AxisPlacement{k, ranks / k}, cl));
  return std::max(0.0, best);
}

/// Candidate `c`'s lower bounds (PlanCandidate::boundSeconds, boundBytes) from `m`.
/// Step: every op costs at least its FLOPs at their rates (computeOf), the ranks' FLOPs sum
/// to at least the model's (the global batch's samples and one update; a split only ever
/// adds: replicated parts, recomputation, accumulation), and the busiest rank does at least
/// the mean, stretched as predict() stretches it. With the step probed at the layout's tp and
/// sp, the mean is at least that rank's work over the ranks that split it further (pp, dp's
/// samples). Plus, off shared cores, the mean rank's communication (the busiest rank's
/// compute and communication together are at least their means): the dp x sp replicas
/// reduce their gradients, each rank at least its mean share of them, in two ring passes (an
/// all-reduce; at ZeRO 1-3 a reduce-scatter and the all-gather of the updated or sharded
/// parameters) at the smaller of the gradients' and parameters' bytes; and the probed rank's
/// collectives over tp and sp a sample, over its samples and the pp ranks that split them;
/// each priced as collectiveSeconds prices one call on the group's cheapest placement.
/// States: the fullest of the tp x pp ranks holds at least the mean of what they hold, and
/// ZeRO splits at most over the dp x sp replicas what its stage partitions.
void bound(const ModelFigures &m, const PlanRequest &req, PlanCandidate &c) {
  const ClusterSpec &cl = *req.cluster;
  const double batch = static_cast<double>(req.globalBatch);
  const double ranks = static_cast<double>(req.devices);
  double mean = (m.perSample * batch + m.perUpdate) / ranks;
  auto it = m.bySplit.find({c.tp, c.sp});
  const ModelFigures::Rate *probed = nullptr;
  if (it != m.bySplit.end())
    probed = c.microBatch == 1 && it->second.atOne ? &*it->second.atOne
             : it->second.slope                    ? &*it->second.slope
                                                   : nullptr;
  if (probed)
    mean = std::max(mean, (probed->seconds * batch + it->second.perUpdate) *
                              static_cast<double>(c.tp * c.sp) / ranks);
  c.boundSeconds = cl.sharesCores() ? mean : mean * pipelineStretch(c);
  if (probed && !cl.sharesCores())
    for (auto &[row, perSample] : probed->bytes)
      c.boundSeconds += cheapestCall(row.second,
                                     perSample * batch / static_cast<double>(c.dp * c.pp),
                                     row.first == "tp" ? c.tp : row.first == "sp" ? c.sp
                                                                                  : c.tp * c.sp,
                                     cl);
  if (!m.statesOnDevice)
    return;
  int64_t split = c.tp * c.pp, replicas = c.dp * c.sp;
  if (!cl.sharesCores() && replicas > 1)
    c.boundSeconds +=
        2 * cheapestCall("reduce_scatter",
                         static_cast<double>(std::min(m.gradBytes, m.paramBytes) / split),
                         replicas, cl);
  c.boundBytes = m.paramBytes / split / (c.zeroStage == 3 ? replicas : 1) +
                 m.gradBytes / split / (c.zeroStage >= 2 ? replicas : 1) +
                 m.optimizerBytes / split / (c.zeroStage >= 1 ? replicas : 1);
}

/// Why a candidate was not compiled.
constexpr const char *kStatesExceed =
    "its model states alone exceed the device memory (a lower bound)";
constexpr const char *kActivationsExceed =
    "its model states and one sample's activations exceed the device memory without "
    "recomputation (a lower bound)";
std::string slowerThan(int64_t keep) {
  return "its step's lower bound is slower than the " + std::to_string(keep) +
         " fastest fitting layouts";
}
} // namespace

FailureOr<std::vector<PlanCandidate>>
mlir::ds::searchLayouts(const json::Object &baseConfig, const PlanRequest &req,
                        llvm::function_ref<OwningOpRef<ModuleOp>(int64_t)> importAt,
                        MLIRContext *context) {
  std::vector<PlanCandidate> out;
  // The compiler's refusals become the candidates' reasons, not errors of ds-opt.
  std::string first;
  ScopedDiagnosticHandler capture(context, [&](Diagnostic &d) {
    if (d.getSeverity() == DiagnosticSeverity::Error && first.empty())
      first = d.str();
    return success();
  });
  std::map<int64_t, OwningOpRef<ModuleOp>> imported; // by micro-batch
  std::map<int64_t, std::string> importError;
  // The model at `micro` (imported once), or null with why it does not import in `why`.
  auto modelAt = [&](int64_t micro, std::string &why) -> ModuleOp {
    if (!imported.count(micro)) {
      first.clear();
      imported[micro] = importAt(micro);
      importError[micro] = first.empty() ? "the model does not import" : first;
    }
    if (!imported[micro])
      why = "micro-batch " + std::to_string(micro) + ": " + importError[micro];
    return imported[micro].get();
  };
  // The figures of candidate `c` compiled at `gas` accumulation steps, or why it does not
  // compile (in `why`).
  auto compileAt = [&](const PlanCandidate &c, int64_t gas,
                       std::string &why) -> std::optional<StepFigures> {
    PlanCandidate at = c;
    at.gas = gas;
    std::string text;
    llvm::raw_string_ostream(text) << json::Value(layoutConfig(baseConfig, at));
    auto cfg = ::ds::parseDeepSpeedConfig(text, c.dp);
    if (!cfg) {
      why = llvm::toString(cfg.takeError());
      return std::nullopt;
    }
    ModuleOp model = modelAt(c.microBatch, why);
    if (!model)
      return std::nullopt;
    OwningOpRef<ModuleOp> step = model.clone();
    first.clear();
    FailureOr<PlannedStep> planned = failure();
    if (succeeded(buildTrainingStep(*step, *cfg)))
      planned = planStep(*step);
    if (failed(planned)) {
      why = first.empty() ? "the step does not compile" : first;
      return std::nullopt;
    }
    return figuresOf(*step, planned->plan, req, c.pp);
  };
  // Compiles candidate `c` and fills in its prediction, or why it does not fit. A pipeline
  // rank's program holds every micro-batch, so its compile grows with the accumulation steps
  // m. The schedule's period d is one micro-batch (1F1B) or p of them (interleaved, where m is
  // a multiple of p): past 3 (m1 + d) micro-batches, the figures at m1 = p + d, m1 + d and
  // m1 + 2d (the warm-up filled and a steady period run on every rank; each further period
  // the same) are continued to m along the line through the first two, where the third lies
  // on it; else, or with --plan-exact, the layout compiles at m.
  auto judge = [&](PlanCandidate &c) {
    c.config.clear();
    llvm::raw_string_ostream(c.config) << json::Value(layoutConfig(baseConfig, c));
    std::optional<StepFigures> figures;
    c.continued = false;
    int64_t d = c.virtualStages > 1 ? c.pp : 1; // layoutConfig: interleaved when v > 1
    int64_t m1 = c.pp + d;
    if (c.pp > 1 && !req.exact && c.gas > 3 * (m1 + d) && (c.gas - m1) % d == 0) {
      SmallVector<StepFigures, 3> at;
      std::string why;
      for (int64_t m = m1; m <= m1 + 2 * d; m += d) {
        std::optional<StepFigures> f = compileAt(c, m, why);
        if (!f)
          break;
        at.push_back(std::move(*f));
      }
      if (at.size() == 3)
        figures = extrapolate(at, m1, d, c.gas);
      c.continued = figures.has_value();
    }
    if (!figures)
      figures = compileAt(c, c.gas, c.why);
    if (!figures)
      return;
    predict(*figures, req, c);
    if (c.peakBytes + c.paddingBytes > req.deviceMemory)
      c.why = "needs " + std::to_string(c.peakBytes + c.paddingBytes) + " bytes of " +
              std::to_string(req.deviceMemory);
  };
  // A pipeline's schedules: the user's, else 1F1B and interleaved over 2 chunks per rank
  // (where the micro-batches are a multiple of the stages, as interleaving needs).
  auto virtualChoices = [&](int64_t pp, int64_t gas) -> SmallVector<int64_t, 2> {
    if (pp == 1)
      return {1};
    if (int64_t asked = askedVirtualStages(baseConfig))
      return {asked};
    if (gas % pp != 0)
      return {1};
    return {1, 2};
  };
  for (int64_t pp : divisors(req.devices))
    for (int64_t tp : divisors(req.devices / pp))
      for (int64_t sp : divisors(req.devices / pp / tp)) {
        int64_t dp = req.devices / pp / tp / sp;
        if (req.globalBatch % dp != 0)
          continue;
        for (int64_t micro : divisors(req.globalBatch / dp))
          for (int64_t zero = 0; zero <= 3; ++zero) {
            // With one data-parallel rank a ZeRO stage partitions nothing: stage 0 stands
            // for them all (unless --plan-fix names one).
            if (dp == 1 && zero > 0 && req.fixed.zero < 0)
              continue;
            for (int64_t v : virtualChoices(pp, req.globalBatch / dp / micro)) {
              PlanCandidate c{dp, tp, pp, sp, zero, micro, req.globalBatch / dp / micro};
              c.virtualStages = v;
              // Recomputation costs a forward: tried where the layout does not fit without it
              // (or where the user or --plan-fix asks for it).
              c.recompute = asksRecompute(baseConfig) || req.fixed.recompute == 1;
              if (matches(req.fixed, c))
                out.push_back(std::move(c));
            }
          }
      }
  // The bounds, from the model's step on one rank (micro-batch 1, nothing split; none where
  // it does not compile: then every layout compiles). With keep 0 they are only reported.
  std::optional<ModelFigures> model;
  if (!out.empty()) {
    // The model's step on one rank at `micro` (split by `tp` and `sp` alone), or null.
    auto probe = [&](int64_t micro, int64_t tp, int64_t sp) -> OwningOpRef<ModuleOp> {
      PlanCandidate one{1, tp, 1, sp, 0, micro, 1};
      one.recompute = asksRecompute(baseConfig);
      std::string text, why;
      llvm::raw_string_ostream(text) << json::Value(layoutConfig(baseConfig, one));
      auto cfg = ::ds::parseDeepSpeedConfig(text, 1);
      if (!cfg) {
        llvm::consumeError(cfg.takeError());
        return nullptr;
      }
      ModuleOp m = modelAt(micro, why);
      if (!m)
        return nullptr;
      OwningOpRef<ModuleOp> step = m.clone();
      if (failed(buildTrainingStep(*step, *cfg)))
        return nullptr;
      return step;
    };
    if (OwningOpRef<ModuleOp> step = probe(1, 1, 1)) {
      model = modelFiguresOf(*step, baseConfig, *req.cluster);
      if (FailureOr<PlannedStep> planned = planStep(*step); succeeded(planned))
        model->activationBytes =
            std::max<int64_t>(0, planned->plan.microPeak - planned->plan.persistentBytes);
      // Each op's seconds are max(a m, b m + c) in the micro-batch m (c >= 0: what it reads
      // whatever m, as weights), convex with f(4) <= 2 f(2): for every m >= 1 at least m
      // times the slope between micro-batches 2 and 4 (at 1 the same ops may fold away, so
      // 1 is not a point of the line), and a split of the op costs at least the whole.
      // And so at each tp and sp the layouts take: one rank's, and its collectives' bytes
      // over tp and sp the same way (each a line in m; what the update sends cancels).
      std::set<std::pair<int64_t, int64_t>> splits;
      for (const PlanCandidate &c : out)
        splits.insert({c.tp, c.sp});
      // At micro-batch 1 (where a layout at 1 runs the very same ops) from the micro-step
      // alone.
      auto addRows = [](ModelFigures::Rate &rate, ModuleOp at, double times) {
        auto functions = stepFunctions(at);
        for (const CommRow &row :
             commRows(at, ArrayRef<std::pair<func::FuncOp, int64_t>>(functions).take_front()))
          if (row.axes == "tp" || row.axes == "sp" || row.axes == "tp+sp")
            rate.bytes[{row.axes, row.kind}] += times * static_cast<double>(row.bytes);
      };
      for (auto [tp, sp] : splits) {
        ModelFigures::Split split;
        if (OwningOpRef<ModuleOp> one = probe(1, tp, sp)) {
          ModelFigures f = modelFiguresOf(*one, baseConfig, *req.cluster);
          split.perUpdate = f.perUpdate;
          split.atOne = ModelFigures::Rate{f.microStep, {}};
          addRows(*split.atOne, *one, 1);
        }
        OwningOpRef<ModuleOp> two = probe(2, tp, sp), four = probe(4, tp, sp);
        if (two && four) {
          ModelFigures at2 = modelFiguresOf(*two, baseConfig, *req.cluster);
          split.perUpdate = at2.perUpdate;
          split.slope = ModelFigures::Rate{
              (modelFiguresOf(*four, baseConfig, *req.cluster).microStep - at2.microStep) / 2,
              {}};
          addRows(*split.slope, *four, 0.5);
          addRows(*split.slope, *two, -0.5);
          for (auto &[row, bytes] : split.slope->bytes)
            bytes = std::max(0.0, bytes);
        }
        if (split.atOne || split.slope)
          model->bySplit[{tp, sp}] = std::move(split);
      }
      if (auto one = model->bySplit.find({1, 1}); one != model->bySplit.end() && one->second.slope)
        model->perSample = std::max(model->perSample, one->second.slope->seconds);
    }
    if (model && model->perSample > 0)
      for (PlanCandidate &c : out) {
        bound(*model, req, c);
        if (model->statesOnDevice)
          c.boundActivationBytes = model->activationBytes / (c.tp * c.sp * c.pp);
      }
  }
  // Compiled in the order of their step's bound; once `keep` fitting ones are faster than the
  // next bound, the rest cannot enter them.
  std::vector<size_t> order(out.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return out[a].boundSeconds < out[b].boundSeconds;
  });
  std::multiset<double> fastest; // the fitting ones' steps, at most `keep`
  int64_t judged = 0, fitting = 0;
  for (size_t i : order) {
    PlanCandidate &c = out[i];
    if (req.progress)
      req.progress(judged++, static_cast<int64_t>(out.size()), fitting,
                   layoutName(c) + ", " + settingsName(c));
    // Without recomputation a rank also holds at least its share of one sample's activations
    // (split by tp, sp and pp at best; more samples only add): past the memory, the layout is
    // compiled recomputing (where allowed), as the search would after its compile failed.
    if (req.keep > 0 && !c.recompute &&
        c.boundBytes + c.boundActivationBytes > req.deviceMemory) {
      if (req.fixed.recompute == 0) {
        c.pruned = true;
        c.why = kActivationsExceed;
        llvm::raw_string_ostream(c.config) << json::Value(layoutConfig(baseConfig, c));
        continue;
      }
      c.recompute = true;
    }
    bool over = req.keep > 0 && c.boundBytes > req.deviceMemory;
    bool slower = model && req.keep > 0 && static_cast<int64_t>(fastest.size()) >= req.keep &&
                  c.boundSeconds > *fastest.rbegin();
    if (over || slower) {
      c.pruned = true;
      c.why = over ? kStatesExceed : slowerThan(req.keep);
      llvm::raw_string_ostream(c.config) << json::Value(layoutConfig(baseConfig, c));
      continue;
    }
    auto start = std::chrono::steady_clock::now();
    judge(c);
    if (!c.fits() && c.peakBytes && !c.recompute && req.fixed.recompute != 0) {
      PlanCandidate again = c;
      again.recompute = true;
      again.why.clear();
      judge(again);
      if (again.fits() || (again.peakBytes && again.peakBytes < c.peakBytes))
        c = std::move(again);
    }
    c.compileSeconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    fitting += c.fits();
    if (c.fits() && req.keep > 0) {
      fastest.insert(c.stepSeconds);
      if (static_cast<int64_t>(fastest.size()) > req.keep)
        fastest.erase(std::prev(fastest.end()));
    }
  }
  // Fitting layouts first, fastest first; then the rest by peak, those not compiled last.
  std::stable_sort(out.begin(), out.end(), [](const PlanCandidate &a, const PlanCandidate &b) {
    if (a.fits() != b.fits())
      return a.fits();
    if (a.pruned != b.pruned)
      return b.pruned;
    return a.fits() ? a.stepSeconds < b.stepSeconds : a.peakBytes < b.peakBytes;
  });
  return out;
}

llvm::Expected<PlanFixed> mlir::ds::parsePlanFixed(llvm::StringRef text, int64_t ranks) {
  auto error = [](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "--plan-fix: " + msg);
  };
  PlanFixed f;
  SmallVector<llvm::StringRef> items;
  text.split(items, ',', -1, false);
  for (llvm::StringRef item : items) {
    auto [key, value] = item.trim().split('=');
    int64_t n = 0;
    if (value.getAsInteger(10, n) || n < 0)
      return error("'" + item + "' needs a non-negative integer (AXIS=N, e.g. tp=2,zero=3)");
    int64_t *slot = key == "dp"     ? &f.dp
                    : key == "tp"   ? &f.tp
                    : key == "pp"   ? &f.pp
                    : key == "sp"   ? &f.sp
                    : key == "zero" ? &f.zero
                    : key == "micro" ? &f.micro
                    : key == "recompute" ? &f.recompute
                    : key == "virtual" ? &f.virtualStages
                                     : nullptr;
    if (!slot)
      return error("unknown axis '" + key +
                   "' (dp, tp, pp, sp, zero, micro, recompute, virtual)");
    if ((key == "zero" && n > 3) || (key == "recompute" && n > 1) ||
        (key != "zero" && key != "recompute" && n < 1))
      return error("'" + item + "' is out of range (zero is 0-3, recompute 0 or 1; the others "
                   "are at least 1)");
    *slot = n;
  }
  int64_t product = 1;
  for (int64_t a : {f.dp, f.tp, f.pp, f.sp})
    product *= a ? a : 1;
  if (ranks % product != 0)
    return error("dp x tp x pp x sp = " + llvm::Twine(product) + " does not divide the " +
                 llvm::Twine(ranks) + " ranks");
  if (f.tp && f.pp && f.sp) {
    if (f.dp && product != ranks)
      return error("dp x tp x pp x sp = " + llvm::Twine(product) + " but the job has " +
                   llvm::Twine(ranks) + " ranks (--world-size)");
    f.dp = ranks / (f.tp * f.pp * f.sp);
  }
  return f;
}

FailureOr<OwningOpRef<ModuleOp>>
mlir::ds::compileLayout(const PlanCandidate &c,
                        llvm::function_ref<OwningOpRef<ModuleOp>(int64_t)> importAt,
                        MLIRContext *context) {
  auto cfg = ::ds::parseDeepSpeedConfig(c.config, c.dp);
  if (!cfg) {
    emitError(UnknownLoc::get(context)) << llvm::toString(cfg.takeError());
    return failure();
  }
  OwningOpRef<ModuleOp> step = importAt(c.microBatch);
  if (!step || failed(buildTrainingStep(*step, *cfg)))
    return failure();
  return step;
}

FailureOr<bool> mlir::ds::printFitReport(const json::Object &baseConfig, const PlanRequest &req,
                                         llvm::function_ref<OwningOpRef<ModuleOp>(int64_t)> importAt,
                                         MLIRContext *context, PlanCandidate &given,
                                         llvm::raw_ostream &os) {
  const PlanFixed &f = req.fixed;
  given = PlanCandidate{f.dp, f.tp, f.pp, f.sp, f.zero, f.micro, 0};
  given.recompute = f.recompute == 1 || asksRecompute(baseConfig);
  given.virtualStages = given.pp == 1 ? 1
                        : f.virtualStages ? f.virtualStages
                                          : std::max<int64_t>(askedVirtualStages(baseConfig), 1);
  int64_t samples = given.dp * given.microBatch;
  if (req.globalBatch % samples != 0) {
    emitError(UnknownLoc::get(context))
        << "--plan-fix: micro-batch " << f.micro << " x dp " << f.dp << " = " << samples
        << " does not divide the global batch " << req.globalBatch
        << " (DeepSpeed's batch identity: global = micro x accumulation x dp)";
    return failure();
  }
  given.gas = req.globalBatch / samples;
  json::Object cfgJson = layoutConfig(baseConfig, given);
  llvm::raw_string_ostream(given.config) << json::Value(json::Object(cfgJson));
  FailureOr<OwningOpRef<ModuleOp>> step = compileLayout(given, importAt, context);
  if (failed(step))
    return failure();
  FailureOr<PlannedStep> planned = planStep(**step);
  if (failed(planned))
    return failure();
  predict(figuresOf(**step, planned->plan, req, given.pp), req, given);
  os << "will it fit: " << layoutName(given) << ", " << settingsName(given) << " x "
     << given.gas << " accumulation steps (global batch "
     << req.globalBatch << ") on " << req.cluster->name << ", " << req.deviceMemory
     << " bytes a device\n";
  if (failed(printMemoryReport(**step, os)))
    return failure();
  const MemoryPlan &plan = planned->plan;
  // Per rank: the exact peak (the runtime's count) plus the allocator's padding of what is
  // live at it. Every rank of a stage (or of a mesh without pipeline) runs the same plan.
  SmallVector<std::pair<int64_t, int64_t>> stages; // (peak, padding)
  if (plan.ranks.empty())
    stages.push_back({plan.peakBytes(), plan.paddingAtPeak()});
  for (const RankPlan &r : plan.ranks)
    stages.push_back({r.peak(), r.paddingAtPeak()});
  int64_t perStage = req.devices / static_cast<int64_t>(stages.size());
  bool fits = true;
  int64_t worst = 0;
  os << "fit per rank (the plan's peak plus the allocator's padding to "
     << DSRT_ALLOCATION_GRANULE << " bytes a storage, against " << req.deviceMemory << "):\n";
  for (auto [i, s] : llvm::enumerate(stages)) {
    int64_t need = s.first + s.second;
    std::string who = stages.size() == 1
                          ? "every rank (" + std::to_string(req.devices) + ")"
                          : "pipeline stage " + std::to_string(i) + " (" +
                                std::to_string(perStage) + " rank" + (perStage == 1 ? "" : "s") +
                                ")";
    os << "  " << who << ": peak " << s.first << " + padding " << s.second << " = " << need
       << ": ";
    if (need <= req.deviceMemory) {
      os << "fits, " << req.deviceMemory - need << " bytes spare\n";
    } else {
      os << "DOES NOT FIT, short by " << need - req.deviceMemory << " bytes\n";
      fits = false;
      worst = std::max(worst, need - req.deviceMemory);
    }
  }
  os << "(not counted: the runtime's own memory, its code and the channel's buffers: "
        "bench/plan_gpt.py measures the process's RSS beside the plan)\n";
  os << llvm::format("predicted step %.4g s (compute %.4g, communication %.4g), MFU %.3f\n",
                     given.stepSeconds, given.computeSeconds, given.commSeconds, given.mfu);
  if (fits) // the answer; a search would only cost time (every layout compiles)
    return true;
  given.why = "short by " + std::to_string(worst) + " bytes";
  // What would fit: every axis free, the nearest layouts first (fewest axes changed), then
  // the fastest.
  PlanRequest free = req;
  free.fixed = PlanFixed();
  free.keep = 0; // the nearest layouts, not only the fastest
  auto ranked = searchLayouts(baseConfig, free, importAt, context);
  if (failed(ranked))
    return failure();
  auto changes = [&](const PlanCandidate &c) {
    std::string out;
    auto note = [&](const char *axis, int64_t from, int64_t to) {
      if (from != to)
        out += std::string(out.empty() ? "" : ", ") + axis + " " + std::to_string(from) +
               "->" + std::to_string(to);
    };
    note("dp", given.dp, c.dp);
    note("tp", given.tp, c.tp);
    note("pp", given.pp, c.pp);
    note("sp", given.sp, c.sp);
    note("ZeRO", given.zeroStage, c.zeroStage);
    note("micro-batch", given.microBatch, c.microBatch);
    note("recompute", given.recompute, c.recompute);
    note("virtual stages", given.virtualStages, c.virtualStages);
    return out;
  };
  SmallVector<const PlanCandidate *> near;
  for (const PlanCandidate &c : *ranked)
    if (c.fits() && !changes(c).empty())
      near.push_back(&c);
  // dp follows from the ranks and the other axes: its change is not counted.
  auto distance = [&](const PlanCandidate *c) {
    return (c->tp != given.tp) + (c->pp != given.pp) + (c->sp != given.sp) +
           (c->zeroStage != given.zeroStage) + (c->microBatch != given.microBatch) +
           (c->recompute != given.recompute) + (c->virtualStages != given.virtualStages);
  };
  std::stable_sort(near.begin(), near.end(), [&](auto *a, auto *b) {
    return distance(a) < distance(b);
  });
  os << "what would fit (the nearest layouts that do, fewest changes first, then the fastest; "
     << llvm::count_if(*ranked, [](const PlanCandidate &c) { return c.fits(); }) << " of "
     << ranked->size() << " fit):\n";
  if (near.empty())
    os << "  none: give more devices, a smaller --global-batch, or offload in the config\n";
  for (size_t i = 0; i < near.size() && i < 5; ++i)
    os << llvm::format("  %-26s %s: peak %lld, step %.4g s  (", layoutName(*near[i]).c_str(),
                       settingsName(*near[i]).c_str(), (long long)near[i]->peakBytes,
                       near[i]->stepSeconds)
       << changes(*near[i]) << ")\n";
  return fits;
}

std::string mlir::ds::planToJSON(ArrayRef<PlanCandidate> ranked, const PlanRequest &req) {
  std::string s;
  llvm::raw_string_ostream os(s);
  json::OStream j(os, 1);
  j.object([&] {
    j.attribute("cluster", req.cluster->name);
    j.attribute("ranks", req.devices);
    j.attribute("global_batch", req.globalBatch);
    j.attribute("device_memory_bytes", req.deviceMemory);
    j.attributeArray("candidates", [&] {
      for (size_t i = 0; i < ranked.size(); ++i) {
        const PlanCandidate &c = ranked[i];
        j.object([&] {
          if (c.fits())
            j.attribute("rank", static_cast<int64_t>(i + 1));
          j.attribute("dp", c.dp);
          j.attribute("tp", c.tp);
          j.attribute("pp", c.pp);
          j.attribute("sp", c.sp);
          j.attribute("zero_stage", c.zeroStage);
          j.attribute("micro_batch", c.microBatch);
          j.attribute("gradient_accumulation_steps", c.gas);
          j.attribute("recompute", c.recompute);
          j.attribute("virtual_stages", c.virtualStages);
          j.attribute("continued", c.continued);
          j.attribute("pruned", c.pruned);
          if (!c.pruned)
            j.attribute("compile_s", c.compileSeconds);
          if (c.boundSeconds > 0) {
            j.attribute("bound_step_s", c.boundSeconds);
            j.attribute("bound_peak_bytes", c.boundBytes);
            j.attribute("bound_activation_bytes", c.boundActivationBytes);
          }
          j.attribute("fits", c.fits());
          if (!c.fits())
            j.attribute("why", c.why);
          if (c.peakBytes) {
            j.attribute("peak_bytes", c.peakBytes);
            j.attribute("padding_bytes", c.paddingBytes);
            j.attribute("step_s", c.stepSeconds);
            j.attribute("compute_s", c.computeSeconds);
            j.attribute("comm_s", c.commSeconds);
            j.attribute("mfu", c.mfu);
            j.attributeObject("bytes_by_axis", [&] {
              for (auto &[axis, bytes] : c.bytesByAxis)
                j.attribute(axis, bytes);
            });
          }
          if (auto config = json::parse(c.config))
            j.attribute("config", std::move(*config));
          else
            llvm::consumeError(config.takeError());
        });
      }
    });
  });
  return s + "\n";
}

void mlir::ds::printPlanTable(ArrayRef<PlanCandidate> ranked, const PlanRequest &req,
                              size_t rows, llvm::raw_ostream &os) {
  size_t fitting = llvm::count_if(ranked, [](const PlanCandidate &c) { return c.fits(); });
  os << "plan: " << ranked.size() << " layouts of " << req.devices << " ranks (global batch "
     << req.globalBatch << ") on " << req.cluster->name << ", " << fitting << " fit "
     << req.deviceMemory << " bytes a device (the peak plus the allocator's padding); step "
     << "time = compute + communication, not overlapped; rc y: activation checkpointing; "
     << "v: model chunks per pipeline rank (2: interleaved) (docs/design/plan.md)\n";
  if (size_t pruned = llvm::count_if(ranked, [](auto &c) { return c.pruned; }))
    os << "  " << ranked.size() - pruned << " compiled, in the order of a lower bound on their "
       << "step; " << pruned << " not (their states alone over the memory, or their bound "
       << "slower than the " << req.keep << " fastest fitting; --plan-keep 0 compiles all)\n";
  if (size_t continued = llvm::count_if(ranked, [](auto &c) { return c.continued; }))
    os << "  " << continued << " pipelined layouts planned at three accumulation steps past "
       << "the warm-up and continued along their line (checked on the third; --plan-exact "
       << "compiles each at its own)\n";
  // Columns only ever get added before the last (free-form) one, so that scripts reading them
  // keep working.
  os << llvm::format("%-4s %-26s %4s %5s %4s %2s %14s %10s %10s %10s %6s %2s  %s\n", "rank",
                     "layout", "zero", "micro", "gas", "rc", "peak", "step_s", "compute_s",
                     "comm_s", "mfu", "v", "bytes per axis");
  for (size_t i = 0; i < ranked.size() && i < rows; ++i) {
    const PlanCandidate &c = ranked[i];
    std::string layout = layoutName(c);
    if (!c.fits() && c.peakBytes == 0) {
      os << llvm::format("%-4s %-26s %4lld %5lld %4lld %2s  ", "-", layout.c_str(),
                         (long long)c.zeroStage, (long long)c.microBatch, (long long)c.gas,
                         c.recompute ? "y" : "-")
         << (c.pruned ? "not compiled" : "refused")
         << (c.virtualStages > 1 ? " (interleaved x" + std::to_string(c.virtualStages) + ")"
                                 : std::string())
         << ": " << c.why << "\n";
      continue;
    }
    std::string axes;
    for (auto &[axis, bytes] : c.bytesByAxis)
      axes += (axes.empty() ? "" : " ") + axis + "=" + std::to_string(bytes);
    os << llvm::format("%-4s %-26s %4lld %5lld %4lld %2s %14lld %10.4g %10.4g %10.4g %6.3f "
                       "%2lld  %s\n",
                       c.fits() ? std::to_string(i + 1).c_str() : "-", layout.c_str(),
                       (long long)c.zeroStage, (long long)c.microBatch, (long long)c.gas,
                       c.recompute ? "y" : "-", (long long)c.peakBytes, c.stepSeconds,
                       c.computeSeconds, c.commSeconds,
                       c.mfu, (long long)c.virtualStages, axes.empty() ? "none" : axes.c_str());
    if (!c.fits())
      os << "     (" << c.why << ")\n";
  }
  // Why the first wins: against the fastest fitting layout of each other shape (tp, pp, sp),
  // where its time goes instead.
  if (!ranked.empty() && ranked.front().fits()) {
    const PlanCandidate &best = ranked.front();
    std::set<std::array<int64_t, 3>> seen{{best.tp, best.pp, best.sp}};
    for (const PlanCandidate &c : ranked) {
      if (!c.fits() || !seen.insert({c.tp, c.pp, c.sp}).second || seen.size() > 4)
        continue;
      os << llvm::format("why 1 beats %-26s %s: %.4g s less "
                         "(compute %+.4g s, communication %+.4g s)",
                         layoutName(c).c_str(), settingsName(c).c_str(),
                         c.stepSeconds - best.stepSeconds,
                         best.computeSeconds - c.computeSeconds,
                         best.commSeconds - c.commSeconds);
      int64_t mine = 0, theirs = 0;
      for (auto &[axis, bytes] : best.bytesByAxis)
        mine += bytes;
      for (auto &[axis, bytes] : c.bytesByAxis)
        theirs += bytes;
      os << "; bytes sent " << mine << " vs " << theirs << "\n";
    }
  }
  // The rest that do not fit, by reason: over the memory, or refused by the compiler.
  // (not compiled, reason) -> count, a layout
  std::map<std::pair<bool, std::string>, std::pair<int64_t, std::string>> reasons;
  for (size_t i = rows; i < ranked.size(); ++i) {
    const PlanCandidate &c = ranked[i];
    if (c.fits())
      continue;
    auto &[count, example] =
        reasons[{c.pruned, c.peakBytes ? std::string("over the device memory") : c.why}];
    if (count++ == 0)
      example = layoutName(c) + " ZeRO " + std::to_string(c.zeroStage) + " micro-batch " +
                std::to_string(c.microBatch);
  }
  for (auto &[why, seen] : reasons)
    os << (why.first ? "not compiled: " : "not fitting: ") << seen.first << " layout"
       << (seen.first == 1 ? "" : "s") << " (" << why.second << "; e.g. " << seen.second
       << ")\n";
}
