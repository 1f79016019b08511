//===- OpHelpers.h - building blocks of the aten op handlers ---------------===//
//
// Shared by the handler files (AtenOps.cpp, TransformerOps.cpp): argument checks, PyTorch's
// type promotion, and the ds ops behind the common aten ops, each checking shapes with
// DSShapes.h so that a rejected shape is reported at the op's Python line.
//
#ifndef DS_LIB_IMPORTER_TORCHSCRIPT_OPHELPERS_H
#define DS_LIB_IMPORTER_TORCHSCRIPT_OPHELPERS_H

#include "Interpreter.h"

namespace mlir::ds::ts::ops {
using R = std::vector<AV>;

#define TRY(var, expr)                                                                        \
  auto var = (expr);                                                                          \
  if (failed(var))                                                                            \
    return failure();

inline FailureOr<R> one(AV v) { return R{std::move(v)}; }
bool anyGrad(ArrayRef<AV> values);
/// PyTorch's result type for mixing tensors of any rank and Python numbers.
Type promote(Interpreter &I, ArrayRef<AV> operands);
int64_t normDim(int64_t d, int64_t rank);
FailureOr<int64_t> dimArg(Interpreter &I, const AV &v, int64_t rank);
FailureOr<SmallVector<int64_t>> intList(Interpreter &I, const AV &v, size_t broadcastTo = 0);
FailureOr<AV> tensorArg(Interpreter &I, const AV &v);
/// `v` as a tensor AV that needs a gradient if any of `from` does.
AV result(Value v, ArrayRef<AV> from);
RankedTensorType tensorOf(ArrayRef<int64_t> shape, Type et);
FailureOr<AV> compare(Interpreter &I, CmpPredicate pred, const AV &a, const AV &b);
FailureOr<AV> reshape(Interpreter &I, const AV &x, ArrayRef<int64_t> shape);
FailureOr<AV> scaled(Interpreter &I, const AV &x, const AV &factor);
FailureOr<AV> slice(Interpreter &I, const AV &x, int64_t dim, int64_t start, int64_t end,
                    int64_t step);
FailureOr<AV> transpose(Interpreter &I, const AV &x, ArrayRef<int64_t> perm);
FailureOr<AV> concat(Interpreter &I, ArrayRef<AV> xs, int64_t dim);
FailureOr<AV> where(Interpreter &I, const AV &cond, const AV &onTrue, const AV &onFalse,
                    Type type);
FailureOr<AV> constantTensor(Interpreter &I, ArrayRef<int64_t> shape, Type et,
                             llvm::function_ref<double(int64_t)> valueAt);
FailureOr<R> matmul(Interpreter &I, const AV &a0, const AV &b0);
FailureOr<R> reduce(Interpreter &I, torch::jit::Node *, R &in, StringRef which);
FailureOr<R> softmaxLike(Interpreter &I, R &in, bool log);
FailureOr<R> dropout(Interpreter &I, R &in);
FailureOr<R> layerNorm(Interpreter &I, R &in);
struct BatchNormResults {
  AV output, mean, var;                 // var: biased, as normalized with
  AV newRunningMean, newRunningVar;     // set when running statistics are given
};
/// Training-mode batch norm over dimension 1, with the running statistics' momentum update.
FailureOr<BatchNormResults> batchNormTraining(Interpreter &I, const AV &x, const AV &w,
                                              const AV &b, const AV &rm, const AV &rv,
                                              const AV &momentum, double eps);
FailureOr<R> filled(Interpreter &I, ArrayRef<int64_t> shape, const AV &value, const AV &dtype);

/// An elementwise binary ds op with broadcasting, in `type` (default: PyTorch's promotion).
/// A 16-bit tensor with a Python number computes in f32 with the number as f32 and rounds the
/// result, as PyTorch's kernels do (their opmath type); the number is not rounded to 16 bits
/// (HF's eager attention scales bf16 scores by 1/sqrt(d)).
template <typename OpTy>
FailureOr<AV> binary(Interpreter &I, const AV &a, const AV &b, Type type = {}) {
  if (!type) {
    type = promote(I, {a, b});
    auto half = dyn_cast<FloatType>(type);
    if (half && half.getWidth() == 16 && (a.isNumber() || b.isNumber())) {
      auto wide = binary<OpTy>(I, a, b, I.b().getF32Type());
      if (failed(wide))
        return failure();
      Value v = ConvertOp::create(I.b(), I.loc(), tensorOf(wide->shape(), type), wide->tensor);
      return result(v, {*wide});
    }
  }
  auto ta = I.asTensor(a, type), tb = I.asTensor(b, type);
  if (failed(ta) || failed(tb))
    return failure();
  auto shape = broadcastShapes(ta->shape(), tb->shape(), I.shapeError());
  if (failed(shape))
    return failure();
  Value v = OpTy::create(I.b(), I.loc(), tensorOf(*shape, type), ta->tensor, tb->tensor);
  return result(v, {*ta, *tb});
}

template <typename OpTy>
FailureOr<AV> unaryFloat(Interpreter &I, const AV &x) {
  if (!isa<FloatType>(x.type().getElementType()))
    return I.error() << "expects a floating-point tensor, got " << x.describe(), failure();
  Value v = OpTy::create(I.b(), I.loc(), x.tensor);
  return result(v, {x});
}


/// Adds the handlers of TransformerOps.cpp (attention, RMSNorm, SiLU) to `h`.
void addTransformerOps(llvm::StringMap<OpHandler> &h);
/// Adds the handlers of ExpertOps.cpp (a mixture-of-experts router's topk and histc) to `h`.
void addExpertOps(llvm::StringMap<OpHandler> &h);
/// Adds the handlers of CoreAtenOps.cpp (decomposed programs, masks, padding) to `h`.
void addCoreAtenOps(llvm::StringMap<OpHandler> &h);

} // namespace mlir::ds::ts::ops

#endif
