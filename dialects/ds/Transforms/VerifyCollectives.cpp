//===- VerifyCollectives.cpp - every rank issues the same collectives --------===//
//
// A collective that one rank issues and another does not (or issues with another shape, dtype
// or order) hangs the job at run time. This pass rules that out at compile time: for every rank
// of each grid it lists the collectives that rank runs, in program order, following control
// flow whose condition it can evaluate for that rank (from shard.process_linear_index /
// process_multi_index and arith on constants), and compares each rank's list with rank 0's.
// Control flow whose condition is neither rank-derived nor constant must issue the same
// collectives on both sides, since ranks may take different sides.
//
#include "ds/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "llvm/ADT/SmallString.h"

#include <map>
#include <optional>

namespace mlir::ds {
#define GEN_PASS_DEF_DSVERIFYCOLLECTIVES
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {
bool isCollective(Operation *op) {
  return isa<shard::AllGatherOp, shard::AllReduceOp, shard::AllSliceOp, shard::AllToAllOp,
             shard::BroadcastOp, shard::GatherOp, shard::RecvOp, shard::ReduceOp,
             shard::ReduceScatterOp, shard::ScatterOp, shard::SendOp, shard::ShiftOp,
             RingAttentionOp, RingAttentionGradOp, ExpertRouteOp, ExpertDispatchOp,
             ExpertCombineOp>(op);
}

/// What must match between ranks: the op's name, attributes (grid, axes, reduction, ...) and
/// operand and result types.
std::string signature(Operation *op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << op->getName() << " " << op->getAttrDictionary() << " : (";
  llvm::interleaveComma(op->getOperandTypes(), os);
  os << ") -> (";
  llvm::interleaveComma(op->getResultTypes(), os);
  os << ")";
  return s;
}

std::string locString(Location loc) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << loc;
  return s;
}

std::string describe(Operation *op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << op->getName() << " ";
  llvm::interleaveComma(op->getOperandTypes(), os);
  os << " -> ";
  llvm::interleaveComma(op->getResultTypes(), os);
  os << " at " << op->getLoc();
  return s;
}

/// Rank `rank`'s index along axis `axis` of a grid of `shape` (row-major).
int64_t coordinate(int64_t rank, ArrayRef<int64_t> shape, int64_t axis) {
  for (int64_t a = static_cast<int64_t>(shape.size()) - 1; a > axis; --a)
    rank /= shape[a];
  return rank % shape[axis];
}

/// The group a collective runs in, as a key shared by its members: its grid, its axes (none:
/// all of them) and this rank's indices along the other axes. `name` says it for messages.
std::string groupOf(Operation *op, ModuleOp module, int64_t rank, std::string &name) {
  auto gridAttr = op->getAttrOfType<FlatSymbolRefAttr>("grid");
  auto grid = gridAttr ? module.lookupSymbol<shard::GridOp>(gridAttr) : nullptr;
  auto axesAttr = op->getAttrOfType<DenseI16ArrayAttr>("grid_axes");
  if (!grid) {
    name = "the world";
    return "";
  }
  ArrayRef<int64_t> shape = grid.getShape();
  llvm::SmallDenseSet<int64_t> axes;
  if (axesAttr)
    for (int16_t a : axesAttr.asArrayRef())
      axes.insert(a);
  std::string key = grid.getSymName().str() + ":";
  for (int64_t a = 0; a < static_cast<int64_t>(shape.size()); ++a)
    if (axes.empty() || axes.contains(a))
      key += std::to_string(a) + ",";
  name.clear();
  std::string others;
  for (int64_t a = 0; a < static_cast<int64_t>(shape.size()); ++a) {
    if (axes.empty() || axes.contains(a)) {
      name += (name.empty() ? "" : ", ") + std::to_string(a);
      continue;
    }
    int64_t c = coordinate(rank, shape, a);
    key += "|" + std::to_string(c);
    others += (others.empty() ? "" : ", ") + std::string("axis ") + std::to_string(a) + " = " +
              std::to_string(c);
  }
  name = "the group of @" + grid.getSymName().str() + " axes [" + name + "]" +
         (others.empty() ? "" : " at " + others);
  return key;
}

bool containsCollective(Region &r) {
  bool found = false;
  r.walk([&](Operation *op) {
    if (isCollective(op))
      found = true;
  });
  return found;
}

struct Tracer {
  int64_t rank;
  ModuleOp module;
  std::vector<Operation *> sequence;
  std::string error;
  Operation *errorOp = nullptr;
  llvm::SmallPtrSet<Operation *, 8> calling;
  /// Whether the trace read this rank's index (else every rank's trace is this one).
  bool rankDependent = false;

