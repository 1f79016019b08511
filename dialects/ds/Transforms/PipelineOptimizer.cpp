//===- PipelineOptimizer.cpp - @optimizer_step split over the pipeline ranks ---===//
//
// ds-optimizer builds one @optimizer_step over every parameter; on a pipeline each rank
// holds only its stage's parameters and states (`ds.stages`). Each op runs where the slots it
// reads are (an op that combines several ranks' values, such as clipping's global norm, runs
// on every rank that needs it, from received copies), and a value that another rank needs is
// sent right after it is computed. Every rank walks the one original order, so the sends and
// receives of all ranks are in one global order: they cannot hang, and the sums keep the
// single-rank order (clipping's norm is bit-identical). A parameter that several ranks hold
// (a tied embedding and LM head) has a partial gradient on each: they exchange and sum them
// in rank order first.
//
#include "PipelineOptimizer.h"

#include "Mesh.h"
#include "ds/IR/DSOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"

using namespace mlir;
using namespace mlir::ds;

namespace {
using Mask = uint64_t;

SmallVector<int64_t> ranksOf(Mask m) {
  SmallVector<int64_t> r;
  for (int64_t i = 0; i < 64; ++i)
    if (m >> i & 1)
      r.push_back(i);
  return r;
}

int64_t lowest(Mask m) { return llvm::countr_zero(m); }

} // namespace

namespace {
/// shard's point-to-point ops take tensors of rank >= 1: a scalar travels as one element.
RankedTensorType wireType(Type t) {
  auto rt = cast<RankedTensorType>(t);
  return rt.getRank() > 0 ? rt : RankedTensorType::get({1}, rt.getElementType());
}
} // namespace

void mlir::ds::emitPipelineSend(OpBuilder &b, const MeshAxisRef &pp, Value x, int64_t to) {
  Location loc = x.getLoc();
  if (wireType(x.getType()) != x.getType())
    x = ReshapeOp::create(b, loc, wireType(x.getType()), x);
  shard::SendOp::create(b, loc, x.getType(), pp.grid, pp.axes(), x, ArrayRef<int64_t>{to},
                        ValueRange{});
}

Value mlir::ds::emitPipelineRecv(OpBuilder &b, const MeshAxisRef &pp, Type type, int64_t from,
                                 Location loc) {
  RankedTensorType wire = wireType(type);
  Type e = wire.getElementType();
  Attribute zero = isa<FloatType>(e) ? Attribute(FloatAttr::get(e, 0.0))
                                     : Attribute(IntegerAttr::get(e, 0));
  Value buffer = ConstantOp::create(b, loc, DenseElementsAttr::get(wire, zero));
  Value got = shard::RecvOp::create(b, loc, wire, pp.grid, pp.axes(), buffer,
                                    b.getDenseI64ArrayAttr({from}), ValueRange{});
  if (wire != type)
    got = ReshapeOp::create(b, loc, type, got);
  return got;
}

