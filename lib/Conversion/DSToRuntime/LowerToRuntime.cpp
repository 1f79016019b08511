//===- LowerToRuntime.cpp - ds-lower-to-runtime: dsrt calls in LLVM dialect -===//
//
// Every ds tensor becomes a `dsrt_tensor *`. Results are allocated from the device arena just
// before their kernel and freed right after their last use; reshapes and parameter reads are
// views. The same schedule is simulated here to compute the exact peak bytes (the plan). This
// file lowers the step's structure (slots, views, constants, collectives, in-place updates);
// each kernel op goes through its family's pattern (KernelPatterns.h, one file per family).
//
//===----------------------------------------------------------------------===//
#include "ds/Transforms/Passes.h"

#include "KernelPatterns.h"
#include "MatmulViews.h"
#include "RunDescriptor.h"

#include "ds/Config/DeepSpeedConfig.h"

#include "ds/IR/DSShapes.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include <deque>
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSLOWERTORUNTIME
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {
RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// dsrt.h's code of an element type.
FailureOr<dsrt_dtype> dtypeCode(Type t) {
  if (t.isF32())
    return DSRT_F32;
  if (t.isF64())
    return DSRT_F64;
  if (t.isInteger(64))
    return DSRT_I64;
  if (t.isInteger(32))
    return DSRT_I32;
  if (t.isInteger(1))
    return DSRT_I1;
  if (t.isBF16())
    return DSRT_BF16;
  if (t.isF16())
    return DSRT_F16;
  return failure();
}
/// The metadata's name of a dtype (the runtime's io::dtypeFromName reads it).
const char *dtypeName(dsrt_dtype code) { return dsrt_dtype_name(code); }
/// Bytes of a tensor as the runtime stores it (DSRT_I1: a byte per element).
int64_t tensorBytes(RankedTensorType t) {
  unsigned bits = t.getElementType().getIntOrFloatBitWidth();
  return numElements(t.getShape()) * (bits == 1 ? 1 : bits / 8);
}

/// Simulates the runtime arena: storages with reference counts, exactly as dsrt counts them.
struct ArenaModel {
  struct Storage {
    int64_t bytes = 0;
    int refs = 0;
    bool counted = true;
    std::string what;
    bool comm = false; ///< a communication buffer (a collective's input or output)
    dsrt_space space = DSRT_SPACE_DEVICE; ///< the arena, host memory or the swap file
  };
  std::vector<Storage> storages;
  int64_t inUse = 0, peak = 0;
  /// Host memory and the swap file (ds-offload's spaces), counted apart from the arena.
  int64_t hostInUse = 0, hostPeak = 0, nvmeInUse = 0, nvmePeak = 0;
  int allocIn(dsrt_space space, int64_t bytes, std::string what) {
    if (space == DSRT_SPACE_DEVICE)
      return alloc(bytes, std::move(what));
    storages.push_back({bytes, 1, true, std::move(what), false, space});
    int64_t &use = space == DSRT_SPACE_HOST ? hostInUse : nvmeInUse;
    int64_t &top = space == DSRT_SPACE_HOST ? hostPeak : nvmePeak;
    use += bytes;
    top = std::max(top, use);
    return storages.size() - 1;
  }
  /// Communication buffers live now, and at the last peak.
  int64_t commInUse = 0, commAtPeak = 0;

  int alloc(int64_t bytes, std::string what, bool counted = true, bool comm = false) {
    storages.push_back({bytes, 1, counted, std::move(what), comm});
    if (counted) {
      inUse += bytes;
      commInUse += comm ? bytes : 0;
      if (inUse > peak) {
        peak = inUse;
        commAtPeak = commInUse;
      }
    }
    return storages.size() - 1;
  }
  void retain(int s) { ++storages[s].refs; }
  void release(int s) {
    if (--storages[s].refs == 0 && storages[s].counted && storages[s].space != DSRT_SPACE_DEVICE) {
      (storages[s].space == DSRT_SPACE_HOST ? hostInUse : nvmeInUse) -= storages[s].bytes;
      return;
    }
    if (storages[s].refs == 0 && storages[s].counted) {
      inUse -= storages[s].bytes;
      commInUse -= storages[s].comm ? storages[s].bytes : 0;
    }
  }
};

/// Whether `v` is a communication buffer: a collective's result, or a value packed only to be
/// communicated (stage 2's gradient buckets).
bool isCommBuffer(Value v) {
  auto isCollective = [](Operation *op) {
    return isa<shard::AllReduceOp, shard::AllGatherOp, shard::ReduceScatterOp, shard::AllToAllOp>(op);
  };
  if (Operation *d = v.getDefiningOp(); d && isCollective(d))
    return true;
  return v.hasOneUse() && isCollective(*v.getUsers().begin());
}

/// Lowers the ds functions of one module.
/// The lowering of one module: the step's structure here, every kernel op through the kernel
/// patterns (KernelPatterns.h), for which it is the emitter.
class Lowering : private runtime::KernelEmitter {
public:
  Lowering(ModuleOp module)
      : module(module), ctx(module.getContext()), b(ctx), loc(module.getLoc()) {
    ptrTy = LLVM::LLVMPointerType::get(ctx);
    i32Ty = IntegerType::get(ctx, 32);
    i64Ty = IntegerType::get(ctx, 64);
    f64Ty = Float64Type::get(ctx);
    voidTy = LLVM::LLVMVoidType::get(ctx);
    runtime::populateKernelPatterns(kernels);
  }

  LogicalResult run();

private:
  // --- slots -----------------------------------------------------------------------------
  struct Slot {
    std::string name, of;
    dsrt_slot_role role = DSRT_ROLE_PARAMETER;
    SmallVector<std::string> aliases;
    RankedTensorType type;
    int viewOf = -1;     ///< a member of this flat buffer's slot
    int shardOf = -1;    ///< stage 3: a parameter that exists only as part of this shard slot
    int64_t offset = 0;  ///< elements into it
    bool pinned = false; ///< a view or a viewed buffer: assignments copy into it
    bool sharded = false; ///< differs between ranks (a ZeRO shard)
    /// A parameter split over a mesh axis (ds-tensor-parallel): its type is this rank's part
    /// of dimension `splitDim` of the state_dict tensor, in `splitSegments` segments.
    int64_t splitDim = -1, splitSegments = 1, splitParts = 1;
    std::string splitAxis;
    /// A pipeline: the pp ranks that hold it (empty: every rank).
    SmallVector<int64_t> stages;
    dsrt_space space = DSRT_SPACE_DEVICE; ///< ds.memory_space
    bool heldBy(int64_t ppRank) const {
      return stages.empty() || llvm::is_contained(stages, ppRank);
    }
  };
  LogicalResult collectSlots();

  // --- emission helpers ------------------------------------------------------------------
  LLVM::LLVMFuncOp runtimeFunc(StringRef name, LLVM::LLVMFunctionType type);
  /// A call of runtime function `f` (RuntimeABI.h), typed as dsrt.h declares it.
  template <class F, class... G> runtime::Arg<typename F::Result> call(const F &f, G &&...args) {
    return runtime::Arg<typename F::Result>(
        emitCall(f.name, f.type(ctx), F::arguments(std::forward<G>(args)...)));
  }
  Value emitCall(StringRef name, LLVM::LLVMFunctionType type,
                 ArrayRef<runtime::Operand> args) override;
  /// An i32 constant for the program's own arithmetic (calls take KernelEmitter::i32).
  Value constantI32(int64_t v) {
    return LLVM::ConstantOp::create(b, loc, i32Ty, b.getI32IntegerAttr(v));
  }
  /// Materializes a call's constant operand (KernelEmitter's i32, i64, f64, i64Array, null).
  Value materialize(const runtime::Operand &o);
  runtime::Context context() override { return runtime::Context(ctxArg); }
  runtime::Context ctxv() { return runtime::Context(ctxArg); }
  MLIRContext *mlirContext() override { return ctx; }
  /// The lowered tensor of `v`.
  runtime::Tensor get(Value v) {
    return v ? runtime::Tensor(lowered.lookup(v)) : runtime::Tensor(null());
  }

  // --- the kernel patterns' emitter ---------------------------------------------------------
  runtime::Tensor operand(Value v) override { return get(v); }
  runtime::Tensor temporary(RankedTensorType type, Operation *op) override;
  void releaseTemporary(runtime::Tensor t) override;
  bool isFusedTranspose(Value v) override {
    return v.getDefiningOp() && fusedTransposes.contains(v.getDefiningOp());
  }
  runtime::KernelPatterns kernels;
  llvm::DenseMap<Value, int> temporaryStorage;
  runtime::Tensor alloc(Value result, const std::string &what);
  runtime::Tensor allocType(RankedTensorType type, const std::string &what, int &storage);
  /// For an elementwise op's result: the storage of an operand of the same type that dies at
  /// this op (a view of it, null if none may be taken).
  runtime::Tensor reuseDying(Operation *op, Value result);
  /// Per function: the op after which each value is dead.
  llvm::DenseMap<Value, Operation *> lastUse;

  // --- functions ---------------------------------------------------------------------------
  LogicalResult lowerFunc(func::FuncOp func, StringRef newName, bool isMicroStep);
  LogicalResult lowerOp(Operation *op);
  void emitInitSlots();
  void emitMetadata();
  // --- trace sites: each ds op's runtime calls follow a dsrt_trace_site naming the op and
  // its source location (the metadata's "sites"), emitted lazily by call() -------------------
  /// Makes `op` (null: none) the site of the calls that follow.
  void setSite(Operation *op) { pendingSite = op; }
  /// The index of `op`'s site in "sites" (added when first named), or -1 for none.
  int siteOf(Operation *op);
  llvm::StringMap<int> siteIndex;
  llvm::DenseMap<Operation *, int> siteOfOp;
  std::vector<std::string> siteNames;
  Operation *pendingSite = nullptr;
  int emittedSite = -2; ///< -2: unknown (function entry, after a branch)
  // --- pipelines (ds-pipeline): one program per pp rank, dispatched on the pp coordinate ---
  LogicalResult runPipeline(DictionaryAttr info);
  /// The arena model with the slots that pp rank `ppRank` holds (-1: all) allocated.
  void allocateSlots(int64_t ppRank);
  /// Emits `body` under `if (cond)`, continuing after it.
  void emitIf(Value cond, llvm::function_ref<void()> body);
  /// This rank's pp coordinate (an i32 in the function being emitted).
  Value ppCoordinate();
  int64_t ppAxisIndex = -1, pipelineStages = 1, pipelineMicroBatches = 1;
  std::string pipelineSchedule;
  struct RankPlan {
    int64_t persistent = 0, step = 0, optimizer = 0, stepComm = 0, optimizerComm = 0;
  };
  std::vector<RankPlan> rankPlans;
  func::FuncOp inputsFunc; ///< the function whose arguments are the inputs

  ModuleOp module;
  MLIRContext *ctx;
  OpBuilder b;
  Location loc;
  Type ptrTy, i32Ty, i64Ty, f64Ty, voidTy;
  Value ctxArg;

  std::vector<Slot> slots;
  llvm::StringMap<int> slotIndex;
  llvm::StringMap<LLVM::LLVMFuncOp> funcs;
  llvm::DenseMap<Attribute, LLVM::GlobalOp> arrayGlobals;
  int globalCounter = 0;

  // Per function: lowered values, their storages in the arena model, fused transposes.
  llvm::DenseMap<Value, Value> lowered;
  llvm::DenseMap<Value, int> storageOf;
  llvm::DenseSet<Operation *> fusedTransposes;
  runtime::MatmulViews matmulViews;
  /// The values `op` reads when lowered: a matmul on views reads the tensors its operands
  /// were taken from; a fused transpose's input is read by its matmul; absorbed ops, none.
  SmallVector<Value> readsOf(Operation *op) {
    if (matmulViews.absorbed.contains(op))
      return {};
    if (auto it = matmulViews.plans.find(op); it != matmulViews.plans.end())
      return {it->second.lhsRoot, it->second.rhsRoot};
    SmallVector<Value> vs;
    for (Value v : op->getOperands()) {
      if (auto t = v.getDefiningOp<TransposeOp>(); t && fusedTransposes.contains(t))
        v = t.getInput();
      vs.push_back(v);
    }
    return vs;
  }
  /// The values `op` defines when lowered (a matmul on views: the value whose storage it
  /// writes).
  SmallVector<Value> definesOf(Operation *op) {
    if (matmulViews.absorbed.contains(op))
      return {};
    if (auto it = matmulViews.plans.find(op);
        it != matmulViews.plans.end() && it->second.resultBuffer)
      return {it->second.resultBuffer};
    return SmallVector<Value>(op->getResults());
  }
  /// Collective results whose event the compute stream has not waited for yet.
  llvm::MapVector<Value, Value> pendingEvents;
  /// Transfer-stream events completed before the one of the value they are chained to.
  llvm::DenseMap<Value, SmallVector<Value>> chainedEvents;
  /// Before `op` (or the return, with null): waits for the collectives it reads.
  void waitFor(Operation *op);
  LogicalResult lowerCollective(Operation *op);
  FailureOr<int32_t> groupOf(Operation *op);
  ArenaModel arena;
  /// ds-offload: the op being lowered runs on the host (its results are host tensors).
  bool onHost = false;
  /// NVMe writes in flight (event, the storage they read), waited oldest first.
  std::deque<std::pair<Value, int>> pendingStores;
  void waitStores(size_t keep);
  /// Bytes moved per dsrt_move_kind in one call of the function being lowered.
  int64_t movedNow[4] = {0, 0, 0, 0};
  int64_t movedPerStep[4] = {0, 0, 0, 0};
  int64_t hostPersistent = 0, nvmePersistent = 0;
  std::vector<int> slotStorage;
  int64_t persistentBytes = 0, inputBytes = 0;
  int64_t microPeak = 0, optimizerPeak = 0;
  int64_t microCommAtPeak = 0, optimizerCommAtPeak = 0;
  std::vector<std::pair<int64_t, std::string>> temporaries;
};

LogicalResult Lowering::collectSlots() {
  for (Operation &op : *module.getBody()) {
    Slot s;
    if (auto p = dyn_cast<ParameterOp>(op)) {
      s.name = p.getSymName().str();
      s.role = runtime::role(p.getRole());
      if (auto aliases = p.getAliases())
        for (Attribute a : *aliases)
          s.aliases.push_back(cast<StringAttr>(a).getValue().str());
      s.type = p.getTensorType();
      if (ShardingAttr sh = p.getShardingAttr()) {
        auto mesh = module->getAttrOfType<MeshAttr>(kMeshAttrName);
        for (auto [d, axes] : llvm::enumerate(sh.getDims())) {
          auto list = cast<ArrayAttr>(axes);
          if (list.empty())
            continue;
          if (list.size() != 1 || s.splitDim >= 0 || !mesh)
            return p.emitError() << "ds-lower-to-runtime: a parameter may be split along one "
                                    "dimension over one mesh axis";
          s.splitDim = static_cast<int64_t>(d);
          s.splitSegments = sh.getSegmentsOf(d);
          s.splitAxis = cast<StringAttr>(list[0]).getValue().str();
          s.splitParts = mesh.getShape()[mesh.findAxis(s.splitAxis)];
        }
      }
    } else if (auto st = dyn_cast<StateOp>(op)) {
      s.name = st.getSymName().str();
      s.of = st.getOf().value_or("").str();
      s.type = st.getTensorType();
      s.sharded = st.getOfAttr() && module.lookupSymbol<FlatBufferOp>(st.getOfAttr());
      s.role = runtime::role(st.getRole());
    } else if (auto f = dyn_cast<FlatBufferOp>(op)) {
      if (f.getRole() == SlotRole::params_sharded)
        continue; // only its shard (a ds.state) is stored
      s.name = f.getSymName().str();
      s.role = runtime::role(f.getRole());
      s.type = f.getTensorType();
      s.pinned = true;
    } else {
      continue;
    }
    if (auto st = op.getAttrOfType<DenseI64ArrayAttr>(kStagesAttrName))
      s.stages.assign(st.asArrayRef().begin(), st.asArrayRef().end());
    if (auto sp = op.getAttrOfType<MemorySpaceAttr>(kMemorySpaceAttrName))
      s.space = runtime::space(sp.getValue());
    if (failed(dtypeCode(s.type.getElementType())))
      return op.emitError() << "ds-lower-to-runtime: unsupported element type "
                            << s.type.getElementType();
    slotIndex[s.name] = slots.size();
    slots.push_back(std::move(s));
  }
  // Members of partitioned buffers exist only in their shard state (stage 3).
  for (auto f : module.getOps<FlatBufferOp>()) {
    if (f.getRole() != SlotRole::params_sharded)
      continue;
    int shard = slotIndex.lookup((f.getSymName() + "@shard").str());
    int64_t offset = 0;
    for (Attribute a : f.getMembers()) {
      Slot &m = slots[slotIndex.lookup(cast<FlatSymbolRefAttr>(a).getValue())];
      m.shardOf = shard;
      m.offset = offset;
      offset += m.type.getNumElements();
    }
  }
  // Members of flat buffers are views at their running offsets.
  for (auto f : module.getOps<FlatBufferOp>()) {
    if (f.getRole() == SlotRole::params_sharded)
      continue;
    int base = slotIndex.lookup(f.getSymName());
    int64_t offset = 0;
    for (Attribute a : f.getMembers()) {
      Slot &m = slots[slotIndex.lookup(cast<FlatSymbolRefAttr>(a).getValue())];
      m.viewOf = base;
      m.offset = offset;
      m.pinned = true;
      offset += m.type.getNumElements();
    }
  }
  return success();
}

LLVM::LLVMFuncOp Lowering::runtimeFunc(StringRef name, LLVM::LLVMFunctionType type) {
  auto it = funcs.find(name);
  if (it != funcs.end())
    return it->second;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(module.getBody());
  auto fn = LLVM::LLVMFuncOp::create(b, module.getLoc(), name, type);
  fn.setLinkage(LLVM::Linkage::External);
  funcs[name] = fn;
  return fn;
}

int Lowering::siteOf(Operation *op) {
  if (!op)
    return -1;
  if (auto it = siteOfOp.find(op); it != siteOfOp.end())
    return it->second;
  // The last file location: the model's line where the importer fused it after a library
  // line (torch.nn's code, inlined).
  std::string where;
  op->getLoc()->walk([&](Location l) {
    if (auto flc = dyn_cast<FileLineColLoc>(l))
      where = (llvm::sys::path::filename(flc.getFilename().getValue()) + ":" +
               Twine(flc.getLine()))
                  .str();
    return WalkResult::advance();
  });
  std::string name = op->getName().getStringRef().str() + (where.empty() ? "" : " " + where);
  auto [it, inserted] = siteIndex.try_emplace(name, (int)siteNames.size());
  if (inserted)
    siteNames.push_back(name);
  return siteOfOp[op] = it->second;
}

Value Lowering::materialize(const runtime::Operand &o) {
  if (o.value)
    return o.value;
  if (auto i = dyn_cast<IntegerAttr>(o.constant))
    return LLVM::ConstantOp::create(b, loc, i.getType(), i);
  if (auto f = dyn_cast<FloatAttr>(o.constant))
    return LLVM::ConstantOp::create(b, loc, f.getType(), f);
  if (isa<UnitAttr>(o.constant))
    return LLVM::ZeroOp::create(b, loc, ptrTy);
  auto attr = cast<DenseElementsAttr>(o.constant);
  LLVM::GlobalOp &global = arrayGlobals[attr];
  if (!global) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    global = LLVM::GlobalOp::create(b, module.getLoc(),
                                    LLVM::LLVMArrayType::get(i64Ty, attr.getNumElements()),
                                    /*isConstant=*/true, LLVM::Linkage::Internal,
                                    ("__ds_i64_" + Twine(globalCounter++)).str(), attr);
  }
  return LLVM::AddressOfOp::create(b, loc, global);
}

