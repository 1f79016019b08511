//===- TensorParallel.cpp - the ds-tensor-parallel pass: Megatron regions -----===//
//
// Finds, in @forward, regions that start at column-parallel linears and end at one
// row-parallel linear, checks that every op in between can compute on this rank's part of
// its operands, and rewrites them to the local parts: split parameters, local result types,
// ds.parallel_copy at the start and ds.parallel_sum at the end. A value's part is described by
// a Split: dimension `dim` is `segments` equal segments and the rank holds the r-th of tp
// contiguous chunks of every segment (segments = 1: one contiguous chunk).
//
#include "ds/Transforms/Passes.h"

#include "TensorParallel.h"
#include "TensorParallelRemarks.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

#include <map>
#include <numeric>

namespace mlir::ds {
#define GEN_PASS_DEF_DSTENSORPARALLEL
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// One region: its column-parallel linears, the ops between, and its row-parallel linear.
struct Region {
  SmallVector<LinearOp> entries;
  SmallVector<Split> entrySplits;
  SmallVector<Operation *> ops; ///< in block order
  llvm::DenseMap<Value, Split> splits;
  LinearOp exit;
};

} // namespace

static int64_t product(ArrayRef<int64_t> dims) {
  return std::accumulate(dims.begin(), dims.end(), int64_t{1}, std::multiplies<int64_t>());
}

namespace {

struct TensorParallelPass : mlir::ds::impl::DSTensorParallelBase<TensorParallelPass> {
  using DSTensorParallelBase::DSTensorParallelBase;
  void runOnOperation() override;

  int64_t tp = 1;
  func::FuncOp forward;
  TensorParallelRewriter rw;
  /// Linears whose weight (and bias) are trainable parameters read only by them.
  llvm::DenseSet<Operation *> candidates;

