//===- MemoryPlanner.cpp - one walk over a function: placements, waits, frees ---===//
#include "MemoryPlanner.h"

#include "ds/IR/DSShapes.h"
#include "dsrt/dsrt.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"

using namespace mlir;
using namespace mlir::ds;

namespace {
RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

bool isCollective(Operation *op) {
  return isa<shard::AllReduceOp, shard::AllGatherOp, shard::ReduceScatterOp, shard::AllToAllOp>(
      op);
}

/// Whether `v` is a transpose of the last two dims that can fold into a matmul operand.
bool isLast2Transpose(Value v) {
  auto t = v.getDefiningOp<TransposeOp>();
  if (!t || !t->hasOneUse())
    return false;
  ArrayRef<int64_t> perm = t.getPermutation();
  int64_t r = perm.size();
  if (r < 2)
    return false;
  for (int64_t i = 0; i < r - 2; ++i)
    if (perm[i] != i)
      return false;
  return perm[r - 2] == r - 1 && perm[r - 1] == r - 2;
}

/// Whether an update's new value `r` may overwrite its old value `old`: a slot read used only
/// here whose new value only goes back to that slot (ZeRO: this rank's shard of a flat buffer,
/// whose new value is only gathered back into that buffer).
bool isUpdatedInPlace(Value old, Value r) {
  if (!old.hasOneUse() || !r.hasOneUse())
    return false;
  Operation *user = *r.getUsers().begin();
  if (auto slice = old.getDefiningOp<shard::AllSliceOp>()) {
    old = slice.getInput();
    user = isa<shard::AllGatherOp>(user) && user->hasOneUse() ? *user->getUsers().begin()
                                                              : nullptr;
  }
  auto read = old.getDefiningOp<GetParameterOp>();
  auto write = dyn_cast_or_null<AssignOp>(user);
  return read && write && write.getName() == read.getName();
}

/// Whether a cache's new value `r` may overwrite its old value `old` (ds.cache_write): a slot
/// read used only here, the slot read nowhere else in the function, and the new value written
/// back to it once; other ops may read the new value (the attention after the write).
bool isCacheUpdatedInPlace(Value old, Value r) {
  auto read = old.getDefiningOp<GetParameterOp>();
  if (!read || !old.hasOneUse())
    return false;
  int writes = 0;
  for (Operation *user : r.getUsers())
    if (auto a = dyn_cast<AssignOp>(user))
      writes += a.getName() == read.getName() ? 1 : 2;
  if (writes != 1)
    return false;
  bool readElsewhere = false;
  read->getParentOfType<func::FuncOp>().walk([&](GetParameterOp g) {
    readElsewhere |= g != read && g.getName() == read.getName();
  });
  return !readElsewhere;
}
} // namespace

std::string mlir::ds::describeForPlan(Operation *op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << op->getName().getStringRef() << " result "
     << formatShape(typeOf(op->getResult(0)).getShape());
  if (auto fl = dyn_cast<FileLineColLoc>(op->getLoc()))
    os << " at " << fl.getFilename().getValue() << ":" << fl.getLine();
  return s;
}

bool MemoryPlanner::isCommBuffer(Value v) const {
  if (Operation *d = v.getDefiningOp(); d && isCollective(d))
    return true;
  return v.hasOneUse() && isCollective(*v.getUsers().begin());
}

SmallVector<Value> MemoryPlanner::readsOf(Operation *op) const {
  if (fp->views.absorbed.contains(op))
    return {};
  if (auto it = fp->views.plans.find(op); it != fp->views.plans.end())
    return {it->second.lhsRoot, it->second.rhsRoot};
  SmallVector<Value> vs;
  for (Value v : op->getOperands()) {
    if (auto t = v.getDefiningOp<TransposeOp>(); t && fp->fusedTransposes.contains(t))
      v = t.getInput();
    vs.push_back(v);
  }
  return vs;
}

SmallVector<Value> MemoryPlanner::definesOf(Operation *op) const {
  if (fp->views.absorbed.contains(op))
    return {};
  if (auto it = fp->views.plans.find(op);
      it != fp->views.plans.end() && it->second.resultBuffer)
    return {it->second.resultBuffer};
  return SmallVector<Value>(op->getResults());
}

// --- placements ------------------------------------------------------------------------------