Value Lowering::emitCall(StringRef name, LLVM::LLVMFunctionType type,
                         ArrayRef<runtime::Operand> operands) {
  SmallVector<Value> args;
  for (const runtime::Operand &o : operands)
    args.push_back(materialize(o));
  if ((pendingSite || emittedSite >= 0) && name != "dsrt_trace_site") {
    int site = siteOf(pendingSite);
    if (site != emittedSite) {
      emittedSite = site;
      call(runtime::fn::dsrt_trace_site, ctxv(), i32(site));
    }
  }
  auto c = LLVM::CallOp::create(b, loc, runtimeFunc(name, type), args);
  return c.getNumResults() ? c.getResult() : Value();
}

runtime::Tensor Lowering::allocType(RankedTensorType type, const std::string &what,
                                    int &storage) {
  int32_t code = *dtypeCode(type.getElementType());
  if (onHost) { // the host optimizer's work: host memory, not the arena
    storage = arena.allocIn(DSRT_SPACE_HOST, tensorBytes(type), what);
    return call(runtime::fn::dsrt_tensor_alloc_host, ctxv(), i32(code), i32(type.getRank()),
                                           i64Array(type.getShape()));
  }
  storage = arena.alloc(tensorBytes(type), what);
  temporaries.push_back({tensorBytes(type), what});
  return call(runtime::fn::dsrt_tensor_alloc, ctxv(), i32(code), i32(type.getRank()),
                                    i64Array(type.getShape()));
}

