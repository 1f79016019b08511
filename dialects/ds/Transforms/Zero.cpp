//===- Zero.cpp - the ds-zero pass: data parallelism and ZeRO partitioning ---===//
//
// Runs between ds-autodiff and ds-optimizer. Partitions over the ranks that hold replicas of
// the parameters: the mesh's data-parallel axis, with its sequence-parallel axis (a one-axis
// mesh of data-parallel-size ranks when the module has none; its grid `@mesh` is the upstream
// `shard` dialect's) and records the stage in the module (`ds.zero`); ds-optimizer then
// emits the update with the communication that the stage needs. For stages 1-3 it lays the
// trainable parameters out in one flat buffer, padded once so that it splits into equal
// shards (as DeepSpeed's flat partitions), and (stage 1) the gradients in another.
//
#include "ds/Transforms/Passes.h"

#include "Mesh.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

#include <map>

#include <numeric>

namespace mlir::ds {
#define GEN_PASS_DEF_DSZERO
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {
/// Shards are whole multiples of 64 bytes (the arena's alignment): 16 f32 or 32 bf16/f16
/// elements.
constexpr int64_t kShardAlignmentBytes = 64;
int64_t shardAlignment(Type elem) {
  return kShardAlignmentBytes / std::max<int64_t>(1, elem.getIntOrFloatBitWidth() / 8);
}
/// The one element type of the trainable parameters (one flat buffer per dtype; ds-zero
/// partitions models whose trainable parameters share it).
LogicalResult checkElementType(ParameterOp param, Type &elem, int64_t stage) {
  Type t = param.getTensorType().getElementType();
  if (!isa<FloatType>(t) || (elem && t != elem))
    return param.emitError() << "ds-zero: stage " << stage
                             << " partitions trainable parameters of one float type; '"
                             << param.getSymName() << "' is " << t << " and others are "
                             << elem << " (make them one type)";
  elem = t;
  return success();
}

/// A gradient's accumulation in @micro_step (ds-autodiff's): %old = get @p@grad;
/// %new = add %old, %g; assign @p@grad.
struct GradAccumulation {
  ParameterOp param;
  StateOp state;
  Value g;
  SmallVector<Operation *> ops;
  /// Where backward defines the gradient (the body's first op for an argument).
  Operation *ready = nullptr;
  Operation *readyAt() const { return ready; }
};

/// Gradients reduced together, and whether stage 3 partitions their parameters.
struct GradBucket {
  SmallVector<GradAccumulation *> members;
  bool partitioned = false;
  /// The op after which every member's gradient is ready.
  Operation *lastReady() const {
    Operation *last = nullptr;
    for (GradAccumulation *gr : members)
      if (!last || last->isBeforeInBlock(gr->readyAt()))
        last = gr->readyAt();
    return last;
  }
};

struct ZeroPass : mlir::ds::impl::DSZeroBase<ZeroPass> {
  using DSZeroBase::DSZeroBase;
  void runOnOperation() override;
  LogicalResult partitionGradients(ModuleOp module);
  /// The gradient accumulations of @micro_step, in the order backward makes them ready, and
  /// the parameters' one element type.
  FailureOr<SmallVector<GradAccumulation>> findAccumulations(ModuleOp module, Block &body,
                                                             Type &elem);
  /// The buckets of reduce-bucket-size elements (stage 3's persistent parameters and the
  /// tensor-parallel parts apart), in the order their last gradient is ready.
  SmallVector<GradBucket> bucketGradients(MutableArrayRef<GradAccumulation> grads);
  LogicalResult partitionParameters(ModuleOp module);
  /// Stage 3 on a pipeline: in the programs of the ranks that hold `flat`, its members are
  /// views of the buffer all-gathered from its shard once per step, before their first use.
  LogicalResult gatherOncePerStep(ModuleOp module, FlatBufferOp flat);
  /// Stage 2 on a pipeline: in the programs of the ranks that hold `flat`, its members'
  /// gradients accumulate as values over the step's micro-batches and are reduce-scattered
  /// once, after the last, into the bucket's gradient shard; the whole gradient states go.
  LogicalResult reduceOncePerStep(ModuleOp module, FlatBufferOp flat,
                                  ArrayRef<Attribute> grads);
  /// Stage 3: the flat buffers whose parameters are partitioned (the others persist whole).
  SmallVector<FlatBufferOp> shardedBuffers;
  /// The ranks the partitions span: the mesh's dp axis, and sp where sp > 1.
  MeshAxisRef dp;
};

int64_t roundUp(int64_t n, int64_t unit) { return (n + unit - 1) / unit * unit; }

/// Expert parallelism's experts (split over ep by ds-expert-parallel) stay outside the flat
/// buffers, whole on their rank, their gradients summed by ds-optimizer over their replicas
/// (the expert-data-parallel group). DeepSpeed partitions an expert's state over that group;
/// ds does not yet.
bool isExpertPart(ParameterOp param) {
  return param && splitsOver(param.getShardingAttr(), MeshAxis::ep);
}
} // namespace

void ZeroPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (stage < 0 || stage > 3) {
    module.emitError() << "ds-zero: stage " << static_cast<int64_t>(stage)
                       << " is not a ZeRO stage (0, 1, 2 or 3)";
    return signalPassFailure();
  }

