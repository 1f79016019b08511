//===- ActivationCheckpoint.cpp - ds-activation-checkpoint: recompute blocks -===//
//
// DeepSpeed's activation checkpointing without changing the model: the compiler finds the
// repeated blocks in the parameters' names, keeps only each segment's inputs from the forward,
// and clones the segment's ops into the backward where their values are first needed.
//
//===----------------------------------------------------------------------===//
#include "ds/Transforms/Passes.h"

#include "CutBytes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Regex.h"

#include <map>
#include <optional>
#include <set>

namespace mlir::ds {
#define GEN_PASS_DEF_DSACTIVATIONCHECKPOINT
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {
/// Ops whose values are kept rather than recomputed: random masks (the same bits), reads of
/// parameters and states (views), constants, collectives, and transfers. The exception is
/// sequence parallelism's all-to-all: it moves activations (Ulysses' q, k, v and attention
/// output, as large as the layer's own), so a recomputed segment exchanges them again in
/// the backward, as DeepSpeed's checkpointed DistributedAttention does, rather than keeping
/// them through the whole step. Every rank of the group recomputes the same exchange.
bool recomputable(Operation *op) {
  if (isa<shard::AllToAllOp>(op))
    return true;
  return !isa<DropoutMaskOp, GetParameterOp, ConstantOp, MoveOp, AssignOp>(op) &&
         !isa<shard::ShardDialect>(op->getDialect()) && op->getNumRegions() == 0 &&
         op->getNumResults() > 0;
}

struct ActivationCheckpointPass
    : mlir::ds::impl::DSActivationCheckpointBase<ActivationCheckpointPass> {
  using DSActivationCheckpointBase::DSActivationCheckpointBase;
  void runOnOperation() override;
};

/// The block index of a parameter read named PREFIX.N.NAME (and its PREFIX), or -1.
int64_t blockOf(GetParameterOp g, std::string &prefix) {
  static const llvm::Regex blockName("^(.+)\\.([0-9]+)\\.");
  SmallVector<StringRef> m;
  if (!blockName.match(g.getName(), &m))
    return -1;
  prefix = m[1].str();
  int64_t i = -1;
  m[2].getAsInteger(10, i);
  return i;
}

/// The repeated blocks before `loss`: the parameter-name prefix with the most distinct
/// indices, and its indices in order.
std::pair<std::string, SmallVector<int64_t>> findRepeatedBlocks(Block &body, Operation *loss) {
  llvm::StringMap<std::set<int64_t>> indices;
  for (Operation &op : body) {
    if (&op == loss)
      break;
    if (auto g = dyn_cast<GetParameterOp>(op)) {
      std::string prefix;
      int64_t i = blockOf(g, prefix);
      if (i >= 0)
        indices[prefix].insert(i);
    }
  }
  std::string prefix;
  size_t most = 0;
  for (auto &[p, set] : indices)
    if (set.size() > most || (set.size() == most && p < prefix)) {
      most = set.size();
      prefix = p.str();
    }
  if (most < 2)
    return {};
  return {prefix, SmallVector<int64_t>(indices[prefix].begin(), indices[prefix].end())};
}

/// Moves each segment's start back, from the first op that reads the block's parameters, to
/// where the fewest forward bytes cross it (the latest such place), no earlier than the op
/// after `floor(s)` (the previous block's last parameter read; for the first segment, the
/// last parameter read before it). The ops before a block's
/// first parameter read (a norm's statistics: x^2, mean, rsqrt, x * rsqrt) otherwise end the
/// previous segment, and their result is kept as a checkpoint beside the residual stream.
void moveCutsToNarrowest(Block &body, Operation *loss, SmallVectorImpl<Operation *> &starts,
                         llvm::function_ref<Operation *(int64_t)> floor) {
  // Forward ops in order; the bytes that cross the cut before each (values defined before it
  // and read by a forward op at or after it; parameters and constants are kept anyway).
  SmallVector<Operation *> ops;
  llvm::DenseMap<Operation *, int64_t> at;
  for (Operation &op : body) {
    if (&op == loss)
      break;
    if (isa<GetParameterOp, ConstantOp>(op))
      continue;
    at[&op] = static_cast<int64_t>(ops.size());
    ops.push_back(&op);
  }
  SmallVector<int64_t> crossing = cutBytes(ops, at);
  auto readsParameter = [](Operation *op) {
    return llvm::any_of(op->getOperands(),
                        [](Value v) { return v.getDefiningOp<GetParameterOp>(); });
  };
  for (auto [s, start] : llvm::enumerate(starts)) {
    if (!at.count(start))
      continue;
    // The first segment: no earlier than the op after the last parameter read before it
    // (the embedding).
    int64_t lo = -1;
    if (Operation *f = floor(static_cast<int64_t>(s)); f && at.count(f))
      lo = at[f];
    else
      for (int64_t p = at[start] - 1; p >= 0 && lo < 0; --p)
        if (readsParameter(ops[p]))
          lo = p;
    int64_t best = at[start];
    for (int64_t p = at[start] - 1; p > lo; --p)
      if (crossing[p] < crossing[best])
        best = p;
    starts[s] = ops[best];
  }
}

/// A segment's outputs (values other forward ops read: the next segment's input, the
/// residual stream) are the checkpoints: kept, not recomputed. `chunkOf`: the segments were
/// split at a pipeline's chunks after their outputs were found; a value another chunk's
/// forward reads is a checkpoint too (that op's backward, in the other chunk, reads it).
void eraseOutputs(llvm::DenseMap<Operation *, int64_t> &segmentOf, Operation *loss,
                  const llvm::DenseMap<Operation *, int64_t> *chunkOf = nullptr) {
  SmallVector<Operation *> outputs;
  for (auto [op, s] : segmentOf)
    if (llvm::any_of(op->getUsers(), [&, op = op, s = s](Operation *u) {
          if (loss->isBeforeInBlock(u))
            return false;
          if (chunkOf)
            return chunkOf->lookup(u) != chunkOf->lookup(op) ||
                   (segmentOf.count(u) && segmentOf.lookup(u) != s);
          return !segmentOf.count(u) || segmentOf.lookup(u) != s;
        }))
      outputs.push_back(op);
  for (Operation *op : outputs)
    segmentOf.erase(op);
}

/// Each forward op's segment (the blocks of `prefix` grouped into `segments` runs of
/// consecutive blocks; 0: one per block), without the segments' outputs, which are kept.
llvm::DenseMap<Operation *, int64_t> assignSegments(Block &body, Operation *loss,
                                                    StringRef prefix, ArrayRef<int64_t> blocks,
                                                    int64_t segments, int64_t &groups) {
  // Each forward op's block: the one of the first block parameter it reads; a block starts
  // at its first such op.
  std::map<int64_t, Operation *> firstOp, lastOp;
  for (Operation &op : body) {
    if (&op == loss)
      break;
    for (Value v : op.getOperands()) {
      auto g = v.getDefiningOp<GetParameterOp>();
      std::string p;
      int64_t i = g ? blockOf(g, p) : -1;
      if (i < 0 || p != prefix)
        continue;
      if (!firstOp.count(i))
        firstOp[i] = &op;
      lastOp[i] = &op;
      break;
    }
  }
  // Blocks grouped into segments: one per block, or `segments` groups of consecutive blocks.
  int64_t n = static_cast<int64_t>(blocks.size());
  groups = segments > 0 ? std::min<int64_t>(segments, n) : n;
  SmallVector<Operation *> starts;
  for (int64_t s = 0; s < groups; ++s)
    starts.push_back(firstOp[blocks[s * n / groups]]);
  moveCutsToNarrowest(body, loss, starts, [&](int64_t s) {
    return s == 0 ? nullptr : lastOp[blocks[s * n / groups - 1]];
  });
  // The last segment runs to the first op that reads another parameter (a final norm, the
  // head), or to the loss.
  Operation *end = lastOp[blocks.back()]->getNextNode();
  for (; end && end != loss; end = end->getNextNode()) {
    bool other = llvm::any_of(end->getOperands(), [&](Value v) {
      auto g = v.getDefiningOp<GetParameterOp>();
      std::string p;
      return g && (blockOf(g, p) != blocks.back() || p != prefix);
    });
    if (other)
      break;
  }
  llvm::DenseMap<Operation *, int64_t> segmentOf;
  int64_t current = -1;
  for (Operation &op : body) {
    if (&op == end || &op == loss)
      break;
    if (current + 1 < groups && &op == starts[current + 1])
      ++current;
    if (current >= 0 && recomputable(&op))
      segmentOf[&op] = current;
  }

  eraseOutputs(segmentOf, loss);
  return segmentOf;
}

/// Each forward op's pipeline chunk: its ds.stage, or for an op canonicalization made, the
/// latest chunk of its operands, else the earliest of its forward users (as ds-pipeline
/// places it).
llvm::DenseMap<Operation *, int64_t> chunksOf(Block &body, Operation *loss) {
  llvm::DenseMap<Operation *, int64_t> chunk;
  SmallVector<Operation *> unresolved;
  for (Operation &op : body) {
    if (&op == loss)
      break;
    if (auto c = op.getAttrOfType<IntegerAttr>(kStageAttrName)) {
      chunk[&op] = c.getInt();
      continue;
    }
    for (Value x : op.getOperands())
      if (Operation *d = x.getDefiningOp(); d && chunk.count(d))
        chunk[&op] = std::max(chunk.lookup(&op), chunk.lookup(d));
    if (!chunk.count(&op))
      unresolved.push_back(&op);
  }
  for (Operation *op : llvm::reverse(unresolved))
    for (Operation *u : op->getUsers())
      if (chunk.count(u))
        chunk[op] = chunk.count(op) ? std::min(chunk.lookup(op), chunk.lookup(u))
                                    : chunk.lookup(u);
  return chunk;
}

/// In a pipeline, each segment split where ds-pipeline-partition cut the chunks: a segment
/// is recomputed in its chunk's backward phase, on the rank that ran its forward, from the
/// checkpoints that rank kept (a value of another chunk is a checkpoint, sent in the
/// forward; a value a later chunk's forward reads is a checkpoint too). Returns the segments'
/// count.
int64_t splitAtChunks(llvm::DenseMap<Operation *, int64_t> &segmentOf,
                      const llvm::DenseMap<Operation *, int64_t> &chunkOf, Operation *loss) {
  std::map<std::pair<int64_t, int64_t>, int64_t> renumbered;
  for (auto &[op, s] : segmentOf)
    renumbered.insert({{s, chunkOf.lookup(op)}, 0});
  int64_t n = 0;
  for (auto &[key, index] : renumbered)
    index = n++;
  for (auto &[op, s] : segmentOf)
    s = renumbered[{s, chunkOf.lookup(op)}];
  eraseOutputs(segmentOf, loss, &chunkOf);
  return n;
}

/// The backward: each use of a segment's value gets a recomputed one, cloned (with what it
/// needs from the same segment) right before the first backward op that reads it. Returns
/// the checkpoints the recomputation reads: segment inputs that other segments computed.
llvm::SetVector<Value> recomputeInBackward(Block &body, Operation *loss,
                                           const llvm::DenseMap<Operation *, int64_t> &segmentOf,
                                           int64_t groups,
                                           const llvm::DenseMap<Operation *, int64_t> *chunkOf) {
  OpBuilder b(loss->getContext());
  std::vector<IRMapping> maps(groups);
  llvm::SetVector<Value> checkpoints;
  // Recomputed values of tiles of rows (ds.tile) are reused only until another tile is
  // recomputed: a tile recomputed for the whole region's result (a block's output) is
  // recomputed again for its own backward, so one tile's values live at a time.
  int64_t lastTile = -1, round = 0;
  SmallVector<std::pair<int64_t, Value>> tileValues;
  std::function<Value(Value, int64_t)> recompute = [&](Value v, int64_t s) -> Value {
    if (Value m = maps[s].lookupOrNull(v))
      return m;
    Operation *def = v.getDefiningOp();
    IRMapping operands;
    for (Value u : def->getOperands()) {
      Operation *d = u.getDefiningOp();
      if (d && segmentOf.count(d) && segmentOf.lookup(d) == s)
        operands.map(u, recompute(u, s));
      else if (d && !isa<GetParameterOp, ConstantOp>(d))
        checkpoints.insert(u); // a kept forward value the recomputation reads
    }
    if (auto tile = def->getAttrOfType<IntegerAttr>(kTileAttrName)) {
      if (tile.getInt() != lastTile) {
        for (auto [seg, t] : tileValues)
          maps[seg].erase(t);
        tileValues.clear();
        lastTile = tile.getInt();
        ++round;
      }
      for (Value r : def->getResults())
        tileValues.push_back({s, r});
    }
    Operation *clone = b.clone(*def, operands);
    if (chunkOf) { // its chunk's backward phase
      clone->setAttr(kStageAttrName, b.getI64IntegerAttr(chunkOf->lookup(def)));
      clone->setAttr(kBackwardAttrName, b.getUnitAttr());
    }
    clone->setAttr(kRecomputeAttrName, def->hasAttr(kTileAttrName)
                                           ? Attribute(b.getI64IntegerAttr(round))
                                           : Attribute(UnitAttr::get(b.getContext())));
    for (auto [r, c] : llvm::zip(def->getResults(), clone->getResults()))
      maps[s].map(r, c);
    return maps[s].lookup(v);
  };
  bool backward = false;
  for (Operation &op : llvm::make_early_inc_range(body)) {
    if (&op == loss) {
      backward = true;
      continue;
    }
    if (!backward || op.hasAttr(kRecomputeAttrName))
      continue;
    for (OpOperand &o : op.getOpOperands()) {
      Operation *d = o.get().getDefiningOp();
      if (!d || !segmentOf.count(d))
        continue;
      b.setInsertionPoint(&op);
      o.set(recompute(o.get(), segmentOf.lookup(d)));
    }
  }
  return checkpoints;
}

/// cpu_checkpointing: a checkpoint leaves the device after its last forward use and comes
/// back before its first recomputing use.
void offloadCheckpoints(const llvm::SetVector<Value> &checkpoints, Operation *loss) {
  OpBuilder b(loss->getContext());
  for (Value v : checkpoints) {
    Operation *lastForward = nullptr, *firstBackward = nullptr;
    for (Operation *u : v.getUsers()) {
      bool isBackward = loss->isBeforeInBlock(u);
      if (!isBackward && (!lastForward || lastForward->isBeforeInBlock(u)))
        lastForward = u;
      if (isBackward && (!firstBackward || u->isBeforeInBlock(firstBackward)))
        firstBackward = u;
    }
    if (!lastForward || !firstBackward)
      continue;
    b.setInsertionPointAfter(lastForward);
    auto host = MoveOp::create(b, v.getLoc(), v.getType(), v,
                               MemorySpaceAttr::get(b.getContext(), MemorySpace::host));
    b.setInsertionPoint(firstBackward);
    auto back = MoveOp::create(b, v.getLoc(), v.getType(), host.getResult(),
                               MemorySpaceAttr::get(b.getContext(), MemorySpace::device));
    // In a pipeline, both on the rank that recomputes from it (a checkpoint another rank
    // computed is kept on the host of the rank it was sent to): the move out in that chunk's
    // forward phase, the move back in its backward phase.
    if (Attribute chunk = firstBackward->getAttr(kStageAttrName)) {
      host->setAttr(kStageAttrName, chunk);
      back->setAttr(kStageAttrName, chunk);
      back->setAttr(kBackwardAttrName, b.getUnitAttr());
    }
    v.replaceUsesWithIf(back.getResult(), [&](OpOperand &use) {
      return use.getOwner() != host && loss->isBeforeInBlock(use.getOwner()) &&
             use.getOwner() != back;
    });
  }
}

void ActivationCheckpointPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (segments < 0) {
    module.emitError() << "ds-activation-checkpoint: segments must be >= 0 (0: one per block)";
    return signalPassFailure();
  }
  auto micro = module.lookupSymbol<func::FuncOp>(kMicroStepName);
  if (!micro) {
    module.emitError() << "ds-activation-checkpoint needs @micro_step (run ds-autodiff first)";
    return signalPassFailure();
  }
  Block &body = micro.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  Operation *loss = ret.getNumOperands() ? ret.getOperand(0).getDefiningOp() : nullptr;
  if (!loss)
    return;

  int64_t groups = 0;
  llvm::DenseMap<Operation *, int64_t> segmentOf;
  if (blocks) {
    auto [prefix, repeated] = findRepeatedBlocks(body, loss);
    if (repeated.empty())
      module.emitWarning() << "ds-activation-checkpoint: no repeated blocks (parameters named "
                              "PREFIX.N.NAME for two or more N) in @micro_step; nothing is "
                              "recomputed";
    else
      segmentOf = assignSegments(body, loss, prefix, repeated, segments, groups);
  }
  // Tiles of rows (ds-tile-sequence) are segments of their own where no block holds them: a
  // tile's values are recomputed right before that tile's backward. Inside a block segment
  // the same happens, as each value is recomputed where the backward first reads it.
  int64_t blockGroups = groups;
  for (Operation &op : body) {
    if (&op == loss)
      break;
    auto tile = op.getAttrOfType<IntegerAttr>(kTileAttrName);
    if (!tile || segmentOf.count(&op) || !recomputable(&op))
      continue;
    segmentOf[&op] = blockGroups + tile.getInt();
    groups = std::max(groups, blockGroups + tile.getInt() + 1);
  }
  if (segmentOf.empty())
    return;
  std::optional<llvm::DenseMap<Operation *, int64_t>> chunkOf;
  if (module->hasAttr(kPipelineAttrName)) {
    chunkOf = chunksOf(body, loss);
    groups = splitAtChunks(segmentOf, *chunkOf, loss);
  }
  llvm::SetVector<Value> checkpoints = recomputeInBackward(
      body, loss, segmentOf, groups, chunkOf ? &*chunkOf : nullptr);
  if (cpu)
    offloadCheckpoints(checkpoints, loss);
}
} // namespace