runtime::Tensor Lowering::alloc(Value result, const std::string &what) {
  int storage;
  runtime::Tensor t = allocType(typeOf(result), what, storage);
  if (isCommBuffer(result)) { // counted by category in the memory report
    ArenaModel::Storage &st = arena.storages[storage];
    st.comm = true;
    arena.commInUse += st.bytes;
    if (arena.peak == arena.inUse)
      arena.commAtPeak = arena.commInUse;
  }
  lowered[result] = t;
  storageOf[result] = storage;
  return t;
}

std::string describe(Operation *op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << op->getName().getStringRef() << " result " << formatShape(typeOf(op->getResult(0)).getShape());
  if (auto fl = dyn_cast<FileLineColLoc>(op->getLoc()))
    os << " at " << fl.getFilename().getValue() << ":" << fl.getLine();
  return s;
}

runtime::Tensor Lowering::temporary(RankedTensorType type, Operation *op) {
  int storage;
  runtime::Tensor t = allocType(type, describe(op), storage);
  temporaryStorage[t] = storage;
  return t;
}

void Lowering::releaseTemporary(runtime::Tensor t) {
  call(runtime::fn::dsrt_tensor_free, ctxv(), t);
  arena.release(temporaryStorage.lookup(t));
  temporaryStorage.erase(t);
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

LogicalResult Lowering::lowerOp(Operation *op) {
  loc = op->getLoc();
  onHost = op->hasAttr(kOnHostAttrName);
  if (matmulViews.absorbed.contains(op))
    return success(); // read or written through by a matmul on views
  if (auto c = dyn_cast<ConcatOp>(op); c && matmulViews.concatsWritten.contains(op)) {
    // Matmuls wrote some pieces in place (allocating it); copy in the others.
    runtime::Tensor out = get(c.getResult());
    int64_t offset = 0;
    for (Value in : c.getInputs()) {
      if (lowered.lookup(in))
        call(runtime::fn::dsrt_insert_slice, ctxv(), out, get(in), i64(c.getDim()), i64(offset), i64(1));
      offset += typeOf(in).getShape()[c.getDim()];
    }
    return success();
  }
  if (isa<shard::AllReduceOp, shard::AllGatherOp, shard::ReduceScatterOp, shard::AllToAllOp>(op))
    return lowerCollective(op);
  // `result` is the view `view` of `source`'s storage.
  auto bindView = [&](Value result, Value source, runtime::Tensor view) {
    lowered[result] = view;
    int st = storageOf.lookup(source);
    storageOf[result] = st;
    arena.retain(st);
    return success();
  };
  // A contiguous slice of a 1-D tensor (stage 3's parameter views): a view, no copy.
  if (auto sl = dyn_cast<SliceOp>(op);
      sl && sl.getStep() == 1 && typeOf(sl.getInput()).getRank() == 1) {
    RankedTensorType type = typeOf(sl.getResult());
    return bindView(sl.getResult(), sl.getInput(),
                    call(runtime::fn::dsrt_tensor_view_at, ctxv(), get(sl.getInput()),
                         i64(sl.getStart()), i32(type.getRank()), i64Array(type.getShape())));
  }
  if (auto sl = dyn_cast<shard::AllSliceOp>(op)) {
    // This rank's chunk along dimension 0: a view, no communication.
    if (sl.getSliceAxis().getZExtValue() != 0)
      return op->emitError() << "ds-lower-to-runtime: all_slice must slice dimension 0";
    FailureOr<int32_t> group = groupOf(op);
    if (failed(group))
      return failure();
    RankedTensorType type = typeOf(sl.getResult());
    return bindView(sl.getResult(), sl.getInput(),
                    call(runtime::fn::dsrt_comm_chunk, ctxv(), i32(*group), get(sl.getInput()),
                         i32(type.getRank()), i64Array(type.getShape())));
  }

  if (auto mc = dyn_cast<MeshCoordinateOp>(op)) {
    // This rank's index along the axis (the runtime's mesh mirrors the grid).
    Value coord = call(runtime::fn::dsrt_comm_coordinate, ctxv(), i32(static_cast<int64_t>(mc.getGridAxis())));
    runtime::Tensor out = alloc(mc.getResult(), describe(op));
    call(runtime::fn::dsrt_fill, ctxv(), out,
         runtime::Arg<double>(LLVM::SIToFPOp::create(b, loc, f64Ty, coord)));
    return success();
  }

  // Pipeline transfers on the pp group (ds-pipeline). A send completes before the rank goes
  // on (its input may be freed right after); a receive is waited for at its first use.
  if (auto send = dyn_cast<shard::SendOp>(op)) {
    FailureOr<int32_t> group = groupOf(op);
    if (failed(group))
      return failure();
    if (!send.getDestinationDynamic().empty() || send.getDestination().size() != 1)
      return op->emitError() << "ds-lower-to-runtime: shard.send needs one static destination";
    runtime::Event event = call(runtime::fn::dsrt_send_recv, ctxv(), i32(*group), null(), i32(-1),
                                          get(send.getInput()), i32(send.getDestination()[0]));
    call(runtime::fn::dsrt_event_wait, ctxv(), event);
    call(runtime::fn::dsrt_event_release, event);
    return success();
  }
  if (auto recv = dyn_cast<shard::RecvOp>(op)) {
    FailureOr<int32_t> group = groupOf(op);
    if (failed(group))
      return failure();
    auto source = recv.getSource();
    if (!recv.getSourceDynamic().empty() || !source || source->size() != 1)
      return op->emitError() << "ds-lower-to-runtime: shard.recv needs one static source";
    runtime::Tensor out = alloc(recv.getResult(), describe(op));
    pendingEvents[recv.getResult()] =
        call(runtime::fn::dsrt_send_recv, ctxv(), i32(*group), out, i32((*source)[0]), null(), i32(-1));
    return success();
  }

  if (auto c = dyn_cast<ConstantOp>(op)) {
    // A receive's operand only gives its type: nothing to make.
    if (c->hasOneUse() && isa<shard::RecvOp>(*c->getUsers().begin()))
      return success();
    auto attr = dyn_cast<DenseElementsAttr>(c.getValue());
    RankedTensorType type = typeOf(c.getResult());
    if (!attr)
      return op->emitError() << "ds-lower-to-runtime: constant must be dense";
    if (attr.isSplat()) {
      // A splat written to a flat buffer (ZeRO's gradient zeroing) fills the buffer itself.
      Value r = c.getResult();
      auto write = r.hasOneUse() ? dyn_cast<AssignOp>(*r.getUsers().begin()) : AssignOp();
      runtime::Tensor t;
      if (write && slotIndex.count(write.getName()) &&
          (slots[slotIndex.lookup(write.getName())].pinned ||
           slots[slotIndex.lookup(write.getName())].space == DSRT_SPACE_HOST)) {
        int idx = slotIndex.lookup(write.getName());
        t = call(runtime::fn::dsrt_slot_get, ctxv(), i32(idx));
        lowered[r] = t;
        storageOf[r] = slotStorage[idx];
        arena.retain(slotStorage[idx]);
      } else {
        t = alloc(r, describe(op));
      }
      double v = isa<FloatType>(type.getElementType())
                     ? attr.getSplatValue<APFloat>().convertToDouble()
                     : (double)attr.getSplatValue<APInt>().getSExtValue();
      if (type.getElementType().isInteger(1))
        v = attr.getSplatValue<bool>() ? 1.0 : 0.0;
      call(runtime::fn::dsrt_fill, ctxv(), t, f64(v));
      return success();
    }
    // Non-splat: bytes in a global, borrowed (not counted in the arena).
    DenseElementsAttr data = attr;
    Type elem = type.getElementType();
    if (elem.isInteger(1)) {
      SmallVector<int8_t> bytes;
      for (bool v : attr.getValues<bool>())
        bytes.push_back(v);
      data = DenseElementsAttr::get(RankedTensorType::get({(int64_t)bytes.size()},
                                                          IntegerType::get(ctx, 8)),
                                    ArrayRef<int8_t>(bytes));
      elem = IntegerType::get(ctx, 8);
    } else {
      data = attr.reshape(RankedTensorType::get({type.getNumElements()}, elem));
    }
    LLVM::GlobalOp global;
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(module.getBody());
      global = LLVM::GlobalOp::create(b, module.getLoc(),
                                      LLVM::LLVMArrayType::get(elem, type.getNumElements()),
                                      true, LLVM::Linkage::Internal,
                                      ("__ds_const_" + Twine(globalCounter++)).str(), data);
    }
    runtime::Arg<const void *> addr(LLVM::AddressOfOp::create(b, loc, global));
    Value t = call(runtime::fn::dsrt_tensor_borrow, ctxv(), i32(*dtypeCode(type.getElementType())),
                                          i32(type.getRank()), i64Array(type.getShape()), addr);
    lowered[c.getResult()] = t;
    storageOf[c.getResult()] = arena.alloc(tensorBytes(type), "constant", /*counted=*/false);
    return success();
  }
  if (auto g = dyn_cast<GetParameterOp>(op)) {
    int idx = slotIndex.lookup(g.getName());
    if (slots[idx].shardOf >= 0)
      return op->emitError() << "ds-lower-to-runtime: '" << g.getName()
                             << "' is partitioned (ZeRO stage 3) and has no whole value to read";
    if (slots[idx].space == DSRT_SPACE_NVME) { // NVMe: read into a host buffer on the transfer stream
      RankedTensorType type = typeOf(g.getResult());
      bool was = onHost;
      onHost = true;
      runtime::Tensor t = alloc(g.getResult(), "NVMe read of " + slots[idx].name);
      onHost = was;
      pendingEvents[g.getResult()] = call(runtime::fn::dsrt_slot_fetch, ctxv(), i32(idx), t);
      movedNow[3] += tensorBytes(type);
      return success();
    }
    lowered[g.getResult()] = call(runtime::fn::dsrt_slot_get, ctxv(), i32(idx));
    storageOf[g.getResult()] = slotStorage[idx];
    arena.retain(slotStorage[idx]);
    return success();
  }
  if (auto m = dyn_cast<MoveOp>(op)) {
    bool toHost = m.getTo() == MemorySpace::host;
    onHost = toHost;
    runtime::Tensor out = alloc(m.getResult(), describe(op));
    onHost = false;
    pendingEvents[m.getResult()] = call(runtime::fn::dsrt_move, ctxv(), out, get(m.getInput()));
    movedNow[toHost ? 0 : 1] += tensorBytes(typeOf(m.getResult()));
    return success();
  }
  auto assignSlot = [&](StringRef name, Value v) {
    int idx = slotIndex.lookup(name);
    if (slots[idx].space == DSRT_SPACE_NVME) { // NVMe: written on the transfer stream, the value held
      int s = storageOf.lookup(v);
      arena.retain(s);
      pendingStores.push_back({call(runtime::fn::dsrt_slot_store, ctxv(), i32(idx), get(v)), s});
      movedNow[2] += tensorBytes(slots[idx].type);
      waitStores(2); // at most two writes in flight
      return;
    }
    call(runtime::fn::dsrt_slot_set, ctxv(), i32(idx), get(v));
    // Copied into a flat buffer, or into a slot of another space; the value dies at its
    // last use.
    if (slots[idx].pinned || arena.storages[storageOf.lookup(v)].space != slots[idx].space)
      return;
    int s = storageOf.lookup(v);
    arena.retain(s);
    arena.release(slotStorage[idx]);
    slotStorage[idx] = s;
  };
  if (auto a = dyn_cast<AssignOp>(op)) {
    assignSlot(a.getName(), a.getValue());
    return success();
  }
  if (auto a = dyn_cast<AssignBufferOp>(op)) {
    assignSlot(a.getName(), a.getValue());
    return success();
  }
  if (auto r = dyn_cast<ReshapeOp>(op)) {
    RankedTensorType type = typeOf(r.getResult());
    lowered[r.getResult()] = call(runtime::fn::dsrt_tensor_view, ctxv(), get(r.getInput()),
                                                       i32(type.getRank()),
                                                       i64Array(type.getShape()));
    int s = storageOf.lookup(r.getInput());
    storageOf[r.getResult()] = s;
    arena.retain(s);
    return success();
  }
  if (auto t = dyn_cast<TransposeOp>(op); t && fusedTransposes.contains(op))
    return success(); // folded into its matmul
  if (auto it = matmulViews.plans.find(op); it != matmulViews.plans.end()) {
    const runtime::MatmulViewPlan &plan = it->second;
    Value result = definesOf(op)[0];
    runtime::Tensor out = get(result); // a concatenation another piece's matmul allocated
    if (!out)
      out = alloc(result, describe(result.getDefiningOp()));
    call(runtime::fn::dsrt_matmul_view, ctxv(), out, get(plan.lhsRoot), get(plan.rhsRoot),
                              i64Array(plan.views), f64(plan.alpha));
    return success();
  }

  // Everything else: allocate the results, then one kernel call.
  if (auto s = dyn_cast<InsertSliceOp>(op)) {
    Value dest = s.getDest();
    auto destConst = dest.getDefiningOp<ConstantOp>();
    runtime::Tensor out;
    bool destIsTemporary =
        dest.hasOneUse() && !isa<BlockArgument>(dest) &&
        arena.storages[storageOf.lookup(dest)].refs == 1 && arena.storages[storageOf.lookup(dest)].counted &&
        (!destConst || cast<DenseElementsAttr>(destConst.getValue()).isSplat());
    if (destIsTemporary) {
      // Write into a buffer that dies here (a filled splat, an earlier insert) instead of
      // copying it.
      RankedTensorType type = typeOf(s.getResult());
      out = call(runtime::fn::dsrt_tensor_view, ctxv(), get(dest), i32(type.getRank()),
                                      i64Array(type.getShape()));
      lowered[s.getResult()] = out;
      storageOf[s.getResult()] = storageOf.lookup(dest);
      arena.retain(storageOf.lookup(dest));
    } else {
      out = alloc(s.getResult(), describe(op));
      call(runtime::fn::dsrt_copy, ctxv(), out, get(dest));
    }
    call(runtime::fn::dsrt_insert_slice, ctxv(), out, get(s.getSource()), i64(s.getDim()),
                               i64(s.getStart()), i64(s.getStep()));
    return success();
  }

  if (auto u = dyn_cast<AdamWUpdateOp>(op)) {
    // Update in place when the old value is a slot read used only here and the new one only
    // goes back to that slot: no second copy of the parameter or its moments.
    Value olds[3] = {u.getParam(), u.getExpAvg(), u.getExpAvgSq()};
    runtime::Tensor outs3[3];
    // ZeRO: this rank's shard of a flat buffer (a view) is also updated in place when the new
    // value is only gathered back into that buffer.
    auto inPlace = [&](Value old, Value r) {
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
    };
    for (int i = 0; i < 3; ++i) {
      Value r = op->getResult(i), old = olds[i];
      if (inPlace(old, r)) {
        RankedTensorType type = typeOf(r);
        outs3[i] = call(runtime::fn::dsrt_tensor_view, ctxv(), get(old), i32(type.getRank()),
                                             i64Array(type.getShape()));
        lowered[r] = outs3[i];
        storageOf[r] = storageOf.lookup(old);
        arena.retain(storageOf[r]);
      } else {
        outs3[i] = alloc(r, describe(op));
      }
    }
    call(runtime::fn::dsrt_adamw_update, ctxv(), outs3[0], outs3[1], outs3[2], get(u.getParam()), get(u.getGrad()),
          get(u.getExpAvg()), get(u.getExpAvgSq()), get(u.getStepSize()),
          get(u.getBiasCorrection2Sqrt()), get(u.getDecay()), get(u.getBeta1()),
          f64(u.getBeta2().convertToDouble()),
          f64(u.getEps().convertToDouble()));
    return success();
  }

  // Every other op: its results allocated, then its kernel pattern's calls.
  const runtime::KernelPatterns::Entry *pattern = kernels.lookup(op);
  if (!pattern)
    return op->emitError() << "ds-lower-to-runtime: no runtime kernel for '" << op->getName()
                           << "'";
  SmallVector<runtime::Tensor> outs;
  for (Value r : op->getResults()) {
    if (pattern->optionalResults && r.use_empty() && r != op->getResult(0)) {
      outs.push_back(null()); // the kernel skips an unused optional gradient
      continue;
    }
    runtime::Tensor reused = pattern->elementwise ? reuseDying(op, r) : runtime::Tensor();
    outs.push_back(reused ? reused : alloc(r, describe(op)));
  }
  return pattern->lower(op, outs, *this);
}