  if (reduceBucketSize < 1) {
    module.emitError() << "ds-zero: reduce-bucket-size must be >= 1 element";
    return signalPassFailure();
  }
  if (dataParallelSize < 1) {
    module.emitError() << "ds-zero: data-parallel-size must be >= 1";
    return signalPassFailure();
  }
  if (module.lookupSymbol(kOptimizerStepName)) {
    module.emitError() << "ds-zero: the module already has an @optimizer_step; run ds-zero "
                          "before ds-optimizer";
    return signalPassFailure();
  }
  if (ZeroAttr done = getZero(module)) {
    module.emitError() << "ds-zero: the module is already partitioned (ZeRO stage "
                       << done.getStage() << "); run ds-zero once";
    return signalPassFailure();
  }
  if (failed(ensureDataParallelMesh(module, dataParallelSize, "ds-zero")))
    return signalPassFailure();
  MeshAttr mesh = getMesh(module);
  // The ranks that hold replicas of the parameters: dp, ep and sp (each sp rank computes
  // gradients from its block of the sequence, which the optimizer sums). ZeRO partitions over
  // all of them, as DeepSpeed-Ulysses does.
  if (!mesh || dataParallelRanks(mesh) * mesh.getSize(MeshAxis::sp) == 1)
    return; // one replica: nothing to partition or communicate
  const bool pipelined = module->hasAttr(kPipelineAttrName);
  FailureOr<MeshAxisRef> group = getReplicaGroup(module, "ds-zero");
  if (failed(group))
    return signalPassFailure();
  dp = *group;
  OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
  Location loc = module.getLoc();
  module->setAttr(kZeroAttrName, ZeroAttr::get(b.getContext(), stage));
  if (stage == 0)
    return;
  if (stage >= 2 && !pipelined) {
    if (failed(partitionGradients(module)) ||
        (stage == 3 && failed(partitionParameters(module))))
      return signalPassFailure();
    return;
  }