LogicalResult mlir::ds::splitOptimizerForPipeline(ModuleOp module) {
  PipelineAttr info = getPipeline(module);
  auto opt = module.lookupSymbol<func::FuncOp>(kOptimizerStepName);
  if (!info || !opt || !info.isScheduled())
    return success(); // not (yet) made into per-rank programs by ds-pipeline
  const int64_t p = info.getStages();
  if (p < 2)
    return success();
  if (p > 64)
    return module.emitError() << "ds-optimizer: at most 64 pipeline stages";
  FailureOr<MeshAxisRef> pp = getMeshAxis(module, MeshAxis::pp, "ds-optimizer");
  if (failed(pp))
    return failure();
  const Mask all = p == 64 ? ~Mask(0) : (Mask(1) << p) - 1;
  MLIRContext *ctx = module.getContext();
  Builder ab(ctx);

  // The ranks that hold each symbol: ds-pipeline's marks; an optimizer state lives with its
  // parameter; other states (the loss scale, fp16's overflow flag) on every rank.
  llvm::DenseMap<StringAttr, Mask> holders;
  auto maskOf = [](DenseI64ArrayAttr a) {
    Mask m = 0;
    for (int64_t r : a.asArrayRef())
      m |= Mask(1) << r;
    return m;
  };
  for (Operation &op : *module.getBody())
    if (auto s = op.getAttrOfType<DenseI64ArrayAttr>(kStagesAttrName))
      if (auto name = op.getAttrOfType<StringAttr>(SymbolTable::getSymbolAttrName()))
        holders[name] = maskOf(s);
  for (auto state : module.getOps<StateOp>()) {
    if (holders.count(state.getSymNameAttr()))
      continue;
    Mask m = all;
    if (auto of = state.getOfAttr(); of && holders.count(of.getAttr()))
      m = holders[of.getAttr()];
    holders[state.getSymNameAttr()] = m;
    SmallVector<int64_t> r = ranksOf(m);
    state->setAttr(kStagesAttrName, ab.getDenseI64ArrayAttr(r));
  }
  auto holdersOf = [&](FlatSymbolRefAttr ref) -> Mask {
    auto it = holders.find(ref.getAttr());
    return it == holders.end() ? all : it->second;
  };

  // Where each value is available without a transfer, where it is needed, and where it runs.
  Block &body = opt.getBody().front();
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);
  llvm::DenseMap<Operation *, Mask> avail, runAt;
  for (Operation *op : ops) {
    Mask m = all;
    if (auto get = dyn_cast<GetParameterOp>(op))
      m = holdersOf(get.getNameAttr());
    for (Value x : op->getOperands())
      if (Operation *d = x.getDefiningOp())
        m &= avail.lookup(d);
    avail[op] = m;
  }
  for (Operation *op : llvm::reverse(ops)) {
    if (auto assign = dyn_cast<AssignOp>(op)) {
      runAt[op] = holdersOf(assign.getNameAttr());
      continue;
    }
    Mask need = 0;
    for (Operation *u : op->getUsers())
      need |= runAt.lookup(u);
    Mask a = avail[op];
    if (!need)
      runAt[op] = 0; // dead
    else if (!a)
      runAt[op] = need; // combines ranks' values: computed where needed, from copies
    else
      runAt[op] = (need & a) | ((need & ~a) ? Mask(1) << lowest(a) : 0);
  }
  // Per value: the ranks it is sent to (those that need it but do not compute it).
  auto receivers = [&](Value v) {
    Mask need = 0;
    for (Operation *u : v.getUsers())
      need |= runAt.lookup(u);
    return need & ~runAt.lookup(v.getDefiningOp());
  };

  // Tied gradients: each holder's partial sum, exchanged pair by pair (a < b: a sends first).
  SmallVector<StateOp> tied;
  for (auto state : module.getOps<StateOp>())
    if (state.getRole() == SlotRole::grad && llvm::popcount(holders[state.getSymNameAttr()]) > 1)
      tied.push_back(state);

  OpBuilder mb = OpBuilder::atBlockEnd(module.getBody());
  for (int64_t r = 0; r < p; ++r) {
    auto fn = func::FuncOp::create(mb, opt.getLoc(), optimizerStepName(r),
                                   opt.getFunctionType());
    fn->setAttr(kPipelineRankAttrName, mb.getI64IntegerAttr(r));
    Block *entry = fn.addEntryBlock();
    OpBuilder b = OpBuilder::atBlockEnd(entry);
    for (StateOp g : tied) {
      SmallVector<int64_t> h = ranksOf(holders[g.getSymNameAttr()]);
      if (!llvm::is_contained(h, r))
        continue;
      Location loc = g.getLoc();
      RankedTensorType t = g.getTensorType();
      auto ref = FlatSymbolRefAttr::get(g.getSymNameAttr());
      Value mine = GetParameterOp::create(b, loc, t, ref);
      llvm::DenseMap<int64_t, Value> part{{r, mine}};
      for (size_t i = 0; i < h.size(); ++i)
        for (size_t j = i + 1; j < h.size(); ++j) {
          if (h[i] == r) {
            emitPipelineSend(b, *pp, mine, h[j]);
            part[h[j]] = emitPipelineRecv(b, *pp, t, h[j], loc);
          } else if (h[j] == r) {
            part[h[i]] = emitPipelineRecv(b, *pp, t, h[i], loc);
            emitPipelineSend(b, *pp, mine, h[i]);
          }
        }
      Value sum = part[h[0]];
      for (size_t i = 1; i < h.size(); ++i)
        sum = AddOp::create(b, loc, t, sum, part[h[i]]);
      AssignOp::create(b, loc, ref, sum);
    }
    IRMapping map;
    for (auto [a, na] : llvm::zip(body.getArguments(), entry->getArguments()))
      map.map(a, na);
    for (Operation *op : ops) {
      if (runAt[op] >> r & 1)
        b.clone(*op, map);
      for (Value v : op->getResults()) {
        Mask to = receivers(v);
        if (!to)
          continue;
        int64_t from = lowest(runAt[op]);
        for (int64_t dst : ranksOf(to)) {
          if (r == from)
            emitPipelineSend(b, *pp, map.lookup(v), dst);
          else if (r == dst)
            map.map(v, emitPipelineRecv(b, *pp, v.getType(), from, v.getLoc()));
        }
      }
    }
    func::ReturnOp::create(b, opt.getLoc());
  }
  opt.erase();
  return success();
}