runtime::Tensor Lowering::reuseDying(Operation *op, Value result) {
  // Only for elementwise kernels (KernelPatterns::addElementwise): they may write over it.
  if (onHost || isCommBuffer(result))
    return {};
  for (Value v : op->getOperands()) {
    if (v.getType() != result.getType() || isa<BlockArgument>(v) || lastUse.lookup(v) != op)
      continue;
    auto it = storageOf.find(v);
    runtime::Tensor handle = get(v);
    if (it == storageOf.end() || !handle)
      continue;
    const int storage = it->second; // (inserting into storageOf below moves its entries)
    const ArenaModel::Storage &st = arena.storages[storage];
    // A temporary of the arena that nothing else holds (no view of it, no pending store).
    if (st.refs != 1 || !st.counted || st.comm || st.space != DSRT_SPACE_DEVICE)
      continue;
    RankedTensorType type = typeOf(result);
    runtime::Tensor out = call(runtime::fn::dsrt_tensor_view, ctxv(), handle, i32(type.getRank()), i64Array(type.getShape()));
    lowered[result] = out;
    storageOf[result] = storage;
    arena.retain(storage);
    return out;
  }
  return {};
}

LogicalResult Lowering::lowerFunc(func::FuncOp func, StringRef newName, bool isMicroStep) {
  lowered.clear();
  storageOf.clear();
  fusedTransposes.clear();
  Block &body = func.getBody().front();

  // Splat constants are filled arena tensors: give each use its own, created right before the
  // use, so that none is live longer than needed (canonicalization hoists them all to the top).
  for (auto c : llvm::to_vector(body.getOps<ConstantOp>())) {
    auto attr = dyn_cast<DenseElementsAttr>(c.getValue());
    if (!attr || !attr.isSplat() || c->use_empty())
      continue;
    SmallVector<OpOperand *> uses;
    for (OpOperand &use : c->getUses())
      uses.push_back(&use);
    for (OpOperand *use : uses) {
      OpBuilder cb(use->getOwner());
      Operation *clone = cb.clone(*c);
      clone->setLoc(use->getOwner()->getLoc()); // the trace names the line that uses it
      use->set(clone->getResult(0));
    }
    c.erase();
  }

  // Matmuls on views of their operands and results (MatmulViews.h); transposes that fold
  // into the other matmuls' operands.
  matmulViews = runtime::planMatmulViews(body);
  func.walk([&](MatmulOp m) {
    if (matmulViews.plans.count(m))
      return;
    for (Value v : {m.getLhs(), m.getRhs()})
      if (isLast2Transpose(v))
        fusedTransposes.insert(v.getDefiningOp());
  });

  // Last use of each value, counting a fused transpose's input as used by its matmul.
  lastUse.clear();
  for (Operation &op : body)
    for (Value v : readsOf(&op))
      lastUse[v] = &op;

  // A collective reads its input until the compute stream waits for it, at the first use of
  // its result: the input lives (and is counted) until then.
  llvm::DenseMap<Operation *, SmallVector<Value>> extendedTo;
  for (Operation &op : body) {
    if (!isa<shard::AllReduceOp, shard::AllGatherOp, shard::ReduceScatterOp, shard::AllToAllOp,
             MoveOp>(op))
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

  // Signature: micro_step(ctx, inputs**) -> dsrt_tensor*;
  // optimizer_step(ctx, lr, step, beta1, aux_lr).
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(module.getBody());
  SmallVector<Type> argTypes = {ptrTy};
  if (isMicroStep)
    argTypes.push_back(ptrTy);
  else
    argTypes.append(func.getNumArguments(), ptrTy);
  Type resultType = func.getNumResults() ? ptrTy : voidTy;
  auto fn = LLVM::LLVMFuncOp::create(b, func.getLoc(), newName,
                                     LLVM::LLVMFunctionType::get(resultType, argTypes));
  Block *entry = fn.addEntryBlock(b);
  b.setInsertionPointToStart(entry);
  ctxArg = entry->getArgument(0);
  pendingSite = nullptr, emittedSite = -2;
  loc = func.getLoc();

  // Arguments: inputs owned by the caller (their storages are counted by the caller).
  for (auto [i, arg] : llvm::enumerate(func.getArguments())) {
    Value t;
    if (isMicroStep) {
      Value slot = LLVM::GEPOp::create(b, loc, ptrTy, ptrTy, entry->getArgument(1),
                                       ArrayRef<LLVM::GEPArg>{(int32_t)i});
      t = LLVM::LoadOp::create(b, loc, ptrTy, slot);
    } else {
      t = entry->getArgument(1 + i);
    }
    lowered[arg] = t;
    storageOf[arg] = arena.alloc(0, "argument", /*counted=*/false);
    arena.retain(storageOf[arg]); // never released by the callee
  }

  Value returned;
  emittedSite = -2;
  for (Operation &op : body) {
    setSite(isa<func::ReturnOp>(op) ? nullptr : &op);
    waitFor(&op);
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      loc = ret.getLoc();
      waitStores(0);
      if (ret.getNumOperands())
        returned = ret.getOperand(0);
      break;
    }
    if (failed(lowerOp(&op)))
      return failure();
    // Free what dies here: operands at their last use, results nobody uses.
    SmallVector<Value> dying;
    for (Value v : readsOf(&op)) {
      if (lastUse.lookup(v) == &op && !isa<BlockArgument>(v) && !llvm::is_contained(dying, v))
        dying.push_back(v);
    }
    for (Value r : definesOf(&op))
      if (!lastUse.count(r) && lowered.lookup(r))
        dying.push_back(r);
    // Collective inputs whose life was extended to this op (not one of its operands).
    for (Value v : extendedTo.lookup(&op))
      if (!llvm::is_contained(dying, v))
        dying.push_back(v);
    for (Value v : dying) {
      if (func.getBody().front().getTerminator()->getNumOperands() &&
          v == func.getBody().front().getTerminator()->getOperand(0))
        continue;
      if (!lowered.lookup(v))
        continue;
      runtime::Tensor h = get(v);
      call(runtime::fn::dsrt_tensor_free, ctxv(), h);
      arena.release(storageOf.lookup(v));
    }
  }
  if (returned) {
    LLVM::ReturnOp::create(b, loc, ValueRange{lowered.lookup(returned)});
  } else {
    LLVM::ReturnOp::create(b, loc, ValueRange{});
  }
  return success();
}