  // The flat layout: trainable parameters in module order, and their gradients likewise.
  // Tensor-parallel parts (parameters with a sharding) get buffers of their own, so that the
  // optimizer knows which shards hold distinct parts on the tp ranks (clipping's norm).
  // A pipeline: each stage's parameters get buffers of their own (held by that stage only);
  // a parameter that several stages hold (a tied embedding and LM head) stays outside, its
  // gradient summed over dp whole as at stage 0.
  struct Layout {
    SmallVector<Attribute> params, grads;
    int64_t total = 0;
  };
  // (pp stage or -1, tp part, partitioned) -> layout. Stage 3 on a pipeline: the parameters
  // above the persistence threshold are partitioned, their gradients accumulated whole over
  // the step (as stage 1) and reduce-scattered by the optimizer.
  std::map<std::tuple<int64_t, int, int>, Layout> layouts;
  Type elem;
  for (auto state : module.getOps<StateOp>()) {
    if (state.getRole() != SlotRole::grad)
      continue;
    auto param = module.lookupSymbol<ParameterOp>(state.getOfAttr());
    if (isExpertPart(param))
      continue;
    RankedTensorType t = param.getTensorType();
    if (failed(checkElementType(param, elem, stage)))
      return signalPassFailure();
    int64_t ppStage = -1;
    if (auto st = param->getAttrOfType<DenseI64ArrayAttr>(kStagesAttrName)) {
      if (st.size() != 1)
        continue; // held by several stages
      ppStage = st[0];
    }
    int partitioned = stage == 3 && t.getNumElements() > persistenceThreshold ? 1 : 0;
    Layout &l = layouts[{ppStage, param.getShardingAttr() ? 1 : 0, partitioned}];
    l.params.push_back(FlatSymbolRefAttr::get(param.getSymNameAttr()));
    l.grads.push_back(FlatSymbolRefAttr::get(state.getSymNameAttr()));
    l.total += t.getNumElements();
  }
  if (layouts.empty()) {
    module.emitError() << "ds-zero: no gradient states; run ds-autodiff first";
    return signalPassFailure();
  }
  b.setInsertionPointToEnd(module.getBody());
  for (Operation &op : *module.getBody())
    if (!isa<ParameterOp, StateOp, shard::GridOp>(op)) {
      b.setInsertionPoint(&op);
      break;
    }
  bool replicatedParts = false;
  for (auto &[key, l] : layouts)
    replicatedParts |= std::get<1>(key) == 0;
  for (auto &[key, l] : layouts) {
    auto [ppStage, k, partitioned] = key;
    int64_t padded = roundUp(l.total, dp.size * shardAlignment(elem));
    auto flatType = RankedTensorType::get({padded}, elem);
    std::string suffix = k == 1 && replicatedParts ? ".tp" : "";
    if (ppStage >= 0)
      suffix += ".pp" + std::to_string(ppStage);
    if (partitioned)
      suffix += ".sharded";
    auto params = FlatBufferOp::create(
        b, loc, b.getStringAttr("zero.params" + suffix),
        SlotRoleAttr::get(b.getContext(),
                          partitioned ? SlotRole::params_sharded : SlotRole::params),
        b.getArrayAttr(l.params),
        TypeAttr::get(flatType));
    if (partitioned) {
      StateOp::create(b, loc, b.getStringAttr("zero.params" + suffix + "@shard"),
                      FlatSymbolRefAttr::get(params.getSymNameAttr()),
                      SlotRoleAttr::get(b.getContext(), SlotRole::param_shard),
                      TypeAttr::get(RankedTensorType::get({padded / dp.size}, elem)));
      if (failed(gatherOncePerStep(module, params)))
        return signalPassFailure();
    }
    if (ppStage >= 0)
      params->setAttr(kStagesAttrName, b.getDenseI64ArrayAttr({ppStage}));
    if (stage == 2 && pipelined) { // gradients never whole between steps
      if (failed(reduceOncePerStep(module, params, l.grads)))
        return signalPassFailure();
      continue;
    }
    auto grads = FlatBufferOp::create(b, loc, b.getStringAttr("zero.grads" + suffix),
                                      SlotRoleAttr::get(b.getContext(), SlotRole::grads),
                                      b.getArrayAttr(l.grads), TypeAttr::get(flatType));
    if (ppStage >= 0)
      grads->setAttr(kStagesAttrName, b.getDenseI64ArrayAttr({ppStage}));
  }
}