  bool isCandidate(LinearOp l) { return candidates.contains(l) && !rw.assigned.contains(l); }
  StringRef roleOf(LinearOp l) { return rw.roleOf(parameterOf(l.getWeight()).getSymName()); }
  ParameterOp parameterOf(Value v) { return rw.parameterOf(v); }
  LogicalResult findRegion(LinearOp exit, Region &r, std::string &why);
  LogicalResult propagate(Region &r, std::string &why);
  FailureOr<Split> splitOf(Operation *op, Region &r, std::string &why);
  void rewrite(Region &r, const MeshAxisRef &axis);
  void splitParameter(Value v, int64_t dim, const Split &s) {
    rw.splitParameter(parameterOf(v), dim, s.segments, s.sizes);
  }
  RankedTensorType localType(RankedTensorType t, Split s) {
    SmallVector<int64_t> shape(t.getShape());
    shape[s.dim] /= tp;
    return RankedTensorType::get(shape, t.getElementType());
  }
};

/// Ops that a region may contain (their rules are in splitOf).
bool regionOp(Operation *op) {
  return isa<SliceOp, ConcatOp, BroadcastToOp, ReshapeOp, TransposeOp, MatmulOp, SoftmaxOp,
             LogSoftmaxOp, DropoutOp, GeluOp, CmpOp, WhereOp, ConvertOp, AttentionOp>(op) ||
         (op->hasTrait<OpTrait::SameOperandsAndResultType>() && op->getNumOperands() == 1 &&
          op->getNumResults() == 1 && isa<GradientOpInterface>(op) && isPure(op)) ||
         isa<AddOp, SubOp, MulOp, DivOp, PowOp, MaximumOp, MinimumOp>(op);
}

LogicalResult TensorParallelPass::findRegion(LinearOp exit, Region &r, std::string &why) {
  r.exit = exit;
  // Backward from the exit's input: region-able ops, stopping at candidate linears.
  llvm::SetVector<Operation *> reached;
  llvm::SetVector<Operation *> entries;
  SmallVector<Value> stack{exit.getInput()};
  llvm::DenseSet<Value> seen;
  while (!stack.empty()) {
    Value v = stack.pop_back_val();
    if (!seen.insert(v).second)
      continue;
    Operation *d = v.getDefiningOp();
    if (!d || d->getBlock() != exit->getBlock())
      continue;
    if (auto l = dyn_cast<LinearOp>(d)) {
      if (isCandidate(l) && l != exit && roleOf(l) != "row")
        entries.insert(l);
      continue;
    }
    if (!regionOp(d) || reached.size() > 4096)
      continue;
    reached.insert(d);
    for (Value o : d->getOperands())
      stack.push_back(o);
  }
  if (entries.empty()) {
    why = "no linear with its own weight feeds it through ops that can work on a part";
    return failure();
  }
  for (Operation *e : entries)
    r.entries.push_back(cast<LinearOp>(e));
  llvm::sort(r.entries, [](LinearOp a, LinearOp b) {
    return a->isBeforeInBlock(b.getOperation());
  });
  // The region: the reached ops that depend on an entry.
  llvm::DenseSet<Value> tainted;
  for (Operation *e : entries)
    tainted.insert(e->getResult(0));
  SmallVector<Operation *> ordered(reached.begin(), reached.end());
  llvm::sort(ordered, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  for (Operation *op : ordered)
    if (llvm::any_of(op->getOperands(), [&](Value o) { return tainted.contains(o); })) {
      r.ops.push_back(op);
      for (Value res : op->getResults())
        tainted.insert(res);
    }
  if (!tainted.contains(exit.getInput())) {
    why = "its input does not come from the linears before it";
    r.ops.clear();
    return failure();
  }
  // Closed: the region's values are used only inside it or by the exit's input.
  auto inside = [&](OpOperand &use) {
    Operation *u = use.getOwner();
    if (u == exit.getOperation())
      return use.getOperandNumber() == 0;
    return llvm::is_contained(r.ops, u);
  };
  for (Operation *e : entries)
    for (OpOperand &use : e->getResult(0).getUses())
      if (!inside(use)) {
        why = "the output of '" + std::string(parameterOf(cast<LinearOp>(e).getWeight())
                                                  .getSymName()) +
              "' is also used outside the region";
        return failure();
      }
  for (Operation *op : r.ops)
    for (Value res : op->getResults())
      for (OpOperand &use : res.getUses())
        if (!inside(use)) {
          why = "'" + op->getName().getStringRef().str() +
                "' in the region has a use outside it";
          return failure();
        }
  return success();
}

/// How the entry's output splits along its last dimension: into the segments that slices of
/// it take when they tile it (a fused q/k/v or gate/up projection; unequal for grouped-query
/// heads), else one.
Split entrySplit(LinearOp l) {
  RankedTensorType t = typeOf(l.getResult());
  int64_t last = t.getRank() - 1, n = t.getShape()[last];
  Split one{last, 1, {}};
  std::map<int64_t, int64_t> pieces; // start -> end
  for (Operation *u : l.getResult().getUsers()) {
    auto s = dyn_cast<SliceOp>(u);
    if (!s || static_cast<int64_t>(s.getDim()) != last || s.getStep() != 1)
      return one;
    int64_t start = static_cast<int64_t>(s.getStart()), end = static_cast<int64_t>(s.getEnd());
    auto [it, fresh] = pieces.emplace(start, end);
    if (!fresh && it->second != end)
      return one;
  }
  SmallVector<int64_t, 3> sizes;
  int64_t at = 0;
  for (auto [start, end] : pieces) {
    if (start != at || end <= start)
      return one;
    sizes.push_back(end - start);
    at = end;
  }
  if (at != n || sizes.size() < 2)
    return one;
  Split s{last, static_cast<int64_t>(sizes.size()), {}};
  if (llvm::any_of(sizes, [&](int64_t z) { return z != sizes[0]; }))
    s.sizes = sizes;
  return s;
}

/// The first element of segment k of `dim` (of `n` elements) split as `s`, and its size.
std::pair<int64_t, int64_t> segmentOf(const Split &s, int64_t n, int64_t k) {
  if (s.sizes.empty())
    return {k * (n / s.segments), n / s.segments};
  int64_t start = 0;
  for (int64_t j = 0; j < k; ++j)
    start += s.sizes[j];
  return {start, s.sizes[k]};
}

FailureOr<Split> TensorParallelPass::splitOf(Operation *op, Region &r, std::string &why) {
  auto splitOfValue = [&](Value v) -> std::optional<Split> {
    auto it = r.splits.find(v);
    if (it == r.splits.end())
      return std::nullopt;
    return it->second;
  };
  auto fail = [&](const Twine &cause) -> FailureOr<Split> {
    why = ("'" + op->getName().getStringRef() + "' " + cause).str();
    return failure();
  };
  RankedTensorType rt = typeOf(op->getResult(0));
  auto divides = [&](Split s, RankedTensorType t) {
    int64_t n = t.getShape()[s.dim];
    return n % s.segments == 0 && (n / s.segments) % tp == 0;
  };

  if (auto s = dyn_cast<SliceOp>(op)) {
    Split in = *splitOfValue(s.getInput());
    if (static_cast<int64_t>(s.getDim()) != in.dim)
      return in;
    int64_t n = typeOf(s.getInput()).getShape()[in.dim];
    int64_t start = static_cast<int64_t>(s.getStart()), end = static_cast<int64_t>(s.getEnd());
    for (int64_t k = 0; k < in.segments && in.segments > 1 && s.getStep() == 1; ++k)
      if (segmentOf(in, n, k) == std::make_pair(start, end - start))
        return Split{in.dim, 1, {}};
    return fail("slices the split dimension other than by whole segments");
  }
  // (Segments, equal or not, reach only slices: an entry has them when slices are all its
  // users.)
  if (auto c = dyn_cast<ConcatOp>(op)) {
    // Rotary embeddings' rotate_half: halves of each head joined again, along a whole dim.
    std::optional<Split> in;
    for (Value o : c.getInputs()) {
      std::optional<Split> s = splitOfValue(o);
      if (!s)
        return fail("joins a part with a whole tensor");
      if (in && *in != *s)
        return fail("joins parts split along different dimensions");
      in = s;
    }
    if (static_cast<int64_t>(c.getDim()) == in->dim)
      return fail("joins along the split dimension");
    return *in;
  }
  if (auto bc = dyn_cast<BroadcastToOp>(op)) {
    // Grouped-query attention's repeat_kv: each key/value head repeated for its query heads,
    // along a new dimension beside the split one (which, at least tp long, is never one of
    // the size-1 dimensions a broadcast widens).
    Split in = *splitOfValue(bc.getInput());
    return Split{in.dim + rt.getRank() - typeOf(bc.getInput()).getRank(), in.segments};
  }
  if (auto t = dyn_cast<TransposeOp>(op)) {
    Split in = *splitOfValue(t.getInput());
    ArrayRef<int64_t> perm = t.getPermutation();
    for (auto [i, p] : llvm::enumerate(perm))
      if (p == in.dim)
        return Split{static_cast<int64_t>(i), in.segments};
    return fail("has a malformed permutation");
  }
  if (auto re = dyn_cast<ReshapeOp>(op)) {
    std::string cause;
    FailureOr<Split> s = splitThroughReshape(typeOf(re.getInput()).getShape(), rt.getShape(),
                                             *splitOfValue(re.getInput()), tp, cause);
    if (failed(s))
      return fail(cause);
    return *s;
  }
  if (auto m = dyn_cast<MatmulOp>(op)) {
    RankedTensorType lt = typeOf(m.getLhs()), rtt = typeOf(m.getRhs());
    std::optional<Split> ls = splitOfValue(m.getLhs()), rs = splitOfValue(m.getRhs());
    int64_t lr = lt.getRank(), rr = rtt.getRank(), R = rt.getRank();
    if (lr < 2 || rr < 2)
      return fail("is a vector product");
    // Batch dims align from the right.
    auto batchOf = [&](int64_t d, int64_t rank) { return d < rank - 2 ? R - rank + d : -1; };
    if (ls && rs) {
      int64_t lb = batchOf(ls->dim, lr), rb = batchOf(rs->dim, rr);
      if (lb < 0 || lb != rb || ls->segments != rs->segments)
        return fail("multiplies parts that are not split along the same batch dimension");
      return Split{lb, ls->segments};
    }
    if (ls) {
      int64_t lb = batchOf(ls->dim, lr);
      if (ls->dim == lr - 2)
        return Split{R - 2, ls->segments};
      if (lb >= 0 && (rr - (R - lb) < 0 || rtt.getShape()[rr - (R - lb)] == 1))
        return Split{lb, ls->segments};
      return fail("contracts the split dimension");
    }
    int64_t rb = batchOf(rs->dim, rr);
    if (rs->dim == rr - 1)
      return Split{R - 1, rs->segments};
    if (rb >= 0 && (lr - (R - rb) < 0 || lt.getShape()[lr - (R - rb)] == 1))
      return Split{rb, rs->segments};
    return fail("contracts the split dimension");
  }
  if (auto a = dyn_cast<AttentionOp>(op)) {
    // By heads: query, key and value along dimension 1, the mask whole and one head wide
    // (grouped-query heads stay with their key/value head: both counts divide by tp).
    std::optional<Split> s;
    for (Value o : {a.getQuery(), a.getKey(), a.getValue()}) {
      std::optional<Split> os = splitOfValue(o);
      if (!os || os->dim != 1 || (s && *s != *os))
        return fail("needs query, key and value split by heads alike");
      if (!divides(*os, typeOf(o)))
        return fail("has heads that do not divide by the tp size");
      s = os;
    }
    if (a.getMask() && (splitOfValue(a.getMask()) || typeOf(a.getMask()).getShape()[1] != 1))
      return fail("has a mask per head");
    return *s;
  }
  if (isa<SoftmaxOp, LogSoftmaxOp>(op)) {
    Split in = *splitOfValue(op->getOperand(0));
    if (op->getAttrOfType<IntegerAttr>("dim").getInt() == in.dim)
      return fail("normalizes along the split dimension");
    return in;
  }
  // Elementwise (with broadcasting): every split operand along the same result dimension;
  // the others of size 1 there (or without it).
  std::optional<Split> result;
  for (Value o : op->getOperands()) {
    auto ot = dyn_cast<RankedTensorType>(o.getType());
    if (!ot)
      return fail("has an operand that is not a tensor");
    int64_t shift = rt.getRank() - ot.getRank();
    if (std::optional<Split> s = splitOfValue(o)) {
      Split at{s->dim + shift, s->segments};
      if (ot.getShape()[s->dim] != rt.getShape()[at.dim])
        return fail("broadcasts a split operand");
      if (result && *result != at)
        return fail("combines parts split along different dimensions");
      result = at;
    }
  }
  for (Value o : op->getOperands()) {
    if (splitOfValue(o))
      continue;
    auto ot = cast<RankedTensorType>(o.getType());
    int64_t d = result->dim - (rt.getRank() - ot.getRank());
    if (d >= 0 && ot.getShape()[d] != 1)
      return fail("combines a part with a whole operand of the split dimension's size");
  }
  if (!divides(*result, rt))
    return fail("has a split dimension that does not divide by the tp size");
  return *result;
}

LogicalResult TensorParallelPass::propagate(Region &r, std::string &why) {
  for (LinearOp e : r.entries) {
    RankedTensorType t = typeOf(e.getResult());
    Split s = entrySplit(e);
    int64_t n = t.getShape().back(), g = s.segments;
    for (int64_t k = 0; k < g; ++k)
      if (segmentOf(s, n, k).second % tp != 0) {
        why = "'" + parameterOf(e.getWeight()).getSymName().str() + "' has " +
              std::to_string(n) + " output features" +
              (g > 1 ? " in " + std::to_string(g) + " segments" : "") +
              ", which do not divide by tp = " + std::to_string(tp);
        return failure();
      }
    r.entrySplits.push_back(s);
    r.splits[e.getResult()] = s;
  }
  for (Operation *op : r.ops) {
    FailureOr<Split> s = splitOf(op, r, why);
    if (failed(s))
      return failure();
    for (Value res : op->getResults())
      r.splits[res] = *s;
  }
  Split in = r.splits.lookup(r.exit.getInput());
  if (in.dim != typeOf(r.exit.getInput()).getRank() - 1 || in.segments != 1) {
    why = "its input is split along a dimension other than its features";
    return failure();
  }
  return success();
}

} // namespace

FailureOr<Split> mlir::ds::splitThroughReshape(ArrayRef<int64_t> a, ArrayRef<int64_t> b,
                                               Split in, int64_t parts, std::string &why) {
  // The groups of dimensions whose products match; find the one holding the split.
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    size_t i0 = i, j0 = j;
    int64_t pa = i < a.size() ? a[i++] : 1, pb = j < b.size() ? b[j++] : 1;
    while (pa != pb) {
      if (pa < pb && i < a.size())
        pa *= a[i++];
      else if (pb < pa && j < b.size())
        pb *= b[j++];
      else {
        why = "has shapes whose dimensions do not group";
        return failure();
      }
    }
    // Absorb trailing size-1 dimensions into this group.
    while (i < a.size() && a[i] == 1 && !(static_cast<int64_t>(i) == in.dim))
      ++i;
    while (j < b.size() && b[j] == 1)
      ++j;
    if (in.dim < static_cast<int64_t>(i0) || in.dim >= static_cast<int64_t>(i))
      continue;
    // Within the group: O outer blocks, each with a split part of T elements.
    int64_t O = product(a.slice(i0, in.dim - i0)) * in.segments;
    int64_t T = a[in.dim] / in.segments * product(a.slice(in.dim + 1, i - in.dim - 1));
    for (size_t e = j0; e < j; ++e) {
      int64_t before = product(b.slice(j0, e - j0)), after = product(b.slice(e + 1, j - e - 1));
      if (O % before != 0 || (T / parts) % after != 0 || T % parts != 0)
        continue;
      int64_t g = O / before;
      if (b[e] != g * (T / after))
        continue;
      return Split{static_cast<int64_t>(e), g};
    }
    why = "regroups the split dimension so that a rank's part is not a block of whole rows "
          "(a head count that does not divide by the tp size)";
    return failure();
  }
  why = "has shapes whose dimensions do not group";
  return failure();
}