void Lowering::waitStores(size_t keep) {
  while (pendingStores.size() > keep) {
    auto [event, storage] = pendingStores.front();
    pendingStores.pop_front();
    call(runtime::fn::dsrt_event_wait, ctxv(), runtime::Event(event));
    call(runtime::fn::dsrt_event_release, runtime::Event(event));
    arena.release(storage);
  }
}

void Lowering::waitFor(Operation *op) {
  SmallVector<Value> ready;
  for (auto &[v, event] : pendingEvents)
    if (isa<func::ReturnOp>(op) || llvm::is_contained(op->getOperands(), v))
      ready.push_back(v);
  // A move of an NVMe read needs no wait: both run on the transfer stream, in order. The
  // read's event is released with the move's.
  if (auto m = dyn_cast<MoveOp>(op))
    if (llvm::is_contained(ready, m.getInput()) && m.getInput().getDefiningOp<GetParameterOp>()) {
      chainedEvents[m.getResult()].push_back(pendingEvents.lookup(m.getInput()));
      pendingEvents.erase(m.getInput());
      llvm::erase(ready, m.getInput());
    }
  for (Value v : ready) {
    runtime::Event event(pendingEvents.lookup(v));
    call(runtime::fn::dsrt_event_wait, ctxv(), event);
    call(runtime::fn::dsrt_event_release, event);
    for (Value chained : chainedEvents.lookup(v))
      call(runtime::fn::dsrt_event_release, runtime::Event(chained));
    chainedEvents.erase(v);
    pendingEvents.erase(v);
  }
}