  /// The integer value of `v` on this rank, when it can be computed.
  std::optional<int64_t> eval(Value v) {
    Operation *d = v.getDefiningOp();
    if (!d)
      return std::nullopt;
    if (auto c = dyn_cast<arith::ConstantOp>(d))
      if (auto i = dyn_cast<IntegerAttr>(c.getValue()))
        return i.getValue().getSExtValue();
    if (isa<shard::ProcessLinearIndexOp>(d)) {
      rankDependent = true;
      return rank;
    }
    if (auto m = dyn_cast<shard::ProcessMultiIndexOp>(d)) {
      rankDependent = true;
      // The rank's index along one axis of the grid (row-major, the last axis fastest).
      auto grid = module.lookupSymbol<shard::GridOp>(m.getGrid());
      if (!grid)
        return std::nullopt;
      ArrayRef<int64_t> shape = grid.getShape();
      SmallVector<int64_t> axes;
      for (int16_t a : m.getAxes())
        axes.push_back(a);
      if (axes.empty())
        for (int64_t a = 0; a < static_cast<int64_t>(shape.size()); ++a)
          axes.push_back(a);
      return coordinate(rank, shape, axes[cast<OpResult>(v).getResultNumber()]);
    }
    if (isa<arith::IndexCastOp, arith::ExtSIOp, arith::ExtUIOp, arith::TruncIOp>(d))
      return eval(d->getOperand(0));
    if (auto s = dyn_cast<arith::SelectOp>(d)) {
      auto c = eval(s.getCondition());
      return c ? eval(*c ? s.getTrueValue() : s.getFalseValue()) : std::nullopt;
    }
    if (d->getNumOperands() != 2)
      return std::nullopt;
    auto a = eval(d->getOperand(0)), b = eval(d->getOperand(1));
    if (!a || !b)
      return std::nullopt;
    if (isa<arith::AddIOp>(d))
      return *a + *b;
    if (isa<arith::SubIOp>(d))
      return *a - *b;
    if (isa<arith::MulIOp>(d))
      return *a * *b;
    if (isa<arith::DivSIOp, arith::DivUIOp>(d) && *b != 0)
      return *a / *b;
    if (isa<arith::RemSIOp, arith::RemUIOp>(d) && *b != 0)
      return *a % *b;
    if (isa<arith::AndIOp>(d))
      return *a & *b;
    if (isa<arith::OrIOp>(d))
      return *a | *b;
    if (isa<arith::XOrIOp>(d))
      return *a ^ *b;
    if (auto c = dyn_cast<arith::CmpIOp>(d)) {
      switch (c.getPredicate()) {
      case arith::CmpIPredicate::eq:
        return *a == *b;
      case arith::CmpIPredicate::ne:
        return *a != *b;
      case arith::CmpIPredicate::slt:
      case arith::CmpIPredicate::ult:
        return *a < *b;
      case arith::CmpIPredicate::sle:
      case arith::CmpIPredicate::ule:
        return *a <= *b;
      case arith::CmpIPredicate::sgt:
      case arith::CmpIPredicate::ugt:
        return *a > *b;
      case arith::CmpIPredicate::sge:
      case arith::CmpIPredicate::uge:
        return *a >= *b;
      }
    }
    return std::nullopt;
  }

