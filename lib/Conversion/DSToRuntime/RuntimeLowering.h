//===- RuntimeLowering.h - what the conversion patterns share ---------------===//
//
// ds-lower-to-runtime converts every op of a step's functions with a registered pattern
// (RuntimeOpPattern). The patterns share the module's MemoryPlan, which decides every
// placement, wait and free, and a RuntimeLowering: the tensor handle of each value, the events
// of transfers in flight, the runtime functions declared so far and the trace sites named.
// A CallEmitter emits one op's calls, typed by dsrt.h (RuntimeABI.h).
//
#ifndef DS_CONVERSION_DSTORUNTIME_RUNTIMELOWERING_H
#define DS_CONVERSION_DSTORUNTIME_RUNTIMELOWERING_H

#include "KernelPatterns.h"

#include "ds/Analysis/MemoryPlan.h"

#include "mlir/Transforms/DialectConversion.h"
#include "llvm/ADT/StringMap.h"

#include <deque>

namespace mlir::ds::runtime {

class RuntimeLowering {
public:
  RuntimeLowering(ModuleOp module, const MemoryPlan &plan);

  ModuleOp module;
  const MemoryPlan &plan;
  Type ptrTy, i32Ty, i64Ty, f64Ty, voidTy;

  /// The tensor handle (`dsrt_tensor *`) of each ds value lowered so far.
  llvm::DenseMap<Value, Value> lowered;
  /// The event (`dsrt_event *`) of each transfer not yet waited for.
  llvm::DenseMap<Value, Value> events;
  /// NVMe writes in flight: their events, oldest first.
  std::deque<Value> stores;
  /// The function being lowered: its plan and its context argument.
  const FunctionPlan *fn = nullptr;
  Value ctxArg;

  /// The runtime function `name` of `type`, declared once in the module.
  LLVM::LLVMFuncOp declare(OpBuilder &b, StringRef name, LLVM::LLVMFunctionType type);
  /// A call's constant operand (KernelEmitter::i32 ...), made where the call is.
  Value materialize(OpBuilder &b, Location loc, const Operand &o);
  /// Constant data (a non-splat constant's bytes) in a global.
  Value global(OpBuilder &b, Location loc, DenseElementsAttr data, Type element);

  // Trace sites: each ds op's calls follow a dsrt_trace_site naming the op and its source
  // location (the descriptor's "sites"), emitted when the site changes.
  /// The index of `op`'s site (named when first seen), or -1 for none.
  int siteOf(Operation *op);
  ArrayRef<std::string> siteNames() const { return sites; }
  /// The site whose calls were emitted last: -2 unknown (a function's entry, after a branch).
  int emittedSite = -2;

private:
  llvm::StringMap<LLVM::LLVMFuncOp> funcs;
  llvm::DenseMap<Attribute, LLVM::GlobalOp> arrays;
  int globals = 0;
  llvm::StringMap<int> siteIndex;
  llvm::DenseMap<Operation *, int> siteOfOp;
  std::vector<std::string> sites;
};

/// Emits runtime calls at a builder's insertion point for one op (the trace names it; null:
/// none), as a KernelEmitter for the kernel patterns.
class CallEmitter : public KernelEmitter {
public:
  CallEmitter(RuntimeLowering &lowering, OpBuilder &b, Location loc, Operation *site)
      : lowering(lowering), b(b), loc(loc), site(site) {}

  /// A call of runtime function `f` (RuntimeABI.h), typed as dsrt.h declares it.
  template <class F, class... G> Arg<typename F::Result> call(const F &f, G &&...args) {
    return Arg<typename F::Result>(
        emitCall(f.name, f.type(mlirContext()), F::arguments(std::forward<G>(args)...)));
  }
  Context ctx() { return Context(lowering.ctxArg); }
  /// The handle of `v` (a null pointer for a null value).
  Tensor operand(Value v) override;
  /// Binds `result` to handle `t`.
  Tensor bind(Value result, Tensor t) {
    lowering.lowered[result] = t;
    return t;
  }
  /// The tensor the plan places `result` in: a new one, a view of another value's storage,
  /// a slot's value (null for Placement::None and Placement::Op).
  Tensor place(Value result, const Placement &p);
  /// The element type's code, and a tensor type's shape arguments.
  Arg<int32_t> dtype(Type element);
  Tensor alloc(RankedTensorType type, bool host);
  Tensor view(Tensor of, RankedTensorType type);

  /// Before an op: the plan's waits; after it: NVMe writes waited for, then its frees.
  void waitFor(ArrayRef<EventWait> waits);
  void waitStores(unsigned count);
  void free(ArrayRef<Value> values);