LogicalResult ZeroPass::reduceOncePerStep(ModuleOp module, FlatBufferOp flat,
                                          ArrayRef<Attribute> grads) {
  RankedTensorType flatType = flat.getTensorType();
  Type elem = flatType.getElementType();
  auto shardType = RankedTensorType::get({flatType.getNumElements() / dp.size}, elem);
  OpBuilder mb(flat);
  mb.setInsertionPointAfter(flat);
  std::string shardName = (flat.getSymName() + "@" + stringifySlotRole(SlotRole::grad)).str();
  auto shardState = StateOp::create(mb, flat.getLoc(), mb.getStringAttr(shardName),
                                    FlatSymbolRefAttr::get(flat.getSymNameAttr()),
                                    SlotRoleAttr::get(mb.getContext(), SlotRole::grad_shard),
                                    TypeAttr::get(shardType));
  if (auto st = flat->getAttr(kStagesAttrName))
    shardState->setAttr(kStagesAttrName, st);
  llvm::StringMap<size_t> member;
  for (auto [i, a] : llvm::enumerate(grads))
    member[cast<FlatSymbolRefAttr>(a).getValue()] = i;
  for (auto fn : module.getOps<func::FuncOp>()) {
    if (!fn->hasAttr(kPipelineRankAttrName) ||
        !fn.getSymName().starts_with(kPipelineStepPrefix))
      continue;
    // acc = acc + g over the micro-batches, as values (the first is g: 0 + g).
    SmallVector<Value> acc(grads.size());
    Operation *last = nullptr;
    for (auto assign : llvm::to_vector(fn.getBody().front().getOps<AssignOp>())) {
      auto it = member.find(assign.getName());
      if (it == member.end())
        continue;
      auto add = assign.getValue().getDefiningOp<AddOp>();
      auto read = add ? add.getLhs().getDefiningOp<GetParameterOp>() : GetParameterOp();
      if (!read || read.getName() != assign.getName() || !add->hasOneUse() ||
          !read->hasOneUse())
        return assign.emitOpError() << "ds-zero: stage 2 on a pipeline expects each "
                                       "gradient accumulated as read + add + assign";
      Value &a = acc[it->second];
      if (!a) {
        a = add.getRhs();
        add.getResult().replaceAllUsesWith(a);
        add.erase();
        read.erase();
      } else {
        read.getResult().replaceAllUsesWith(a);
        read.erase();
        a = add.getResult();
      }
      if (Operation *def = a.getDefiningOp(); def && (!last || last->isBeforeInBlock(def)))
        last = def;
      assign.erase();
    }
    if (!last)
      continue; // this rank holds no member
    OpBuilder b(last->getContext());
    b.setInsertionPointAfter(last);
    Location loc = flat.getLoc();
    SmallVector<Value> pieces;
    int64_t total = 0;
    for (auto [i, a] : llvm::enumerate(grads)) {
      auto state = module.lookupSymbol<StateOp>(cast<FlatSymbolRefAttr>(a));
      RankedTensorType t = state.getTensorType();
      auto piece = RankedTensorType::get({t.getNumElements()}, elem);
      total += t.getNumElements();
      pieces.push_back(acc[i] ? ReshapeOp::create(b, loc, piece, acc[i]).getResult()
                              : ConstantOp::create(b, loc, DenseElementsAttr::get(
                                                               piece, FloatAttr::get(elem, 0.0)))
                                    .getResult());
    }
    if (flatType.getNumElements() > total) {
      auto pad = RankedTensorType::get({flatType.getNumElements() - total}, elem);
      pieces.push_back(
          ConstantOp::create(b, loc, DenseElementsAttr::get(pad, FloatAttr::get(elem, 0.0))));
    }
    Value packed = pieces.size() == 1
                       ? pieces[0]
                       : ConcatOp::create(b, loc, flatType, pieces, b.getI64IntegerAttr(0))
                             .getResult();
    Value summed = shard::ReduceScatterOp::create(b, loc, shardType, dp.grid, dp.axes(), packed,
                                                  shard::ReductionKind::Sum, APInt(64, 0));
    AssignOp::create(b, loc, FlatSymbolRefAttr::get(shardState.getSymNameAttr()), summed);
  }
  for (Attribute a : grads)
    if (auto state = module.lookupSymbol<StateOp>(cast<FlatSymbolRefAttr>(a)))
      state.erase();
  return success();
}