  bool fail(Operation *op, const Twine &msg) {
    if (error.empty()) {
      error = msg.str();
      errorOp = op;
    }
    return false;
  }

  /// The collectives of a region whose condition is not known: both sides must agree.
  bool sameOnAllPaths(Operation *op, ArrayRef<Region *> regions) {
    std::vector<std::vector<Operation *>> seqs;
    for (Region *r : regions) {
      Tracer sub{rank, module, {}, {}, nullptr, calling};
      bool ok = sub.block(r->empty() ? nullptr : &r->front());
      rankDependent |= sub.rankDependent;
      if (!ok)
        return fail(sub.errorOp, sub.error);
      seqs.push_back(sub.sequence);
    }
    for (size_t i = 1; i < seqs.size(); ++i) {
      bool same = seqs[i].size() == seqs[0].size();
      for (size_t k = 0; same && k < seqs[0].size(); ++k)
        same = signature(seqs[i][k]) == signature(seqs[0][k]);
      if (!same) {
        Operation *first = !seqs[0].empty() ? seqs[0][0] : !seqs[i].empty() ? seqs[i][0] : op;
        return fail(first, "ds-verify-collectives: " + describe(first) +
                               " is under a condition (" + op->getName().getStringRef() + " at " +
                               locString(op->getLoc()) +
                               ") that can differ between ranks and whose branches issue "
                               "different collectives; issue the same collectives on every "
                               "path");
      }
    }
    sequence.insert(sequence.end(), seqs[0].begin(), seqs[0].end());
    return true;
  }

  bool block(Block *b) {
    if (!b)
      return true;
    for (Operation &op : *b)
      if (!visit(&op))
        return false;
    return true;
  }

  bool visit(Operation *op) {
    if (isCollective(op)) {
      sequence.push_back(op);
      return true;
    }
    if (auto i = dyn_cast<scf::IfOp>(op)) {
      if (auto c = eval(i.getCondition()))
        return block(*c ? &i.getThenRegion().front()
                        : (i.getElseRegion().empty() ? nullptr : &i.getElseRegion().front()));
      return sameOnAllPaths(op, {&i.getThenRegion(), &i.getElseRegion()});
    }
    if (auto s = dyn_cast<scf::IndexSwitchOp>(op)) {
      if (auto c = eval(s.getArg())) {
        for (auto [k, v] : llvm::enumerate(s.getCases()))
          if (v == *c)
            return block(&s.getCaseRegions()[k].front());
        return block(&s.getDefaultRegion().front());
      }
      SmallVector<Region *> rs = {&s.getDefaultRegion()};
      for (Region &r : s.getCaseRegions())
        rs.push_back(&r);
      return sameOnAllPaths(op, rs);
    }
    if (auto f = dyn_cast<scf::ForOp>(op)) {
      if (!containsCollective(f.getRegion()))
        return true;
      auto lb = eval(f.getLowerBound()), ub = eval(f.getUpperBound()), st = eval(f.getStep());
      if (!lb || !ub || !st || *st <= 0)
        return fail(op, "ds-verify-collectives: a loop at " +
                            locString(op->getLoc()) +
                            " issues collectives but its trip count is not known at compile "
                            "time; give it constant bounds");
      for (int64_t it = *lb; it < *ub; it += *st)
        if (!block(f.getBody()))
          return false;
      return true;
    }
    if (auto call = dyn_cast<func::CallOp>(op)) {
      auto callee = module.lookupSymbol<func::FuncOp>(call.getCallee());
      if (!callee || callee.isExternal() || calling.contains(callee))
        return true;
      calling.insert(callee);
      bool ok = block(&callee.getBody().front());
      calling.erase(callee);
      return ok;
    }
    for (Region &r : op->getRegions())
      if (containsCollective(r))
        return fail(op, "ds-verify-collectives: collectives inside " +
                            op->getName().getStringRef() +
                            " cannot be checked; use scf.if, scf.index_switch or scf.for");
    return true;
  }
};

struct VerifyCollectivesPass
    : mlir::ds::impl::DSVerifyCollectivesBase<VerifyCollectivesPass> {
  void runOnOperation() override;
};
} // namespace

