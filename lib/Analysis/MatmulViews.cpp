//===- MatmulViews.cpp - matmuls that read and write strided views --------===//
#include "ds/Analysis/MatmulViews.h"

#include "ds/IR/DSDialect.h"
#include "ds/IR/DSOps.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <cmath>
#include <optional>

using namespace mlir;
using namespace mlir::ds;

namespace {

ArrayRef<int64_t> shapeOf(Value v) { return cast<RankedTensorType>(v.getType()).getShape(); }

SmallVector<int64_t, 4> contiguous(ArrayRef<int64_t> shape) {
  SmallVector<int64_t, 4> s(shape.size(), 1);
  for (int d = (int)shape.size() - 2; d >= 0; --d)
    s[d] = s[d + 1] * shape[d + 1];
  return s;
}

/// The strides of `to` as a view of a tensor of `from` with `strides`, when a reshape is one
/// (each run of merged dims contiguous within itself), as torch.Tensor.view decides.
std::optional<SmallVector<int64_t, 4>> reshapeStrides(ArrayRef<int64_t> from,
                                                      ArrayRef<int64_t> strides,
                                                      ArrayRef<int64_t> to) {
  SmallVector<int64_t, 4> out(to.size(), 1);
  if (from.empty()) // a scalar: every dim of `to` has size 1
    return out;
  int64_t viewD = (int64_t)to.size() - 1;
  int64_t base = strides.back(), runNumel = 1, viewNumel = 1;
  for (int64_t d = (int64_t)from.size() - 1; d >= 0; --d) {
    runNumel *= from[d];
    // A run of dims ends where the next one out is not laid out right after it.
    if (d == 0 || (from[d - 1] != 1 && strides[d - 1] != runNumel * base)) {
      while (viewD >= 0 && (viewNumel < runNumel || to[viewD] == 1)) {
        out[viewD] = viewNumel * base;
        viewNumel *= to[viewD];
        --viewD;
      }
      if (viewNumel != runNumel)
        return std::nullopt;
      if (d > 0) {
        base = strides[d - 1];
        runNumel = viewNumel = 1;
      }
    }
  }
  if (viewD != -1)
    return std::nullopt;
  return out;
}

/// A value as elements of another: v[i] = scale * root[offset + sum_d i_d strides_d].
struct View {
  Value root;
  int64_t offset = 0;
  SmallVector<int64_t, 4> strides;
  SmallVector<Operation *> chain; ///< the ops between root and the value
  double scale = 1.0;
};

View rootView(Value v) { return {v, 0, contiguous(shapeOf(v)), {}, 1.0}; }

bool onHost(Operation *op) { return op->hasAttr(kOnHostAttrName); }

/// When `op` multiplies `v` (of its result's type, f32 or bf16) by a splat constant that is a
/// power of two: that factor, which scales every sum it reaches exactly (short of subnormals);
/// else 0. Not f16: its subnormals start at 6.1e-5, where PyTorch's rounding of the scaled
/// value and the product's one rounding differ.
double powerOfTwoFactor(Operation *op, Value v) {
  auto mul = dyn_cast_or_null<MulOp>(op);
  if (!mul || onHost(mul) || v.getType() != mul.getResult().getType())
    return 0;
  Type elem = cast<RankedTensorType>(v.getType()).getElementType();
  if (!elem.isF32() && !elem.isBF16())
    return 0;
  Value other = mul.getLhs() == v ? mul.getRhs() : mul.getLhs();
  auto c = other.getDefiningOp<ConstantOp>();
  auto dense = c ? dyn_cast<DenseFPElementsAttr>(c.getValue()) : nullptr;
  if (!dense || !dense.isSplat())
    return 0;
  double f = dense.getSplatValue<APFloat>().convertToDouble();
  int exp = 0;
  if (!std::isfinite(f) || std::frexp(std::fabs(f), &exp) != 0.5 || exp < -100 || exp > 100)
    return 0;
  return f;
}

/// `v` as a view through the slices, reshapes and transposes that made it (as far as they
/// are views), in `block`; `written` ops (transposes a matmul writes through) end the walk.
View viewOf(Value v, Block *block, const llvm::DenseSet<Operation *> &written) {
  Operation *def = v.getDefiningOp();
  if (!def || def->getBlock() != block || onHost(def) || written.contains(def))
    return rootView(v);
  if (auto t = dyn_cast<TransposeOp>(def)) {
    View in = viewOf(t.getInput(), block, written);
    ArrayRef<int64_t> perm = t.getPermutation();
    SmallVector<int64_t, 4> s(perm.size());
    for (size_t i = 0; i < perm.size(); ++i)
      s[i] = in.strides[perm[i]];
    in.strides = s;
    in.chain.push_back(def);
    return in;
  }
  if (auto sl = dyn_cast<SliceOp>(def)) {
    View in = viewOf(sl.getInput(), block, written);
    int64_t dim = sl.getDim(), step = sl.getStep();
    if (step < 1)
      return rootView(v);
    in.offset += sl.getStart() * in.strides[dim];
    in.strides[dim] *= step;
    in.chain.push_back(def);
    return in;
  }
  if (auto r = dyn_cast<ReshapeOp>(def)) {
    View in = viewOf(r.getInput(), block, written);
    auto s = reshapeStrides(shapeOf(r.getInput()), in.strides, shapeOf(v));
    if (!s)
      return rootView(v);
    in.strides = *s;
    in.chain.push_back(def);
    return in;
  }
  if (auto m = dyn_cast<MulOp>(def)) {
    for (Value x : {m.getLhs(), m.getRhs()})
      if (double f = powerOfTwoFactor(m, x)) {
        View in = viewOf(x, block, written);
        in.scale *= f;
        in.chain.push_back(def);
        return in;
      }
  }
  return rootView(v);
}

/// The {offset, s0, s1, rows, columns} of a matrix view for dsrt_matmul_view, if it has one
/// (a unit stride on rows or columns; rows or columns that do not overlap).
std::optional<SmallVector<int64_t, 5>> matrixView(const View &v, ArrayRef<int64_t> shape) {
  int64_t r = shape.size(), rows = shape[r - 2], cols = shape[r - 1];
  int64_t sr = v.strides[r - 2], sc = v.strides[r - 1];
  bool ok = ((sc == 1 || cols == 1) && (rows == 1 || sr >= cols)) ||
            ((sr == 1 || rows == 1) && (cols == 1 || sc >= rows));
  if (!ok)
    return std::nullopt;
  int64_t s0 = r == 4 ? v.strides[0] : 0, s1 = v.strides[r - 3];
  return SmallVector<int64_t, 5>{v.offset, s0, s1, sr, sc};
}

/// Whether `chain` is what dsrt_matmul's flags already do: nothing, or one transpose of the
/// last two dims.
bool plainFlag(ArrayRef<Operation *> chain) {
  if (chain.empty())
    return true;
  if (chain.size() != 1)
    return false;
  auto t = dyn_cast<TransposeOp>(chain[0]);
  if (!t)
    return false;
  ArrayRef<int64_t> p = t.getPermutation();
  int64_t r = p.size();
  for (int64_t i = 0; i + 2 < r; ++i)
    if (p[i] != i)
      return false;
  return r >= 2 && p[r - 2] == r - 1 && p[r - 1] == r - 2;
}

} // namespace