  Tensor temporary(RankedTensorType type, Operation *op) override;
  void releaseTemporary(Tensor t) override;
  bool isFusedTranspose(Value v) override { return lowering.fn->isFusedTranspose(v); }
  Value emitCall(StringRef name, LLVM::LLVMFunctionType type, ArrayRef<Operand> args) override;
  MLIRContext *mlirContext() override { return lowering.module.getContext(); }
  Context context() override { return ctx(); }
  void waitAndRelease(Value event) override {
    call(fn::dsrt_event_wait, ctx(), Event(event));
    call(fn::dsrt_event_release, Event(event));
  }

  RuntimeLowering &lowering;
  OpBuilder &b;
  Location loc;
  Operation *site;
};

/// Lowers op `Op` of a step: the plan's waits, the op's own calls (`lower`), the NVMe writes
/// it waits for, its frees; its results become their handles. Ops that a matmul on views
/// absorbs make no calls.
template <class Op> class RuntimeOpPattern : public OpConversionPattern<Op> {
public:
  RuntimeOpPattern(const TypeConverter &types, MLIRContext *ctx, RuntimeLowering &lowering)
      : OpConversionPattern<Op>(types, ctx), lowering(lowering) {}

  LogicalResult matchAndRewrite(Op op, typename Op::Adaptor,
                                ConversionPatternRewriter &rewriter) const final {
    const OpPlan &plan = lowering.fn->of(op);
    CallEmitter e(lowering, rewriter, op.getLoc(), op);
    e.waitFor(plan.waits);
    if (!lowering.fn->views.absorbed.contains(op) && failed(lower(op, plan, e)))
      return failure();
    e.waitStores(plan.storesWaited);
    e.free(plan.frees);
    SmallVector<Value> handles;
    for (Value r : op->getResults())
      handles.push_back(lowering.lowered.lookup(r));
    rewriter.replaceOp(op, handles);
    return success();
  }
  /// The op's own calls, its results placed as `plan` says.
  virtual LogicalResult lower(Op op, const OpPlan &plan, CallEmitter &e) const = 0;

protected:
  RuntimeLowering &lowering;
};

/// The arrangements of views a kernel op may be instead of a kernel call (a transpose folded
/// into its matmul, a matmul on strided views, a concatenation that matmuls wrote in place, a
/// contiguous 1-D slice): true when `op` is one, lowered (MemoryPatterns.cpp).
FailureOr<bool> lowerArrangement(Operation *op, const OpPlan &plan, CallEmitter &e);

/// A kernel op: its results placed by the plan, then its family's calls.
template <class Op> class KernelOpPattern : public RuntimeOpPattern<Op> {
public:
  KernelOpPattern(const TypeConverter &types, MLIRContext *ctx, RuntimeLowering &lowering,
                  KernelLowering lower)
      : RuntimeOpPattern<Op>(types, ctx, lowering), lowerKernel(std::move(lower)) {}
  LogicalResult lower(Op op, const OpPlan &plan, CallEmitter &e) const override {
    FailureOr<bool> arranged = lowerArrangement(op, plan, e);
    if (failed(arranged))
      return failure();
    if (*arranged)
      return success();
    SmallVector<Tensor> outs;
    for (auto [r, p] : llvm::zip(op->getResults(), plan.results))
      outs.push_back(e.place(r, p));
    return lowerKernel(op, outs, e);
  }

private:
  KernelLowering lowerKernel;
};

template <class Op> void KernelPatterns::addOne(KernelLowering lower) {
  set.add<KernelOpPattern<Op>>(types, set.getContext(), lowering, std::move(lower));
}

/// The patterns of every ds op and shard collective of a step (one file per family), and the
/// functions' (FunctionPatterns.cpp).
void populateFunctionPatterns(const TypeConverter &types, RewritePatternSet &patterns,
                              RuntimeLowering &lowering);
void populateStructurePatterns(const TypeConverter &types, RewritePatternSet &patterns,
                               RuntimeLowering &lowering);
void populateMemoryPatterns(const TypeConverter &types, RewritePatternSet &patterns,
                            RuntimeLowering &lowering);

/// ds_init_slots, which defines every slot (a pipeline rank: its stage's), and a pipeline's
/// ds_micro_step and ds_optimizer_step, which call this rank's programs (EntryPoints.cpp).
void emitInitSlots(RuntimeLowering &lowering, OpBuilder &b);
void emitPipelineEntryPoints(RuntimeLowering &lowering, OpBuilder &b);
/// ds_metadata: the program's descriptor (ProgramDescriptor.cpp).
void emitProgramDescriptor(RuntimeLowering &lowering, OpBuilder &b);

} // namespace mlir::ds::runtime

#endif // DS_CONVERSION_DSTORUNTIME_RUNTIMELOWERING_H