LogicalResult ZeroPass::gatherOncePerStep(ModuleOp module, FlatBufferOp flat) {
  RankedTensorType flatType = flat.getTensorType();
  Type elem = flatType.getElementType();
  auto shardRef = FlatSymbolRefAttr::get(module.getContext(), (flat.getSymName() + "@shard").str());
  auto shardType = RankedTensorType::get({flatType.getNumElements() / dp.size}, elem);
  llvm::StringMap<int64_t> offsets;
  int64_t offset = 0;
  for (Attribute a : flat.getMembers()) {
    auto param = module.lookupSymbol<ParameterOp>(cast<FlatSymbolRefAttr>(a));
    offsets[param.getSymName()] = offset;
    offset += param.getTensorType().getNumElements();
  }
  for (auto fn : module.getOps<func::FuncOp>()) {
    if (!fn->hasAttr(kPipelineRankAttrName) ||
        !fn.getSymName().starts_with(kPipelineStepPrefix))
      continue;
    SmallVector<GetParameterOp> reads;
    fn.walk([&](GetParameterOp get) {
      if (offsets.count(get.getName()))
        reads.push_back(get);
    });
    if (reads.empty())
      continue;
    OpBuilder b(reads.front());
    Location loc = flat.getLoc();
    Value shard = GetParameterOp::create(b, loc, shardType, shardRef);
    Value full = shard::AllGatherOp::create(b, loc, flatType, dp.grid, dp.axes(), shard,
                                            APInt(64, 0));
    for (GetParameterOp get : reads) {
      b.setInsertionPoint(get);
      auto type = cast<RankedTensorType>(get.getType());
      int64_t at = offsets.lookup(get.getName()), n = type.getNumElements();
      Value piece = SliceOp::create(b, loc, RankedTensorType::get({n}, elem), full, 0, at,
                                    at + n, 1);
      Value view = type.getRank() == 1 ? piece : ReshapeOp::create(b, loc, type, piece).getResult();
      get.getResult().replaceAllUsesWith(view);
      get.erase();
    }
  }
  return success();
}

/// Stage 2: gradients are never whole. In @micro_step each parameter's gradient is produced by
/// backward and was accumulated into its own state; instead, parameters are grouped in the
/// order their gradients become ready into buckets of at least reduce-bucket-size elements,
/// each bucket a flat parameter buffer (padded to N x 16 elements) whose gradient shard is a
/// state of 1/N of it. As soon as backward has produced a bucket's last gradient, the bucket
/// is packed and reduce-scattered; its shard is accumulated once the next bucket is on its way
/// (or at the end), so communication overlaps the rest of backward with at most two buckets in
/// flight.
FailureOr<SmallVector<GradAccumulation>>
ZeroPass::findAccumulations(ModuleOp module, Block &body, Type &elem) {
  SmallVector<GradAccumulation> grads;
  for (auto assign : llvm::make_early_inc_range(body.getOps<AssignOp>())) {
    auto state = module.lookupSymbol<StateOp>(assign.getNameAttr());
    if (!state || state.getRole() != SlotRole::grad ||
        isExpertPart(module.lookupSymbol<ParameterOp>(state.getOfAttr())))
      continue;
    auto add = assign.getValue().getDefiningOp<AddOp>();
    GetParameterOp old;
    Value g;
    if (add)
      for (int i = 0; i < 2; ++i)
        if (auto r = add->getOperand(i).getDefiningOp<GetParameterOp>();
            r && r.getName() == state.getSymName()) {
          old = r;
          g = add->getOperand(1 - i);
        }
    if (!old || !add->hasOneUse() || !old->hasOneUse())
      return assign.emitError() << "ds-zero: stage " << static_cast<int64_t>(stage)
                                << " expects ds-autodiff's accumulation "
                                   "(get, add, assign) of '"
                                << state.getSymName() << "'";
    auto param = module.lookupSymbol<ParameterOp>(state.getOfAttr());
    if (failed(checkElementType(param, elem, stage)))
      return failure();
    Operation *d = g.getDefiningOp();
    grads.push_back({param, state, g, {assign, add, old}, d ? d : &body.front()});
  }
  if (grads.empty())
    return module.emitError() << "ds-zero: no gradient accumulations in @micro_step; run "
                                 "ds-autodiff first";
  llvm::stable_sort(grads, [&](const GradAccumulation &x, const GradAccumulation &y) {
    return x.readyAt()->isBeforeInBlock(y.readyAt());
  });
  return grads;
}

SmallVector<GradBucket> ZeroPass::bucketGradients(MutableArrayRef<GradAccumulation> grads) {
  // Stage 3 keeps parameters under the persistence threshold whole, in buckets of their own.
  // Tensor-parallel parts (parameters with a sharding) are bucketed apart from the replicated
  // parameters, so that the optimizer knows which shards hold distinct parts on the tp ranks.
  SmallVector<GradBucket> buckets;
  for (auto [persistent, split] : {std::pair{false, false}, std::pair{false, true},
                                   std::pair{true, false}, std::pair{true, true}}) {
    int64_t filled = reduceBucketSize;
    for (GradAccumulation &gr : grads) {
      int64_t n = gr.param.getTensorType().getNumElements();
      if ((stage == 3 && n < persistenceThreshold) != persistent ||
          static_cast<bool>(gr.param.getShardingAttr()) != split)
        continue;
      if (filled >= reduceBucketSize) {
        buckets.push_back({{}, stage == 3 && !persistent});
        filled = 0;
      }
      buckets.back().members.push_back(&gr);
      filled += n;
    }
  }
  // Issued in the order their last gradient is ready (the persistent ones of stage 3
  // interleave with the others).
  llvm::stable_sort(buckets, [](const GradBucket &x, const GradBucket &y) {
    return x.lastReady()->isBeforeInBlock(y.lastReady());
  });
  return buckets;
}

