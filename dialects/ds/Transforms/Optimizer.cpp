//===- Optimizer.cpp - the ds-optimizer pass: the parameter update as IR ---===//
#include "ds/Transforms/Passes.h"

#include "Mesh.h"
#include "PipelineOptimizer.h"
#include "ZeroUpdate.h"

#include "ds/Transforms/MuonRule.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSet.h"

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
  Value matmul(Value x, Value y) {
    ArrayRef<int64_t> xs = typeOf(x).getShape(), ys = typeOf(y).getShape();
    auto t = RankedTensorType::get({xs[0], ys[1]}, typeOf(x).getElementType());
    return MatmulOp::create(b, loc, t, x, y);
  }
  Value transpose(Value x) {
    ArrayRef<int64_t> xs = typeOf(x).getShape();
    auto t = RankedTensorType::get({xs[1], xs[0]}, typeOf(x).getElementType());
    return TransposeOp::create(b, loc, t, x, b.getDenseI64ArrayAttr({1, 0}));
  }
  Value reshape(Value x, ArrayRef<int64_t> shape) {
    if (typeOf(x).getShape() == shape)
      return x;
    return ReshapeOp::create(b, loc, RankedTensorType::get(shape, typeOf(x).getElementType()), x);
  }
  /// torch.lerp(self, end, weight) with a scalar weight, f32: self + w (end - self) when
  /// |w| < 0.5, else end - (end - self) (1 - w), both factors rounded to float.
  Value lerp(Value self, Value end, double weight) {
    auto f32 = b.getF32Type();
    float w = static_cast<float>(weight);
    if (std::abs(w) < 0.5f)
      return add(self, mul(sub(end, self), constant(f32, w)));
    return sub(end, mul(sub(end, self), constant(f32, 1.0f - w)));
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

class UpdateBuilder;
struct OptimizerPass : mlir::ds::impl::DSOptimizerBase<OptimizerPass> {
  using DSOptimizerBase::DSOptimizerBase;
  void runOnOperation() override;
  friend class UpdateBuilder; // reads the options
};

bool isHalfType(Type t) { return isa<FloatType>(t) && t.getIntOrFloatBitWidth() == 16; }
RankedTensorType wide(RankedTensorType t) {
  return RankedTensorType::get(t.getShape(), Float32Type::get(t.getContext()));
}

/// Builds @optimizer_step and the optimizer's states for the pass's options: ZeRO's
/// collectives from ZeroUpdate, the rest (unscaling, the overflow check, clipping, the
/// optimizers' arithmetic) here, in this order.
class UpdateBuilder {
public:
  UpdateBuilder(const OptimizerPass &opt, ModuleOp module)
      : opt(opt), module(module), ctx(module.getContext()), loc(module.getLoc()),
        f32(Float32Type::get(ctx)), f64(Float64Type::get(ctx)),
        scalarF32(RankedTensorType::get({}, f32)), scalarF64(RankedTensorType::get({}, f64)) {}
  LogicalResult build();

private:
  LogicalResult collect();
  LogicalResult readParallelism();
  void findMuonParameters();
  void declareStates();
  void buildFunction();
  void buildOverflowCheck();
  void buildStepScalars();
  void buildClipping();
  void updateBuckets();
  void updateParameter(size_t i);
  Value elementwiseUpdate(llvm::function_ref<Value()> pget, Value g, RankedTensorType t,
                          StringRef m1, StringRef m2);
  Value sgdUpdate(Value p, Value g, RankedTensorType t, StringRef m1);
  void muonUpdate(size_t i, Value g, StringRef name, RankedTensorType t);
  void muonAdamUpdate(size_t i, Value g, StringRef name, RankedTensorType t);
  /// A gradient as the update reads it: f32, divided by fp16's loss scale. Widened where
  /// used, one tensor at a time: the update's copy (`atUse`) is marked so that CSE does not
  /// merge it with the clipping's or the overflow check's (which would keep every f32
  /// gradient alive at once).
  Value widenGrad(Value g, bool atUse);
  /// A parameter's gradient outside the flat buffers.
  Value paramGrad(size_t i, bool atUse);
  /// The new value of a state, or (fp16, on overflow) its old one.
  Value keep(Value next, Value old);
  Value allReduce(const MeshAxisRef &axis, Value local);
  Emitter &e() { return *emitter; }

  const OptimizerPass &opt;
  ModuleOp module;
  MLIRContext *ctx;
  Location loc;
  Type f32, f64;
  RankedTensorType scalarF32, scalarF64;
  bool isAdam = false, isSgd = false, isMuon = false, decoupled = false, mixed = false;
  /// Gradient states by parameter, from ds-autodiff (with flat buffers: the parameters
  /// outside them, which several pipeline stages hold; updated whole, their gradients summed
  /// over dp as at stage 0).
  SmallVector<std::pair<ParameterOp, StateOp>> params;
  StateOp lossScaleState;
  ZeroLayout zero;
  /// Tensor parallelism: parameters with a sharding hold distinct parts on the tp ranks, so
  /// the global norm and the overflow check also sum over the tp axis.
  std::optional<MeshAxisRef> tpAxis;
  /// Expert parallelism: parameters split over ep (ds-expert-parallel) hold distinct experts
  /// on the ep ranks, each gradient already summed over the rows of its ep group: they are
  /// summed over their replicas only (`expertReplicas`, dp: the expert-data-parallel group;
  /// none when it has one rank), and their share of the norm and the overflow check over ep.
  std::optional<MeshAxisRef> expertAxis, expertReplicas;
  bool isExpertPart(size_t i) {
    return splitsOver(params[i].first.getShardingAttr(), MeshAxis::ep);
  }
  llvm::StringSet<> embeddingTables;
  // Per bucket and per parameter: the optimizer's states (moments, the f32 master).
  SmallVector<std::pair<std::string, std::string>> bucketMoments, moments;
  SmallVector<std::string> bucketMasters, masters;
  SmallVector<bool> muonParam;
  std::string foundInfName;
  // @optimizer_step.
  Block *entry = nullptr;
  std::optional<OpBuilder> builder;
  std::optional<Emitter> emitter;
  SmallVector<Value> bucketGrads;
  Value invScale, ok, lr, step, adamLr, one64, beta1Value, bc1, bc2, stepSize, bc2Sqrt, decay;
  Value clipCoef, muonDecay;
};

LogicalResult UpdateBuilder::build() {
  if (module.lookupSymbol(kOptimizerStepName))
    return module.emitError() << "ds-optimizer: the module already has an @optimizer_step";
  if (failed(collect()) || failed(readParallelism()))
    return failure();
  findMuonParameters();
  declareStates();
  buildFunction();
  // A pipeline: each rank's update of what it holds.
  return splitOptimizerForPipeline(module);
}

LogicalResult UpdateBuilder::collect() {
  for (auto state : module.getOps<StateOp>())
    if (state.getRole() == SlotRole::grad && state.getOfAttr())
      params.push_back({module.lookupSymbol<ParameterOp>(state.getOfAttr()), state});
  if (params.empty() && module.getOps<FlatBufferOp>().empty())
    return module.emitError() << "ds-optimizer: no gradient states; run ds-autodiff first";
  // Mixed precision (ds-mixed-precision): 16-bit parameters and gradients, updated through
  // f32 master copies with f32 moments; fp16 also unscales the gradients and skips the step
  // when they overflowed.
  for (auto param : module.getOps<ParameterOp>())
    mixed |= param.getTrainable() && isHalfType(param.getTensorType().getElementType());
  for (auto st : module.getOps<StateOp>())
    if (st.getRole() == SlotRole::loss_scale)
      lossScaleState = st;
  switch (opt.type) {
  case OptimizerKind::adamw:
  case OptimizerKind::adam:
    isAdam = true;
    break;
  case OptimizerKind::sgd:
    isSgd = true;
    break;
  case OptimizerKind::muon:
    isMuon = true;
    break;
  }
  // AdamW is always decoupled (DeepSpeed); Adam follows adam-w-mode.
  decoupled = opt.type == OptimizerKind::adamw || opt.adamWMode;
  return success();
}

LogicalResult UpdateBuilder::readParallelism() {
  FailureOr<ZeroLayout> layout = ZeroLayout::read(module, "ds-optimizer");
  if (failed(layout))
    return failure();
  zero = std::move(*layout);
  if (zero.flat() && isMuon)
    return module.emitError() << "ds-optimizer: Muon with ZeRO stage " << zero.stage
                              << " is not implemented yet (Newton-Schulz needs whole "
                                 "matrices); use stage 0";
  llvm::erase_if(params,
                 [&](auto &pg) { return zero.members.contains(pg.first.getSymNameAttr()); });
  if (llvm::any_of(llvm::seq(params.size()), [&](size_t i) { return isExpertPart(i); })) {
    FailureOr<MeshAxisRef> a = getMeshAxis(module, MeshAxis::ep, "ds-optimizer");
    FailureOr<MeshAxisRef> r = getExpertReplicaGroup(module, "ds-optimizer");
    if (failed(a) || failed(r))
      return failure();
    expertAxis = *a;
    if (r->size > 1)
      expertReplicas = *r;
  }
  if (MeshAttr mesh = getMesh(module); mesh && mesh.getSize(MeshAxis::tp) > 1) {
    FailureOr<MeshAxisRef> a = getMeshAxis(module, MeshAxis::tp, "ds-optimizer");
    if (failed(a))
      return failure();
    tpAxis = *a;
    if (isMuon && llvm::any_of(params, [](auto &pg) {
          return static_cast<bool>(pg.first.getShardingAttr());
        }))
      return module.emitError() << "ds-optimizer: Muon with tensor parallelism is not "
                                   "implemented yet (Newton-Schulz needs whole matrices); use "
                                   "AdamW, or autotp_size 1";
  }
  return success();
}

void UpdateBuilder::findMuonParameters() {
  // Muon's selection (DeepSpeed's rule, shared with ds-reference): the embedding tables are
  // the parameters that a ds.embedding reads; the LM head is the weight of the ds.linear whose
  // result, through reshapes, is a ds.cross_entropy's logits.
  // Reshapes and conversions (a 16-bit model's roundings) are looked through.
  auto source = [](Value v) {
    while (true) {
      if (auto r = v.getDefiningOp<ReshapeOp>())
        v = r.getInput();
      else if (auto c = v.getDefiningOp<ConvertOp>())
        v = c.getInput();
      else
        return v;
    }
  };
  module.walk([&](EmbeddingOp op) {
    if (auto g = source(op.getWeight()).getDefiningOp<GetParameterOp>())
      embeddingTables.insert(g.getName());
  });
  module.walk([&](CrossEntropyOp ce) {
    if (auto lin = source(ce.getLogits()).getDefiningOp<LinearOp>())
      if (auto g = source(lin.getWeight()).getDefiningOp<GetParameterOp>())
        embeddingTables.insert(g.getName());
  });
  for (auto [param, grad] : params) {
    std::vector<std::string> names = {param.getSymName().str()};
    if (auto aliases = param.getAliases())
      for (Attribute a : *aliases)
        names.push_back(cast<StringAttr>(a).str());
    muonParam.push_back(isMuon && usesMuon(names, param.getTensorType().getRank(),
                                           embeddingTables.contains(param.getSymName())));
  }
}

void UpdateBuilder::declareStates() {
  // Optimizer state is f32 (the parameters' type, or their masters' in mixed precision),
  // declared after the last state.
  OpBuilder mb(ctx);
  if (!params.empty())
    mb.setInsertionPointAfter(params.back().second);
  auto newState = [&](ParameterOp param, SlotRole role) {
    std::string name = (param.getSymName() + "@" + stringifySlotRole(role)).str();
    StateOp::create(mb, param.getLoc(), mb.getStringAttr(name),
                    FlatSymbolRefAttr::get(param.getSymNameAttr()),
                    SlotRoleAttr::get(ctx, role), TypeAttr::get(wide(param.getTensorType())));
    return name;
  };
  for (ZeroBucket &bucket : zero.buckets) {
    auto shardState = [&](SlotRole role) {
      std::string name = (bucket.params.getSymName() + "@" + stringifySlotRole(role)).str();
      StateOp::create(mb, loc, mb.getStringAttr(name),
                      FlatSymbolRefAttr::get(bucket.params.getSymNameAttr()),
                      SlotRoleAttr::get(ctx, role), TypeAttr::get(wide(bucket.shardType)));
      return name;
    };
    mb.setInsertionPointAfter(bucket.lastDeclaration());
    bucketMasters.push_back(mixed ? shardState(SlotRole::master) : "");
    if (isAdam)
      bucketMoments.push_back(
          {shardState(SlotRole::exp_avg), shardState(SlotRole::exp_avg_sq)});
    else if (opt.momentum != 0)
      bucketMoments.push_back({shardState(SlotRole::momentum_buffer), ""});
    else
      bucketMoments.push_back({"", ""});
  }
  for (auto [i, pg] : llvm::enumerate(params)) {
    ParameterOp param = pg.first;
    masters.push_back(mixed ? newState(param, SlotRole::master) : "");
    if (muonParam[i])
      moments.push_back({newState(param, SlotRole::momentum_buffer), ""});
    else if (isAdam || isMuon)
      moments.push_back(
          {newState(param, SlotRole::exp_avg), newState(param, SlotRole::exp_avg_sq)});
    else if (opt.momentum != 0)
      moments.push_back({newState(param, SlotRole::momentum_buffer), ""});
    else
      moments.push_back({"", ""});
  }
  if (lossScaleState) {
    foundInfName = stringifySlotRole(SlotRole::found_inf).str();
    StateOp::create(mb, loc, mb.getStringAttr(foundInfName), FlatSymbolRefAttr(),
                    SlotRoleAttr::get(ctx, SlotRole::found_inf), TypeAttr::get(scalarF32));
  }
}

void UpdateBuilder::buildFunction() {
  // func.func @optimizer_step(%lr: tensor<f32>, %step: tensor<f32>, %beta1: tensor<f64>,
  //                           %aux_lr: tensor<f32>)
  OpBuilder fb = OpBuilder::atBlockEnd(module.getBody());
  auto func = func::FuncOp::create(
      fb, loc, kOptimizerStepName,
      FunctionType::get(ctx, {scalarF32, scalarF32, scalarF64, scalarF32}, {}));
  entry = func.addEntryBlock();
  builder.emplace(OpBuilder::atBlockBegin(entry));
  emitter.emplace(Emitter{*builder, loc});
  lr = entry->getArgument(0);
  step = entry->getArgument(1);
  // The gradients summed over the replicas: whole ones (stage 0, and the parameters outside
  // the flat buffers), then each bucket's shard.
  ZeroCollectives collectives(*builder, loc, zero);
  SmallVector<std::pair<StateOp, RankedTensorType>> whole, experts;
  for (auto [i, pg] : llvm::enumerate(params))
    (isExpertPart(i) ? experts : whole).push_back({pg.second, pg.first.getTensorType()});
  collectives.sumWholeGradients(whole);
  if (expertReplicas)
    for (auto [grad, type] : experts)
      e().assign(grad.getSymName(),
                 allReduce(*expertReplicas, e().get(grad.getSymName(), type)));
  bucketGrads = collectives.gradientShards();
  // Mixed precision: the update reads f32 gradients, divided by fp16's loss scale.
  if (lossScaleState)
    invScale = e().div(e().constant(f32, 1.0),
                       e().get(lossScaleState.getSymName(), lossScaleState.getTensorType()));
  buildOverflowCheck();
  buildStepScalars();
  buildClipping();
  // Muon's decoupled decay 1 - lr wd (f64, then f32) for its own lr.
  if (isMuon)
    muonDecay = e().convert(e().sub(one64, e().mul(e().convert(lr, f64),
                                                   e().constant(f64, opt.weightDecay))),
                            f32);
  updateBuckets();
  for (size_t i = 0; i < params.size(); ++i)
    updateParameter(i);
  func::ReturnOp::create(*builder, loc);
}

Value UpdateBuilder::widenGrad(Value g, bool atUse) {
  if (!isHalfType(typeOf(g).getElementType()))
    return g;
  g = e().convert(g, f32);
  if (atUse)
    g.getDefiningOp()->setAttr("rematerialized", builder->getUnitAttr());
  return invScale ? e().mul(g, invScale) : g;
}

Value UpdateBuilder::paramGrad(size_t i, bool atUse) {
  auto [param, grad] = params[i];
  return widenGrad(e().get(grad.getSymName(), param.getTensorType()), atUse);
}

Value UpdateBuilder::keep(Value next, Value old) {
  if (!ok)
    return next;
  return WhereOp::create(*builder, loc, typeOf(next), ok, next, old);
}

Value UpdateBuilder::allReduce(const MeshAxisRef &axis, Value local) {
  return shard::AllReduceOp::create(*builder, loc, typeOf(local), axis.grid, axis.axes(), local,
                                    shard::ReductionKind::Sum);
}

void UpdateBuilder::buildOverflowCheck() {
  // fp16: found_inf is 1 when a gradient (of any rank's shard) is inf or NaN, which is when
  // their sum times zero is NaN; the step's new values are then the old ones.
  if (!lossScaleState)
    return;
  Value local, experts;
  auto probe = [&](Value &acc, Value g) {
    Value z = e().sumAll(e().mul(g, e().constant(f32, 0.0)));
    acc = acc ? e().add(acc, z) : z;
  };
  for (Value g : bucketGrads)
    probe(local, widenGrad(g, false));
  for (size_t i = 0; i < params.size(); ++i)
    probe(isExpertPart(i) ? experts : local, paramGrad(i, false));
  if (experts) // distinct on the ep ranks
    probe(local, allReduce(*expertAxis, experts));
  if (zero.flat())
    local = ZeroCollectives(*builder, loc, zero).sumOverReplicas(local);
  if (tpAxis)
    local = allReduce(*tpAxis, local);
  ok = CmpOp::create(*builder, loc, RankedTensorType::get({}, builder->getI1Type()),
                     CmpPredicateAttr::get(ctx, CmpPredicate::eq), local,
                     e().constant(f32, 0.0));
  Value one = e().constant(f32, 1.0), zeroValue = e().constant(f32, 0.0);
  e().assign(foundInfName, WhereOp::create(*builder, loc, typeOf(one), ok, zeroValue, one));
}

void UpdateBuilder::buildStepScalars() {
  // Muon's AdamW group has its own lr; every other optimizer has one group.
  adamLr = isMuon ? entry->getArgument(3) : lr;
  // Step scalars in f64, as torch.optim computes them in Python/C++ doubles.
  Value lr64 = e().convert(adamLr, f64), step64 = e().convert(step, f64);
  one64 = e().constant(f64, 1.0);
  beta1Value = opt.scheduledBeta1 ? entry->getArgument(2) : e().constant(f64, opt.beta1);
  bc1 = e().sub(one64, e().pow(beta1Value, step64));
  bc2 = e().sub(one64, e().pow(e().constant(f64, opt.beta2), step64));
  stepSize = e().convert(e().div(lr64, bc1), f32);
  // pow(x, 0.5): the runtime's f64 support is binary ops and conversions.
  bc2Sqrt = e().convert(e().pow(bc2, e().constant(f64, 0.5)), f32);
  decay = e().convert(
      e().sub(one64, e().mul(lr64, e().constant(f64, decoupled ? opt.weightDecay : 0.0))), f32);
}

void UpdateBuilder::buildClipping() {
  // Global-norm clipping (clip_grad_norm_): the norm of the per-parameter norms.
  if (opt.gradientClipping <= 0)
    return;
  // Sums of squares: the tensor-parallel parts' also over the tp ranks, the experts' over ep.
  Value total, parts, experts;
  auto add = [&](Value &acc, Value sq) { acc = acc ? e().add(acc, sq) : sq; };
  auto addTpParts = [&](Value &acc) {
    if (!parts)
      return;
    add(acc, allReduce(*tpAxis, parts));
    parts = Value();
  };
  if (zero.flat()) {
    // The shards' sums of squares, summed over the replicas (the padding adds zeros).
    Value local;
    for (auto [bucket, grad] : llvm::zip(zero.buckets, bucketGrads)) {
      Value g = widenGrad(grad, false);
      add(bucket.split && tpAxis ? parts : local, e().sumAll(e().mul(g, g)));
    }
    addTpParts(local);
    total = ZeroCollectives(*builder, loc, zero).sumOverReplicas(local);
  }
  // The parameters outside the buffers: whole (already summed over dp) on every rank.
  for (size_t i = 0; i < params.size(); ++i) {
    Value g = paramGrad(i, false);
    Value norm = e().sqrt(e().sumAll(e().mul(g, g)));
    bool tpPart = tpAxis && splitsOver(params[i].first.getShardingAttr(), MeshAxis::tp);
    add(isExpertPart(i) ? experts : tpPart ? parts : total, e().mul(norm, norm));
  }
  addTpParts(total);
  if (experts)
    add(total, allReduce(*expertAxis, experts));
  Value norm = e().sqrt(total);
  Value coef = e().div(e().constant(f32, opt.gradientClipping),
                       e().add(norm, e().constant(f32, 1e-6)));
  clipCoef = MinimumOp::create(*builder, loc, scalarF32, coef, e().constant(f32, 1.0));
}

Value UpdateBuilder::sgdUpdate(Value p, Value g, RankedTensorType t, StringRef m1) {
  // torch.optim.SGD: d = g + wd p; buf = d at step 1, else m buf + (1 - dampening) d;
  // d = d + m buf (Nesterov) or buf; p = p - lr d.
  if (opt.weightDecay != 0)
    g = e().add(g, e().mul(p, e().constant(f32, opt.weightDecay)));
  if (opt.momentum != 0) {
    Value buf = e().get(m1, t);
    Value next = e().add(e().mul(buf, e().constant(f32, opt.momentum)),
                         e().mul(g, e().constant(f32, 1.0 - opt.dampening)));
    Value first = CmpOp::create(*builder, loc, RankedTensorType::get({}, builder->getI1Type()),
                                CmpPredicateAttr::get(ctx, CmpPredicate::eq), step,
                                e().constant(f32, 1.0));
    Value oldBuf = buf;
    buf = WhereOp::create(*builder, loc, t, first, g, next);
    e().assign(m1, keep(buf, oldBuf));
    g = opt.nesterov ? e().add(g, e().mul(buf, e().constant(f32, opt.momentum))) : buf;
  }
  return keep(e().sub(p, e().mul(g, lr)), p);
}

Value UpdateBuilder::elementwiseUpdate(llvm::function_ref<Value()> pget, Value g,
                                       RankedTensorType t, StringRef m1, StringRef m2) {
  // SGD and Adam(W): the update of `t`-typed parameter values from `pget` (a fresh read each
  // call) with gradient `g` and the moments `m1`, `m2`; returns the new parameter.
  if (isSgd)
    return sgdUpdate(pget(), g, t, m1);
  if (!decoupled && opt.weightDecay != 0) // Adam's L2: the decay joins the gradient
    g = e().add(g, e().mul(pget(), e().constant(f32, opt.weightDecay)));
  Value p = pget(), m = e().get(m1, t), v = e().get(m2, t);
  auto update = AdamWUpdateOp::create(*builder, loc, t, t, t, p, g, m, v, stepSize, bc2Sqrt,
                                      decay, beta1Value, builder->getF64FloatAttr(opt.beta2),
                                      builder->getF64FloatAttr(opt.eps));
  e().assign(m1, keep(update.getNewExpAvg(), m));
  e().assign(m2, keep(update.getNewExpAvgSq(), v));
  return keep(update.getNewParam(), p);
}

void UpdateBuilder::updateBuckets() {
  // ZeRO stages 1-3: update this rank's shard of each flat parameter buffer (a view); ZeRO
  // writes it back.
  ZeroCollectives collectives(*builder, loc, zero);
  for (auto [i, bucket] : llvm::enumerate(zero.buckets)) {
    RankedTensorType masterType = wide(bucket.shardType);
    Value g = widenGrad(bucketGrads[i], true);
    if (clipCoef)
      g = e().mul(g, clipCoef);
    auto [m1, m2] = bucketMoments[i];
    StringRef master = bucketMasters[i];
    // Mixed precision: the f32 master shard is updated, and the 16-bit parameters become
    // its rounding.
    collectives.writeBack(bucket, [&](llvm::function_ref<Value()> pget) -> Value {
      if (master.empty())
        return elementwiseUpdate(pget, g, bucket.shardType, m1, m2);
      Value next = elementwiseUpdate([&] { return e().get(master, masterType); }, g,
                                     masterType, m1, m2);
      e().assign(master, next);
      return e().convert(next, bucket.shardType.getElementType());
    });
  }
}

void UpdateBuilder::muonUpdate(size_t i, Value g, StringRef name, RankedTensorType t) {
  // DeepSpeed's muon_update: buf.lerp_(g, 1 - m); u = g.lerp_(buf, m) (Nesterov); the
  // quintic Newton-Schulz iteration on u viewed as [rows, rest], transposed when tall,
  // normalized by its Frobenius norm + 1e-7; then u * max(1, size(-2) / size(-1))^0.5,
  // p *= 1 - lr wd, p -= lr u.
  Value oldBuf = e().get(moments[i].first, t);
  Value buf = e().lerp(oldBuf, g, 1.0 - opt.momentum);
  e().assign(moments[i].first, keep(buf, oldBuf));
  Value u = e().lerp(g, buf, opt.momentum);
  ArrayRef<int64_t> shape = t.getShape();
  int64_t rows = shape[0], cols = t.getNumElements() / rows;
  Value x = e().reshape(u, {rows, cols});
  bool tall = rows > cols;
  if (tall)
    x = e().transpose(x);
  Value norm = e().sqrt(e().sumAll(e().mul(x, x)));
  x = e().div(x, e().add(norm, e().constant(f32, 1e-7)));
  const double ca = 3.4445, cb = -4.7750, cc = 2.0315;
  for (int it = 0; it < 5; ++it) {
    Value a = e().matmul(x, e().transpose(x));
    // b * A + c * A @ A parses as b * A + (c * A) @ A.
    Value bm = e().add(e().mul(a, e().constant(f32, cb)),
                       e().matmul(e().mul(a, e().constant(f32, cc)), a));
    x = e().add(e().mul(x, e().constant(f32, ca)), e().matmul(bm, x));
  }
  if (tall)
    x = e().transpose(x);
  double ratio = static_cast<double>(shape[shape.size() - 2]) /
                 static_cast<double>(shape[shape.size() - 1]);
  x = e().mul(x, e().constant(f32, std::sqrt(std::max(1.0, ratio))));
  Value old = e().get(name, t);
  Value p = e().mul(old, muonDecay);
  e().assign(name, keep(e().sub(p, e().mul(e().reshape(x, shape), lr)), old));
}

void UpdateBuilder::muonAdamUpdate(size_t i, Value g, StringRef name, RankedTensorType t) {
  // MuonWithAuxAdam's adam_update: lerp moments, bias-corrected by division, eps after the
  // square root; p *= 1 - lr wd, p -= lr update.
  Value oldM = e().get(moments[i].first, t), oldV = e().get(moments[i].second, t);
  Value m = e().lerp(oldM, g, 1.0 - opt.beta1);
  Value v = e().lerp(oldV, e().mul(g, g), 1.0 - opt.beta2);
  e().assign(moments[i].first, keep(m, oldM));
  e().assign(moments[i].second, keep(v, oldV));
  Value mc = e().div(m, e().convert(bc1, f32));
  Value vc = e().div(v, e().convert(bc2, f32));
  Value update = e().div(mc, e().add(e().sqrt(vc), e().constant(f32, opt.eps)));
  Value old = e().get(name, t);
  Value p = e().mul(old, decay);
  e().assign(name, keep(e().sub(p, e().mul(update, adamLr)), old));
}

void UpdateBuilder::updateParameter(size_t i) {
  auto [param, grad] = params[i];
  RankedTensorType gradType = param.getTensorType();
  // The updated tensor: the parameter, or in mixed precision its f32 master, which the
  // 16-bit parameter then rounds.
  RankedTensorType t = wide(gradType);
  std::string name = mixed ? masters[i] : param.getSymName().str();
  Value g = paramGrad(i, true);
  if (clipCoef)
    g = e().mul(g, clipCoef);
  if (muonParam[i])
    muonUpdate(i, g, name, t);
  else if (isMuon)
    muonAdamUpdate(i, g, name, t);
  else
    e().assign(name, elementwiseUpdate([&] { return e().get(name, t); }, g, t,
                                       moments[i].first, moments[i].second));
  if (mixed)
    e().assign(param.getSymName(), e().convert(e().get(name, t), gradType.getElementType()));
  Value zeros = ConstantOp::create(
      *builder, loc,
      DenseElementsAttr::get(gradType, FloatAttr::get(gradType.getElementType(), 0.0)));
  e().assign(grad.getSymName(), zeros);
}
} // namespace

void OptimizerPass::runOnOperation() {
  if (failed(UpdateBuilder(*this, getOperation()).build()))
    signalPassFailure();
}