/// The runtime group of a shard collective: the mask of its grid axes (bit i: axis i of the
/// mesh, which the grid mirrors); DSRT_GROUP_WORLD (-1) when it names none.
FailureOr<int32_t> Lowering::groupOf(Operation *op) {
  auto gridName = op->getAttrOfType<FlatSymbolRefAttr>("grid");
  auto grid = gridName ? module.lookupSymbol<shard::GridOp>(gridName.getValue()) : nullptr;
  auto mesh = module->getAttrOfType<MeshAttr>(kMeshAttrName);
  if (!grid || !mesh || grid.getShape() != mesh.getShape())
    return op->emitError() << "ds-lower-to-runtime: collectives need a grid that mirrors the "
                              "module's ds.mesh (same sizes in the same order; ds-zero and the "
                              "parallelism passes make one)";
  auto axes = op->getAttrOfType<DenseI16ArrayAttr>("grid_axes");
  if (!axes || axes.empty())
    return -1;
  int32_t mask = 0;
  for (int16_t a : axes.asArrayRef()) {
    if (a < 0 || a >= static_cast<int64_t>(mesh.getShape().size()))
      return op->emitError() << "ds-lower-to-runtime: grid axis " << a << " is not an axis of "
                             << mesh.str();
    mask |= 1 << a;
  }
  return mask;
}

/// shard.all_reduce / all_gather / reduce_scatter / all_to_all over the runtime group of their
/// grid axes; gather, scatter and exchange along dimension 0.
LogicalResult Lowering::lowerCollective(Operation *op) {
  FailureOr<int32_t> group = groupOf(op);
  if (failed(group))
    return failure();
  Value in = op->getOperand(0), r = op->getResult(0);
  auto reduction = [](shard::ReductionKind k) -> FailureOr<int> {
    switch (k) {
    case shard::ReductionKind::Sum:
      return 0;
    case shard::ReductionKind::Max:
      return 1;
    case shard::ReductionKind::Min:
      return 2;
    default:
      return failure();
    }
  };
  runtime::Event event;
  if (auto ar = dyn_cast<shard::AllReduceOp>(op)) {
    FailureOr<int> red = reduction(ar.getReduction());
    if (failed(red) || typeOf(in) != typeOf(r))
      return op->emitError() << "ds-lower-to-runtime: all_reduce must be sum, max or min "
                                "with the input's type";
    // In place when a slot read used only here goes back to the same slot (DeepSpeed reduces
    // the gradient buffer itself).
    auto read = in.getDefiningOp<GetParameterOp>();
    auto write = r.hasOneUse() ? dyn_cast<AssignOp>(*r.getUsers().begin()) : AssignOp();
    runtime::Tensor out;
    if (read && write && in.hasOneUse() && write.getName() == read.getName()) {
      RankedTensorType type = typeOf(r);
      out = call(runtime::fn::dsrt_tensor_view, ctxv(), get(in), i32(type.getRank()),
                                      i64Array(type.getShape()));
      lowered[r] = out;
      storageOf[r] = storageOf.lookup(in);
      arena.retain(storageOf[r]);
    } else {
      out = alloc(r, describe(op));
    }
    event = call(runtime::fn::dsrt_all_reduce, ctxv(), i32(*group), out, get(in), i32(*red));
  } else if (auto ag = dyn_cast<shard::AllGatherOp>(op)) {
    if (ag.getGatherAxis().getZExtValue() != 0)
      return op->emitError() << "ds-lower-to-runtime: all_gather must gather along dimension 0";
    // In place into a flat buffer whose shard the input already is (ZeRO's updated
    // parameters): the gathered value is the buffer itself.
    auto write = r.hasOneUse() ? dyn_cast<AssignOp>(*r.getUsers().begin()) : AssignOp();
    runtime::Tensor out;
    if (write && slotIndex.count(write.getName())) {
      int idx = slotIndex.lookup(write.getName());
      if (slots[idx].pinned && storageOf.lookup(in) == slotStorage[idx]) {
        out = call(runtime::fn::dsrt_slot_get, ctxv(), i32(idx));
        lowered[r] = out;
        storageOf[r] = slotStorage[idx];
        arena.retain(slotStorage[idx]);
      }
    }
    if (!out)
      out = alloc(r, describe(op));
    event = call(runtime::fn::dsrt_all_gather, ctxv(), i32(*group), out, get(in));
  } else if (auto a2a = dyn_cast<shard::AllToAllOp>(op)) {
    if (a2a.getSplitAxis().getZExtValue() != 0 || a2a.getConcatAxis().getZExtValue() != 0 ||
        typeOf(in) != typeOf(r))
      return op->emitError() << "ds-lower-to-runtime: all_to_all must split and concatenate "
                                "along dimension 0 with the input's type (ds-sequence-parallel "
                                "moves the axes there)";
    event = call(runtime::fn::dsrt_all_to_all, ctxv(), i32(*group), alloc(r, describe(op)),
                                     get(in));
  } else {
    auto rs = cast<shard::ReduceScatterOp>(op);
    FailureOr<int> red = reduction(rs.getReduction());
    if (failed(red) || rs.getScatterAxis().getZExtValue() != 0)
      return op->emitError() << "ds-lower-to-runtime: reduce_scatter must be sum, max or min "
                                "along dimension 0";
    event = call(runtime::fn::dsrt_reduce_scatter, ctxv(), i32(*group), alloc(r, describe(op)), get(in), i32(*red));
  }
  pendingEvents[r] = event;
  return success();
}

void Lowering::emitInitSlots() {
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(module.getBody());
  loc = module.getLoc();
  auto fn = LLVM::LLVMFuncOp::create(b, loc, "ds_init_slots",
                                     LLVM::LLVMFunctionType::get(voidTy, {ptrTy}));
  Block *entry = fn.addEntryBlock(b);
  b.setInsertionPointToStart(entry);
  ctxArg = entry->getArgument(0);
  pendingSite = nullptr, emittedSite = -2;
  // A pipeline rank defines only the slots of its stage.
  Value coord = ppAxisIndex >= 0 ? ppCoordinate() : Value();
  auto onItsRanks = [&](const Slot &s, llvm::function_ref<void()> define) {
    if (!coord || s.stages.empty() || (int64_t)s.stages.size() == pipelineStages)
      return define();
    Value held;
    for (int64_t r : s.stages) {
      Value is = LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::eq, coord, constantI32(r));
      held = held ? LLVM::OrOp::create(b, loc, held, is).getResult() : is;
    }
    emitIf(held, define);
  };
  for (auto [i, s] : llvm::enumerate(slots))
    if (s.viewOf < 0 && s.shardOf < 0)
      onItsRanks(s, [&, i = i, &s = s] {
        if (s.space != DSRT_SPACE_DEVICE) // ds-offload's: host memory or the swap file
          call(runtime::fn::dsrt_slot_define_in, ctxv(), i32(i), i32(s.space),
                                       i32(*dtypeCode(s.type.getElementType())),
                                       i32(s.type.getRank()), i64Array(s.type.getShape()));
        else
          call(runtime::fn::dsrt_slot_define, ctxv(), i32(i), i32(*dtypeCode(s.type.getElementType())),
                                    i32(s.type.getRank()), i64Array(s.type.getShape()));
      });
  for (auto [i, s] : llvm::enumerate(slots))
    if (s.viewOf >= 0)
      onItsRanks(s, [&, i = i, &s = s] {
        call(runtime::fn::dsrt_slot_define_view, ctxv(), i32(i), i32(s.viewOf), i64(s.offset),
              i32(*dtypeCode(s.type.getElementType())), i32(s.type.getRank()),
              i64Array(s.type.getShape()));
      });
  LLVM::ReturnOp::create(b, loc, ValueRange{});
}

/// @optimizer_step's signature, as ds-optimizer builds it.
static LogicalResult checkOptimizerType(func::FuncOp opt) {
  MLIRContext *ctx = opt.getContext();
  auto f32 = RankedTensorType::get({}, Float32Type::get(ctx));
  auto f64 = RankedTensorType::get({}, Float64Type::get(ctx));
  if (opt.getFunctionType() != FunctionType::get(ctx, {f32, f32, f64, f32}, {}))
    return opt.emitError() << "ds-lower-to-runtime: @" << opt.getSymName()
                           << " must take (lr: tensor<f32>, step: tensor<f32>, beta1: "
                              "tensor<f64>, aux_lr: tensor<f32>) as ds-optimizer builds it; got "
                           << opt.getFunctionType();
  return success();
}

void Lowering::allocateSlots(int64_t ppRank) {
  arena = ArenaModel();
  slotStorage.clear();
  persistentBytes = hostPersistent = nvmePersistent = 0;
  for (Slot &s : slots) {
    if (s.viewOf >= 0 || s.shardOf >= 0 || (ppRank >= 0 && !s.heldBy(ppRank))) {
      slotStorage.push_back(-1); // a view, a member of a shard, or another stage's
      continue;
    }
    slotStorage.push_back(arena.allocIn(s.space, tensorBytes(s.type), "slot " + s.name));
    if (s.space == DSRT_SPACE_DEVICE)
      persistentBytes += tensorBytes(s.type);
    else
      (s.space == DSRT_SPACE_HOST ? hostPersistent : nvmePersistent) += tensorBytes(s.type);
  }
  for (auto [i, s] : llvm::enumerate(slots))
    if (s.viewOf >= 0 && slotStorage[s.viewOf] >= 0) {
      slotStorage[i] = slotStorage[s.viewOf];
      arena.retain(slotStorage[i]);
    }
}

void Lowering::emitIf(Value cond, llvm::function_ref<void()> body) {
  Region *region = b.getInsertionBlock()->getParent();
  Block *then = new Block(), *rest = new Block();
  region->push_back(then);
  region->push_back(rest);
  LLVM::CondBrOp::create(b, loc, cond, then, rest);
  b.setInsertionPointToStart(then);
  body();
  if (then->empty() || !then->back().hasTrait<OpTrait::IsTerminator>())
    LLVM::BrOp::create(b, loc, ValueRange{}, rest);
  b.setInsertionPointToStart(rest);
  emittedSite = -2; // the branch may or may not have named a site
}