void MemoryPlanner::place(Value result, Placement p) {
  if (auto r = dyn_cast<OpResult>(result); r && r.getOwner() == cur->owner)
    cur->results[r.getResultNumber()] = p;
  else // a matmul on views writing a concatenation's buffer
    fp->bufferPlacements[result] = p;
}

int MemoryPlanner::allocHere(Value result) {
  return allocate(result, onHost ? MemorySpace::host : MemorySpace::device);
}

int MemoryPlanner::allocate(Value result, MemorySpace space) {
  RankedTensorType type = typeOf(result);
  std::string what = describeForPlan(result.getDefiningOp());
  int storage;
  if (space != MemorySpace::device) {
    storage = arena.allocIn(space, storedBytes(type), what);
  } else {
    storage = arena.alloc(storedBytes(type), what);
    temporaries.push_back({storedBytes(type), what});
  }
  if (isCommBuffer(result)) // counted by category in the memory report
    arena.markComm(storage);
  storageOf[result] = storage;
  fp->handled.insert(result);
  place(result, {space == MemorySpace::device ? Placement::Alloc : Placement::AllocHost});
  return storage;
}

void MemoryPlanner::viewOf(Value result, Value source) {
  int s = storageOf.lookup(source);
  storageOf[result] = s;
  arena.retain(s);
  fp->handled.insert(result);
  place(result, {Placement::ViewOf, source});
}

void MemoryPlanner::slotValue(Value result, int slot) {
  storageOf[result] = slotStorage[slot];
  arena.retain(slotStorage[slot]);
  fp->handled.insert(result);
  place(result, {Placement::SlotValue, Value(), slot});
}

void MemoryPlanner::opMade(Value result, int storage) {
  storageOf[result] = storage;
  fp->handled.insert(result);
  place(result, {Placement::Op});
}

Value MemoryPlanner::reuseDying(Operation *op, Value result) {
  if (onHost || isCommBuffer(result))
    return nullptr;
  for (Value v : op->getOperands()) {
    if (v.getType() != result.getType() || isa<BlockArgument>(v) || lastUse.lookup(v) != op)
      continue;
    auto it = storageOf.find(v);
    if (it == storageOf.end() || !fp->handled.contains(v))
      continue;
    const ArenaModel::Storage &st = arena.storages[it->second];
    // A temporary of the arena that nothing else holds (no view of it, no pending store).
    if (st.refs != 1 || !st.counted || st.comm || st.space != MemorySpace::device)
      continue;
    return v;
  }
  return nullptr;
}

// --- one function ----------------------------------------------------------------------------

void MemoryPlanner::beginFunction(func::FuncOp func) {
  storageOf.clear();
  Block &body = func.getBody().front();
  // Matmuls on views of their operands and results; transposes that fold into the other
  // matmuls' operands.
  fp->views = planMatmulViews(body);
  func.walk([&](MatmulOp m) {
    if (fp->views.plans.count(m))
      return;
    for (Value v : {m.getLhs(), m.getRhs()})
      if (isLast2Transpose(v))
        fp->fusedTransposes.insert(v.getDefiningOp());
  });
  // Last use of each value, counting a fused transpose's input as used by its matmul.
  lastUse.clear();
  for (Operation &op : body)
    for (Value v : readsOf(&op))
      lastUse[v] = &op;
  // A collective reads its input until the compute stream waits for it, at the first use of
  // its result: the input lives (and is counted) until then.
  extendedTo.clear();
  for (Operation &op : body) {
    if (!isCollective(&op) && !isa<MoveOp>(op))
      continue;
    Operation *firstUser = nullptr;
    for (Operation *u : op.getResult(0).getUsers())
      if (!firstUser || u->isBeforeInBlock(firstUser))
        firstUser = u;
    Value in = op.getOperand(0);
    if (firstUser && lastUse.lookup(in) && lastUse[in]->isBeforeInBlock(firstUser) &&
        !isa<BlockArgument>(in)) {
      lastUse[in] = firstUser;
      extendedTo[firstUser].push_back(in);
    }
  }
  // Arguments: inputs owned by the caller (their storages are counted by the caller).
  for (BlockArgument arg : body.getArguments()) {
    storageOf[arg] = arena.alloc(0, "argument", /*counted=*/false);
    arena.retain(storageOf[arg]); // never released by the callee
    fp->handled.insert(arg);
  }
  pendingEvents.clear();
  chainedEvents.clear();
  movedNow = {};
}