void TensorParallelRewriter::splitParameter(ParameterOp param, int64_t dim, int64_t segments,
                                            ArrayRef<int64_t> sizes) {
  RankedTensorType t = param.getTensorType();
  SmallVector<int64_t> shape(t.getShape());
  shape[dim] /= tp;
  auto local = RankedTensorType::get(shape, t.getElementType());
  MLIRContext *ctx = module.getContext();
  SmallVector<Attribute> dims;
  SmallVector<int64_t> segs;
  for (int64_t i = 0; i < local.getRank(); ++i) {
    Attribute tpAxis = StringAttr::get(ctx, stringifyMeshAxis(MeshAxis::tp));
    dims.push_back(i == dim ? ArrayAttr::get(ctx, {tpAxis}) : ArrayAttr::get(ctx, {}));
    segs.push_back(i == dim ? segments : 1);
  }
  param.setType(local);
  param.setShardingAttr(segments > 1
                            ? ShardingAttr::get(ctx, ArrayAttr::get(ctx, dims), segs, sizes)
                            : ShardingAttr::get(ctx, ArrayAttr::get(ctx, dims)));
  module.walk([&](GetParameterOp g) {
    if (g.getName() == param.getSymName())
      g.getResult().setType(local);
  });
}

void mlir::ds::remarkStaysWhole(Operation *at, StringRef param, const Twine &why) {
  at->emitRemark() << "ds-tensor-parallel: '" << param << "' stays replicated: " << why;
}