Value Lowering::ppCoordinate() {
  return call(runtime::fn::dsrt_comm_coordinate, ctxv(), i32(ppAxisIndex));
}

LogicalResult Lowering::runPipeline(DictionaryAttr info) {
  auto intOf = [&](StringRef key) {
    auto a = info.getAs<IntegerAttr>(key);
    return a ? a.getInt() : -1;
  };
  pipelineStages = intOf("stages");
  pipelineMicroBatches = intOf("micro_batches");
  auto sched = info.getAs<PipelineScheduleAttr>("schedule");
  auto mesh = module->getAttrOfType<MeshAttr>(kMeshAttrName);
  if (pipelineMicroBatches < 1 || !sched || !mesh || mesh.findAxis(MeshAxis::pp) < 0)
    return module.emitError() << "ds-lower-to-runtime: a pipeline module needs ds-pipeline's "
                                 "per-rank programs (ds.pipeline with micro_batches and "
                                 "schedule) and a mesh with a pp axis";
  pipelineSchedule = stringifyPipelineSchedule(sched.getValue()).str();
  ppAxisIndex = mesh.findAxis(MeshAxis::pp);
  SmallVector<func::FuncOp> steps, opts;
  for (int64_t r = 0; r < pipelineStages; ++r) {
    auto step = module.lookupSymbol<func::FuncOp>(("pipeline_step_" + Twine(r)).str());
    auto opt = module.lookupSymbol<func::FuncOp>(("optimizer_step_" + Twine(r)).str());
    if (!step || !opt)
      return module.emitError() << "ds-lower-to-runtime: pipeline rank " << r
                                << " lacks @pipeline_step_" << r << " or @optimizer_step_" << r
                                << " (run ds-pipeline, then ds-optimizer)";
    if (failed(checkOptimizerType(opt)))
      return failure();
    steps.push_back(step);
    opts.push_back(opt);
  }
  inputsFunc = steps[0];
  for (Type t : inputsFunc.getArgumentTypes()) {
    auto rt = dyn_cast<RankedTensorType>(t);
    if (!rt || failed(dtypeCode(rt.getElementType())))
      return inputsFunc.emitError() << "ds-lower-to-runtime: unsupported input type " << t;
    inputBytes += tensorBytes(rt);
  }
  emitInitSlots();
  // Each rank's plan: its slots, then its step and its update, in the driver's order.
  int64_t persistentMax = 0;
  for (int64_t r = 0; r < pipelineStages; ++r) {
    allocateSlots(r);
    RankPlan plan;
    plan.persistent = persistentBytes;
    persistentMax = std::max(persistentMax, persistentBytes);
    int64_t base = arena.inUse;
    int inputsStorage = arena.alloc(inputBytes, "inputs");
    arena.peak = arena.inUse;
    if (failed(lowerFunc(steps[r], ("ds_pipeline_step_" + Twine(r)).str(), true)))
      return failure();
    plan.step = arena.peak;
    plan.stepComm = arena.commAtPeak;
    microCommAtPeak = std::max(microCommAtPeak, arena.commAtPeak);
    arena.release(inputsStorage);
    arena.inUse = base;
    arena.peak = base;
    int scalars = arena.alloc(3 * 4 + 8, "step scalars");
    if (failed(lowerFunc(opts[r], ("ds_optimizer_step_" + Twine(r)).str(), false)))
      return failure();
    plan.optimizer = arena.peak;
    plan.optimizerComm = arena.commAtPeak;
    optimizerCommAtPeak = std::max(optimizerCommAtPeak, arena.commAtPeak);
    arena.release(scalars);
    microPeak = std::max(microPeak, plan.step);
    optimizerPeak = std::max(optimizerPeak, plan.optimizer);
    rankPlans.push_back(plan);
  }
  persistentBytes = persistentMax;

  // The entry points the driver calls: each dispatches to this rank's program.
  OpBuilder::InsertionGuard guard(b);
  auto dispatch = [&](StringRef name, StringRef target, unsigned nargs, bool returns) {
    b.setInsertionPointToEnd(module.getBody());
    loc = module.getLoc();
    SmallVector<Type> args(nargs, ptrTy);
    auto fn = LLVM::LLVMFuncOp::create(
        b, loc, name, LLVM::LLVMFunctionType::get(returns ? ptrTy : voidTy, args));
    Block *entry = fn.addEntryBlock(b);
    b.setInsertionPointToStart(entry);
    ctxArg = entry->getArgument(0);
    pendingSite = nullptr, emittedSite = -2;
    Value coord = ppCoordinate();
    for (int64_t r = 0; r < pipelineStages; ++r) {
      Value is = LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::eq, coord, constantI32(r));
      emitIf(is, [&] {
        auto callee = module.lookupSymbol<LLVM::LLVMFuncOp>((target + Twine(r)).str());
        auto c = LLVM::CallOp::create(b, loc, callee, entry->getArguments());
        if (returns)
          LLVM::ReturnOp::create(b, loc, ValueRange{c.getResult()});
        else
          LLVM::ReturnOp::create(b, loc, ValueRange{});
      });
    }
    if (returns)
      LLVM::ReturnOp::create(b, loc, ValueRange{LLVM::ZeroOp::create(b, loc, ptrTy).getResult()});
    else
      LLVM::ReturnOp::create(b, loc, ValueRange{});
  };
  dispatch("ds_micro_step", "ds_pipeline_step_", 2, true);
  dispatch("ds_optimizer_step", "ds_optimizer_step_", 5, false);

  emitMetadata();
  for (Operation &op : llvm::make_early_inc_range(*module.getBody()))
    if (isa<func::FuncOp, ParameterOp, StateOp, FlatBufferOp, shard::GridOp>(op))
      op.erase();
  for (StringRef attr : {StringRef(kRunAttrName), StringRef("ds.weights"), StringRef(kMeshAttrName),
                         StringRef(kPipelineAttrName)})
    module->removeAttr(attr);
  return success();
}

LogicalResult Lowering::run() {
  if (auto info = module->getAttrOfType<DictionaryAttr>(kPipelineAttrName)) {
    if (failed(collectSlots()))
      return failure();
    return runPipeline(info);
  }
  auto micro = module.lookupSymbol<func::FuncOp>("micro_step");
  auto opt = module.lookupSymbol<func::FuncOp>("optimizer_step");
  if (!micro || !opt)
    return module.emitError() << "ds-lower-to-runtime needs @micro_step and @optimizer_step "
                                 "(run ds-autodiff and ds-optimizer first)";
  if (failed(checkOptimizerType(opt)))
    return failure();
  if (failed(collectSlots()))
    return failure();
  for (Type t : micro.getArgumentTypes()) {
    auto rt = dyn_cast<RankedTensorType>(t);
    if (!rt || failed(dtypeCode(rt.getElementType())))
      return micro.emitError() << "ds-lower-to-runtime: unsupported input type " << t;
    inputBytes += tensorBytes(rt);
  }

  // Persistent slots, then the two functions, simulated in the driver's order.
  allocateSlots(-1);
  emitInitSlots();

  int64_t base = arena.inUse;
  int inputsStorage = arena.alloc(inputBytes, "inputs");
  arena.peak = arena.inUse;
  temporaries.clear();
  // Bytes moved between spaces: the micro-step's once per micro-batch.
  auto run = module->getAttrOfType<RunAttr>(kRunAttrName);
  int64_t gas = run ? run.getGradientAccumulationSteps() : 1;
  std::fill(std::begin(movedNow), std::end(movedNow), 0);
  if (failed(lowerFunc(micro, "ds_micro_step", true)))
    return failure();
  for (int k = 0; k < 4; ++k)
    movedPerStep[k] = movedNow[k] * std::max<int64_t>(1, gas);
  std::fill(std::begin(movedNow), std::end(movedNow), 0);
  microPeak = arena.peak;
  microCommAtPeak = arena.commAtPeak;
  arena.release(inputsStorage);
  // The returned loss is freed by the driver.
  arena.inUse = base;
  arena.peak = base;
  // The driver's step scalars: lr, step and aux_lr (f32), beta1 (f64).
  int scalars = arena.alloc(3 * 4 + 8, "step scalars");
  if (failed(lowerFunc(opt, "ds_optimizer_step", false)))
    return failure();
  optimizerPeak = arena.peak;
  optimizerCommAtPeak = arena.commAtPeak;
  arena.release(scalars);
  for (int k = 0; k < 4; ++k)
    movedPerStep[k] += movedNow[k];

  emitMetadata();
  // The ds-level program is now fully described by the LLVM functions and the metadata.
  for (Operation &op : llvm::make_early_inc_range(*module.getBody()))
    if (isa<func::FuncOp, ParameterOp, StateOp, FlatBufferOp, shard::GridOp>(op))
      op.erase();
  for (StringRef attr : {StringRef(kRunAttrName), StringRef("ds.weights"), StringRef(kMeshAttrName)})
    module->removeAttr(attr);
  return success();
}