LogicalResult MemoryPlanner::planFunction(func::FuncOp func, StringRef symbol, bool microStep,
                                          bool generation) {
  fp = &plan.plans_[func];
  fp->owner = func;
  plan.functions_.push_back({func, symbol.str(), microStep, generation});
  beginFunction(func);
  Block &body = func.getBody().front();
  for (Operation &op : body) {
    cur = &fp->ops[&op];
    cur->owner = &op;
    cur->results.assign(op.getNumResults(), Placement());
    planWaits(&op);
    if (isa<func::ReturnOp>(op)) {
      unsigned before = pendingStores.size();
      waitStores(0);
      cur->storesWaited = before;
      break;
    }
    int64_t peakBefore = arena.peak;
    if (failed(planOp(&op)))
      return failure();
    // The most the op holds: a new peak it reached, else what its results leave in use.
    fp->timeline.push_back(
        {arena.peak > peakBefore ? arena.peak : arena.inUse, arena.commInUse});
    planFrees(&op);
  }
  fp->peak = arena.peak;
  fp->commAtPeak = arena.commAtPeak;
  fp->moved = movedNow;
  return success();
}

void MemoryPlanner::planWaits(Operation *op) {
  SmallVector<Value> ready;
  for (auto &[v, unused] : pendingEvents)
    if (isa<func::ReturnOp>(op) || llvm::is_contained(op->getOperands(), v))
      ready.push_back(v);
  // A move of an NVMe read needs no wait: both run on the transfer stream, in order. The
  // read's event is released with the move's.
  if (auto m = dyn_cast<MoveOp>(op))
    if (llvm::is_contained(ready, m.getInput()) && m.getInput().getDefiningOp<GetParameterOp>()) {
      chainedEvents[m.getResult()].push_back(m.getInput());
      pendingEvents.erase(m.getInput());
      llvm::erase(ready, m.getInput());
    }
  for (Value v : ready) {
    EventWait w{v, {}};
    for (Value chained : chainedEvents.lookup(v))
      w.alsoRelease.push_back(chained);
    cur->waits.push_back(std::move(w));
    chainedEvents.erase(v);
    pendingEvents.erase(v);
  }
}

void MemoryPlanner::waitStores(size_t keep) {
  while (pendingStores.size() > keep) {
    arena.release(pendingStores.front());
    pendingStores.pop_front();
  }
}

void MemoryPlanner::planFrees(Operation *op) {
  // What dies here: operands at their last use, results nobody uses, and collective inputs
  // whose life was extended to this op.
  SmallVector<Value> dying;
  for (Value v : readsOf(op))
    if (lastUse.lookup(v) == op && !isa<BlockArgument>(v) && !llvm::is_contained(dying, v))
      dying.push_back(v);
  for (Value r : definesOf(op))
    if (!lastUse.count(r) && fp->handled.contains(r))
      dying.push_back(r);
  for (Value v : extendedTo.lookup(op))
    if (!llvm::is_contained(dying, v))
      dying.push_back(v);
  Operation *ret = op->getBlock()->getTerminator();
  for (Value v : dying) {
    if (ret->getNumOperands() && v == ret->getOperand(0))
      continue; // the loss: the driver frees it
    if (!fp->handled.contains(v))
      continue;
    cur->frees.push_back(v);
    arena.release(storageOf.lookup(v));
  }
}

LogicalResult MemoryPlanner::planOp(Operation *op) {
  onHost = op->hasAttr(kOnHostAttrName);
  if (fp->views.absorbed.contains(op))
    return success(); // read or written through by a matmul on views
  FailureOr<bool> planned = planStructure(op);
  if (succeeded(planned) && !*planned)
    planned = planMemory(op);
  if (failed(planned))
    return failure();
  if (!*planned)
    planKernel(op);
  return success();
}

void MemoryPlanner::planKernel(Operation *op) {
  // Every other op: its results allocated (an elementwise op's may take a dying operand's
  // storage), then its kernel; dropout's mask lives for the multiply.
  const bool optional = op->hasTrait<OpTrait::ds::OptionalGradients>();
  const bool elementwise = op->hasTrait<OpTrait::ds::WritesOverOperand>();
  for (Value r : op->getResults()) {
    if (optional && r.use_empty() && r != op->getResult(0))
      continue; // the kernel skips an unused optional gradient: Placement::None
    if (Value reused = elementwise ? reuseDying(op, r) : Value())
      viewOf(r, reused);
    else
      allocHere(r);
  }
  if (auto d = dyn_cast<DropoutOp>(op)) {
    RankedTensorType type = typeOf(d.getResult());
    std::string what = describeForPlan(op);
    int mask;
    if (onHost) {
      mask = arena.allocIn(MemorySpace::host, storedBytes(type), what);
    } else {
      mask = arena.alloc(storedBytes(type), what);
      temporaries.push_back({storedBytes(type), what});
    }
    arena.release(mask);
  }
}