LogicalResult ZeroPass::partitionGradients(ModuleOp module) {
  auto micro = module.lookupSymbol<func::FuncOp>(kMicroStepName);
  if (!micro)
    return module.emitError() << "ds-zero: no @micro_step; run ds-autodiff first";
  Block &body = micro.getBody().front();
  Type elem;
  FailureOr<SmallVector<GradAccumulation>> found = findAccumulations(module, body, elem);
  if (failed(found))
    return failure();
  SmallVector<GradAccumulation> grads = std::move(*found);
  SmallVector<GradBucket> buckets = bucketGradients(grads);

  OpBuilder mb(module.getContext());
  mb.setInsertionPointAfter(grads.front().state); // after the states, before the functions
  for (Operation &op : *module.getBody())
    if (!isa<ParameterOp, StateOp, shard::GridOp>(op)) {
      mb.setInsertionPoint(&op);
      break;
    }
  Location loc = module.getLoc();
  Type f32 = elem; // the parameters' type (f32, or bf16/f16 in mixed precision)
  struct Pending {
    std::string shard;
    RankedTensorType type;
    Value reduced;
  };
  SmallVector<Pending> pending;
  OpBuilder b(module.getContext());
  auto accumulate = [&](Pending &p) {
    auto shard = FlatSymbolRefAttr::get(b.getContext(), p.shard);
    Value old = GetParameterOp::create(b, loc, p.type, shard);
    Value sum = AddOp::create(b, loc, p.type, old, p.reduced);
    AssignOp::create(b, loc, shard, sum);
  };
  Operation *issued = nullptr; // the last op the previous bucket added
  for (auto [k, bucket] : llvm::enumerate(buckets)) {
    SmallVector<Attribute> members;
    int64_t total = 0;
    for (GradAccumulation *gr : bucket.members) {
      members.push_back(FlatSymbolRefAttr::get(gr->param.getSymNameAttr()));
      total += gr->param.getTensorType().getNumElements();
    }
    Operation *last = bucket.lastReady();
    int64_t padded = roundUp(total, dp.size * shardAlignment(elem));
    auto flatType = RankedTensorType::get({padded}, f32);
    auto shardType = RankedTensorType::get({padded / dp.size}, f32);
    std::string name = ("zero.params." + Twine(k)).str();
    auto flat = FlatBufferOp::create(
        mb, loc, mb.getStringAttr(name),
        SlotRoleAttr::get(mb.getContext(),
                          bucket.partitioned ? SlotRole::params_sharded : SlotRole::params),
        mb.getArrayAttr(members),
        TypeAttr::get(flatType));
    if (bucket.partitioned) {
      StateOp::create(mb, loc, mb.getStringAttr(name + "@shard"),
                      FlatSymbolRefAttr::get(flat.getSymNameAttr()),
                      SlotRoleAttr::get(mb.getContext(), SlotRole::param_shard),
                      TypeAttr::get(shardType));
      shardedBuffers.push_back(flat);
    }
    std::string shardName = name + "@" + stringifySlotRole(SlotRole::grad).str();
    StateOp::create(mb, loc, mb.getStringAttr(shardName),
                    FlatSymbolRefAttr::get(flat.getSymNameAttr()),
                    SlotRoleAttr::get(mb.getContext(), SlotRole::grad_shard),
                    TypeAttr::get(shardType));

    // Pack the bucket right after its last gradient and reduce-scatter it, after what the
    // previous bucket issued (two buckets can share their last op: a linear's weight and bias
    // gradients, one partitioned and one persistent).
    b.setInsertionPointAfter(issued && last->isBeforeInBlock(issued) ? issued : last);
    SmallVector<Value> pieces;
    for (GradAccumulation *gr : bucket.members) {
      auto t = gr->param.getTensorType();
      auto flatPiece = RankedTensorType::get({t.getNumElements()}, f32);
      pieces.push_back(ReshapeOp::create(b, loc, flatPiece, gr->g));
    }
    if (padded > total) {
      auto padType = RankedTensorType::get({padded - total}, f32);
      pieces.push_back(
          ConstantOp::create(b, loc, DenseElementsAttr::get(padType, FloatAttr::get(f32, 0.0))));
    }
    Value packed = pieces.size() == 1 ? pieces[0]
                                      : ConcatOp::create(b, loc, flatType, pieces,
                                                         b.getI64IntegerAttr(0))
                                            .getResult();
    Value reduced = shard::ReduceScatterOp::create(b, loc, shardType, dp.grid, dp.axes(), packed,
                                                   shard::ReductionKind::Sum, APInt(64, 0));
    // The previous bucket's shard is accumulated now that this one is in flight.
    if (!pending.empty()) {
      accumulate(pending.back());
      pending.pop_back();
    }
    pending.push_back({shardName, shardType, reduced});
    issued = &*std::prev(b.getInsertionPoint());
  }
  b.setInsertionPoint(body.getTerminator());
  for (Pending &p : pending)
    accumulate(p);
  // The per-parameter gradients are gone.
  for (GradAccumulation &gr : grads)
    for (Operation *op : gr.ops)
      op->erase();
  for (GradAccumulation &gr : grads)
    gr.state.erase();
  return success();
}