void Lowering::emitMetadata() {
  llvm::json::Array inputs;
  // A pipeline's step takes every micro-batch's inputs: the first micro-batch's name them.
  auto micro = inputsFunc ? inputsFunc : module.lookupSymbol<func::FuncOp>("micro_step");
  unsigned perMicroBatch = micro.getNumArguments() / std::max<int64_t>(1, pipelineMicroBatches);
  for (auto [i, t] : llvm::enumerate(micro.getArgumentTypes().take_front(perMicroBatch))) {
    auto rt = cast<RankedTensorType>(t);
    auto name = micro.getArgAttrOfType<StringAttr>(i, kInputNameAttrName);
    inputs.push_back(llvm::json::Object{
        {"name", name ? name.getValue().str() : ("input" + Twine(i)).str()},
        {"dtype", dtypeName(*dtypeCode(rt.getElementType()))},
        {"dims", llvm::json::Array(rt.getShape())}});
  }
  llvm::json::Array slotArray;
  std::vector<std::pair<int64_t, std::string>> largest;
  for (Slot &s : slots) {
    llvm::json::Object o{{"name", s.name},
                         {"role", dsrt_slot_role_name(s.role)},
                         {"dtype", dtypeName(*dtypeCode(s.type.getElementType()))},
                         {"dims", llvm::json::Array(s.type.getShape())}};
    if (!s.aliases.empty())
      o["aliases"] = llvm::json::Array(s.aliases);
    if (!s.of.empty())
      o["of"] = s.of;
    if (s.viewOf >= 0) {
      o["view_of"] = slots[s.viewOf].name;
      o["offset"] = s.offset;
    }
    if (s.shardOf >= 0) {
      o["sharded_by"] = slots[s.shardOf].name;
      o["offset"] = s.offset;
    }
    if (s.sharded)
      o["sharded"] = true;
    if (s.splitDim >= 0)
      o["split"] = llvm::json::Object{{"dim", s.splitDim},
                                      {"segments", s.splitSegments},
                                      {"axis", s.splitAxis},
                                      {"parts", s.splitParts}};
    if (!s.stages.empty())
      o["stages"] = llvm::json::Array(s.stages);
    if (s.space != DSRT_SPACE_DEVICE)
      o["space"] = dsrt_space_name(s.space);
    slotArray.push_back(std::move(o));
    largest.push_back({tensorBytes(s.type), dsrt_slot_role_kind(s.role) + (" " + s.name)});
  }
  for (auto &t : temporaries)
    largest.push_back({t.first, "activation: " + t.second});
  std::stable_sort(largest.begin(), largest.end(),
                   [](auto &x, auto &y) { return x.first > y.first; });
  llvm::json::Array buffers;
  for (size_t i = 0; i < largest.size() && i < 8; ++i)
    buffers.push_back(llvm::json::Object{{"name", largest[i].second}, {"bytes", largest[i].first}});

  llvm::json::Array sites;
  for (const std::string &site : siteNames)
    sites.push_back(site);
  llvm::json::Object root{
      {"inputs", std::move(inputs)},
      {"sites", std::move(sites)},
      {"slots", std::move(slotArray)},
      {"plan", llvm::json::Object{{"peak_bytes", std::max(microPeak, optimizerPeak)},
                                  {"persistent_bytes", persistentBytes},
                                  {"input_bytes", inputBytes},
                                  {"micro_step_peak_bytes", microPeak},
                                  {"optimizer_step_peak_bytes", optimizerPeak},
                                  {"micro_step_communication_bytes", microCommAtPeak},
                                  {"optimizer_step_communication_bytes", optimizerCommAtPeak},
                                  {"buffers", std::move(buffers)}}}};
  // Without offload: the persistent bytes that DeepSpeed's offload keys would move off the
  // device (ds-offload's rules), so that a plan over --device-memory can name the keys.
  auto run = module->getAttrOfType<RunAttr>(kRunAttrName);
  if (run)
    runtime::describeRun(run, root);
  if (!module->hasAttr(kOffloadAttrName)) {
    int64_t stage = run ? run.getZeroStage() : 0;
    int64_t threshold =
        run ? run.getParamPersistenceThreshold() : deepspeed::kParamPersistenceThreshold;
    int64_t optimizerBytes = 0, paramBytes = 0;
    bool sharded =
        llvm::any_of(slots, [](const Slot &sl) { return sl.role == DSRT_ROLE_PARAM_SHARD; });
    for (const Slot &sl : slots) {
      if (sl.viewOf >= 0 || sl.shardOf >= 0)
        continue;
      int64_t bytes = tensorBytes(sl.type);
      switch (sl.role) {
      case DSRT_ROLE_PARAMETER:
        if (!sharded && sl.type.getNumElements() >= threshold)
          paramBytes += bytes;
        break;
      case DSRT_ROLE_PARAM_SHARD:
        paramBytes += bytes;
        break;
      case DSRT_ROLE_GRAD:
      case DSRT_ROLE_GRAD_SHARD:
      case DSRT_ROLE_EXP_AVG:
      case DSRT_ROLE_EXP_AVG_SQ:
      case DSRT_ROLE_MOMENTUM_BUFFER:
      case DSRT_ROLE_MASTER:
        optimizerBytes += bytes;
        break;
      case DSRT_ROLE_BUFFER:
      case DSRT_ROLE_LOSS_SCALE:
      case DSRT_ROLE_FOUND_INF:
      case DSRT_ROLE_PARAMS:
      case DSRT_ROLE_GRADS:
      case DSRT_ROLE_PARAMS_SHARDED:
        break;
      }
    }
    llvm::json::Object off;
    if (stage >= 1)
      off["optimizer"] =
          llvm::json::Object{{"bytes", optimizerBytes}, {"keys", ::ds::kOffloadOptimizerKeys}};
    if (stage == 3)
      off["param"] = llvm::json::Object{{"bytes", paramBytes}, {"keys", ::ds::kOffloadParamKeys}};
    if (!off.empty())
      root.getObject("plan")->insert({"offloadable", std::move(off)});
  }
  // ds-offload's spaces: host memory and the swap file, and what moves between the tiers.
  if (arena.hostPeak || nvmePersistent) {
    llvm::json::Object &plan = *root.getObject("plan");
    plan["host_peak_bytes"] = arena.hostPeak;
    plan["host_persistent_bytes"] = hostPersistent;
    plan["nvme_bytes"] = nvmePersistent;
    // The swap file holds each NVMe slot at a 4096-byte boundary (O_DIRECT's alignment).
    int64_t file = 0;
    for (const Slot &sl : slots)
      if (sl.space == DSRT_SPACE_NVME)
        file += (tensorBytes(sl.type) + 4095) / 4096 * 4096;
    plan["nvme_file_bytes"] = file;
    plan["moved_bytes_per_step"] = llvm::json::Object{{"device_to_host", movedPerStep[0]},
                                                      {"host_to_device", movedPerStep[1]},
                                                      {"host_to_nvme", movedPerStep[2]},
                                                      {"nvme_to_host", movedPerStep[3]}};
  }
  if (auto w = module->getAttrOfType<StringAttr>("ds.weights"))
    root["weights"] = w.getValue().str();
  // A pipeline: one call of ds_micro_step runs the step's micro-batches on this rank's stage.
  if (ppAxisIndex >= 0) {
    llvm::json::Array ranks;
    for (const RankPlan &r : rankPlans)
      ranks.push_back(llvm::json::Object{{"peak_bytes", std::max(r.step, r.optimizer)},
                                         {"persistent_bytes", r.persistent},
                                         {"step_peak_bytes", r.step},
                                         {"optimizer_step_peak_bytes", r.optimizer},
                                         {"step_communication_bytes", r.stepComm},
                                         {"optimizer_step_communication_bytes",
                                          r.optimizerComm}});
    root["pipeline"] = llvm::json::Object{{"stages", pipelineStages},
                                          {"micro_batches", pipelineMicroBatches},
                                          {"schedule", pipelineSchedule},
                                          {"ranks", std::move(ranks)}};
  }
  // The runtime joins this mesh (its groups are masks of these axes).
  if (auto mesh = module->getAttrOfType<MeshAttr>(kMeshAttrName)) {
    llvm::json::Array axes;
    for (StringAttr a : mesh.getAxes())
      axes.push_back(a.getValue().str());
    root["mesh"] = llvm::json::Object{{"axes", std::move(axes)},
                                      {"shape", llvm::json::Array(mesh.getShape())}};
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::json::Value(std::move(root));
  text.push_back('\0');

  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(module.getBody());
  loc = module.getLoc();
  auto global = LLVM::GlobalOp::create(
      b, loc, LLVM::LLVMArrayType::get(IntegerType::get(ctx, 8), text.size()), true,
      LLVM::Linkage::Internal, "__ds_metadata", b.getStringAttr(text));
  auto fn = LLVM::LLVMFuncOp::create(b, loc, "ds_metadata", LLVM::LLVMFunctionType::get(ptrTy, {}));
  Block *entry = fn.addEntryBlock(b);
  b.setInsertionPointToStart(entry);
  Value addr = LLVM::AddressOfOp::create(b, loc, global);
  LLVM::ReturnOp::create(b, loc, ValueRange{addr});
}

struct LowerToRuntimePass : mlir::ds::impl::DSLowerToRuntimeBase<LowerToRuntimePass> {
  using DSLowerToRuntimeBase::DSLowerToRuntimeBase;
  void runOnOperation() override {
    Lowering lowering(getOperation());
    if (failed(lowering.run()))
      signalPassFailure();
  }
};
} // namespace
