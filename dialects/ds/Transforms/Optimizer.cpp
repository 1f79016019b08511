//===- Optimizer.cpp - the ds-optimizer pass: the parameter update as IR ---===//
#include "ds/Transforms/Passes.h"

#include "Mesh.h"
#include "PipelineOptimizer.h"

#include "ds/Transforms/MuonRule.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
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
    if (state.getRole() == SlotRole::grad && state.getOfAttr())
      params.push_back({module.lookupSymbol<ParameterOp>(state.getOfAttr()), state});
  bool hasFlat = !module.getOps<FlatBufferOp>().empty();
  if (params.empty() && !hasFlat) {
    module.emitError() << "ds-optimizer: no gradient states; run ds-autodiff first";
    return signalPassFailure();
  }

  // Mixed precision (ds-mixed-precision): 16-bit parameters and gradients, updated through
  // f32 master copies with f32 moments; fp16 also unscales the gradients and skips the step
  // when they overflowed.
  auto isHalfType = [](Type t) {
    return isa<FloatType>(t) && t.getIntOrFloatBitWidth() == 16;
  };
  auto wide = [&](RankedTensorType t) {
    return RankedTensorType::get(t.getShape(), Float32Type::get(ctx));
  };
  bool mixed = false;
  for (auto param : module.getOps<ParameterOp>())
    mixed |= param.getTrainable() && isHalfType(param.getTensorType().getElementType());
  StateOp lossScaleState;
  for (auto st : module.getOps<StateOp>())
    if (st.getRole() == SlotRole::loss_scale)
      lossScaleState = st;

  bool isAdam = false, isSgd = false, isMuon = false;
  switch (type) {
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
  bool decoupled = type == OptimizerKind::adamw || adamWMode;

  // ds-zero's decision: the stage, the ranks that hold replicas (the mesh's dp axis, and sp)
  // and (stage >= 1) the flat buffers.
  int64_t zeroStage = -1, ranks = 1;
  MeshAxisRef dp;
  // One bucket per flat parameter buffer: its gradients are a flat buffer to reduce-scatter
  // (stage 1) or a shard that backward already reduced into (stage 2).
  struct Bucket {
    FlatBufferOp params;
    FlatBufferOp grads;
    StateOp gradShard;
    StateOp paramShard; ///< stage 3: the parameters exist only as this shard
    RankedTensorType shardType;
    std::pair<std::string, std::string> moments;
    std::string master; ///< mixed precision: the f32 master shard
    Value g;
    bool split = false; ///< its members are tensor-parallel parts (distinct on the tp ranks)
  };
  SmallVector<Bucket> buckets;
  if (ZeroAttr attr = getZero(module)) {
    zeroStage = attr.getStage();
    FailureOr<MeshAxisRef> axis = getReplicaGroup(module, "ds-optimizer");
    if (failed(axis))
      return signalPassFailure();
    dp = *axis;
    ranks = dp.size;
    if (zeroStage >= 1) {
      for (auto f : module.getOps<FlatBufferOp>()) {
        if (f.getRole() != SlotRole::params && f.getRole() != SlotRole::params_sharded)
          continue;
        Bucket bucket;
        bucket.params = f;
        auto firstParam = cast<FlatSymbolRefAttr>(f.getMembers()[0]);
        if (auto p = module.lookupSymbol<ParameterOp>(firstParam))
          bucket.split = static_cast<bool>(p.getShardingAttr());
        for (auto g : module.getOps<FlatBufferOp>())
          if (g.getRole() == SlotRole::grads)
            if (auto st = module.lookupSymbol<StateOp>(cast<FlatSymbolRefAttr>(g.getMembers()[0])))
              if (st.getOfAttr() == firstParam)
                bucket.grads = g;
        for (auto st : module.getOps<StateOp>())
          if (st.getOf() == f.getSymName() && st.getRole() == SlotRole::grad_shard)
            bucket.gradShard = st;
          else if (st.getOf() == f.getSymName() && st.getRole() == SlotRole::param_shard)
            bucket.paramShard = st;
        int64_t n = f.getTensorType().getNumElements();
        bucket.shardType = RankedTensorType::get({n / ranks}, f.getTensorType().getElementType());
        if (!bucket.grads && !bucket.gradShard) {
          f.emitError() << "ds-optimizer: ZeRO stage " << zeroStage << ": @" << f.getSymName()
                        << " has neither a flat gradient buffer nor a gradient shard";
          return signalPassFailure();
        }
        buckets.push_back(bucket);
      }
      if (buckets.empty()) {
        module.emitError() << "ds-optimizer: ZeRO stage " << zeroStage
                           << " needs ds-zero's flat parameter buffers";
        return signalPassFailure();
      }
      if (isMuon) {
        module.emitError() << "ds-optimizer: Muon with ZeRO stage " << zeroStage
                           << " is not implemented yet (Newton-Schulz needs whole matrices); "
                              "use stage 0";
        return signalPassFailure();
      }
    }
  }
  bool flat = zeroStage >= 1;
  // With flat buffers, `params` keeps the parameters outside them (on a pipeline, those that
  // several stages hold): updated whole, their gradients summed over dp as at stage 0.
  if (flat) {
    llvm::DenseSet<StringAttr> members;
    for (auto f : module.getOps<FlatBufferOp>())
      for (Attribute a : f.getMembers())
        members.insert(cast<FlatSymbolRefAttr>(a).getAttr());
    llvm::erase_if(params, [&](auto &pg) { return members.contains(pg.first.getSymNameAttr()); });
  }

  // Tensor parallelism: parameters with a sharding hold distinct parts on the tp ranks, so
  // the global norm and the overflow check also sum over the tp axis.
  std::optional<MeshAxisRef> tpAxis;
  if (MeshAttr mesh = getMesh(module); mesh && mesh.getSize(MeshAxis::tp) > 1) {
    FailureOr<MeshAxisRef> a = getMeshAxis(module, MeshAxis::tp, "ds-optimizer");
    if (failed(a))
      return signalPassFailure();
    tpAxis = *a;
    if (isMuon && llvm::any_of(params, [](auto &pg) {
          return static_cast<bool>(pg.first.getShardingAttr());
        })) {
      module.emitError() << "ds-optimizer: Muon with tensor parallelism is not implemented yet "
                            "(Newton-Schulz needs whole matrices); use AdamW, or autotp_size 1";
      return signalPassFailure();
    }
  }

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
  llvm::StringSet<> embeddingTables;
  module.walk([&](EmbeddingOp e) {
    if (auto g = source(e.getWeight()).getDefiningOp<GetParameterOp>())
      embeddingTables.insert(g.getName());
  });
  module.walk([&](CrossEntropyOp ce) {
    if (auto lin = source(ce.getLogits()).getDefiningOp<LinearOp>())
      if (auto g = source(lin.getWeight()).getDefiningOp<GetParameterOp>())
        embeddingTables.insert(g.getName());
  });
  auto usesMuonRule = [&](ParameterOp param) {
    std::vector<std::string> names = {param.getSymName().str()};
    if (auto aliases = param.getAliases())
      for (Attribute a : *aliases)
        names.push_back(cast<StringAttr>(a).str());
    return usesMuon(names, param.getTensorType().getRank(),
                          embeddingTables.contains(param.getSymName()));
  };

  // Optimizer state symbols after the last state.
  OpBuilder mb(ctx);
  if (!params.empty())
    mb.setInsertionPointAfter(params.back().second);
  Location loc = module.getLoc();
  SmallVector<std::pair<std::string, std::string>> moments;
  SmallVector<bool> muonParam;
  // Optimizer state is f32 (the parameters' type, or their masters' in mixed precision).
  auto newState = [&](ParameterOp param, SlotRole role) {
    std::string name = (param.getSymName() + "@" + stringifySlotRole(role)).str();
    StateOp::create(mb, param.getLoc(), mb.getStringAttr(name),
                    FlatSymbolRefAttr::get(param.getSymNameAttr()),
                    SlotRoleAttr::get(ctx, role), TypeAttr::get(wide(param.getTensorType())));
    return name;
  };
  for (Bucket &bucket : buckets) {
    auto shardState = [&](SlotRole role) {
      std::string name = (bucket.params.getSymName() + "@" + stringifySlotRole(role)).str();
      StateOp::create(mb, loc, mb.getStringAttr(name),
                      FlatSymbolRefAttr::get(bucket.params.getSymNameAttr()),
                      SlotRoleAttr::get(ctx, role), TypeAttr::get(wide(bucket.shardType)));
      return name;
    };
    Operation *last = bucket.paramShard ? bucket.paramShard.getOperation()
                      : bucket.gradShard ? bucket.gradShard.getOperation()
                      : bucket.grads   ? bucket.grads.getOperation()
                                       : bucket.params.getOperation();
    mb.setInsertionPointAfter(last);
    if (mixed)
      bucket.master = shardState(SlotRole::master);
    if (isAdam)
      bucket.moments = {shardState(SlotRole::exp_avg), shardState(SlotRole::exp_avg_sq)};
    else if (momentum != 0)
      bucket.moments = {shardState(SlotRole::momentum_buffer), ""};
  }
  SmallVector<std::string> masters;
  for (auto [param, grad] : params) {
    masters.push_back(mixed ? newState(param, SlotRole::master) : "");
    muonParam.push_back(isMuon && usesMuonRule(param));
    if (muonParam.back())
      moments.push_back({newState(param, SlotRole::momentum_buffer), ""});
    else if (isAdam || isMuon)
      moments.push_back({newState(param, SlotRole::exp_avg), newState(param, SlotRole::exp_avg_sq)});
    else if (momentum != 0)
      moments.push_back({newState(param, SlotRole::momentum_buffer), ""});
    else
      moments.push_back({"", ""});
  }

  std::string foundInfName;
  if (lossScaleState) {
    foundInfName = stringifySlotRole(SlotRole::found_inf).str();
    StateOp::create(mb, loc, mb.getStringAttr(foundInfName), FlatSymbolRefAttr(),
                    SlotRoleAttr::get(mb.getContext(), SlotRole::found_inf),
                    TypeAttr::get(RankedTensorType::get({}, Float32Type::get(ctx))));
  }

  // func.func @optimizer_step(%lr: tensor<f32>, %step: tensor<f32>, %beta1: tensor<f64>,
  //                           %aux_lr: tensor<f32>)
  OpBuilder fb = OpBuilder::atBlockEnd(module.getBody());
  auto f32 = Float32Type::get(ctx);
  auto f64 = Float64Type::get(ctx);
  auto scalarF32 = RankedTensorType::get({}, f32);
  auto scalarF64 = RankedTensorType::get({}, f64);
  auto func = func::FuncOp::create(
      fb, loc, "optimizer_step",
      FunctionType::get(ctx, {scalarF32, scalarF32, scalarF64, scalarF32}, {}));
  Block *entry = func.addEntryBlock();
  OpBuilder b = OpBuilder::atBlockBegin(entry);
  Emitter e{b, loc};
  Value lr = entry->getArgument(0), step = entry->getArgument(1);
  ArrayRef<int16_t> dpAxes = dp.axes();

  // ZeRO stage 0: the gradients summed over the ranks that hold replicas (dp, and sp whose
  // ranks each differentiate their block of the sequence) first (all the all-reduces, then
  // the write-backs, so that the channel runs them back to back).
  if (zeroStage == 0 || flat) {
    SmallVector<std::pair<StateOp, Value>> reduced;
    for (auto [param, grad] : params) {
      RankedTensorType t = param.getTensorType();
      Value r = shard::AllReduceOp::create(b, loc, t, dp.grid, dpAxes,
                                           e.get(grad.getSymName(), t),
                                           shard::ReductionKind::Sum);
      reduced.push_back({grad, r});
    }
    for (auto [grad, r] : reduced)
      e.assign(grad.getSymName(), r);
  }
  // ZeRO stages 1-2: this rank's shard of the gradients, summed over the ranks (stage 1
  // reduce-scatters the flat gradients now; stage 2's backward already did).
  for (Bucket &bucket : buckets) {
    if (bucket.gradShard) {
      bucket.g = e.get(bucket.gradShard.getSymName(), bucket.shardType);
      continue;
    }
    RankedTensorType flatType = bucket.grads.getTensorType();
    bucket.g = shard::ReduceScatterOp::create(b, loc, bucket.shardType, dp.grid, dpAxes,
                                              e.get(bucket.grads.getSymName(), flatType),
                                              shard::ReductionKind::Sum, APInt(64, 0));
  }
  // Mixed precision: the update reads f32 gradients, divided by fp16's loss scale.
  Value invScale;
  if (lossScaleState)
    invScale = e.div(e.constant(f32, 1.0),
                     e.get(lossScaleState.getSymName(), lossScaleState.getTensorType()));
  // Widened where used, one tensor at a time: the update's copy is marked so that CSE does
  // not merge it with the clipping's or the overflow check's (which would keep every f32
  // gradient alive at once).
  auto widenGrad = [&](Value g, bool atUse) {
    if (!isHalfType(typeOf(g).getElementType()))
      return g;
    g = e.convert(g, f32);
    if (atUse)
      g.getDefiningOp()->setAttr("rematerialized", b.getUnitAttr());
    return invScale ? e.mul(g, invScale) : g;
  };
  // Without ZeRO partitioning: each parameter's gradient.
  auto paramGrad = [&](size_t i, bool atUse) {
    auto [param, grad] = params[i];
    return widenGrad(e.get(grad.getSymName(), param.getTensorType()), atUse);
  };
  // fp16: found_inf is 1 when a gradient (of any rank's shard) is inf or NaN, which is when
  // their sum times zero is NaN; the step's new values are then the old ones.
  Value ok;
  if (lossScaleState) {
    Value local;
    auto probe = [&](Value g) {
      Value z = e.sumAll(e.mul(g, e.constant(f32, 0.0)));
      local = local ? e.add(local, z) : z;
    };
    for (Bucket &bucket : buckets)
      probe(widenGrad(bucket.g, false));
    for (size_t i = 0; i < params.size(); ++i)
      probe(paramGrad(i, false));
    if (flat)
      local = shard::AllReduceOp::create(b, loc, typeOf(local), dp.grid, dpAxes, local,
                                         shard::ReductionKind::Sum);
    if (tpAxis)
      local = shard::AllReduceOp::create(b, loc, typeOf(local), tpAxis->grid, tpAxis->axes(),
                                         local, shard::ReductionKind::Sum);
    ok = CmpOp::create(b, loc, RankedTensorType::get({}, b.getI1Type()),
                       CmpPredicateAttr::get(ctx, CmpPredicate::eq), local,
                       e.constant(f32, 0.0));
    Value one = e.constant(f32, 1.0), zero = e.constant(f32, 0.0);
    e.assign(foundInfName, WhereOp::create(b, loc, typeOf(one), ok, zero, one));
  }
  // The new value of a state, or (fp16, on overflow) its old one.
  auto keep = [&](Value next, Value old) -> Value {
    if (!ok)
      return next;
    return WhereOp::create(b, loc, typeOf(next), ok, next, old);
  };
  // Muon's AdamW group has its own lr; every other optimizer has one group.
  Value adamLr = isMuon ? entry->getArgument(3) : lr;

  // Step scalars in f64, as torch.optim computes them in Python/C++ doubles.
  Value lr64 = e.convert(adamLr, f64), step64 = e.convert(step, f64);
  Value one64 = e.constant(f64, 1.0);
  Value beta1Value = scheduledBeta1 ? entry->getArgument(2) : e.constant(f64, beta1);
  Value bc1 = e.sub(one64, e.pow(beta1Value, step64));
  Value bc2 = e.sub(one64, e.pow(e.constant(f64, beta2), step64));
  Value stepSize = e.convert(e.div(lr64, bc1), f32);
  // pow(x, 0.5): the runtime's f64 support is binary ops and conversions.
  Value bc2Sqrt = e.convert(e.pow(bc2, e.constant(f64, 0.5)), f32);
  Value decay = e.convert(
      e.sub(one64, e.mul(lr64, e.constant(f64, decoupled ? weightDecay : 0.0))), f32);

  // Global-norm clipping (clip_grad_norm_): the norm of the per-parameter norms.
  Value clipCoef;
  if (gradientClipping > 0 && flat) {
    // The shards' sums of squares, summed over the ranks (the padding adds zeros); the
    // tensor-parallel parts' also over the tp ranks.
    Value local, parts;
    for (Bucket &bucket : buckets) {
      Value g = widenGrad(bucket.g, false);
      Value sq = e.sumAll(e.mul(g, g));
      Value &acc = bucket.split && tpAxis ? parts : local;
      acc = acc ? e.add(acc, sq) : sq;
    }
    if (parts) {
      parts = shard::AllReduceOp::create(b, loc, scalarF32, tpAxis->grid, tpAxis->axes(), parts,
                                         shard::ReductionKind::Sum);
      local = local ? e.add(local, parts) : parts;
    }
    Value total = shard::AllReduceOp::create(b, loc, scalarF32, dp.grid, dpAxes, local,
                                             shard::ReductionKind::Sum);
    // The parameters outside the buffers: whole (already summed over dp) on every rank.
    Value looseParts;
    for (size_t i = 0; i < params.size(); ++i) {
      Value g = paramGrad(i, false);
      Value norm = e.sqrt(e.sumAll(e.mul(g, g)));
      Value sq = e.mul(norm, norm);
      if (tpAxis && params[i].first.getShardingAttr())
        looseParts = looseParts ? e.add(looseParts, sq) : sq;
      else
        total = e.add(total, sq);
    }
    if (looseParts)
      total = e.add(total, shard::AllReduceOp::create(b, loc, scalarF32, tpAxis->grid,
                                                      tpAxis->axes(), looseParts,
                                                      shard::ReductionKind::Sum));
    Value coef = e.div(e.constant(f32, gradientClipping),
                       e.add(e.sqrt(total), e.constant(f32, 1e-6)));
    clipCoef = MinimumOp::create(b, loc, scalarF32, coef, e.constant(f32, 1.0));
  } else if (gradientClipping > 0) {
    Value total, parts;
    for (size_t i = 0; i < params.size(); ++i) {
      Value g = paramGrad(i, false);
      Value norm = e.sqrt(e.sumAll(e.mul(g, g)));
      Value sq = e.mul(norm, norm);
      Value &acc = tpAxis && params[i].first.getShardingAttr() ? parts : total;
      acc = acc ? e.add(acc, sq) : sq;
    }
    if (parts) {
      parts = shard::AllReduceOp::create(b, loc, scalarF32, tpAxis->grid, tpAxis->axes(), parts,
                                         shard::ReductionKind::Sum);
      total = total ? e.add(total, parts) : parts;
    }
    Value totalNorm = e.sqrt(total);
    Value coef = e.div(e.constant(f32, gradientClipping), e.add(totalNorm, e.constant(f32, 1e-6)));
    clipCoef = MinimumOp::create(b, loc, scalarF32, coef, e.constant(f32, 1.0));
  }

  // Muon's decoupled decay 1 - lr wd (f64, then f32) for its own lr.
  Value muonDecay;
  if (isMuon)
    muonDecay = e.convert(
        e.sub(one64, e.mul(e.convert(lr, f64), e.constant(f64, weightDecay))), f32);

  // SGD and Adam(W): the update of `t`-typed parameter values from `pget` (a fresh read each
  // call) with gradient `g` and the moments `m1`, `m2`; returns the new parameter.
  auto elementwiseUpdate = [&](llvm::function_ref<Value()> pget, Value g, RankedTensorType t,
                               StringRef m1, StringRef m2) -> Value {
    if (isSgd) {
      // torch.optim.SGD: d = g + wd p; buf = d at step 1, else m buf + (1 - dampening) d;
      // d = d + m buf (Nesterov) or buf; p = p - lr d.
      Value p = pget();
      if (weightDecay != 0)
        g = e.add(g, e.mul(p, e.constant(f32, weightDecay)));
      if (momentum != 0) {
        Value buf = e.get(m1, t);
        Value next = e.add(e.mul(buf, e.constant(f32, momentum)),
                           e.mul(g, e.constant(f32, 1.0 - dampening)));
        Value first = CmpOp::create(b, loc, RankedTensorType::get({}, b.getI1Type()),
                                    CmpPredicateAttr::get(ctx, CmpPredicate::eq), step,
                                    e.constant(f32, 1.0));
        Value oldBuf = buf;
        buf = WhereOp::create(b, loc, t, first, g, next);
        e.assign(m1, keep(buf, oldBuf));
        g = nesterov ? e.add(g, e.mul(buf, e.constant(f32, momentum))) : buf;
      }
      return keep(e.sub(p, e.mul(g, lr)), p);
    }
    if (!decoupled && weightDecay != 0) // Adam's L2: the decay joins the gradient
      g = e.add(g, e.mul(pget(), e.constant(f32, weightDecay)));
    Value p = pget(), m = e.get(m1, t), v = e.get(m2, t);
    auto update = AdamWUpdateOp::create(b, loc, t, t, t, p, g, m, v, stepSize, bc2Sqrt, decay,
                                        beta1Value, b.getF64FloatAttr(beta2),
                                        b.getF64FloatAttr(eps));
    e.assign(m1, keep(update.getNewExpAvg(), m));
    e.assign(m2, keep(update.getNewExpAvgSq(), v));
    return keep(update.getNewParam(), p);
  };

  if (flat) {
    // ZeRO stages 1-2: update this rank's shard of each flat parameter buffer (a view), then
    // gather every rank's into the buffer, which the parameters are views of.
    auto zeros = [&](RankedTensorType t) {
      return ConstantOp::create(b, loc,
                                DenseElementsAttr::get(t, FloatAttr::get(t.getElementType(), 0.0)));
    };
    for (Bucket &bucket : buckets) {
      RankedTensorType flatType = bucket.params.getTensorType();
      RankedTensorType masterType = wide(bucket.shardType);
      Value g = widenGrad(bucket.g, true);
      if (clipCoef)
        g = e.mul(g, clipCoef);
      // Mixed precision: the f32 master shard is updated, and the 16-bit parameters become
      // its rounding.
      auto updateShard = [&](llvm::function_ref<Value()> pget) -> Value {
        if (bucket.master.empty())
          return elementwiseUpdate(pget, g, bucket.shardType, bucket.moments.first,
                                   bucket.moments.second);
        Value master = elementwiseUpdate([&] { return e.get(bucket.master, masterType); }, g,
                                         masterType, bucket.moments.first,
                                         bucket.moments.second);
        e.assign(bucket.master, master);
        return e.convert(master, bucket.shardType.getElementType());
      };
      if (bucket.paramShard) { // stage 3: the shard is all this rank keeps
        StringRef name = bucket.paramShard.getSymName();
        e.assign(name, updateShard([&] { return e.get(name, bucket.shardType); }));
        if (bucket.gradShard) // (on a pipeline the gradients are a whole flat buffer)
          e.assign(bucket.gradShard.getSymName(), zeros(bucket.shardType));
        else
          e.assign(bucket.grads.getSymName(), zeros(bucket.grads.getTensorType()));
        continue;
      }
      Value pShard = shard::AllSliceOp::create(b, loc, bucket.shardType, dp.grid, dpAxes,
                                               e.get(bucket.params.getSymName(), flatType),
                                               APInt(64, 0));
      Value newShard = updateShard([&] { return pShard; });
      Value gathered = shard::AllGatherOp::create(b, loc, flatType, dp.grid, dpAxes, newShard,
                                                  APInt(64, 0));
      e.assign(bucket.params.getSymName(), gathered);
      if (bucket.grads)
        e.assign(bucket.grads.getSymName(), zeros(bucket.grads.getTensorType()));
      else
        e.assign(bucket.gradShard.getSymName(), zeros(bucket.shardType));
    }
  }

  for (auto [i, pg] : llvm::enumerate(params)) {
    auto [param, grad] = pg;
    RankedTensorType gradType = param.getTensorType();
    // The updated tensor: the parameter, or in mixed precision its f32 master, which the
    // 16-bit parameter then rounds.
    RankedTensorType t = wide(gradType);
    std::string name = mixed ? masters[i] : param.getSymName().str();
    Value g = paramGrad(i, true);
    if (clipCoef)
      g = e.mul(g, clipCoef);
    if (muonParam[i]) {
      // DeepSpeed's muon_update: buf.lerp_(g, 1 - m); u = g.lerp_(buf, m) (Nesterov); the
      // quintic Newton-Schulz iteration on u viewed as [rows, rest], transposed when tall,
      // normalized by its Frobenius norm + 1e-7; then u * max(1, size(-2) / size(-1))^0.5,
      // p *= 1 - lr wd, p -= lr u.
      Value oldBuf = e.get(moments[i].first, t);
      Value buf = e.lerp(oldBuf, g, 1.0 - momentum);
      e.assign(moments[i].first, keep(buf, oldBuf));
      Value u = e.lerp(g, buf, momentum);
      ArrayRef<int64_t> shape = t.getShape();
      int64_t rows = shape[0], cols = t.getNumElements() / rows;
      Value x = e.reshape(u, {rows, cols});
      bool tall = rows > cols;
      if (tall)
        x = e.transpose(x);
      Value norm = e.sqrt(e.sumAll(e.mul(x, x)));
      x = e.div(x, e.add(norm, e.constant(f32, 1e-7)));
      const double ca = 3.4445, cb = -4.7750, cc = 2.0315;
      for (int it = 0; it < 5; ++it) {
        Value a = e.matmul(x, e.transpose(x));
        // b * A + c * A @ A parses as b * A + (c * A) @ A.
        Value bm = e.add(e.mul(a, e.constant(f32, cb)), e.matmul(e.mul(a, e.constant(f32, cc)), a));
        x = e.add(e.mul(x, e.constant(f32, ca)), e.matmul(bm, x));
      }
      if (tall)
        x = e.transpose(x);
      double ratio = static_cast<double>(shape[shape.size() - 2]) /
                     static_cast<double>(shape[shape.size() - 1]);
      x = e.mul(x, e.constant(f32, std::sqrt(std::max(1.0, ratio))));
      Value old = e.get(name, t);
      Value p = e.mul(old, muonDecay);
      e.assign(name, keep(e.sub(p, e.mul(e.reshape(x, shape), lr)), old));
    } else if (isMuon) {
      // MuonWithAuxAdam's adam_update: lerp moments, bias-corrected by division, eps after
      // the square root; p *= 1 - lr wd, p -= lr update.
      Value oldM = e.get(moments[i].first, t), oldV = e.get(moments[i].second, t);
      Value m = e.lerp(oldM, g, 1.0 - beta1);
      Value v = e.lerp(oldV, e.mul(g, g), 1.0 - beta2);
      e.assign(moments[i].first, keep(m, oldM));
      e.assign(moments[i].second, keep(v, oldV));
      Value mc = e.div(m, e.convert(bc1, f32));
      Value vc = e.div(v, e.convert(bc2, f32));
      Value update = e.div(mc, e.add(e.sqrt(vc), e.constant(f32, eps)));
      Value old = e.get(name, t);
      Value p = e.mul(old, decay);
      e.assign(name, keep(e.sub(p, e.mul(update, adamLr)), old));
    } else {
      e.assign(name, elementwiseUpdate([&] { return e.get(name, t); }, g, t, moments[i].first,
                                       moments[i].second));
    }
    if (mixed)
      e.assign(param.getSymName(),
               e.convert(e.get(name, t), gradType.getElementType()));
    Value zero = ConstantOp::create(
        b, loc, DenseElementsAttr::get(gradType, FloatAttr::get(gradType.getElementType(), 0.0)));
    e.assign(grad.getSymName(), zero);
  }
  func::ReturnOp::create(b, loc);
  // A pipeline: each rank's update of what it holds.
  if (failed(splitOptimizerForPipeline(module)))
    return signalPassFailure();
}