void VerifyCollectivesPass::runOnOperation() {
  ModuleOp module = getOperation();
  // The group: the largest grid (every grid of a ds program spans the same ranks).
  int64_t ranks = 1;
  for (auto grid : module.getOps<shard::GridOp>()) {
    int64_t n = 1;
    for (int64_t d : grid.getShape())
      n = ShapedType::isDynamic(d) ? n : n * d;
    ranks = std::max(ranks, n);
  }
  bool failed = false;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isExternal())
      continue;
    std::vector<std::vector<Operation *>> seqs;
    for (int64_t r = 0; r < ranks && !failed; ++r) {
      Tracer t{r, module, {}, {}, nullptr, {}};
      t.calling.insert(func);
      if (!t.block(&func.getBody().front())) {
        t.errorOp->emitError() << t.error;
        failed = true;
        break;
      }
      seqs.push_back(std::move(t.sequence));
      // A trace that never read the rank's index is every rank's: each member of each group
      // then issues that group's collectives of the one sequence, in its order (a group's
      // members agree on the op's grid, axes and their coordinates off those axes), so they
      // match without comparing (straight-line programs at a thousand ranks).
      if (!t.rankDependent)
        break;
    }
    if (failed)
      break;
    if (seqs.size() == 1 && ranks > 1)
      continue;
    // Within each group, every member issues the same collectives of that group in the same
    // order (each group has its own queue, so the order between groups does not matter).
    struct Group {
      std::string name;
      std::map<int64_t, std::vector<Operation *>> members; // rank -> its collectives
    };
    std::map<std::string, Group> groups;
    for (int64_t r = 0; r < (int64_t)seqs.size(); ++r)
      for (Operation *op : seqs[r]) {
        std::string name;
        std::string key = groupOf(op, module, r, name);
        Group &g = groups[key];
        g.name = name;
        g.members[r].push_back(op);
      }
    // Every rank of a group is a member even where it issues none of its collectives.
    for (auto &[key, g] : groups) {
      Operation *any = g.members.begin()->second.front();
      for (int64_t r = 0; r < (int64_t)seqs.size(); ++r) {
        std::string unused;
        if (groupOf(any, module, r, unused) == key)
          g.members[r]; // ranks that issue nothing in it
      }
    }
    // Ranks mostly issue the same ops (one program on every rank): those match without
    // printing; each other op's signature is printed once.
    llvm::DenseMap<Operation *, std::string> signatures;
    auto signatureOf = [&](Operation *op) -> const std::string & {
      auto [it, added] = signatures.try_emplace(op);
      if (added)
        it->second = signature(op);
      return it->second;
    };
    for (auto &[key, g] : groups) {
      const auto &[first, a] = *g.members.begin();
      for (const auto &[r, b] : g.members) {
        for (size_t k = 0; k < std::max(a.size(), b.size()) && !failed; ++k) {
          Operation *x = k < a.size() ? a[k] : nullptr, *y = k < b.size() ? b[k] : nullptr;
          if (x && y && (x == y || signatureOf(x) == signatureOf(y)))
            continue;
          Operation *at = y ? y : x;
          InFlightDiagnostic d = at->emitError();
          d << "ds-verify-collectives: in @" << func.getSymName() << ", ranks " << first
            << " and " << r << " of " << g.name << " diverge at its collective #" << (k + 1)
            << ": rank " << first << " issues " << (x ? describe(x) : std::string("none"))
            << " but rank " << r << " issues " << (y ? describe(y) : std::string("none"))
            << "; every rank of a group must issue the group's collectives in the same order "
               "with the same kind, shape and dtype, or the job hangs";
          failed = true;
        }
        if (failed)
          break;
      }
      if (failed)
        break;
    }
    if (failed)
      break;
  }
  if (failed)
    signalPassFailure();
}