/// Stage 3: each partitioned bucket's parameters exist whole only while they are used. Every
/// use of a member in @micro_step reads a view (a slice of dimension 0, reshaped) of the
/// bucket all-gathered from its shard. Uses are split at the loss into forward and backward,
/// and each phase gathers a bucket once, issued just before the first use of the bucket used
/// before it in that phase (one bucket of look-ahead, so the gather overlaps that bucket's
/// compute); the gathered buffer dies after the phase's last use of its views.
LogicalResult ZeroPass::partitionParameters(ModuleOp module) {
  auto micro = module.lookupSymbol<func::FuncOp>(kMicroStepName);
  Block &body = micro.getBody().front();
  Value loss = body.getTerminator()->getNumOperands() ? body.getTerminator()->getOperand(0)
                                                      : Value();
  Operation *boundary = loss ? loss.getDefiningOp() : nullptr;
  auto phaseOf = [&](Operation *user) {
    return boundary && boundary->isBeforeInBlock(user) ? 1 : 0;
  };
  OpBuilder b(module.getContext());
  Location loc = micro.getLoc();
  // Each bucket's uses in a phase, by member.
  struct Use {
    FlatBufferOp flat;
    Operation *first = nullptr, *last = nullptr;
    SmallVector<std::pair<int64_t, SmallVector<OpOperand *>>> members; // offset, uses
  };
  auto usesIn = [&](int phase) {
    SmallVector<Use> uses;
    for (FlatBufferOp flat : shardedBuffers) {
      Use u{flat};
      int64_t offset = 0;
      for (Attribute a : flat.getMembers()) {
        auto ref = cast<FlatSymbolRefAttr>(a);
        auto param = module.lookupSymbol<ParameterOp>(ref);
        SmallVector<OpOperand *> operands;
        for (auto get : body.getOps<GetParameterOp>())
          if (get.getName() == ref.getValue())
            for (OpOperand &use : get->getUses())
              if (phaseOf(use.getOwner()) == phase)
                operands.push_back(&use);
        for (OpOperand *o : operands) {
          if (!u.first || o->getOwner()->isBeforeInBlock(u.first))
            u.first = o->getOwner();
          if (!u.last || u.last->isBeforeInBlock(o->getOwner()))
            u.last = o->getOwner();
        }
        if (!operands.empty())
          u.members.push_back({offset, operands});
        offset += param.getTensorType().getNumElements();
      }
      if (u.first)
        uses.push_back(std::move(u));
    }
    llvm::stable_sort(uses, [](const Use &x, const Use &y) {
      return x.first->isBeforeInBlock(y.first);
    });
    return uses;
  };
  SmallVector<Use> phases[2] = {usesIn(0), usesIn(1)};
  auto size = [](const Use &u) {
    FlatBufferOp flat = u.flat;
    return flat.getTensorType().getNumElements();
  };

  // max_reuse_distance: a bucket stays gathered from forward into backward when the other
  // buckets used between its last forward use and its first backward use hold fewer elements.
  llvm::DenseMap<Operation *, Value> forwardGather; // flat buffer -> its forward gather
  llvm::DenseSet<Operation *> reused;
  for (const Use &bw : phases[1])
    for (const Use &fw : phases[0]) {
      if (fw.flat != bw.flat)
        continue;
      int64_t between = 0;
      llvm::DenseSet<Operation *> counted; // each other bucket once
      for (int phase = 0; phase < 2; ++phase)
        for (const Use &o : phases[phase])
          if (o.flat != bw.flat && fw.last->isBeforeInBlock(o.last) &&
              o.first->isBeforeInBlock(bw.first) && counted.insert(o.flat).second)
            between += size(o);
      if (between < maxReuseDistance)
        reused.insert(bw.flat);
    }

  for (int phase = 0; phase < 2; ++phase) {
    SmallVector<Use> &uses = phases[phase];
    for (auto [j, u] : llvm::enumerate(uses)) {
      RankedTensorType flatType = u.flat.getTensorType();
      Type f32 = flatType.getElementType();
      Value full;
      if (phase == 1 && reused.contains(u.flat)) {
        full = forwardGather.lookup(u.flat);
      } else {
        // Issued at the first use of bucket i: the earliest bucket such that the buckets
        // after it, up to this one, hold at most prefetch_bucket_size elements and, with
        // bucket i itself, at most max_live_parameters (i = j: no prefetch).
        size_t i = j;
        int64_t inFlight = 0;
        for (size_t k = j; k > 0; --k) {
          inFlight += size(uses[k]);
          if (inFlight > prefetchBucketSize ||
              inFlight + size(uses[k - 1]) > maxLiveParameters)
            break;
          i = k - 1;
        }
        auto shardType =
            RankedTensorType::get({flatType.getNumElements() / dp.size}, f32);
        b.setInsertionPoint(uses[i].first);
        auto read = GetParameterOp::create(
            b, loc, shardType,
            FlatSymbolRefAttr::get(b.getContext(), (u.flat.getSymName() + "@shard").str()));
        // The backward gather re-reads the shard on purpose: CSE must not fold it into the
        // forward one (which would keep the whole parameters alive across the loss).
        if (phase == 1)
          read->setAttr("rematerialized", b.getUnitAttr());
        Value shard = read;
        full = shard::AllGatherOp::create(b, loc, flatType, dp.grid, dp.axes(), shard, APInt(64, 0));
        if (phase == 0)
          forwardGather[u.flat] = full;
      }
      for (auto &[offset, operands] : u.members) {
        auto type = cast<RankedTensorType>(operands.front()->get().getType());
        Operation *first = nullptr;
        for (OpOperand *o : operands)
          if (!first || o->getOwner()->isBeforeInBlock(first))
            first = o->getOwner();
        b.setInsertionPoint(first);
        int64_t n = type.getNumElements();
        Value piece = SliceOp::create(b, loc, RankedTensorType::get({n}, f32), full, 0, offset,
                                      offset + n, 1);
        Value view = type.getRank() == 1 ? piece : ReshapeOp::create(b, loc, type, piece).getResult();
        for (OpOperand *o : operands)
          o->set(view);
      }
    }
  }
  for (auto get : llvm::make_early_inc_range(body.getOps<GetParameterOp>()))
    if (get->use_empty())
      get->erase();
  // No other function may read a partitioned parameter whole.
  for (FlatBufferOp flat : shardedBuffers)
    for (Attribute a : flat.getMembers()) {
      auto ref = cast<FlatSymbolRefAttr>(a);
      WalkResult r = module.walk([&](GetParameterOp g) {
        if (g.getName() == ref.getValue())
          return WalkResult::interrupt();
        return WalkResult::advance();
      });
      if (r.wasInterrupted())
        return module.emitError() << "ds-zero: stage 3 left a whole read of partitioned '"
                                  << ref.getValue() << "'";
    }
  return success();
}