MatmulViews mlir::ds::planMatmulViews(Block &body) {
  MatmulViews out;
  llvm::DenseMap<Operation *, std::pair<View, View>> operandViews;
  for (auto m : body.getOps<MatmulOp>()) {
    auto type = cast<RankedTensorType>(m.getResult().getType());
    int64_t r = type.getRank();
    Type elem = type.getElementType();
    if (!(elem.isF32() || elem.isBF16() || elem.isF16()) || (r != 3 && r != 4) || onHost(m) ||
        shapeOf(m.getLhs()).size() != (size_t)r || shapeOf(m.getRhs()).size() != (size_t)r ||
        shapeOf(m.getLhs()).take_front(r - 2) != type.getShape().take_front(r - 2) ||
        shapeOf(m.getRhs()).take_front(r - 2) != type.getShape().take_front(r - 2))
      continue;
    View a = viewOf(m.getLhs(), &body, out.absorbed), b = viewOf(m.getRhs(), &body, out.absorbed);
    auto av = matrixView(a, shapeOf(m.getLhs()));
    if (!av)
      a = rootView(m.getLhs()), av = matrixView(a, shapeOf(m.getLhs()));
    auto bv = matrixView(b, shapeOf(m.getRhs()));
    if (!bv)
      b = rootView(m.getRhs()), bv = matrixView(b, shapeOf(m.getRhs()));

    // The result through the transposes and power-of-two scalings that are its only use,
    // one after another.
    Operation *last = nullptr;
    SmallVector<Operation *> resultChain;
    double resultScale = 1.0;
    Value cur = m.getResult();
    while (cur.hasOneUse()) {
      Operation *user = *cur.getUsers().begin();
      if (double f = powerOfTwoFactor(user, cur)) {
        resultScale *= f;
      } else {
        auto t = dyn_cast<TransposeOp>(user);
        if (!t || onHost(t))
          break;
      }
      resultChain.push_back(user);
      cur = user->getResult(0);
    }
    View c = rootView(m.getResult());
    // ... then, reshaped or not, as one piece of a concatenation.
    Operation *reshape = nullptr;
    ConcatOp concat;
    int64_t at = 0; // element offset of the piece in the concatenation
    SmallVector<int64_t, 4> s = contiguous(shapeOf(cur));
    if (cur.hasOneUse()) {
      Value piece = cur;
      if (auto r = dyn_cast<ReshapeOp>(*cur.getUsers().begin()); r && r.getResult().hasOneUse())
        reshape = r, piece = r.getResult();
      concat = dyn_cast<ConcatOp>(*piece.getUsers().begin());
      if (concat && !onHost(concat)) {
        int64_t dim = concat.getDim(), start = 0;
        for (Value in : concat.getInputs()) {
          if (in == piece)
            break;
          start += shapeOf(in)[dim];
        }
        SmallVector<int64_t, 4> whole = contiguous(shapeOf(concat.getResult()));
        at = start * whole[dim];
        auto back = reshapeStrides(shapeOf(piece), whole, shapeOf(cur));
        if (back)
          s = *back;
        else
          concat = nullptr;
      } else {
        concat = nullptr;
      }
    }
    if (!concat)
      reshape = nullptr, at = 0, s = contiguous(shapeOf(cur));
    if (!resultChain.empty() || concat) {
      // Strides of the matmul's result dims in the buffer it writes.
      for (Operation *op : llvm::reverse(resultChain)) {
        auto t = dyn_cast<TransposeOp>(op);
        if (!t)
          continue; // a scaling: the same layout
        ArrayRef<int64_t> perm = t.getPermutation();
        SmallVector<int64_t, 4> in(perm.size());
        for (size_t i = 0; i < perm.size(); ++i)
          in[perm[i]] = s[i];
        s = in;
      }
      View through{m.getResult(), at, s, {}};
      if (matrixView(through, type.getShape())) {
        c = through;
        last = concat ? concat.getOperation()
                      : (resultChain.empty() ? nullptr : resultChain.back());
      } else {
        resultChain.clear();
        reshape = nullptr, concat = nullptr, resultScale = 1.0;
      }
    }
    if (!last && plainFlag(a.chain) && plainFlag(b.chain))
      continue; // dsrt_matmul as it is
    auto cv = matrixView(c, type.getShape());
    MatmulViewPlan plan;
    plan.lhsRoot = a.root;
    plan.rhsRoot = b.root;
    if (last)
      plan.resultBuffer = last->getResult(0);
    ArrayRef<int64_t> ls = shapeOf(m.getLhs()), shape = type.getShape();
    plan.views = {r == 4 ? shape[0] : 1, shape[r - 3], shape[r - 2], shape[r - 1], ls[r - 1]};
    plan.alpha = a.scale * b.scale * resultScale;
    for (auto *v : {&*av, &*bv, &*cv})
      plan.views.append(v->begin(), v->end());
    out.plans[m] = plan;
    operandViews[m] = {a, b};
    for (Operation *t : resultChain)
      out.absorbed.insert(t); // single uses, one after another: nothing else reads them
    if (reshape)
      out.absorbed.insert(reshape);
    if (concat)
      out.concatsWritten.insert(concat);
  }

  // An op of an operand's chain needs no lowering when every use of it is absorbed: by a
  // planned matmul reading through it, or by another such op. Drop the others until none
  // changes (a dropped op is computed, and so are the ops it reads).
  llvm::DenseSet<Operation *> chainOps;
  for (auto &[m, ab] : operandViews)
    for (const View *v : {&ab.first, &ab.second})
      chainOps.insert(v->chain.begin(), v->chain.end());
  auto readsThrough = [&](OpOperand &use, Operation *op) {
    auto it = operandViews.find(use.getOwner());
    if (it == operandViews.end())
      return false;
    const View &v = use.getOperandNumber() == 0 ? it->second.first : it->second.second;
    return llvm::is_contained(v.chain, op);
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (Operation *op : llvm::to_vector(chainOps)) {
      bool allAbsorbed = llvm::all_of(op->getResult(0).getUses(), [&](OpOperand &use) {
        return chainOps.contains(use.getOwner()) || readsThrough(use, op);
      });
      if (!allAbsorbed) {
        chainOps.erase(op);
        changed = true;
      }
    }
  }
  out.absorbed.insert(chainOps.begin(), chainOps.end());
  // The factors of absorbed scalings, when nothing else reads them.
  for (Operation *op : llvm::to_vector(out.absorbed))
    if (auto mul = dyn_cast<MulOp>(op))
      for (Value x : {mul.getLhs(), mul.getRhs()})
        if (auto c = x.getDefiningOp<ConstantOp>();
            c && llvm::all_of(c->getUsers(), [&](Operation *u) { return out.absorbed.contains(u); }))
          out.absorbed.insert(c);
  return out;
}
