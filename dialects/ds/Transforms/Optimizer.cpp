//===- Optimizer.cpp - the ds-optimizer pass: the parameter update as IR ---===//
#include "ds/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSOPTIMIZER
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {
RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// Builds elementwise arithmetic on tensors with broadcasting of rank-0 scalars.
struct Emitter {
  OpBuilder &b;
  Location loc;

  Value constant(Type elem, double v) {
    auto type = RankedTensorType::get({}, elem);
    return ConstantOp::create(b, loc, DenseElementsAttr::get(type, FloatAttr::get(elem, v)));
  }
  RankedTensorType resultOf(Value x, Value y) {
    return typeOf(x).getRank() >= typeOf(y).getRank() ? typeOf(x) : typeOf(y);
  }
  Value add(Value x, Value y) { return AddOp::create(b, loc, resultOf(x, y), x, y); }
  Value sub(Value x, Value y) { return SubOp::create(b, loc, resultOf(x, y), x, y); }
  Value mul(Value x, Value y) { return MulOp::create(b, loc, resultOf(x, y), x, y); }
  Value div(Value x, Value y) { return DivOp::create(b, loc, resultOf(x, y), x, y); }
  Value pow(Value x, Value y) { return PowOp::create(b, loc, resultOf(x, y), x, y); }
  Value sqrt(Value x) { return SqrtOp::create(b, loc, typeOf(x), x); }
  Value convert(Value x, Type elem) {
    return ConvertOp::create(b, loc, RankedTensorType::get(typeOf(x).getShape(), elem), x);
  }
  Value get(StringRef sym, RankedTensorType type) {
    return GetParameterOp::create(b, loc, type, FlatSymbolRefAttr::get(b.getContext(), sym));
  }
  void assign(StringRef sym, Value v) {
    AssignOp::create(b, loc, FlatSymbolRefAttr::get(b.getContext(), sym), v);
  }
  Value sumAll(Value x) {
    SmallVector<int64_t> dims;
    for (int64_t i = 0; i < typeOf(x).getRank(); ++i)
      dims.push_back(i);
    if (dims.empty())
      return x;
    return SumOp::create(b, loc, RankedTensorType::get({}, typeOf(x).getElementType()), x,
                         b.getDenseI64ArrayAttr(dims), nullptr);
  }
};

struct OptimizerPass : mlir::ds::impl::DSOptimizerBase<OptimizerPass> {
  using DSOptimizerBase::DSOptimizerBase;
  void runOnOperation() override;
};
} // namespace