// --- structure: collectives, views, transfers, constants --------------------------------------

/// The runtime group of a shard collective: the mask of its grid axes (bit i: axis i of the
/// mesh, which the grid mirrors); DSRT_GROUP_WORLD (-1) when it names none.
static FailureOr<int32_t> groupOf(ModuleOp module, Operation *op) {
  auto gridName = op->getAttrOfType<FlatSymbolRefAttr>("grid");
  auto grid = gridName ? module.lookupSymbol<shard::GridOp>(gridName.getValue()) : nullptr;
  auto mesh = module->getAttrOfType<MeshAttr>(kMeshAttrName);
  if (!grid || !mesh || grid.getShape() != mesh.getShape())
    return op->emitError() << "ds-lower-to-runtime: collectives need a grid that mirrors the "
                              "module's ds.mesh (same sizes in the same order; ds-zero and the "
                              "parallelism passes make one)";
  auto axes = op->getAttrOfType<DenseI16ArrayAttr>("grid_axes");
  if (!axes)
    return -1;
  for (int16_t a : axes.asArrayRef())
    if (a < 0 || a >= static_cast<int64_t>(mesh.getShape().size()))
      return op->emitError() << "ds-lower-to-runtime: grid axis " << a << " is not an axis of "
                             << mesh.str();
  return runtimeGroupOf(axes.asArrayRef());
}

static bool reducible(shard::ReductionKind k) {
  return k == shard::ReductionKind::Sum || k == shard::ReductionKind::Max ||
         k == shard::ReductionKind::Min;
}

LogicalResult MemoryPlanner::planCollective(Operation *op) {
  FailureOr<int32_t> group = groupOf(module, op);
  if (failed(group))
    return failure();
  cur->group = *group;
  Value in = op->getOperand(0), r = op->getResult(0);
  if (auto ar = dyn_cast<shard::AllReduceOp>(op)) {
    if (!reducible(ar.getReduction()) || typeOf(in) != typeOf(r))
      return op->emitError() << "ds-lower-to-runtime: all_reduce must be sum, max or min "
                                "with the input's type";
    // In place when a slot read used only here goes back to the same slot (DeepSpeed reduces
    // the gradient buffer itself).
    auto read = in.getDefiningOp<GetParameterOp>();
    auto write = r.hasOneUse() ? dyn_cast<AssignOp>(*r.getUsers().begin()) : AssignOp();
    if (read && write && in.hasOneUse() && write.getName() == read.getName())
      viewOf(r, in);
    else
      allocHere(r);
  } else if (auto ag = dyn_cast<shard::AllGatherOp>(op)) {
    if (ag.getGatherAxis().getZExtValue() != 0)
      return op->emitError() << "ds-lower-to-runtime: all_gather must gather along dimension 0";
    // In place into a flat buffer whose shard the input already is (ZeRO's updated
    // parameters): the gathered value is the buffer itself.
    auto write = r.hasOneUse() ? dyn_cast<AssignOp>(*r.getUsers().begin()) : AssignOp();
    int idx = write ? plan.slots_.indexOf(write.getName()) : -1;
    if (idx >= 0 && plan.slots_[idx].pinned && storageOf.lookup(in) == slotStorage[idx])
      slotValue(r, idx);
    else
      allocHere(r);
  } else if (auto a2a = dyn_cast<shard::AllToAllOp>(op)) {
    if (a2a.getSplitAxis().getZExtValue() != 0 || a2a.getConcatAxis().getZExtValue() != 0 ||
        typeOf(in) != typeOf(r))
      return op->emitError() << "ds-lower-to-runtime: all_to_all must split and concatenate "
                                "along dimension 0 with the input's type (ds-sequence-parallel "
                                "moves the axes there)";
    allocHere(r);
  } else {
    auto rs = cast<shard::ReduceScatterOp>(op);
    if (!reducible(rs.getReduction()) || rs.getScatterAxis().getZExtValue() != 0)
      return op->emitError() << "ds-lower-to-runtime: reduce_scatter must be sum, max or min "
                                "along dimension 0";
    allocHere(r);
  }
  pendingEvents[r] = true;
  return success();
}

