//===- Offload.cpp - ds-offload: memory spaces, host ops and moves ----------===//
//
// ZeRO-Offload (optimizer state and its update on the host) and ZeRO-Infinity (parameter
// shards off the device, NVMe) as a static schedule: the pass decides where each state lives
// and which ops run on the host, inserts a ds.move wherever a value crosses between the
// spaces, and issues the moves of state reads ahead of their use.
//
//===----------------------------------------------------------------------===//
#include "ds/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"

#include <map>
#include <tuple>

namespace mlir::ds {
#define GEN_PASS_DEF_DSOFFLOAD
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {
enum class Space { Device, Host, Any };

bool isCollective(Operation *op) { return isa<shard::ShardDialect>(op->getDialect()); }

/// Where DeepSpeed's offload device puts a state.
MemorySpace spaceOf(OffloadDevice d) {
  switch (d) {
  case OffloadDevice::none:
    return MemorySpace::device;
  case OffloadDevice::cpu:
    return MemorySpace::host;
  case OffloadDevice::nvme:
    return MemorySpace::nvme;
  }
  llvm_unreachable("an OffloadDevice without a space");
}

struct OffloadPass : mlir::ds::impl::DSOffloadBase<OffloadPass> {
  using DSOffloadBase::DSOffloadBase;
  void runOnOperation() override;

private:
  /// Where a read of the state `name` yields its value (NVMe reads land in host memory).
  Space stateSpace(StringRef name) {
    auto it = spaces.find(name);
    return it == spaces.end() || it->second == MemorySpace::device ? Space::Device : Space::Host;
  }
  Space valueSpace(Value v) {
    Operation *def = v.getDefiningOp();
    if (!def)
      return Space::Device; // the step's inputs
    if (isa<ConstantOp>(def))
      return Space::Any; // compiled in: made where it is used
    if (auto g = dyn_cast<GetParameterOp>(def))
      return stateSpace(g.getName());
    if (auto m = dyn_cast<MoveOp>(def))
      return m.getTo() == MemorySpace::host ? Space::Host : Space::Device;
    return def->hasAttr(kOnHostAttrName) ? Space::Host : Space::Device;
  }
  void placeStates(ModuleOp module);
  void placeOps(func::FuncOp micro, func::FuncOp opt);
  void insertMoves(func::FuncOp func, Operation *loss);
  void prefetchMoves(func::FuncOp func, Operation *loss);

  llvm::StringMap<MemorySpace> spaces; ///< state or parameter -> host | nvme
};

void OffloadPass::placeStates(ModuleOp module) {
  MemorySpace optSpace = spaceOf(optimizer), paramSpace = spaceOf(param);
  bool offloadOptimizer = optimizer != OffloadDevice::none;
  bool offloadParams = param != OffloadDevice::none;
  llvm::StringSet<> members;
  bool sharded = false;
  for (auto f : module.getOps<FlatBufferOp>()) {
    sharded |= f.getRole() == SlotRole::params_sharded;
    for (Attribute a : f.getMembers())
      members.insert(cast<FlatSymbolRefAttr>(a).getValue());
  }
  auto place = [&](Operation *op, StringRef name, MemorySpace space) {
    op->setAttr(kMemorySpaceAttrName, MemorySpaceAttr::get(op->getContext(), space));
    spaces[name] = space;
  };
  for (auto st : module.getOps<StateOp>()) {
    StringRef name = st.getSymName();
    if (members.contains(name))
      continue;
    switch (st.getRole()) {
    case SlotRole::param_shard:
      if (offloadParams)
        place(st, name, paramSpace);
      break;
    case SlotRole::grad:
    case SlotRole::grad_shard:
      if (offloadOptimizer) // accumulated on the host, as the optimizer reads them there
        place(st, name, MemorySpace::host);
      break;
    case SlotRole::exp_avg:
    case SlotRole::exp_avg_sq:
    case SlotRole::momentum_buffer:
    case SlotRole::master:
      if (offloadOptimizer)
        place(st, name, optSpace);
      break;
    case SlotRole::loss_scale:
    case SlotRole::found_inf: // the driver's scalars stay on the device
    case SlotRole::kv_cache:  // generation's cache: read by every decode step
    case SlotRole::parameter:
    case SlotRole::buffer:
    case SlotRole::params:
    case SlotRole::grads:
    case SlotRole::params_sharded: // not a state's (StateOp::verify)
      break;
    }
  }
  // One rank (no ZeRO partitioning): the large trainable parameters themselves.
  if (offloadParams && !sharded)
    for (auto p : module.getOps<ParameterOp>())
      if (p.getTrainable() && !members.contains(p.getSymName()) &&
          p.getTensorType().getNumElements() >= persistenceThreshold)
        place(p, p.getSymName(), paramSpace);
}

void OffloadPass::placeOps(func::FuncOp micro, func::FuncOp opt) {
  MLIRContext *ctx = micro.getContext();
  // The update: every op but the collectives, reads and writes runs on the host.
  if (optimizer != OffloadDevice::none)
    opt.walk([&](Operation *op) {
      if (op == opt || isa<GetParameterOp, AssignOp, MoveOp, ConstantOp, func::ReturnOp>(op) ||
          isCollective(op))
        return;
      op->setAttr(kOnHostAttrName, UnitAttr::get(ctx));
    });
  // The micro-step: an accumulation into a host state (read it, add, write it back) runs on
  // the host, so that only the new gradient crosses.
  micro.walk([&](AssignOp a) {
    if (stateSpace(a.getName()) != Space::Host)
      return;
    Operation *def = a.getValue().getDefiningOp();
    if (!def || isa<GetParameterOp, MoveOp, ConstantOp>(def) || isCollective(def))
      return;
    bool onlyHostWrites = llvm::all_of(def->getUsers(), [&](Operation *u) {
      auto w = dyn_cast<AssignOp>(u);
      return w && stateSpace(w.getName()) == Space::Host;
    });
    bool readsHostState = llvm::any_of(def->getOperands(), [&](Value v) {
      auto g = v.getDefiningOp<GetParameterOp>();
      return g && stateSpace(g.getName()) == Space::Host;
    });
    if (onlyHostWrites && readsHostState)
      def->setAttr(kOnHostAttrName, UnitAttr::get(ctx));
  });
  // Constants are made where all their users run.
  for (func::FuncOp f : {micro, opt})
    f.walk([&](ConstantOp c) {
      if (!c->use_empty() && llvm::all_of(c->getUsers(), [&](Operation *u) {
            if (auto w = dyn_cast<AssignOp>(u))
              return stateSpace(w.getName()) == Space::Host;
            return u->hasAttr(kOnHostAttrName);
          }))
        c->setAttr(kOnHostAttrName, UnitAttr::get(ctx));
    });
}

void OffloadPass::insertMoves(func::FuncOp func, Operation *loss) {
  Block &body = func.getBody().front();
  // One move per value, target space and phase (forward, backward: split at the loss).
  std::map<std::tuple<void *, int, int>, Value> moved;
  OpBuilder b(func.getContext());
  SmallVector<Operation *> reads;
  for (Operation &op : llvm::make_early_inc_range(body)) {
    if (isa<GetParameterOp>(op))
      reads.push_back(&op);
    if (isa<GetParameterOp, MoveOp, ConstantOp, func::ReturnOp>(op))
      continue;
    Space want = op.hasAttr(kOnHostAttrName) ? Space::Host : Space::Device;
    if (auto a = dyn_cast<AssignOp>(op))
      want = stateSpace(a.getName());
    int phase = loss && loss->isBeforeInBlock(&op) ? 1 : 0;
    for (OpOperand &o : op.getOpOperands()) {
      Value v = o.get();
      Space have = valueSpace(v);
      if (have == Space::Any || have == want)
        continue;
      Value &m = moved[{v.getAsOpaquePointer(), static_cast<int>(want), phase}];
      if (!m) {
        b.setInsertionPoint(&op);
        // A state read gets a read of its own, so that each move (and an NVMe read) can be
        // issued on its own schedule.
        Value from = v;
        if (auto g = v.getDefiningOp<GetParameterOp>())
          from = b.clone(*g)->getResult(0);
        MemorySpace to = want == Space::Host ? MemorySpace::host : MemorySpace::device;
        m = MoveOp::create(b, op.getLoc(), v.getType(), from,
                           MemorySpaceAttr::get(b.getContext(), to));
      }
      o.set(m);
    }
  }
  for (Operation *r : reads) // reads that only moves used
    if (r->use_empty())
      r->erase();
}

void OffloadPass::prefetchMoves(func::FuncOp func, Operation *loss) {
  if (prefetch <= 0)
    return;
  Block &body = func.getBody().front();
  // A transfer: a move of a state read, or an NVMe read the host uses directly.
  struct Transfer {
    GetParameterOp read;
    MoveOp move; // may be null
    Operation *consumer;
  };
  SmallVector<Transfer> transfers;
  auto firstUser = [](Value v) {
    Operation *first = nullptr;
    for (Operation *u : v.getUsers())
      if (!first || u->isBeforeInBlock(first))
        first = u;
    return first;
  };
  for (Operation &op : body) {
    if (auto m = dyn_cast<MoveOp>(op)) {
      if (auto g = m.getInput().getDefiningOp<GetParameterOp>())
        if (Operation *c = firstUser(m.getResult()))
          transfers.push_back({g, m, c});
    } else if (auto g = dyn_cast<GetParameterOp>(op)) {
      auto it = spaces.find(g.getName());
      if (it != spaces.end() && it->second == MemorySpace::nvme &&
          llvm::none_of(g->getUsers(), [](Operation *u) { return isa<MoveOp>(u); }))
        if (Operation *c = firstUser(g.getResult()))
          transfers.push_back({g, nullptr, c});
    }
  }
  // The consumers in program order; a transfer is issued at the consumer `prefetch` earlier,
  // within its phase (a backward read is not brought back before the loss).
  SmallVector<Operation *> consumers;
  for (Transfer &t : transfers)
    consumers.push_back(t.consumer);
  llvm::sort(consumers, [](Operation *x, Operation *y) { return x->isBeforeInBlock(y); });
  consumers.erase(std::unique(consumers.begin(), consumers.end()), consumers.end());
  OpBuilder b(func.getContext());
  for (Transfer &t : transfers) {
    auto phase = [&](Operation *op) { return loss && loss->isBeforeInBlock(op); };
    int64_t at = llvm::find(consumers, t.consumer) - consumers.begin();
    int64_t to = at;
    while (to > 0 && at - to < prefetch && phase(consumers[to - 1]) == phase(t.consumer))
      --to;
    Operation *target = consumers[to];
    Operation *first = t.move ? t.move.getOperation() : t.read.getOperation();
    if (!target->isBeforeInBlock(first))
      continue;
    // Not across a write of the same state.
    bool written = false;
    for (Operation *op = target; op != first && !written; op = op->getNextNode())
      if (auto a = dyn_cast<AssignOp>(op))
        written = a.getName() == t.read.getName();
    if (written)
      continue;
    if (t.move && !t.read->hasOneUse())
      continue; // a read that other ops use too stays; its move cannot go before it
    t.read->moveBefore(target);
    if (t.move)
      t.move->moveBefore(target);
  }
}

void OffloadPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (optimizer == OffloadDevice::none && param == OffloadDevice::none)
    return;
  if (module->hasAttr(kPipelineAttrName)) {
    module.emitError() << "ds-offload: offloading a pipeline's state is not implemented yet; "
                          "drop zero_optimization.offload_* or pipeline.stages";
    return signalPassFailure();
  }
  auto micro = module.lookupSymbol<func::FuncOp>(kMicroStepName);
  auto opt = module.lookupSymbol<func::FuncOp>(kOptimizerStepName);
  if (!micro || !opt) {
    module.emitError() << "ds-offload needs @micro_step and @optimizer_step (run ds-autodiff "
                          "and ds-optimizer first)";
    return signalPassFailure();
  }
  placeStates(module);
  placeOps(micro, opt);
  Operation *loss = nullptr;
  auto ret = cast<func::ReturnOp>(micro.getBody().front().getTerminator());
  if (ret.getNumOperands())
    loss = ret.getOperand(0).getDefiningOp();
  insertMoves(micro, loss);
  insertMoves(opt, nullptr);
  prefetchMoves(micro, loss);
  prefetchMoves(opt, nullptr);
  MLIRContext *ctx = module.getContext();
  module->setAttr(kOffloadAttrName,
                  DictionaryAttr::get(
                      ctx, {NamedAttribute(StringAttr::get(ctx, "optimizer"),
                                           OffloadDeviceAttr::get(ctx, optimizer)),
                            NamedAttribute(StringAttr::get(ctx, "param"),
                                           OffloadDeviceAttr::get(ctx, param))}));
}
} // namespace
