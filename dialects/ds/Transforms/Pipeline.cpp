//===- Pipeline.cpp - ds-pipeline: each pipeline rank's step as straight-line code --===//
//
// @micro_step's ops fall into phases (a chunk's forward or backward); each rank's schedule
// orders its phases for the step's micro-batches (1F1B or interleaved), a simulation in
// rounds places the transfers between ranks in one global order, and each rank's function
// is emitted from that order: phases cloned per micro-batch, shard.send / shard.recv on the
// mesh's pp axis.
//
#include "ds/Transforms/Passes.h"

#include "Mesh.h"
#include "PipelineOptimizer.h"
#include "PipelineReads.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"

#include <functional>
#include <map>
#include <set>

namespace mlir::ds {
#define GEN_PASS_DEF_DSPIPELINE
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {
struct PipelinePass : mlir::ds::impl::DSPipelineBase<PipelinePass> {
  using DSPipelineBase::DSPipelineBase;
  void runOnOperation() override;
};


bool isFree(Operation *op) { return isCopiedToEachChunk(op); }

/// One step of a rank's program: a phase of a micro-batch, or a transfer.
struct Item {
  enum Kind { Phase, Send, Recv } kind;
  int64_t phase = -1; ///< the phase (Phase)
  int64_t micro = 0;
  int64_t transfer = -1; ///< index into the transfers (Send, Recv)
};

/// A value of one micro-batch moving from the rank that computes it to one that uses it.
struct Transfer {
  Value value;
  int64_t micro, from, to;
};

/// ds-pipeline on one module: the phases of @micro_step, each rank's order of them, the
/// simulation that places the transfers, and the ranks' programs.
class PipelineBuilder {
public:
  PipelineBuilder(ModuleOp module, int64_t microBatches, PipelineSchedule schedule)
      : module(module), ctx(module.getContext()), m(microBatches), schedule(schedule) {}
  LogicalResult build() {
    if (failed(check()) || failed(assignPhases()) || failed(groupPhases()))
      return failure();
    findFlows();
    orderPhases();
    if (failed(simulate()))
      return failure();
    emitPrograms();
    markHolders();
    return success();
  }

private:
  /// The module, the options and the mesh agree.
  LogicalResult check();
  /// Each op's phase.
  LogicalResult assignPhases();
  /// Each phase's ops in program order, and its work.
  LogicalResult groupPhases();
  /// What each phase needs from other ranks and sends to them.
  void findFlows();
  /// Each rank's phases in schedule order.
  void orderPhases();
  /// The ranks' programs: phases and transfers in one global order.
  LogicalResult simulate();
  /// @pipeline_step_R for each rank R.
  void emitPrograms();
  /// The ranks that hold each parameter and state, and the module's #ds.pipeline.
  void markHolders();
  /// The rank that runs phase `ph`.
  int64_t rankOfPhase(int64_t ph) const {
    return (ph < chunks ? ph : 2 * chunks - 1 - ph) % p;
  }

  ModuleOp module;
  MLIRContext *ctx;
  const int64_t m;
  const PipelineSchedule schedule;
  func::FuncOp micro;
  int64_t p = 1, v = 1, chunks = 1;
  bool interleaved = false;
  MeshAxisRef ppAxis;
  Operation *ret = nullptr;
  llvm::DenseMap<Operation *, int64_t> phaseOf;
  SmallVector<SmallVector<Operation *>> phaseOps;
  SmallVector<int64_t> phaseFlops;
  SmallVector<SmallVector<Value>> needs;
  SmallVector<SmallVector<std::pair<Value, int64_t>>> sends;
  SmallVector<SmallVector<std::pair<int64_t, int64_t>>> order; // (phase, micro)
  SmallVector<Transfer> transfers;
  SmallVector<SmallVector<Item>> program;
  llvm::MapVector<Attribute, std::set<int64_t>> holders; // symbol -> ranks
};
} // namespace

void PipelinePass::runOnOperation() {
  if (failed(PipelineBuilder(getOperation(), microBatches, schedule).build()))
    signalPassFailure();
}

LogicalResult PipelineBuilder::check() {
  PipelineAttr info = getPipeline(module);
  micro = module.lookupSymbol<func::FuncOp>(kMicroStepName);
  if (!info || !micro) {
    module.emitError() << "ds-pipeline needs a module cut by ds-pipeline-partition and a "
                          "func.func @micro_step (run ds-pipeline-partition, then ds-autodiff)";
    return failure();
  }
  p = info.getStages();
  v = info.getVirtualStages();
  chunks = p * v;
  if (m < 1) {
    module.emitError() << "ds-pipeline: micro-batches must be >= 1";
    return failure();
  }
  interleaved = schedule == PipelineSchedule::interleaved;
  if (interleaved != (v > 1)) {
    module.emitError() << "ds-pipeline: schedule '" << stringifyPipelineSchedule(schedule)
                       << "' with " << v
                       << " chunks per rank; interleaved needs virtual_stages >= 2 and 1f1b "
                          "one chunk per rank";
    return failure();
  }
  if (interleaved && m % p != 0) {
    int64_t below = m / p * p, above = below + p;
    module.emitError() << "ds-pipeline: the interleaved schedule needs the micro-batches per "
                          "step (gradient_accumulation_steps, "
                       << m << ") to be a multiple of the pipeline stages (" << p
                       << "); use " << (below > 0 ? std::to_string(below) + " or " : "")
                       << above << ", or schedule 1f1b";
    return failure();
  }
  FailureOr<MeshAxisRef> axis = getMeshAxis(module, MeshAxis::pp, "ds-pipeline");
  if (failed(axis))
    return failure();
  ppAxis = *axis;
  if (ppAxis.size != p) {
    module.emitError() << "ds-pipeline: the mesh's pp axis has " << ppAxis.size
                       << " ranks but the module was cut for " << p << " stages";
    return failure();
  }

  return success();
}

LogicalResult PipelineBuilder::assignPhases() {
  // Phases: F of chunk c is c, B of chunk c is 2C - 1 - c, so that a value only flows to
  // phases of higher number.
  Block &body = micro.getBody().front();
  ret = body.getTerminator();
  SmallVector<Operation *> unresolved;
  for (Operation &op : body.without_terminator()) {
    if (isFree(&op))
      continue;
    if (auto c = op.getAttrOfType<IntegerAttr>(kStageAttrName)) {
      if (c.getInt() < 0 || c.getInt() >= chunks) {
        op.emitOpError() << "has ds.stage " << c.getInt() << " outside the " << chunks
                         << " chunks of the module's pipeline";
        return failure();
      }
      phaseOf[&op] = op.hasAttr(kBackwardAttrName) ? 2 * chunks - 1 - c.getInt() : c.getInt();
      continue;
    }
    // Made by canonicalization: the latest phase of its operands.
    int64_t ph = -1;
    for (Value x : op.getOperands())
      if (Operation *d = x.getDefiningOp(); d && phaseOf.count(d))
        ph = std::max(ph, phaseOf[d]);
    if (ph >= 0)
      phaseOf[&op] = ph;
    else
      unresolved.push_back(&op);
  }
  // Ops of free operands only: the earliest phase of their users.
  for (Operation *op : llvm::reverse(unresolved)) {
    int64_t ph = -1;
    for (Operation *u : op->getUsers()) {
      int64_t up = u == ret ? chunks - 1 : phaseOf.lookup(u);
      if (u == ret || phaseOf.count(u))
        ph = ph < 0 ? up : std::min(ph, up);
    }
    if (ph < 0) {
      op->emitOpError() << "belongs to no pipeline chunk (no ds.stage, and neither its "
                           "operands nor its users have one)";
      return failure();
    }
    phaseOf[op] = ph;
  }
  auto lossDef = ret->getOperand(0).getDefiningOp();
  if (!lossDef || !phaseOf.count(lossDef) || phaseOf[lossDef] != chunks - 1) {
    micro.emitError() << "ds-pipeline: the loss must be computed in the last chunk's forward";
    return failure();
  }
  return success();
}

LogicalResult PipelineBuilder::groupPhases() {
  // Each phase's ops in program order; a value flows only to later phases.
  phaseOps.resize(2 * chunks);
  for (Operation &op : micro.getBody().front().without_terminator()) {
    if (isFree(&op))
      continue;
    int64_t ph = phaseOf[&op];
    for (Value x : op.getOperands())
      if (Operation *d = x.getDefiningOp(); d && phaseOf.count(d) && phaseOf[d] > ph) {
        op.emitOpError() << "in phase " << ph << " uses a value of the later phase "
                         << phaseOf[d] << "; the pipeline cannot order them";
        return failure();
      }
    phaseOps[ph].push_back(&op);
  }
  phaseFlops.assign(2 * chunks, 0);
  for (int64_t ph = 0; ph < 2 * chunks; ++ph)
    for (Operation *op : phaseOps[ph])
      if (auto cost = dyn_cast<CostOpInterface>(op))
        phaseFlops[ph] += cost.getFlops();
  return success();
}

void PipelineBuilder::findFlows() {
  needs.resize(2 * chunks);
  sends.resize(2 * chunks);
  for (int64_t ph = 0; ph < 2 * chunks; ++ph) {
    llvm::SetVector<Value> in;
    for (Operation *op : phaseOps[ph])
      for (Value x : op->getOperands())
        if (Operation *d = x.getDefiningOp();
            d && phaseOf.count(d) && rankOfPhase(phaseOf[d]) != rankOfPhase(ph))
          in.insert(x);
    needs[ph] = in.takeVector();
    for (Operation *op : phaseOps[ph])
      for (Value r : op->getResults()) {
        std::set<int64_t> to;
        for (Operation *u : r.getUsers())
          if (u != ret && phaseOf.count(u) && rankOfPhase(phaseOf[u]) != rankOfPhase(ph))
            to.insert(rankOfPhase(phaseOf[u]));
        for (int64_t t : to)
          sends[ph].push_back({r, t});
      }
  }

}

void PipelineBuilder::orderPhases() {
  order.resize(p);
  for (int64_t r = 0; r < p; ++r) {
    auto &o = order[r];
    if (!interleaved) {
      int64_t warm = std::min(p - r - 1, m);
      auto f = [&](int64_t i) { o.push_back({r, i}); };
      auto bw = [&](int64_t i) { o.push_back({2 * chunks - 1 - r, i}); };
      for (int64_t i = 0; i < warm; ++i)
        f(i);
      for (int64_t i = 0; i < m - warm; ++i) {
        f(warm + i);
        bw(i);
      }
      for (int64_t i = m - warm; i < m; ++i)
        bw(i);
      continue;
    }
    // Megatron's interleaved order: virtual micro-batch k is chunk (k / p) mod v (backward:
    // reversed) of micro-batch (k / (p v)) p + k mod p.
    int64_t total = m * v;
    int64_t warm = std::min((p - r - 1) * 2 + (v - 1) * p, total);
    auto microOf = [&](int64_t k) { return (k / (p * v)) * p + k % p; };
    auto f = [&](int64_t k) {
      int64_t local = (k / p) % v;
      o.push_back({local * p + r, microOf(k)});
    };
    auto bw = [&](int64_t k) {
      int64_t local = v - 1 - (k / p) % v;
      o.push_back({2 * chunks - 1 - (local * p + r), microOf(k)});
    };
    for (int64_t k = 0; k < warm; ++k)
      f(k);
    for (int64_t k = 0; k < total - warm; ++k) {
      f(warm + k);
      bw(k);
    }
    for (int64_t k = total - warm; k < total; ++k)
      bw(k);
  }

}

LogicalResult PipelineBuilder::simulate() {
  // The simulation: in each round every rank runs its next phase if what it receives has
  // arrived; then the round's transfers go in one global order (by sender, then as
  // produced). Every rank issues its sends and receives in that order, so none waits on a
  // transfer that another issues later: the programs cannot hang.
  program.resize(p);
  std::set<std::tuple<int64_t, const void *, int64_t>> arrived; // (rank, value, micro)
  SmallVector<size_t> next(p, 0);
  // Whether rank r's next phase has received what it needs.
  auto ready = [&](int64_t r) {
    if (next[r] == order[r].size())
      return false;
    auto [ph, i] = order[r][next[r]];
    return llvm::all_of(needs[ph], [&, i = i](Value x) {
      return arrived.count({r, x.getAsOpaquePointer(), i}) != 0;
    });
  };
  for (size_t done = 0, all = static_cast<size_t>(p) * order[0].size(); done < all;) {
    SmallVector<Transfer> round;
    for (int64_t r = 0; r < p; ++r) {
      if (!ready(r))
        continue;
      auto [ph, i] = order[r][next[r]];
      program[r].push_back({Item::Phase, ph, i, -1});
      for (auto [x, to] : sends[ph])
        round.push_back({x, i, r, to});
      ++next[r];
      ++done;
    }
    for (Transfer &t : round) {
      int64_t k = transfers.size();
      transfers.push_back(t);
      program[t.from].push_back({Item::Send, -1, t.micro, k});
      program[t.to].push_back({Item::Recv, -1, t.micro, k});
      arrived.insert({t.to, t.value.getAsOpaquePointer(), t.micro});
    }
    // Stuck: unfinished, and no rank can run its next phase (a schedule whose order
    // contradicts the data flow; the built-in ones never do).
    if (done < all && llvm::none_of(llvm::seq<int64_t>(0, p), ready)) {
      InFlightDiagnostic d = module.emitError()
                             << "ds-pipeline: the " << stringifyPipelineSchedule(schedule)
                             << " schedule cannot finish: every rank waits for a value that "
                                "no rank can send yet;";
      for (int64_t r = 0; r < p; ++r)
        if (next[r] < order[r].size())
          d << " rank " << r << " waits at its item " << next[r];
      return failure();
    }
  }

  return success();
}

void PipelineBuilder::emitPrograms() {
  OpBuilder mb = OpBuilder::atBlockEnd(module.getBody());
  const int64_t n = micro.getNumArguments();
  SmallVector<Type> argTypes;
  for (int64_t i = 0; i < m; ++i)
    llvm::append_range(argTypes, micro.getArgumentTypes());
  Type lossElem = Float32Type::get(ctx);
  auto lossesType = RankedTensorType::get({m}, lossElem);
  auto describeTransfer = [&](const Transfer &t, bool send) {
    return (send ? ">" : "<") + std::to_string(send ? t.to : t.from);
  };
  for (int64_t r = 0; r < p; ++r) {
    auto fn = func::FuncOp::create(mb, micro.getLoc(), pipelineStepName(r),
                                   FunctionType::get(ctx, argTypes, {lossesType}));
    for (int64_t i = 0; i < m; ++i)
      for (int64_t k = 0; k < n; ++k)
        if (auto name = micro.getArgAttr(k, kInputNameAttrName))
          fn.setArgAttr(i * n + k, kInputNameAttrName, name);
    Block *entry = fn.addEntryBlock();
    OpBuilder b = OpBuilder::atBlockEnd(entry);
    llvm::DenseMap<std::pair<void *, int64_t>, Value> values; // (value, micro) -> here
    auto key = [](Value x, int64_t i) { return std::make_pair(x.getAsOpaquePointer(), i); };
    std::string text;
    // The value of `x` for micro-batch `i` here; free ops are copied at the point of use
    // (once per phase: `freeCopies` is cleared at each phase).
    llvm::DenseMap<Operation *, Value> freeCopies;
    std::function<Value(Value, int64_t)> lookup = [&](Value x, int64_t i) -> Value {
      if (auto arg = dyn_cast<BlockArgument>(x))
        return entry->getArgument(i * n + arg.getArgNumber());
      Operation *d = x.getDefiningOp();
      if (isFree(d)) {
        auto it = freeCopies.find(d);
        if (it != freeCopies.end())
          return it->second;
        IRMapping operands; // a widened read's parameter read
        for (Value o : d->getOperands())
          operands.map(o, lookup(o, i));
        Operation *c = b.clone(*d, operands);
        c->removeAttr(kStageAttrName);
        c->removeAttr(kBackwardAttrName);
        if (auto get = dyn_cast<GetParameterOp>(c))
          holders[get.getNameAttr().getAttr()].insert(r);
        freeCopies[d] = c->getResult(0);
        return c->getResult(0);
      }
      return values.at(key(x, i));
    };
    for (const Item &item : program[r]) {
      if (!text.empty())
        text += " ";
      if (item.kind == Item::Phase) {
        freeCopies.clear();
        int64_t ph = item.phase;
        bool backward = ph >= chunks;
        int64_t chunk = backward ? 2 * chunks - 1 - ph : ph;
        text += (backward ? "B" : "F") + std::to_string(chunk) + "." + std::to_string(item.micro);
        for (Operation *op : phaseOps[ph]) {
          IRMapping map;
          for (Value x : op->getOperands())
            map.map(x, lookup(x, item.micro));
          Operation *c = b.clone(*op, map);
          c->removeAttr(kStageAttrName);
          c->removeAttr(kBackwardAttrName);
          if (auto assign = dyn_cast<AssignOp>(c))
            holders[assign.getNameAttr().getAttr()].insert(r);
          for (auto [o, nr] : llvm::zip(op->getResults(), c->getResults()))
            values[key(o, item.micro)] = nr;
        }
        continue;
      }
      const Transfer &t = transfers[item.transfer];
      text += describeTransfer(t, item.kind == Item::Send);
      if (item.kind == Item::Send)
        emitPipelineSend(b, ppAxis, values.at(key(t.value, t.micro)), t.to);
      else
        values[key(t.value, t.micro)] = emitPipelineRecv(b, ppAxis, t.value.getType(), t.from,
                                                         t.value.getLoc());
    }
    // The losses of the m micro-batches, where the last chunk runs.
    Value losses;
    Location loc = ret->getLoc();
    if (rankOfPhase(chunks - 1) == r) {
      SmallVector<Value> parts;
      for (int64_t i = 0; i < m; ++i) {
        Value l = values.at(key(ret->getOperand(0), i));
        auto lt = cast<RankedTensorType>(l.getType());
        if (lt.getElementType() != lossElem)
          l = ConvertOp::create(b, loc, RankedTensorType::get(lt.getShape(), lossElem), l);
        parts.push_back(ReshapeOp::create(b, loc, RankedTensorType::get({1}, lossElem), l));
      }
      losses = parts.size() == 1
                   ? parts[0]
                   : ConcatOp::create(b, loc, lossesType, parts, b.getI64IntegerAttr(0));
    } else {
      losses = ConstantOp::create(
          b, loc, DenseElementsAttr::get(lossesType, FloatAttr::get(lossElem, 0.0)));
    }
    func::ReturnOp::create(b, loc, losses);
    fn->setAttr(kPipelineRankAttrName, b.getI64IntegerAttr(r));
    fn->setAttr(kScheduleAttrName, b.getStringAttr(text));
  }

}

void PipelineBuilder::markHolders() {
  // The ranks that hold each parameter and state; one that no rank reads (unused by the
  // loss) stays with rank 0, which updates it.
  Builder ab(ctx);
  auto mark = [&](Operation *op, StringAttr name) {
    auto it = holders.find(name);
    SmallVector<int64_t> ranks = it == holders.end()
                                     ? SmallVector<int64_t>{0}
                                     : SmallVector<int64_t>(it->second.begin(), it->second.end());
    op->setAttr(kStagesAttrName, ab.getDenseI64ArrayAttr(ranks));
  };
  for (auto param : module.getOps<ParameterOp>())
    mark(param, param.getSymNameAttr());
  SmallVector<int64_t> every;
  for (int64_t r = 0; r < p; ++r)
    every.push_back(r);
  for (auto state : module.getOps<StateOp>()) {
    // A parameter's gradient lives with the parameter; the loss scale on every rank (the
    // driver sets it everywhere).
    auto of = state.getOfAttr();
    if (!of) {
      state->setAttr(kStagesAttrName, ab.getDenseI64ArrayAttr(every));
      continue;
    }
    mark(state, holders.count(state.getSymNameAttr()) || !of ? state.getSymNameAttr()
                                                             : of.getAttr());
  }
  micro.erase();
  // The cost model's work per phase (F of chunk c at c, B at 2C - 1 - c): what
  // --comm-report's predicted bubble simulates.
  module->setAttr(kPipelineAttrName,
                  PipelineAttr::get(ab.getContext(), p, v,
                                    PipelineScheduleAttr::get(ab.getContext(), schedule), m,
                                    ab.getDenseI64ArrayAttr(phaseFlops)));
}
