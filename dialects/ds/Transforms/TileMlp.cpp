//===- TileMlp.cpp - ds-tile-sequence's MLP in tiles (ALST's TiledMLP) ------------===//
//
// A position-wise region that widens its input (an MLP) runs in tiles of rows: each tile a
// slice of the region's input along its sequence dimension, the region's ops cloned on it
// and marked `ds.tile`, the tiles' results concatenated. ds-activation-checkpoint recomputes
// each tile in the backward right before its gradient, so one tile's intermediates are all
// that exists of them.
//
#include "TileSequence.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace mlir::ds;

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// Values that do not depend on the step's inputs: parameters, constants and what pure ops
/// compute from them alone (a converted or transposed weight).
struct Invariants {
  llvm::DenseMap<Value, bool> known;
  bool operator()(Value v) {
    auto it = known.find(v);
    if (it != known.end())
      return it->second;
    Operation *def = v.getDefiningOp();
    bool inv = false;
    if (def && isa<GetParameterOp, ConstantOp>(def))
      inv = true;
    else if (def && isMemoryEffectFree(def) && def->getNumRegions() == 0 &&
             def->getNumOperands() > 0)
      inv = llvm::all_of(def->getOperands(), [&](Value o) { return (*this)(o); });
    known[v] = inv;
    return inv;
  }
};

/// The region being grown from `x`: its ops in block order and the values they compute.
struct TiledRegion {
  Value x;
  ArrayRef<int64_t> lead; ///< x's dimensions but the last: every region value has them
  llvm::SetVector<Operation *> ops;
  llvm::DenseSet<Value> values;
  bool widens = false;

  bool inside(Value v) const { return v == x || values.contains(v); }
  /// A tensor of the region's rows: x's rank and leading dimensions.
  bool rowShaped(Value v) const {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    return t && t.getRank() == static_cast<int64_t>(lead.size()) + 1 &&
           t.getShape().drop_back() == lead;
  }
  /// An invariant that broadcasts against the rows without a row dimension of its own.
  bool broadcastsOverRows(Value v) const {
    ArrayRef<int64_t> s = typeOf(v).getShape();
    if (s.size() > lead.size() + 1)
      return false;
    for (size_t i = 0; i + 1 < s.size(); ++i)
      if (s[i] != 1)
        return false;
    return true;
  }
};

/// Whether `op` belongs to the region: each row of its result reads only that row of its
/// region operands (elementwise ops, conversions, linear layers and products by invariants).
bool joins(Operation *op, TiledRegion &r, Invariants &invariant) {
  if (op->hasAttr(kTileAttrName))
    return false;
  bool elementwise = op->hasTrait<OpTrait::ds::WritesOverOperand>() || isa<ConvertOp, CmpOp>(op);
  bool product = isa<LinearOp, MatmulOp>(op);
  if ((!elementwise && !product) || op->getNumResults() != 1 || !r.rowShaped(op->getResult(0)))
    return false;
  bool reads = false;
  for (auto [i, v] : llvm::enumerate(op->getOperands())) {
    if (r.inside(v)) {
      // A product reads its rows from its first operand only.
      if (!r.rowShaped(v) || (product && i != 0))
        return false;
      reads = true;
    } else if (!invariant(v) || (product ? i == 0 : !r.broadcastsOverRows(v))) {
      return false;
    }
  }
  if (auto mm = dyn_cast<MatmulOp>(op); mm && typeOf(mm.getRhs()).getRank() != 2)
    return false;
  return reads;
}

