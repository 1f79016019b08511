//===- DSShapes.h - result shapes of ds ops, shared by verifiers and importer ===//
//
// Each function computes the result shape PyTorch would give, or reports through `emit` why
// the operands are rejected (naming the dimensions). The op verifiers and the TorchScript
// importer call the same functions, so an import error and a verifier error say the same thing.
//
#ifndef DS_IR_DSSHAPES_H
#define DS_IR_DSSHAPES_H

#include "mlir/IR/Diagnostics.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include <optional>

namespace mlir::ds {
using Shape = llvm::SmallVector<int64_t, 4>;
using EmitErrorFn = llvm::function_ref<InFlightDiagnostic()>;

FailureOr<Shape> broadcastShapes(ArrayRef<int64_t> a, ArrayRef<int64_t> b, EmitErrorFn emit);
LogicalResult checkBroadcastTo(ArrayRef<int64_t> in, ArrayRef<int64_t> out, EmitErrorFn emit);
FailureOr<Shape> matmulShape(ArrayRef<int64_t> a, ArrayRef<int64_t> b, EmitErrorFn emit);
FailureOr<Shape> linearShape(ArrayRef<int64_t> x, ArrayRef<int64_t> w,
                             std::optional<ArrayRef<int64_t>> bias, EmitErrorFn emit);
FailureOr<Shape> embeddingShape(ArrayRef<int64_t> w, ArrayRef<int64_t> idx, EmitErrorFn emit);
/// ds.expert_linear's result [N, out] for input [N, in], weight [E, out, in] (transposed:
/// [E, in, out]) and ids [N].
FailureOr<Shape> expertLinearShape(ArrayRef<int64_t> x, ArrayRef<int64_t> w,
                                   ArrayRef<int64_t> ids, bool transposed, EmitErrorFn emit);
/// ds.swiglu's result for a gate-and-up input [..., 2F] and optional row ids: [..., F]; the ids
/// (`rows`, empty without them) [R] for an input [R, 2F].
FailureOr<Shape> swigluShape(ArrayRef<int64_t> x, std::optional<ArrayRef<int64_t>> rows,
                             EmitErrorFn emit);
FailureOr<Shape> reduceShape(ArrayRef<int64_t> in, ArrayRef<int64_t> dims, bool keepdim,
                             EmitErrorFn emit);
FailureOr<Shape> transposeShape(ArrayRef<int64_t> in, ArrayRef<int64_t> perm, EmitErrorFn emit);
FailureOr<Shape> sliceShape(ArrayRef<int64_t> in, int64_t dim, int64_t start, int64_t end,
                            int64_t step, EmitErrorFn emit);
FailureOr<Shape> concatShape(ArrayRef<Shape> ins, int64_t dim, EmitErrorFn emit);
FailureOr<Shape> crossEntropyShape(ArrayRef<int64_t> logits, ArrayRef<int64_t> target,
                                   bool reduced, EmitErrorFn emit);
LogicalResult checkNormParams(ArrayRef<int64_t> expected, std::optional<ArrayRef<int64_t>> w,
                              std::optional<ArrayRef<int64_t>> b, StringRef what,
                              EmitErrorFn emit);
FailureOr<Shape> conv2dShape(ArrayRef<int64_t> in, ArrayRef<int64_t> w,
                             std::optional<ArrayRef<int64_t>> bias, ArrayRef<int64_t> stride,
                             ArrayRef<int64_t> padding, ArrayRef<int64_t> dilation,
                             int64_t groups, EmitErrorFn emit);
FailureOr<Shape> pool2dShape(ArrayRef<int64_t> in, ArrayRef<int64_t> kernel,
                             ArrayRef<int64_t> stride, ArrayRef<int64_t> padding,
                             ArrayRef<int64_t> dilation, bool ceilMode, EmitErrorFn emit);
int64_t numElements(ArrayRef<int64_t> shape);
/// The bytes of a static ranked tensor type (sub-byte elements as one byte each); 0 for
/// anything else.
int64_t tensorBytes(Type t);
/// "[4, 16, 32]"
std::string formatShape(ArrayRef<int64_t> shape);
} // namespace mlir::ds

#endif // DS_IR_DSSHAPES_H
