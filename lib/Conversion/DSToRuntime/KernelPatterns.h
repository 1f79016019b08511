//===- KernelPatterns.h - ds ops to runtime kernel calls, one file per family -===//
//
// Every op that is a kernel of the runtime is lowered by a conversion pattern of its family
// (one file each): given the op and its results already placed by the memory plan, it emits
// the call(s) of the runtime's kernel(s). Their calls are typed by dsrt.h (RuntimeABI.h). The
// runtime's C API is the same on every device (the device is chosen when the program runs),
// so one table serves every device today.
//
#ifndef DS_CONVERSION_DSTORUNTIME_KERNELPATTERNS_H
#define DS_CONVERSION_DSTORUNTIME_KERNELPATTERNS_H

#include "RuntimeABI.h"

#include "ds/IR/DSOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/DialectConversion.h"

#include <functional>

namespace mlir::ds::runtime {

/// What a kernel pattern emits with: implemented by CallEmitter (RuntimeLowering.h).
class KernelEmitter {
public:
  virtual ~KernelEmitter() = default;
  /// The lowered tensor (`dsrt_tensor *`) of `v`; a null pointer for a null value (an absent
  /// optional operand).
  virtual Tensor operand(Value v) = 0;
  /// A call of runtime kernel `f` (a `fn::dsrt_*` of RuntimeABI.h) with this context first,
  /// then `args`, typed as dsrt.h declares them.
  template <class F, class... G> void kernel(const F &f, G &&...args) {
    emitCall(f.name, f.type(mlirContext()), F::arguments(context(), std::forward<G>(args)...));
  }
  /// A call of runtime function `f` that returns an event (work queued on a group's
  /// communication thread), waited for at once and released.
  template <class F, class... G> void kernelWaited(const F &f, G &&...args) {
    waitAndRelease(
        emitCall(f.name, f.type(mlirContext()), F::arguments(context(), std::forward<G>(args)...)));
  }
  /// Constants, materialized by the call that takes them.
  Arg<int32_t> i32(int64_t v) {
    return Arg<int32_t>(IntegerAttr::get(IntegerType::get(mlirContext(), 32), v));
  }
  Arg<int64_t> i64(int64_t v) {
    return Arg<int64_t>(IntegerAttr::get(IntegerType::get(mlirContext(), 64), v));
  }
  Arg<uint64_t> u64(uint64_t v) {
    return Arg<uint64_t>(
        IntegerAttr::get(IntegerType::get(mlirContext(), 64), static_cast<int64_t>(v)));
  }
  Arg<double> f64(double v) {
    return Arg<double>(FloatAttr::get(Float64Type::get(mlirContext()), v));
  }
  /// An i64 array in a constant global.
  Arg<const int64_t *> i64Array(ArrayRef<int64_t> values);
  NullArg null() { return {UnitAttr::get(mlirContext())}; }
  /// A temporary tensor of `type` for `op`'s kernels, counted by the arena model until
  /// releaseTemporary.
  virtual Tensor temporary(RankedTensorType type, Operation *op) = 0;
  virtual void releaseTemporary(Tensor t) = 0;
  /// Whether `v` is a transpose of the last two dims folded into its one matmul user.
  virtual bool isFusedTranspose(Value v) = 0;

protected:
  virtual MLIRContext *mlirContext() = 0;
  virtual Context context() = 0;
  virtual Value emitCall(StringRef name, LLVM::LLVMFunctionType type,
                         ArrayRef<Operand> args) = 0;
  /// dsrt_event_wait and dsrt_event_release of `event`.
  virtual void waitAndRelease(Value event) = 0;
};

/// Lowers `op` whose results are allocated as `outs` (in result order; a null pointer for an
/// optional result nobody uses) to kernel calls.
using KernelLowering =
    std::function<LogicalResult(Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e)>;

class RuntimeLowering;

/// Registers the kernel patterns of op types: each lowers its op, its results placed by the
/// memory plan, with its family's KernelLowering (KernelOpPattern, RuntimeLowering.h).
class KernelPatterns {
public:
  KernelPatterns(const TypeConverter &types, RewritePatternSet &set, RuntimeLowering &lowering)
      : types(types), set(set), lowering(lowering) {}
  template <class... Ops> void add(KernelLowering lower) { (addOne<Ops>(lower), ...); }

private:
  template <class Op> void addOne(KernelLowering lower);
  const TypeConverter &types;
  RewritePatternSet &set;
  RuntimeLowering &lowering;
};

/// Every family's patterns.
void populateKernelPatterns(KernelPatterns &patterns);

// The families (one file each).
void populateElementwiseKernels(KernelPatterns &patterns);    // Elementwise.cpp
void populateReductionKernels(KernelPatterns &patterns);      // Reductions.cpp
void populateNormalizationKernels(KernelPatterns &patterns);  // Normalization.cpp
void populateAttentionKernels(KernelPatterns &patterns);      // Attention.cpp
void populateLinearAlgebraKernels(KernelPatterns &patterns);  // LinearAlgebra.cpp
void populateExpertKernels(KernelPatterns &patterns);         // Experts.cpp
/// Sets `unrouted_undefined` on the experts' products and SwiGLU whose every reader skips the
/// rows no expert takes (Experts.cpp), before the kernels are emitted.
void markUnreadUnroutedRows(ModuleOp module);
void populateConvolutionKernels(KernelPatterns &patterns);    // Convolution.cpp
void populateDataMovementKernels(KernelPatterns &patterns);   // DataMovement.cpp
void populateGenerationKernels(KernelPatterns &patterns);     // Generation.cpp

} // namespace mlir::ds::runtime

#endif // DS_CONVERSION_DSTORUNTIME_KERNELPATTERNS_H
