//===- ZeroUpdate.cpp - ZeRO's part of the update: buckets and collectives --===//
#include "ZeroUpdate.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

using namespace mlir;
using namespace mlir::ds;

Operation *ZeroBucket::lastDeclaration() const {
  if (paramShard)
    return paramShard;
  if (gradShard)
    return gradShard;
  if (grads)
    return grads;
  return params;
}

namespace {
/// The bucket of flat parameter buffer `f`: its gradient buffer or shard, its parameter
/// shard, and the shard's type over `ranks` replicas.
FailureOr<ZeroBucket> readBucket(ModuleOp module, FlatBufferOp f, int64_t ranks,
                                 int64_t stage, StringRef pass) {
  ZeroBucket bucket;
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
  if (!bucket.grads && !bucket.gradShard)
    return f.emitError() << pass << ": ZeRO stage " << stage << ": @" << f.getSymName()
                         << " has neither a flat gradient buffer nor a gradient shard";
  return bucket;
}
} // namespace

FailureOr<ZeroLayout> ZeroLayout::read(ModuleOp module, StringRef pass) {
  ZeroLayout layout;
  ZeroAttr zero = getZero(module);
  if (!zero)
    return layout;
  layout.stage = zero.getStage();
  FailureOr<MeshAxisRef> axis = getReplicaGroup(module, pass);
  if (failed(axis))
    return failure();
  layout.dp = *axis;
  if (!layout.flat())
    return layout;
  for (auto f : module.getOps<FlatBufferOp>()) {
    if (f.getRole() != SlotRole::params && f.getRole() != SlotRole::params_sharded)
      continue;
    FailureOr<ZeroBucket> bucket = readBucket(module, f, layout.dp.size, layout.stage, pass);
    if (failed(bucket))
      return failure();
    layout.buckets.push_back(*bucket);
  }
  if (layout.buckets.empty())
    return module.emitError() << pass << ": ZeRO stage " << layout.stage
                              << " needs ds-zero's flat parameter buffers";
  // On a pipeline, the parameters that several stages hold stay outside the buffers.
  for (auto f : module.getOps<FlatBufferOp>())
    for (Attribute a : f.getMembers())
      layout.members.insert(cast<FlatSymbolRefAttr>(a).getAttr());
  return layout;
}

Value ZeroCollectives::get(StringRef sym, RankedTensorType type) {
  return GetParameterOp::create(b, loc, type, FlatSymbolRefAttr::get(b.getContext(), sym));
}

void ZeroCollectives::assign(StringRef sym, Value v) {
  AssignOp::create(b, loc, FlatSymbolRefAttr::get(b.getContext(), sym), v);
}

Value ZeroCollectives::zeros(RankedTensorType t) {
  return ConstantOp::create(b, loc,
                            DenseElementsAttr::get(t, FloatAttr::get(t.getElementType(), 0.0)));
}

void ZeroCollectives::sumWholeGradients(
    ArrayRef<std::pair<StateOp, RankedTensorType>> grads) {
  if (layout.stage < 0)
    return;
  SmallVector<std::pair<StateOp, Value>> reduced;
  for (auto [grad, type] : grads) {
    Value r = shard::AllReduceOp::create(b, loc, type, layout.dp.grid, layout.dp.axes(),
                                         get(grad.getSymName(), type),
                                         shard::ReductionKind::Sum);
    reduced.push_back({grad, r});
  }
  for (auto [grad, r] : reduced)
    assign(grad.getSymName(), r);
}

SmallVector<Value> ZeroCollectives::gradientShards() {
  SmallVector<Value> shards;
  for (ZeroBucket bucket : layout.buckets) {
    if (bucket.gradShard) {
      shards.push_back(get(bucket.gradShard.getSymName(), bucket.shardType));
      continue;
    }
    RankedTensorType flatType = bucket.grads.getTensorType();
    shards.push_back(shard::ReduceScatterOp::create(
        b, loc, bucket.shardType, layout.dp.grid, layout.dp.axes(),
        get(bucket.grads.getSymName(), flatType), shard::ReductionKind::Sum, APInt(64, 0)));
  }
  return shards;
}

Value ZeroCollectives::sumOverReplicas(Value local) {
  return shard::AllReduceOp::create(b, loc, local.getType(), layout.dp.grid, layout.dp.axes(),
                                    local, shard::ReductionKind::Sum);
}

void ZeroCollectives::writeBack(ZeroBucket bucket,
                                llvm::function_ref<Value(llvm::function_ref<Value()>)> update) {
  if (bucket.paramShard) { // stage 3: the shard is all this rank keeps
    StringRef name = bucket.paramShard.getSymName();
    assign(name, update([&] { return get(name, bucket.shardType); }));
    if (bucket.gradShard) // (on a pipeline the gradients are a whole flat buffer)
      assign(bucket.gradShard.getSymName(), zeros(bucket.shardType));
    else
      assign(bucket.grads.getSymName(), zeros(bucket.grads.getTensorType()));
    return;
  }
  RankedTensorType flatType = bucket.params.getTensorType();
  Value pShard = shard::AllSliceOp::create(b, loc, bucket.shardType, layout.dp.grid,
                                           layout.dp.axes(),
                                           get(bucket.params.getSymName(), flatType),
                                           APInt(64, 0));
  Value newShard = update([&] { return pShard; });
  Value gathered = shard::AllGatherOp::create(b, loc, flatType, layout.dp.grid,
                                              layout.dp.axes(), newShard, APInt(64, 0));
  assign(bucket.params.getSymName(), gathered);
  if (bucket.grads)
    assign(bucket.grads.getSymName(), zeros(bucket.grads.getTensorType()));
  else
    assign(bucket.gradShard.getSymName(), zeros(bucket.shardType));
}
