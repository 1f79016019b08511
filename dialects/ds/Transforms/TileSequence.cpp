//===- TileSequence.cpp - ds-tile-sequence: MLPs and the LM head's loss in tiles -===//
//
// The MLPs in tiles are TileMlp.cpp's. Here ALST's tiled logits loss as a rewrite of
// @forward: the LM head's linear whose logits only feed a cross-entropy (through a reshape to
// rows) becomes one ds.linear_cross_entropy over `loss-tiles` tiles of rows, whose kernels
// hold one tile's logits at a time, forward and backward (each tile's logits recomputed for
// its gradient); a mean is the tiled sum over the count of targets that are not
// ignore_index, as F.cross_entropy divides. The [tokens, vocab] logits never exist whole.
//
#include "ds/Transforms/Passes.h"

#include "TensorParallel.h"
#include "TileSequence.h"

#include "mlir/IR/Builders.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSTILESEQUENCE
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// "auto" tiles: a tile's f32 logits at most this many bytes (the tiled loss then costs about
/// a tile's recomputation more than the whole).
constexpr int64_t kAutoTileBytes = int64_t(64) << 20;

struct TileSequencePass : mlir::ds::impl::DSTileSequenceBase<TileSequencePass> {
  using DSTileSequenceBase::DSTileSequenceBase;
  void runOnOperation() override;
  bool tile(CrossEntropyOp ce);
};

bool TileSequencePass::tile(CrossEntropyOp ce) {
  if (ce.getReduction() == Reduction::none)
    return false;
  Value logits = ce.getLogits();
  RankedTensorType lt = typeOf(logits);
  if (lt.getRank() != 2 || !lt.getElementType().isF32() || !logits.hasOneUse())
    return false;
  auto reshape = logits.getDefiningOp<ReshapeOp>();
  Value wide = reshape ? reshape.getInput() : logits;
  if (reshape && !wide.hasOneUse())
    return false;
  auto head = wide.getDefiningOp<LinearOp>();
  if (!head)
    return false;
  const int64_t N = lt.getShape()[0], V = lt.getShape()[1];
  Value x = head.getInput();
  RankedTensorType xt = typeOf(x);
  const int64_t D = xt.getShape().back();
  if (typeOf(head.getWeight()).getShape()[0] != V || xt.getNumElements() != N * D)
    return false;
  OpBuilder b(ce);
  Location loc = ce.getLoc();
  Type f32 = b.getF32Type();
  if (xt.getRank() != 2)
    x = ReshapeOp::create(b, loc, RankedTensorType::get({N, D}, f32), x);
  // "auto" (0): tiles of at most kAutoTileBytes of logits; one tile is no tiling.
  int64_t want = lossTiles;
  if (want == 0)
    want = (N * V * 4 + kAutoTileBytes - 1) / kAutoTileBytes;
  const int64_t tiles = std::min<int64_t>(want, std::max<int64_t>(N, 1));
  if (tiles <= 1)
    return false;
  const int64_t rows = (N + tiles - 1) / tiles;
  auto scalarT = RankedTensorType::get({}, f32);
  auto lce = LinearCrossEntropyOp::create(
      b, loc, scalarT, RankedTensorType::get({rows * V + 1}, f32), x, head.getWeight(),
      head.getBias(), ce.getTarget(), b.getI64IntegerAttr(tiles), ce.getIgnoreIndexAttr(),
      ce.getLabelSmoothingAttr());
  Value loss = lce.getResult();
  if (ce.getReduction() == Reduction::mean) {
    // The count of targets that are not ignore_index, as F.cross_entropy's mean divides.
    Value target = ce.getTarget();
    RankedTensorType tt = typeOf(target);
    Value ignore = ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(RankedTensorType::get({}, tt.getElementType()),
                               IntegerAttr::get(tt.getElementType(), ce.getIgnoreIndex())));
    Value valid = CmpOp::create(b, loc, RankedTensorType::get(tt.getShape(), b.getI1Type()),
                                CmpPredicateAttr::get(b.getContext(), CmpPredicate::ne),
                                target, ignore);
    Value ones = WhereOp::create(b, loc, RankedTensorType::get(tt.getShape(), f32), valid,
                                 scalarConstant(b, loc, f32, 1.0),
                                 scalarConstant(b, loc, f32, 0.0));
    Value count = SumOp::create(b, loc, scalarT, ones, SmallVector<int64_t>{0}, false);
    loss = DivOp::create(b, loc, scalarT, loss, count);
  }
  ce.getResult().replaceAllUsesWith(loss);
  ce.erase();
  if (reshape)
    reshape.erase();
  head.erase();
  return true;
}

void TileSequencePass::runOnOperation() {
  if (lossTiles == 1 && mlpTiles == 1)
    return;
  ModuleOp module = getOperation();
  auto forward = module.lookupSymbol<func::FuncOp>(kForwardName);
  if (!forward) {
    module.emitError() << "ds-tile-sequence: needs the imported func.func @forward (run it "
                          "before ds-autodiff)";
    return signalPassFailure();
  }
  if (lossTiles < 0 || mlpTiles < 0) {
    module.emitError() << "ds-tile-sequence: loss-tiles and mlp-tiles are counts (0: auto)";
    return signalPassFailure();
  }
  // The loss first: its head is a widening linear layer that is not an MLP.
  if (lossTiles != 1) {
    SmallVector<CrossEntropyOp> losses;
    forward.walk([&](CrossEntropyOp ce) { losses.push_back(ce); });
    int64_t tiled = 0;
    for (CrossEntropyOp ce : losses)
      tiled += tile(ce);
    if (!tiled && lossTiles > 1) {
      forward.emitError() << "ds-tile-sequence: sequence_tiling.loss_tiles is "
                          << static_cast<int64_t>(lossTiles)
                          << " but no f32 cross-entropy reads a linear layer's logits alone "
                             "(a vocabulary-parallel head under tp or a bf16/fp16 model keeps "
                             "its own); drop loss_tiles";
      return signalPassFailure();
    }
  }
  if (mlpTiles != 1 && tileMlps(forward, mlpTiles) == 0 && mlpTiles > 1) {
    forward.emitError() << "ds-tile-sequence: sequence_tiling.mlp_tiles is "
                        << static_cast<int64_t>(mlpTiles)
                        << " but no MLP was found (a linear layer that widens its input, "
                           "position-wise ops, and one narrower result), or it has fewer "
                           "rows than that; drop mlp_tiles";
    return signalPassFailure();
  }
}

} // namespace
