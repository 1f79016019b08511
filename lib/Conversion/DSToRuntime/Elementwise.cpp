//===- Elementwise.cpp - kernel patterns: elementwise ops, conversions, dropout ---===//
#include "RuntimeLowering.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::runtime;

namespace {
/// One dsrt_unary call of `code`.
KernelLowering unary(dsrt_unary_op code) {
  return [code](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    e.kernel(fn::dsrt_unary, e.i32(code), outs[0], e.operand(op->getOperand(0)));
    return success();
  };
}
KernelLowering binary(dsrt_binary_op code) {
  return [code](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    e.kernel(fn::dsrt_binary, e.i32(code), outs[0], e.operand(op->getOperand(0)),
             e.operand(op->getOperand(1)));
    return success();
  };
}

dsrt_cmp_pred cmpCode(CmpPredicate p) {
  switch (p) {
  case CmpPredicate::eq:
    return DSRT_EQ;
  case CmpPredicate::ne:
    return DSRT_NE;
  case CmpPredicate::lt:
    return DSRT_LT;
  case CmpPredicate::le:
    return DSRT_LE;
  case CmpPredicate::gt:
    return DSRT_GT;
  case CmpPredicate::ge:
    return DSRT_GE;
  }
  llvm_unreachable("a CmpPredicate without a runtime code");
}

/// GELU's forward code and its gradient's, by approximation.
std::pair<dsrt_unary_op, dsrt_binary_op> geluCodes(GeluApproximate a) {
  switch (a) {
  case GeluApproximate::none:
    return {DSRT_GELU_ERF, DSRT_GELU_ERF_GRAD};
  case GeluApproximate::tanh:
    return {DSRT_GELU_TANH, DSRT_GELU_TANH_GRAD};
  }
  llvm_unreachable("a GeluApproximate without a runtime code");
}
} // namespace

void mlir::ds::runtime::populateElementwiseKernels(KernelPatterns &p) {
  p.add<NegOp>(unary(DSRT_NEG));
  p.add<ExpOp>(unary(DSRT_EXP));
  p.add<LogOp>(unary(DSRT_LOG));
  p.add<SqrtOp>(unary(DSRT_SQRT));
  p.add<RsqrtOp>(unary(DSRT_RSQRT));
  p.add<TanhOp>(unary(DSRT_TANH));
  p.add<SigmoidOp>(unary(DSRT_SIGMOID));
  p.add<ReluOp>(unary(DSRT_RELU));
  p.add<CosOp>(unary(DSRT_COS));
  p.add<SinOp>(unary(DSRT_SIN));
  p.add<AddOp>(binary(DSRT_ADD));
  p.add<SubOp>(binary(DSRT_SUB));
  p.add<MulOp>(binary(DSRT_MUL));
  p.add<DivOp>(binary(DSRT_DIV));
  p.add<PowOp>(binary(DSRT_POW));
  p.add<MaximumOp>(binary(DSRT_MAX));
  p.add<MinimumOp>(binary(DSRT_MIN));
  p.add<GeluOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    auto o = cast<GeluOp>(op);
    e.kernel(fn::dsrt_unary, e.i32(geluCodes(o.getApproximate()).first), outs[0],
             e.operand(o.getInput()));
    return success();
  });
  p.add<GeluGradOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    auto o = cast<GeluGradOp>(op);
    e.kernel(fn::dsrt_binary, e.i32(geluCodes(o.getApproximate()).second), outs[0],
             e.operand(o.getInput()), e.operand(o.getResultGrad()));
    return success();
  });
  p.add<ConvertOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    e.kernel(fn::dsrt_convert, outs[0], e.operand(cast<ConvertOp>(op).getInput()));
    return success();
  });
  p.add<CmpOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    auto o = cast<CmpOp>(op);
    e.kernel(fn::dsrt_cmp, e.i32(cmpCode(o.getPredicate())), outs[0], e.operand(o.getLhs()),
             e.operand(o.getRhs()));
    return success();
  });
  p.add<WhereOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    auto o = cast<WhereOp>(op);
    e.kernel(fn::dsrt_where, outs[0], e.operand(o.getCond()), e.operand(o.getOnTrue()),
             e.operand(o.getOnFalse()));
    return success();
  });
  p.add<DropoutMaskOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    e.kernel(fn::dsrt_dropout_mask, outs[0],
             e.f64(cast<DropoutMaskOp>(op).getP().convertToDouble()));
    return success();
  });
  p.add<DropoutOp>([](Operation *op, ArrayRef<Tensor> outs, KernelEmitter &e) {
    // The mask lives only for the multiply.
    auto o = cast<DropoutOp>(op);
    Tensor mask = e.temporary(cast<RankedTensorType>(o.getResult().getType()), op);
    e.kernel(fn::dsrt_dropout_mask, mask, e.f64(o.getP().convertToDouble()));
    e.kernel(fn::dsrt_binary, e.i32(DSRT_MUL), outs[0], e.operand(o.getInput()), mask);
    e.releaseTemporary(mask);
    return success();
  });
}