/// The region grown from `x` in one sweep of the block (ops come after their operands), and
/// the one value that leaves it; null when it is not a widening region with one exit.
Value growRegion(TiledRegion &r, Invariants &invariant) {
  Block *block = r.x.getParentBlock();
  Operation *start = r.x.getDefiningOp();
  for (Operation &op : start ? llvm::make_range(std::next(start->getIterator()), block->end())
                             : llvm::make_range(block->begin(), block->end())) {
    if (!joins(&op, r, invariant))
      continue;
    r.ops.insert(&op);
    r.values.insert(op.getResult(0));
    if (auto lin = dyn_cast<LinearOp>(op))
      r.widens |= typeOf(lin.getResult()).getShape().back() >
                  typeOf(lin.getInput()).getShape().back();
  }
  if (!r.widens)
    return Value();
  // An MLP narrows again: a region whose result is its widest value (an LM head's logits)
  // would gain nothing from tiles.
  int64_t widest = 0;
  for (Value v : r.values)
    widest = std::max(widest, typeOf(v).getShape().back());
  Value exit;
  for (Operation *op : r.ops)
    for (Operation *user : op->getResult(0).getUsers())
      if (!r.ops.contains(user)) {
        if (exit && exit != op->getResult(0))
          return Value();
        exit = op->getResult(0);
      }
  // The tiles' concatenation comes after the region's last op: the exit's readers too.
  if (exit && typeOf(exit).getShape().back() >= widest)
    return Value();
  if (exit && llvm::any_of(exit.getUsers(), [&](Operation *u) {
        return u->getBlock() != block || u->isBeforeInBlock(r.ops.back());
      }))
    return Value();
  return exit;
}

/// `r` in `tiles` tiles of its input's second-to-last dimension, each tile's ops marked with
/// the next tile id from `nextTile`.
void cutIntoTiles(TiledRegion &r, Value exit, int64_t tiles, int64_t &nextTile) {
  Operation *last = r.ops.back();
  OpBuilder b(last->getContext());
  b.setInsertionPointAfter(last);
  Location loc = exit.getLoc();
  const int64_t axis = static_cast<int64_t>(r.lead.size()) - 1;
  const int64_t rows = r.lead[axis], each = (rows + tiles - 1) / tiles;
  auto withRows = [&](Type t, int64_t n) {
    auto rt = cast<RankedTensorType>(t);
    SmallVector<int64_t> shape(rt.getShape());
    shape[axis] = n;
    return RankedTensorType::get(shape, rt.getElementType());
  };
  SmallVector<Value> pieces;
  for (int64_t begin = 0; begin < rows; begin += each) {
    int64_t n = std::min(each, rows - begin);
    auto tileAttr = b.getI64IntegerAttr(nextTile++);
    IRMapping map;
    auto slice = SliceOp::create(b, loc, withRows(r.x.getType(), n), r.x,
                                 b.getI64IntegerAttr(axis), b.getI64IntegerAttr(begin),
                                 b.getI64IntegerAttr(begin + n), b.getI64IntegerAttr(1));
    slice->setAttr(kTileAttrName, tileAttr);
    map.map(r.x, slice.getResult());
    for (Operation *op : r.ops) {
      Operation *c = b.clone(*op, map);
      c->getResult(0).setType(withRows(op->getResult(0).getType(), n));
      c->setAttr(kTileAttrName, tileAttr);
    }
    pieces.push_back(map.lookup(exit));
  }
  auto whole = ConcatOp::create(b, loc, exit.getType(), pieces, b.getI64IntegerAttr(axis));
  exit.replaceAllUsesWith(whole.getResult());
  for (Operation *op : llvm::reverse(r.ops))
    op->erase();
}

} // namespace

int64_t mlir::ds::tileMlps(func::FuncOp forward, int64_t tiles) {
  // The inputs of widening linear layers, in order; cutting a region drops the candidates
  // it computed (their ops are erased).
  llvm::SetVector<Value> candidates;
  forward.walk([&](LinearOp lin) {
    RankedTensorType in = typeOf(lin.getInput());
    if (in.getRank() >= 2 && typeOf(lin.getResult()).getShape().back() > in.getShape().back())
      candidates.insert(lin.getInput());
  });
  Invariants invariant;
  int64_t cut = 0, nextTile = 0;
  while (!candidates.empty()) {
    TiledRegion r;
    r.x = candidates.front();
    candidates.remove(r.x);
    r.lead = typeOf(r.x).getShape().drop_back();
    const int64_t rows = r.lead.back(), hidden = typeOf(r.x).getShape().back();
    // "auto" (0): ALST's ceil(sequence / hidden); never more tiles than rows.
    const int64_t want = std::min(tiles ? tiles : (rows + hidden - 1) / hidden, rows);
    Value exit = growRegion(r, invariant);
    if (!exit || want <= 1)
      continue;
    candidates.remove_if([&](Value v) { return r.values.contains(v); });
    cutIntoTiles(r, exit, want, nextTile);
    ++cut;
  }
  return cut;
}