bool mlir::ds::readStaysWholeRemark(StringRef message, std::string &param, std::string &why) {
  if (!message.consume_front("ds-tensor-parallel: '"))
    return false;
  auto [name, rest] = message.split("' stays replicated: ");
  if (rest.empty() && !message.contains("' stays replicated: "))
    return false;
  param = name.str();
  why = rest.str();
  return true;
}

namespace {

void TensorParallelPass::rewrite(Region &r, const MeshAxisRef &axis) {
  MLIRContext *ctx = &getContext();
  auto gridAttr = FlatSymbolRefAttr::get(ctx, axis.grid);
  auto axesAttr = DenseI16ArrayAttr::get(ctx, axis.axes());
  // Slices of whole segments take this rank's part of them (from the global sizes, before
  // any type changes).
  for (Operation *op : r.ops) {
    auto sl = dyn_cast<SliceOp>(op);
    Split s = r.splits.lookup(op->getResult(0));
    if (!sl || static_cast<int64_t>(sl.getDim()) != s.dim)
      continue;
    // This rank's part of segment k begins at the segment's start / tp.
    int64_t start = static_cast<int64_t>(sl.getStart());
    int64_t size = static_cast<int64_t>(sl.getEnd()) - start;
    sl.setStart(start / tp);
    sl.setEnd((start + size) / tp);
  }
  // The region's inputs enter through one parallel_copy each.
  llvm::DenseMap<Value, Value> copies;
  for (auto [e, g] : llvm::zip(r.entries, r.entrySplits)) {
    Value in = e.getInput();
    Value &c = copies[in];
    if (!c) {
      OpBuilder b(e);
      if (Operation *d = in.getDefiningOp())
        b.setInsertionPointAfter(d);
      else
        b.setInsertionPointToStart(in.getParentBlock());
      c = ParallelCopyOp::create(b, e.getLoc(), in, gridAttr, axesAttr);
    }
    e.getInputMutable().assign(c);
    splitParameter(e.getWeight(), 0, g);
    if (e.getBias())
      splitParameter(e.getBias(), 0, g);
    e.getResult().setType(localType(typeOf(e.getResult()), r.splits.lookup(e.getResult())));
  }
  for (Operation *op : r.ops) {
    Split s = r.splits.lookup(op->getResult(0));
    for (Value res : op->getResults())
      res.setType(localType(typeOf(res), s));
  }
  // The exit: partial sums without the bias, summed over tp, then the bias.
  LinearOp x = r.exit;
  splitParameter(x.getWeight(), 1, Split{});
  OpBuilder b(x);
  Value partial = LinearOp::create(b, x.getLoc(), x.getType(), x.getInput(), x.getWeight(),
                                   Value());
  Value y = ParallelSumOp::create(b, x.getLoc(), partial, gridAttr, axesAttr);
  if (Value bias = x.getBias())
    y = AddOp::create(b, x.getLoc(), x.getType(), y, bias);
  x.getResult().replaceAllUsesWith(y);
  x.erase();
}

void TensorParallelPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (autotpSize < 1) {
    module.emitError() << "ds-tensor-parallel: autotp-size must be >= 1";
    return signalPassFailure();
  }
  MeshAttr mesh = getMesh(module);
  if (!mesh) {
    if (autotpSize == 1)
      return;
    module->setAttr(kMeshAttrName, buildMesh(&getContext(), 1, autotpSize, 1));
    mesh = getMesh(module);
  } else if (autotpSize != 1 && mesh.getSize(MeshAxis::tp) != autotpSize) {
    module.emitError() << "ds-tensor-parallel: autotp-size " << static_cast<int64_t>(autotpSize)
                       << " disagrees with the module's mesh " << mesh.str()
                       << " (drop the option; the mesh decides)";
    return signalPassFailure();
  }
  tp = mesh.getSize(MeshAxis::tp);
  if (tp == 1)
    return;
  forward = module.lookupSymbol<func::FuncOp>(kForwardName);
  if (!forward || forward.getBody().getBlocks().size() != 1) {
    module.emitError() << "ds-tensor-parallel: needs the imported func.func @forward (run it "
                          "before ds-autodiff)";
    return signalPassFailure();
  }
  FailureOr<MeshAxisRef> axis = getMeshAxis(module, MeshAxis::tp, "ds-tensor-parallel");
  if (failed(axis))
    return signalPassFailure();
  rw.module = module;
  rw.tp = tp;
  rw.axis = *axis;
  rw.useDefaultSpecs = useDefaultSpecs;
  for (const std::string &spec : layerSpecs) {
    auto [role, pattern] = StringRef(spec).split('=');
    auto re = std::make_shared<llvm::Regex>(pattern);
    std::string why;
    if ((role != "column" && role != "row" && role != "skip") || !re->isValid(why)) {
      module.emitError() << "ds-tensor-parallel: layer spec '" << spec
                         << "' is not ROLE=REGEX with ROLE column, row or skip"
                         << (why.empty() ? "" : " (" + why + ")");
      return signalPassFailure();
    }
    rw.rules.emplace_back(role.str(), std::move(re));
  }