FailureOr<bool> MemoryPlanner::planStructure(Operation *op) {
  if (auto c = dyn_cast<ConcatOp>(op); c && fp->views.concatsWritten.contains(op))
    return true; // matmuls wrote some pieces in place (allocating it); the others are copied
  if (isCollective(op))
    return failed(planCollective(op)) ? FailureOr<bool>(failure()) : true;
  // A contiguous slice of a 1-D tensor (stage 3's parameter views): a view, no copy.
  if (auto sl = dyn_cast<SliceOp>(op);
      sl && sl.getStep() == 1 && typeOf(sl.getInput()).getRank() == 1) {
    viewOf(sl.getResult(), sl.getInput());
    return true;
  }
  if (isa<shard::AllSliceOp, shard::SendOp, shard::RecvOp, RingAttentionOp,
          RingAttentionGradOp, ExpertRouteOp, ExpertDispatchOp, ExpertCombineOp>(op)) {
    FailureOr<int32_t> group = groupOf(module, op);
    if (failed(group))
      return failure();
    cur->group = *group;
  }
  if (auto sl = dyn_cast<shard::AllSliceOp>(op)) {
    // This rank's chunk along dimension 0: a view, no communication.
    if (sl.getSliceAxis().getZExtValue() != 0)
      return op->emitError() << "ds-lower-to-runtime: all_slice must slice dimension 0";
    viewOf(sl.getResult(), sl.getInput());
    return true;
  }
  if (auto mc = dyn_cast<MeshCoordinateOp>(op)) {
    allocHere(mc.getResult());
    return true;
  }
  // Pipeline transfers on the pp group (ds-pipeline). A send completes before the rank goes
  // on (its input may be freed right after); a receive is waited for at its first use.
  if (auto send = dyn_cast<shard::SendOp>(op)) {
    if (!send.getDestinationDynamic().empty() || send.getDestination().size() != 1)
      return op->emitError() << "ds-lower-to-runtime: shard.send needs one static destination";
    return true;
  }
  if (auto recv = dyn_cast<shard::RecvOp>(op)) {
    auto source = recv.getSource();
    if (!recv.getSourceDynamic().empty() || !source || source->size() != 1)
      return op->emitError() << "ds-lower-to-runtime: shard.recv needs one static source";
    allocHere(recv.getResult());
    pendingEvents[recv.getResult()] = true;
    return true;
  }
  if (auto c = dyn_cast<ConstantOp>(op)) {
    // A receive's operand only gives its type: nothing to make.
    if (c->hasOneUse() && isa<shard::RecvOp>(*c->getUsers().begin()))
      return true;
    auto attr = dyn_cast<DenseElementsAttr>(c.getValue());
    if (!attr)
      return op->emitError() << "ds-lower-to-runtime: constant must be dense";
    Value r = c.getResult();
    if (!attr.isSplat()) { // bytes in a global, borrowed (not counted in the arena)
      opMade(r, arena.alloc(storedBytes(typeOf(r)), "constant", /*counted=*/false));
      return true;
    }
    // A splat written to a flat buffer (ZeRO's gradient zeroing) fills the buffer itself.
    auto write = r.hasOneUse() ? dyn_cast<AssignOp>(*r.getUsers().begin()) : AssignOp();
    int idx = write ? plan.slots_.indexOf(write.getName()) : -1;
    if (idx >= 0 && (plan.slots_[idx].pinned || plan.slots_[idx].space == MemorySpace::host))
      slotValue(r, idx);
    else
      allocHere(r);
    return true;
  }
  return false;
}

// --- memory: slots, moves, views, in-place updates --------------------------------------------

void MemoryPlanner::planAssign(StringRef name, Value v) {
  int idx = plan.slots_.indexOf(name);
  const PlannedSlot &slot = plan.slots_[idx];
  if (slot.space == MemorySpace::nvme) { // written on the transfer stream, the value held
    int s = storageOf.lookup(v);
    arena.retain(s);
    pendingStores.push_back(s);
    movedNow[DSRT_MOVE_HOST_TO_NVME] += storedBytes(slot.type);
    unsigned before = pendingStores.size();
    waitStores(2); // at most two writes in flight
    cur->storesWaited = before - pendingStores.size();
    return;
  }
  // Copied into a flat buffer, or into a slot of another space; the value dies at its last
  // use.
  if (slot.pinned || arena.storages[storageOf.lookup(v)].space != slot.space)
    return;
  int s = storageOf.lookup(v);
  arena.retain(s);
  arena.release(slotStorage[idx]);
  slotStorage[idx] = s;
}