void OptimizerPass::runOnOperation() {
  ModuleOp module = getOperation();
  MLIRContext *ctx = &getContext();
  if (module.lookupSymbol("optimizer_step")) {
    module.emitError() << "ds-optimizer: the module already has an @optimizer_step";
    return signalPassFailure();
  }
  // Gradient states by parameter, from ds-autodiff.
  SmallVector<std::pair<ParameterOp, StateOp>> params;
  for (auto state : module.getOps<StateOp>())
    if (state.getRole() == "grad")
      params.push_back({module.lookupSymbol<ParameterOp>(state.getOfAttr()), state});
  if (params.empty()) {
    module.emitError() << "ds-optimizer: no gradient states; run ds-autodiff first";
    return signalPassFailure();
  }

  bool isAdam = type == "AdamW" || type == "Adam";
  bool isSgd = type == "SGD";
  if (!isAdam && !isSgd) {
    module.emitError() << "ds-optimizer: type '" << type
                       << "' is not implemented yet; use AdamW, Adam or SGD";
    return signalPassFailure();
  }
  // AdamW is always decoupled (DeepSpeed); Adam follows adam-w-mode.
  bool decoupled = type == "AdamW" || adamWMode;

  // Optimizer state symbols after the last state.
  OpBuilder mb(ctx);
  mb.setInsertionPointAfter(params.back().second);
  Location loc = module.getLoc();
  SmallVector<std::pair<std::string, std::string>> moments;
  auto newState = [&](ParameterOp param, StringRef role) {
    std::string name = (param.getSymName() + "@" + role).str();
    StateOp::create(mb, param.getLoc(), mb.getStringAttr(name),
                    FlatSymbolRefAttr::get(param.getSymNameAttr()), mb.getStringAttr(role),
                    TypeAttr::get(param.getType()));
    return name;
  };
  for (auto [param, grad] : params) {
    if (isAdam)
      moments.push_back({newState(param, "exp_avg"), newState(param, "exp_avg_sq")});
    else if (momentum != 0)
      moments.push_back({newState(param, "momentum_buffer"), ""});
    else
      moments.push_back({"", ""});
  }

  // func.func @optimizer_step(%lr: tensor<f32>, %step: tensor<f32>)
  OpBuilder fb = OpBuilder::atBlockEnd(module.getBody());
  auto f32 = Float32Type::get(ctx);
  auto f64 = Float64Type::get(ctx);
  auto scalarF32 = RankedTensorType::get({}, f32);
  auto func = func::FuncOp::create(fb, loc, "optimizer_step",
                                   FunctionType::get(ctx, {scalarF32, scalarF32}, {}));
  Block *entry = func.addEntryBlock();
  OpBuilder b = OpBuilder::atBlockBegin(entry);
  Emitter e{b, loc};
  Value lr = entry->getArgument(0), step = entry->getArgument(1);

  // Step scalars in f64, as torch.optim computes them in Python/C++ doubles.
  Value lr64 = e.convert(lr, f64), step64 = e.convert(step, f64);
  Value one64 = e.constant(f64, 1.0);
  Value bc1 = e.sub(one64, e.pow(e.constant(f64, beta1), step64));
  Value bc2 = e.sub(one64, e.pow(e.constant(f64, beta2), step64));
  Value stepSize = e.convert(e.div(lr64, bc1), f32);
  // pow(x, 0.5): the runtime's f64 support is binary ops and conversions.
  Value bc2Sqrt = e.convert(e.pow(bc2, e.constant(f64, 0.5)), f32);
  Value decay = e.convert(
      e.sub(one64, e.mul(lr64, e.constant(f64, decoupled ? weightDecay : 0.0))), f32);

  // Global-norm clipping (clip_grad_norm_): the norm of the per-parameter norms.
  Value clipCoef;
  if (gradientClipping > 0) {
    Value total;
    for (auto [param, grad] : params) {
      RankedTensorType t = param.getTensorType();
      Value g = e.get(grad.getSymName(), t);
      Value norm = e.sqrt(e.sumAll(e.mul(g, g)));
      Value sq = e.mul(norm, norm);
      total = total ? e.add(total, sq) : sq;
    }
    Value totalNorm = e.sqrt(total);
    Value coef = e.div(e.constant(f32, gradientClipping), e.add(totalNorm, e.constant(f32, 1e-6)));
    clipCoef = MinimumOp::create(b, loc, scalarF32, coef, e.constant(f32, 1.0));
  }

  for (auto [i, pg] : llvm::enumerate(params)) {
    auto [param, grad] = pg;
    RankedTensorType t = param.getTensorType();
    StringRef name = param.getSymName();
    Value g = e.get(grad.getSymName(), t);
    if (clipCoef)
      g = e.mul(g, clipCoef);
    if (isSgd) {
      // torch.optim.SGD: d = g + wd p; buf = d at step 1, else m buf + (1 - dampening) d;
      // d = d + m buf (Nesterov) or buf; p = p - lr d.
      Value p = e.get(name, t);
      Value lr32 = lr;
      if (weightDecay != 0)
        g = e.add(g, e.mul(p, e.constant(f32, weightDecay)));
      if (momentum != 0) {
        Value buf = e.get(moments[i].first, t);
        Value next = e.add(e.mul(buf, e.constant(f32, momentum)),
                           e.mul(g, e.constant(f32, 1.0 - dampening)));
        Value first = CmpOp::create(b, loc, RankedTensorType::get({}, b.getI1Type()),
                                    CmpPredicateAttr::get(ctx, CmpPredicate::eq), step,
                                    e.constant(f32, 1.0));
        buf = WhereOp::create(b, loc, t, first, g, next);
        e.assign(moments[i].first, buf);
        g = nesterov ? e.add(g, e.mul(buf, e.constant(f32, momentum))) : buf;
      }
      e.assign(name, e.sub(p, e.mul(g, lr32)));
    } else {
      if (!decoupled && weightDecay != 0) // Adam's L2: the decay joins the gradient
        g = e.add(g, e.mul(e.get(name, t), e.constant(f32, weightDecay)));
      auto update = AdamWUpdateOp::create(
          b, loc, t, t, t, e.get(name, t), g, e.get(moments[i].first, t),
          e.get(moments[i].second, t), stepSize, bc2Sqrt, decay, b.getF64FloatAttr(beta1),
          b.getF64FloatAttr(beta2), b.getF64FloatAttr(eps));
      e.assign(name, update.getNewParam());
      e.assign(moments[i].first, update.getNewExpAvg());
      e.assign(moments[i].second, update.getNewExpAvgSq());
    }
    Value zero = ConstantOp::create(b, loc, DenseElementsAttr::get(t, FloatAttr::get(t.getElementType(), 0.0)));
    e.assign(grad.getSymName(), zero);
  }
  func::ReturnOp::create(b, loc);
}