  // Candidates: linears whose weight (and bias) are trainable, untied parameters read once.
  llvm::DenseMap<StringAttr, int> reads;
  forward.walk([&](GetParameterOp g) { ++reads[g.getNameAttr().getAttr()]; });
  auto own = [&](Value v) {
    ParameterOp p = parameterOf(v);
    return p && p.getTrainable() && !p.getAliases() && !p.getShardingAttr() &&
           reads.lookup(p.getSymNameAttr()) == 1 && v.hasOneUse() &&
           typeOf(v).getRank() <= 2;
  };
  SmallVector<LinearOp> linears;
  forward.walk([&](LinearOp l) {
    linears.push_back(l);
    if (own(l.getWeight()) && (!l.getBias() || own(l.getBias()))) {
      if (std::string why = rw.keptByRules(parameterOf(l.getWeight()).getSymName());
          !why.empty())
        remarkStaysWhole(l, parameterOf(l.getWeight()).getSymName(), why);
      else
        candidates.insert(l);
    }
  });

  SmallVector<Region> regions;
  // Why each linear that no region takes stays whole: of the regions it was tried in (as the
  // entry or the exit), the one that went furthest, as an op that cannot work on a part
  // tells more than a value used outside; among those, the larger region (an attention block
  // rather than the residual hop from one block's output projection to the next one's input).
  struct Attempt {
    std::string why;
    int reached = 0;
    size_t size = 0;
  };
  llvm::DenseMap<Operation *, Attempt> unsplit;
  auto note = [&](LinearOp l, const Attempt &a) {
    Attempt &best = unsplit[l];
    if (best.why.empty() || std::tie(a.reached, a.size) > std::tie(best.reached, best.size))
      best = a;
  };
  for (LinearOp x : linears) {
    if (!isCandidate(x) || roleOf(x) == "column")
      continue;
    std::string why;
    Region r;
    bool found = succeeded(findRegion(x, r, why));
    if (found && succeeded(propagate(r, why))) {
      rw.assigned.insert(x);
      for (LinearOp e : r.entries)
        rw.assigned.insert(e);
      regions.push_back(std::move(r));
      continue;
    }
    // Only linears that could end a region are worth a remark; its entries share it once
    // the region's ops are known (they lie on the path to the exit).
    if (r.entries.empty())
      continue;
    Attempt a{why, found ? 2 : r.ops.empty() ? 0 : 1, r.ops.size()};
    note(x, a);
    if (a.reached > 0)
      for (LinearOp e : r.entries)
        note(e, a);
  }
  for (LinearOp x : linears)
    if (auto it = unsplit.find(x); it != unsplit.end() && !rw.assigned.contains(x))
      remarkStaysWhole(x, parameterOf(x.getWeight()).getSymName(), it->second.why);
  // A linear the config's rules split by column or row must split.
  bool unmet = false;
  for (LinearOp x : linears) {
    StringRef role = roleOf(x);
    if ((role != "column" && role != "row") || rw.assigned.contains(x))
      continue;
    std::string why = unsplit.lookup(x).why;
    if (why.empty())
      why = !candidates.contains(x) ? "its weight or bias is frozen, tied or read twice"
            : role == "column"      ? "no row-parallel linear ends a region that starts at it"
                                    : "no column-parallel linear starts a region that ends at "
                                      "it";
    x.emitError() << "ds-tensor-parallel: tensor_parallel.partition_config splits '"
                  << parameterOf(x.getWeight()).getSymName() << "' by " << role
                  << ", but ds cannot: " << why
                  << " (change its partition_type, or skip it)";
    unmet = true;
  }
  if (unmet)
    return signalPassFailure();
  for (Region &r : regions)
    rewrite(r, *axis);
  rw.vocabParallel(module, forward);
}

} // namespace