FailureOr<bool> MemoryPlanner::planMemory(Operation *op) {
  if (auto g = dyn_cast<GetParameterOp>(op)) {
    int idx = plan.slots_.indexOf(g.getName());
    const PlannedSlot &slot = plan.slots_[idx];
    if (slot.shardOf >= 0)
      return op->emitError() << "ds-lower-to-runtime: '" << g.getName()
                             << "' is partitioned (ZeRO stage 3) and has no whole value to read";
    if (slot.space == MemorySpace::nvme) { // read into a host buffer on the transfer stream
      bool was = onHost;
      onHost = true;
      allocate(g.getResult(), MemorySpace::host);
      onHost = was;
      pendingEvents[g.getResult()] = true;
      movedNow[DSRT_MOVE_NVME_TO_HOST] += storedBytes(typeOf(g.getResult()));
      return true;
    }
    slotValue(g.getResult(), idx);
    return true;
  }
  if (auto m = dyn_cast<MoveOp>(op)) {
    bool toHost = m.getTo() == MemorySpace::host;
    allocate(m.getResult(), toHost ? MemorySpace::host : MemorySpace::device);
    pendingEvents[m.getResult()] = true;
    movedNow[toHost ? DSRT_MOVE_DEVICE_TO_HOST : DSRT_MOVE_HOST_TO_DEVICE] +=
        storedBytes(typeOf(m.getResult()));
    return true;
  }
  if (auto a = dyn_cast<AssignOp>(op)) {
    planAssign(a.getName(), a.getValue());
    return true;
  }
  if (auto a = dyn_cast<AssignBufferOp>(op)) {
    planAssign(a.getName(), a.getValue());
    return true;
  }
  if (auto r = dyn_cast<ReshapeOp>(op)) {
    viewOf(r.getResult(), r.getInput());
    return true;
  }
  if (auto t = dyn_cast<TransposeOp>(op); t && fp->fusedTransposes.contains(op))
    return true; // folded into its matmul
  if (auto it = fp->views.plans.find(op); it != fp->views.plans.end()) {
    Value result = definesOf(op)[0];
    if (!fp->handled.contains(result)) // else: a concatenation another piece allocated
      allocHere(result);
    return true;
  }
  if (auto s = dyn_cast<InsertSliceOp>(op)) {
    // Write into a buffer that dies here (a filled splat, an earlier insert) instead of
    // copying it.
    Value dest = s.getDest();
    auto destConst = dest.getDefiningOp<ConstantOp>();
    const ArenaModel::Storage &st = arena.storages[storageOf.lookup(dest)];
    if (dest.hasOneUse() && !isa<BlockArgument>(dest) && st.refs == 1 && st.counted &&
        (!destConst || cast<DenseElementsAttr>(destConst.getValue()).isSplat()))
      viewOf(s.getResult(), dest);
    else
      allocHere(s.getResult());
    return true;
  }
  if (auto u = dyn_cast<AdamWUpdateOp>(op)) {
    // Update in place when the old value is a slot read used only here and the new one only
    // goes back to that slot (ZeRO: the slot's shard, gathered back into it).
    Value olds[3] = {u.getParam(), u.getExpAvg(), u.getExpAvgSq()};
    for (int i = 0; i < 3; ++i) {
      Value r = op->getResult(i), old = olds[i];
      if (isUpdatedInPlace(old, r))
        viewOf(r, old);
      else
        allocHere(r);
    }
    return true;
  }
  if (auto w = dyn_cast<CacheWriteOp>(op)) {
    // The tokens written into the cache's own storage when it goes back to its state (else
    // a copy of the cache is written: the lowering copies, then writes).
    Value olds[2] = {w.getKCache(), w.getVCache()};
    for (int i = 0; i < 2; ++i) {
      if (isCacheUpdatedInPlace(olds[i], op->getResult(i)))
        viewOf(op->getResult(i), olds[i]);
      else
        allocHere(op->getResult(i));
    }
    return true;
  }
  return false;
}
