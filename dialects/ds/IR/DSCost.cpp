//===- DSCost.cpp - the cost of each ds op (CostOpInterface) -----------------===//
//
// FLOPs as PyTorch's FlopCounterMode and DeepSpeed's flops profiler count them: a matrix
// product of [M, K] by [K, N] is 2 M N K (bias additions are not part of it), and a
// convolution 2 x output elements x (input channels per group x kernel area); elementwise
// functions one operation per element; the composite ops (normalizations, softmax,
// cross-entropy, the AdamW update) the operations of their formulas, written beside each.
// Bytes: every tensor operand and result once; views none. Attached to the ops as external
// models when the dialect initializes, and to the shard collectives (bytes only).
//
#include "ds/IR/DSDialect.h"
#include "ds/IR/DSOps.h"

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"

using namespace mlir;
using namespace mlir::ds;

namespace {
int64_t numel(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && t.hasStaticShape() ? t.getNumElements() : 0;
}
int64_t bytes(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  if (!t || !t.hasStaticShape())
    return 0;
  return t.getNumElements() * std::max<int64_t>(1, t.getElementType().getIntOrFloatBitWidth() / 8);
}
int64_t lastDim(Value v) { return cast<RankedTensorType>(v.getType()).getShape().back(); }
/// The keys one sequence of a ds.paged_attention can reach: its page table's width in pages
/// of the cache's page size.
int64_t pagedKeys(PagedAttentionOp a) {
  return a.getPages().getType().getShape()[1] * a.getKCache().getType().getShape()[2];
}

/// Every tensor operand and result once.
int64_t allBytes(Operation *op) {
  int64_t n = 0;
  for (Value v : op->getOperands())
    n += bytes(v);
  for (Value v : op->getResults())
    n += bytes(v);
  return n;
}

/// FLOPs and matrix-product FLOPs of the ops that compute.
struct Work {
  int64_t flops = 0, matmul = 0;
};

/// Per output element: `k` operations.
Work perResult(Operation *op, int64_t k) { return {k * numel(op->getResult(0)), 0}; }
/// Per input element of operand 0: `k` operations.
Work perInput(Operation *op, int64_t k) { return {k * numel(op->getOperand(0)), 0}; }

Work workOf(Operation *op) {
  // Elementwise: one per output element.
  if (isa<NegOp, ExpOp, LogOp, SqrtOp, RsqrtOp, TanhOp, SigmoidOp, CosOp, SinOp, ReluOp, GeluOp,
          AddOp, SubOp, MulOp, DivOp, PowOp, MaximumOp, MinimumOp, CmpOp, WhereOp, ConvertOp,
          DropoutMaskOp, GeluGradOp, ParallelSumOp, ParallelMaxOp>(op))
    return perResult(op, 1);
  // Dropout: the mask's draw and the scaled product.
  if (isa<DropoutOp>(op))
    return perResult(op, 2);
  // Reductions and running sums: one per input element.
  if (isa<SumOp, MeanOp, AmaxOp, CumsumOp>(op))
    return perInput(op, 1);
  // Softmax: max, subtract, exp, sum, divide (log-softmax: log and subtract instead).
  if (isa<SoftmaxOp, LogSoftmaxOp>(op))
    return perResult(op, 5);
  // Its gradient: y * (dy - sum(dy * y)): multiply, sum, subtract, multiply.
  if (isa<SoftmaxGradOp>(op))
    return perResult(op, 4);
  // Layer and batch norm: mean, variance (subtract, square, sum), normalize, scale and shift.
  if (isa<LayerNormOp, BatchNormOp, BatchNormInferenceOp>(op))
    return perResult(op, 8);
  if (isa<LayerNormGradOp, BatchNormGradOp>(op))
    return perInput(op, 10);
  // Cross-entropy: the log-softmax of the logits (5 per logit) and the pick; its gradient:
  // softmax minus one-hot, scaled.
  if (isa<CrossEntropyOp>(op))
    return perInput(op, 5);
  if (isa<CrossEntropyGradOp>(op))
    return perResult(op, 6);
  // SwiGLU: the gate's sigmoid (exp, add, divide) and two products per result element; its
  // gradient the sigmoid again and 7 more per gate-and-up pair, 5 per element of its result.
  if (isa<SwigluOp>(op))
    return perResult(op, 5);
  if (isa<SwigluGradOp>(op))
    return perResult(op, 5);
  // A router's top-k: one comparison per input element (k is small).
  if (isa<TopKOp>(op))
    return perInput(op, 1);
  // A capacity drop: one count per routed row.
  if (isa<ExpertCapacityOp>(op))
    return perInput(op, 1);
  // Routed experts: one [1, in] x [in, out] product per row (as FlopCounterMode counts HF's
  // bmm of gathered weights); the weight gradient the same per row.
  if (isa<ExpertLinearOp, ExpertLinearGradWeightOp>(op)) {
    auto x = cast<RankedTensorType>(op->getOperand(0).getType()).getShape();
    auto y = cast<RankedTensorType>(op->getOperand(1).getType()).getShape();
    int64_t width = isa<ExpertLinearOp>(op) ? lastDim(op->getResult(0)) : y[1];
    int64_t f = 2 * x[0] * x[1] * width;
    return {f, f};
  }
  // Matrix products.
  if (auto mm = dyn_cast<MatmulOp>(op)) {
    int64_t f = 2 * numel(mm.getResult()) * lastDim(mm.getLhs());
    return {f, f};
  }
  // Attention: the two products (scores, then values) as FlopCounterMode counts SDPA, and
  // the scaled, masked softmax of every score (7); its gradient: four products (the values',
  // the probabilities', the queries' and the keys' gradients; the recomputed scores are not
  // counted, as PyTorch's count of the math backward has no such product) and the softmax
  // gradient with the recomputed probabilities (6 per score).
  // Ring attention: the same over the whole sequence's keys (sp blocks of them).
  if (isa<AttentionOp, AttentionGradOp, RingAttentionOp, RingAttentionGradOp>(op)) {
    auto shape = [&](unsigned i) {
      return cast<RankedTensorType>(op->getOperand(i).getType()).getShape();
    };
    ArrayRef<int64_t> q = shape(0), k = shape(1), v = shape(2);
    int64_t keys = k[2];
    if (isa<RingAttentionOp, RingAttentionGradOp>(op)) {
      auto grid = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(
          op, op->getAttrOfType<FlatSymbolRefAttr>("grid"));
      auto axes = op->getAttrOfType<DenseI16ArrayAttr>("grid_axes");
      for (int16_t a : axes.asArrayRef())
        keys *= grid ? grid.getShape()[a] : 1;
    }
    int64_t scores = q[0] * q[1] * q[2] * keys;
    int64_t f = 2 * scores * (q[3] + v[3]);
    if (isa<AttentionOp, RingAttentionOp>(op))
      return {f + 7 * scores, f};
    return {2 * f + 6 * scores, 2 * f};
  }
  // The tiled LM head and loss: the logits' product and the cross-entropy (5 per logit); its
  // gradient: the logits recomputed, their gradient (6 per logit), and the input's and
  // weight's products.
  if (isa<LinearCrossEntropyOp, LinearCrossEntropyGradOp>(op)) {
    auto x = cast<RankedTensorType>(op->getOperand(0).getType()).getShape();
    auto w = cast<RankedTensorType>(op->getOperand(1).getType()).getShape();
    int64_t logits = x[0] * w[0], f = 2 * logits * x[1];
    if (isa<LinearCrossEntropyOp>(op))
      return {f + 5 * logits, f};
    return {3 * f + 6 * logits, 3 * f};
  }
  if (auto l = dyn_cast<LinearOp>(op)) {
    int64_t f = 2 * numel(l.getResult()) * lastDim(l.getInput());
    return {f + (l.getBias() ? numel(l.getResult()) : 0), f};
  }
  if (auto g = dyn_cast<LinearGradWeightOp>(op)) {
    // dW = dy^T x over the rows; db = the sum of dy's rows.
    int64_t f = 2 * numel(g.getInput()) * lastDim(g.getResultGrad());
    return {f + numel(g.getResultGrad()), f};
  }
  if (auto c = dyn_cast<Conv2dOp>(op)) {
    auto w = cast<RankedTensorType>(c.getWeight().getType());
    int64_t f = 2 * numel(c.getResult()) * (w.getNumElements() / w.getShape()[0]);
    return {f + (c.getBias() ? numel(c.getResult()) : 0), f};
  }
  if (auto c = dyn_cast<Conv2dGradInputOp>(op)) {
    auto w = cast<RankedTensorType>(c.getWeight().getType());
    int64_t f = 2 * numel(c.getResultGrad()) * (w.getNumElements() / w.getShape()[0]);
    return {f, f};
  }
  if (auto c = dyn_cast<Conv2dGradWeightOp>(op)) {
    auto w = cast<RankedTensorType>(c.getDweight().getType());
    int64_t f = 2 * numel(c.getResultGrad()) * (w.getNumElements() / w.getShape()[0]);
    return {f + numel(c.getResultGrad()), f};
  }
  // Pooling: one per window element of every output (max: compare; average: add).
  if (isa<MaxPool2dOp, AvgPool2dOp, AdaptiveAvgPool2dOp>(op))
    return perInput(op, 1);
  if (isa<MaxPool2dGradOp, AvgPool2dGradOp, AdaptiveAvgPool2dGradOp>(op))
    return perResult(op, 1);
  // A table's gradient: one addition per row element scattered.
  if (isa<EmbeddingGradOp>(op))
    return perInput(op, 1);
  // AdamW: both moments (3 each), the bias-corrected step (sqrt, add, divide, multiply,
  // subtract) and the decay (2).
  if (isa<AdamWUpdateOp>(op))
    return perInput(op, 13);
  // Attention against the paged cache, as ds.attention over the keys the page table can hold
  // (lengths are known only when it runs: this is the bound at the table's capacity).
  if (auto a = dyn_cast<PagedAttentionOp>(op)) {
    ArrayRef<int64_t> q = a.getQuery().getType().getShape();
    int64_t scores = q[0] * q[1] * q[2] * pagedKeys(a);
    int64_t f = 2 * scores * (q[3] + lastDim(a.getVCache()));
    return {f + 7 * scores, f};
  }
  // The token's choice: the warpers' softmax of each logit (5, as ds.softmax) and the draw.
  if (isa<SampleOp>(op))
    return perInput(op, 5);
  // Lookups, views, copies, constants and state access compute nothing.
  return {};
}

/// The bytes an op moves where that is not every operand and result whole: the paged cache's
/// ops touch only the pages of their sequences (ds.paged_attention: at most the page table's
/// capacity; ds.cache_write: the new tokens' rows, read and written); -1 for the others.
int64_t partialBytes(Operation *op) {
  auto elem = [](Value v) {
    return std::max<int64_t>(1, cast<RankedTensorType>(v.getType()).getElementTypeBitWidth() / 8);
  };
  if (auto w = dyn_cast<CacheWriteOp>(op))
    return 2 * (bytes(w.getKey()) + bytes(w.getValue())) + bytes(w.getSlots());
  if (auto a = dyn_cast<PagedAttentionOp>(op)) {
    ArrayRef<int64_t> q = a.getQuery().getType().getShape();
    int64_t heads = a.getKCache().getType().getShape()[1];
    int64_t rows = q[0] * heads * pagedKeys(a);
    return rows * (lastDim(a.getKCache()) + lastDim(a.getVCache())) * elem(a.getKCache()) +
           bytes(a.getQuery()) + bytes(a.getResult()) + bytes(a.getPages()) +
           bytes(a.getContextLens()) + bytes(a.getQLens());
  }
  return -1;
}

/// Views: no bytes moved.
bool isView(Operation *op) {
  return isa<ReshapeOp, TransposeOp, BroadcastToOp, SliceOp, ParallelCopyOp, GetParameterOp,
             ConstantOp, MeshCoordinateOp>(op);
}

template <typename OpT>
struct OpCost : public CostOpInterface::ExternalModel<OpCost<OpT>, OpT> {
  int64_t getFlops(Operation *op) const { return workOf(op).flops; }
  int64_t getMatmulFlops(Operation *op) const { return workOf(op).matmul; }
  int64_t getMemoryBytes(Operation *op) const {
    if (isView(op))
      return 0;
    int64_t partial = partialBytes(op);
    return partial >= 0 ? partial : allBytes(op);
  }
};

/// The shard collectives move bytes and add at most one operation per element (reductions).
template <typename OpT>
struct CollectiveCost : public CostOpInterface::ExternalModel<CollectiveCost<OpT>, OpT> {
  int64_t getFlops(Operation *op) const {
    return isa<shard::AllReduceOp, shard::ReduceScatterOp>(op) ? numel(op->getOperand(0)) : 0;
  }
  int64_t getMemoryBytes(Operation *op) const {
    return isa<shard::AllSliceOp>(op) ? 0 : allBytes(op);
  }
};

template <typename... OpTs> void attach(MLIRContext *ctx) {
  (OpTs::template attachInterface<OpCost<OpTs>>(*ctx), ...);
}
} // namespace

void mlir::ds::attachCostModels(MLIRContext *ctx) {
  attach<
#define GET_OP_LIST
#include "ds/IR/DSOps.cpp.inc"
      >(ctx);
}

void mlir::ds::registerShardCosts(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, shard::ShardDialect *) {
    shard::AllReduceOp::attachInterface<CollectiveCost<shard::AllReduceOp>>(*ctx);
    shard::AllGatherOp::attachInterface<CollectiveCost<shard::AllGatherOp>>(*ctx);
    shard::ReduceScatterOp::attachInterface<CollectiveCost<shard::ReduceScatterOp>>(*ctx);
    shard::AllToAllOp::attachInterface<CollectiveCost<shard::AllToAllOp>>(*ctx);
    shard::AllSliceOp::attachInterface<CollectiveCost<shard::AllSliceOp>>(*ctx);
  });
}
