//===- Elementwise.cpp - kernel patterns: elementwise ops, conversions, dropout ---===//
#include "KernelPatterns.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::runtime;

namespace {
// The runtime's op codes (dsrt.h: enum dsrt_unary_op, dsrt_binary_op).
enum Unary : int { kNeg = 0, kExp, kLog, kSqrt, kRsqrt, kTanh, kSigmoid, kRelu, kGeluErf,
                   kGeluTanh, kCos, kSin };
enum Binary : int { kAdd = 0, kSub, kMul, kDiv, kPow, kMax, kMin, kGeluErfGrad, kGeluTanhGrad };

/// One unary kernel call with code `code`.
KernelLowering unary(int code) {
  return [code](Operation *op, ArrayRef<Value> outs, KernelEmitter &e) {
    e.kernel("dsrt_unary", {e.i32(code), outs[0], e.operand(op->getOperand(0))});
    return success();
  };
}
KernelLowering binary(int code) {
  return [code](Operation *op, ArrayRef<Value> outs, KernelEmitter &e) {
    e.kernel("dsrt_binary",
           {e.i32(code), outs[0], e.operand(op->getOperand(0)), e.operand(op->getOperand(1))});
    return success();
  };
}
} // namespace

void mlir::ds::runtime::populateElementwiseKernels(KernelPatterns &p) {
  p.addElementwise<NegOp>(unary(kNeg));
  p.addElementwise<ExpOp>(unary(kExp));
  p.addElementwise<LogOp>(unary(kLog));
  p.addElementwise<SqrtOp>(unary(kSqrt));
  p.addElementwise<RsqrtOp>(unary(kRsqrt));
  p.addElementwise<TanhOp>(unary(kTanh));
  p.addElementwise<SigmoidOp>(unary(kSigmoid));
  p.addElementwise<ReluOp>(unary(kRelu));
  p.addElementwise<CosOp>(unary(kCos));
  p.addElementwise<SinOp>(unary(kSin));
  p.addElementwise<AddOp>(binary(kAdd));
  p.addElementwise<SubOp>(binary(kSub));
  p.addElementwise<MulOp>(binary(kMul));
  p.addElementwise<DivOp>(binary(kDiv));
  p.addElementwise<PowOp>(binary(kPow));
  p.addElementwise<MaximumOp>(binary(kMax));
  p.addElementwise<MinimumOp>(binary(kMin));
  p.addElementwise<GeluOp>([](Operation *op, ArrayRef<Value> outs, KernelEmitter &e) {
    auto o = cast<GeluOp>(op);
    int code = o.getApproximate() == GeluApproximate::tanh ? kGeluTanh : kGeluErf;
    e.kernel("dsrt_unary", {e.i32(code), outs[0], e.operand(o.getInput())});
    return success();
  });
  p.addElementwise<GeluGradOp>([](Operation *op, ArrayRef<Value> outs, KernelEmitter &e) {
    auto o = cast<GeluGradOp>(op);
    int code = o.getApproximate() == GeluApproximate::tanh ? kGeluTanhGrad : kGeluErfGrad;
    e.kernel("dsrt_binary",
           {e.i32(code), outs[0], e.operand(o.getInput()), e.operand(o.getResultGrad())});
    return success();
  });
  p.add<ConvertOp>([](Operation *op, ArrayRef<Value> outs, KernelEmitter &e) {
    e.kernel("dsrt_convert", {outs[0], e.operand(cast<ConvertOp>(op).getInput())});
    return success();
  });
  p.add<CmpOp>([](Operation *op, ArrayRef<Value> outs, KernelEmitter &e) {
    auto o = cast<CmpOp>(op);
    e.kernel("dsrt_cmp", {e.i32((int)o.getPredicate()), outs[0], e.operand(o.getLhs()),
                        e.operand(o.getRhs())});
    return success();
  });
  p.addElementwise<WhereOp>([](Operation *op, ArrayRef<Value> outs, KernelEmitter &e) {
    auto o = cast<WhereOp>(op);
    e.kernel("dsrt_where", {outs[0], e.operand(o.getCond()), e.operand(o.getOnTrue()),
                          e.operand(o.getOnFalse())});
    return success();
  });
  p.add<DropoutMaskOp>([](Operation *op, ArrayRef<Value> outs, KernelEmitter &e) {
    e.kernel("dsrt_dropout_mask", {outs[0], e.f64(cast<DropoutMaskOp>(op).getP().convertToDouble())});
    return success();
  });
  p.add<DropoutOp>([](Operation *op, ArrayRef<Value> outs, KernelEmitter &e) {
    // The mask lives only for the multiply.
    auto o = cast<DropoutOp>(op);
    Value mask = e.temporary(cast<RankedTensorType>(o.getResult().getType()), op);
    e.kernel("dsrt_dropout_mask", {mask, e.f64(o.getP().convertToDouble())});
    e.kernel("dsrt_binary", {e.i32(kMul), outs[0], e.operand(o.getInput()), mask});
    e.releaseTemporary(mask);
    return success();
  });
}
