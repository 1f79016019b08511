//===- ExpertParallel.cpp - the ds-expert-parallel pass: experts split over ep ranks ---===//
//
// DeepSpeed-MoE's and Megatron's expert parallelism on the imported graph: the experts'
// weights (the parameters that only ds.expert_linear reads) split along their experts over
// the mesh's ep ranks (which also read other samples), and each product becomes route,
// dispatch, the local experts' product, combine (ds.expert_route and its exchanges, whose
// counts the runtime decides each step). Everything else stays data-parallel over dp x ep.
// The gradients follow from dispatch and combine being each other's adjoints; ds-optimizer
// sums an expert's gradient over its replicas only (dp, the expert-data-parallel group).
//
#include "ds/Transforms/Passes.h"

#include "Mesh.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/CSE.h"
#include "llvm/ADT/MapVector.h"

#include <algorithm>

namespace mlir::ds {
#define GEN_PASS_DEF_DSEXPERTPARALLEL
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

constexpr llvm::StringLiteral kPass = "ds-expert-parallel";

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

RankedTensorType withRows(Value v, int64_t rows) {
  SmallVector<int64_t> shape(typeOf(v).getShape());
  shape[0] = rows;
  return RankedTensorType::get(shape, typeOf(v).getElementType());
}

/// The rows a rank can receive: every rank's rows (the dropless worst case), or where a capacity
/// bounds each expert's rows from each rank, all of its experts' (E C: C from each of the G
/// ranks for each of its E / G experts).
int64_t receiveRows(Value ids, int64_t rows, int64_t ranks) {
  if (auto cap = ids.getDefiningOp<ExpertCapacityOp>())
    return std::clamp<int64_t>(cap.getExperts() * cap.getCapacity(), 1, rows * ranks);
  return rows * ranks;
}

/// The values between an expert product's combine and the next product's dispatch along the
/// same plan (a SwiGLU's slices, activation and product, or its ds.swiglu) computed on the
/// experts' rank instead: each row of them reads only that row of the combined rows, so
/// computing them on the received rows and skipping the combine and the dispatch gives the
/// next product the same rows (a row received for no expert has id -1 there, and its product
/// is zero whatever the values). Halves the exchanges of an MLP, and its widest one goes. A
/// ds.swiglu told the route's ids is told the received rows' ids there.
class ExpertSide {
public:
  ExpertSide(ExpertRouteOp route, int64_t rows, int64_t received)
      : plan(route.getPlan()), ids(route.getExpertIds()), rows(rows), received(received) {
    mapped.map(ids, route.getLocalIds());
  }

  /// `v` on the experts' side, cloned at `b`'s point; null where a value is not row by row.
  Value get(Value v, OpBuilder &b) {
    if (Value known = mapped.lookupOrNull(v))
      return known;
    Operation *def = v.getDefiningOp();
    if (auto combine = dyn_cast_or_null<ExpertCombineOp>(def)) {
      if (combine.getPlan() != plan)
        return Value();
      mapped.map(v, combine.getInput());
      return combine.getInput();
    }
    if (!def || def->getNumResults() != 1 || !rowWise(def))
      return Value();
    if (auto act = dyn_cast<SwigluOp>(def); act && act.getRows() && act.getRows() != ids)
      return Value();
    bool reshapes = isa<SliceOp, ReshapeOp, ConvertOp>(def);
    for (Value o : def->getOperands())
      if ((reshapes || rowIndexed(o, v)) && !get(o, b))
        return Value();
    Operation *clone = b.clone(*def, mapped);
    clone->getResult(0).setType(withRows(v, received));
    mapped.map(v, clone->getResult(0));
    return clone->getResult(0);
  }

private:
  /// Ops whose result row n reads row n of their row operands: elementwise ones, conversions,
  /// slices and reshapes that keep the rows.
  bool rowWise(Operation *op) const {
    auto t = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (!t || t.getRank() < 1 || t.getShape()[0] != rows)
      return false;
    if (auto s = dyn_cast<SliceOp>(op))
      return s.getDim() != 0;
    if (auto r = dyn_cast<ReshapeOp>(op))
      return typeOf(r.getInput()).getRank() >= 1 && typeOf(r.getInput()).getShape()[0] == rows;
    return op->hasTrait<OpTrait::ds::WritesOverOperand>() || isa<ConvertOp, SwigluOp>(op);
  }
  /// An operand holding rows (of `result`'s rank and rows), not one broadcast over them.
  bool rowIndexed(Value operand, Value result) const {
    auto t = dyn_cast<RankedTensorType>(operand.getType());
    return t && t.getRank() == typeOf(result).getRank() && t.getRank() >= 1 &&
           t.getShape()[0] == rows;
  }

  Value plan, ids;
  int64_t rows, received;
  IRMapping mapped;
};

struct ExpertParallelPass : mlir::ds::impl::DSExpertParallelBase<ExpertParallelPass> {
  using DSExpertParallelBase::DSExpertParallelBase;
  void runOnOperation() override;
  /// The experts' parameters, checked: read only as expert_linear weights, E divisible by G.
  LogicalResult collectParameters(ModuleOp module, ArrayRef<ExpertLinearOp> products,
                                  int64_t ranks);
  llvm::MapVector<StringAttr, ParameterOp> params;
};

LogicalResult ExpertParallelPass::collectParameters(ModuleOp module,
                                                    ArrayRef<ExpertLinearOp> products,
                                                    int64_t ranks) {
  for (ExpertLinearOp p : products) {
    auto read = p.getWeight().getDefiningOp<GetParameterOp>();
    if (!read)
      return p.emitError() << kPass << ": this product's expert weights are not a parameter "
                           << "read; only the experts' parameters split";
    auto param = module.lookupSymbol<ParameterOp>(read.getNameAttr());
    if (!param)
      return read.emitError() << kPass << ": no ds.parameter " << read.getNameAttr();
    if (param.getShardingAttr())
      return param.emitError() << kPass << ": '" << param.getSymName()
                               << "' is already split (" << param.getShardingAttr() << ")";
    int64_t experts = param.getTensorType().getShape()[0];
    if (experts % ranks != 0)
      return param.emitError() << kPass << ": '" << param.getSymName() << "' holds " << experts
                               << " experts, which do not split evenly over " << ranks
                               << " ranks; choose an expert_parallel.autoep_size that divides "
                               << experts;
    params.insert({param.getSymNameAttr(), param});
  }
  // Every read of a split parameter feeds only the experts' products, as their weight.
  WalkResult r = module.walk([&](GetParameterOp read) {
    if (!params.count(read.getNameAttr().getAttr()))
      return WalkResult::advance();
    for (OpOperand &use : read.getResult().getUses()) {
      auto p = dyn_cast<ExpertLinearOp>(use.getOwner());
      if (!p || use.get() != p.getWeight() || use.getOperandNumber() != 1) {
        use.getOwner()->emitError()
            << kPass << ": '" << read.getName() << "' is read here besides the experts' "
            << "products, so it cannot be split over the experts' ranks";
        return WalkResult::interrupt();
      }
    }
    return WalkResult::advance();
  });
  return failure(r.wasInterrupted());
}

void ExpertParallelPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (expertParallelSize == 1)
    return;
  if (expertParallelSize < 1) {
    module.emitError() << kPass << ": expert-parallel-size must be >= 1";
    return signalPassFailure();
  }
  auto forward = module.lookupSymbol<func::FuncOp>(kForwardName);
  if (!forward) {
    module.emitError() << kPass << " needs @forward (the imported model)";
    return signalPassFailure();
  }
  // Standalone, a mesh of expert-parallel-size ranks, all of them expert-parallel; in the
  // training pipeline the config's mesh (dp x ep).
  if (!getMesh(module))
    module->setAttr(kMeshAttrName, buildMesh(module.getContext(), expertParallelSize, 1, 1, 1,
                                             expertParallelSize));
  MeshAttr mesh = getMesh(module);
  if (mesh.getSize(MeshAxis::ep) != expertParallelSize) {
    module.emitError() << kPass << ": expert-parallel-size "
                       << static_cast<int64_t>(expertParallelSize) << " but the module's mesh "
                       << mesh.str() << " has " << mesh.getSize(MeshAxis::ep)
                       << " ep ranks (ds-opt --config makes the mesh from "
                          "expert_parallel.autoep_size)";
    return signalPassFailure();
  }
  FailureOr<MeshAxisRef> ep = getMeshAxis(module, MeshAxis::ep, kPass);
  if (failed(ep))
    return signalPassFailure();
  const int64_t ranks = ep->size;
  // HF's experts compute each product's ids anew (the same wrap of the router's choices):
  // merged first, so that one route serves a layer's products and its SwiGLU stays on the
  // experts' side between them.
  {
    IRRewriter rewriter(module.getContext());
    DominanceInfo dominance(forward);
    eliminateCommonSubExpressions(rewriter, dominance, forward);
  }
  SmallVector<ExpertLinearOp> products;
  forward.walk([&](ExpertLinearOp p) { products.push_back(p); });
  if (products.empty()) {
    module.emitError() << kPass << ": @forward has no routed experts (ds.expert_linear) to "
                          "split; expert parallelism needs a mixture-of-experts model "
                          "(docs/importer/supported-ops.md says which forms import)";
    return signalPassFailure();
  }
  if (failed(collectParameters(module, products, ranks)))
    return signalPassFailure();

  MLIRContext *ctx = module.getContext();
  OpBuilder b(ctx);
  auto grid = FlatSymbolRefAttr::get(ctx, ep->grid);
  auto axes = b.getDenseI16ArrayAttr(ep->axes());
  llvm::DenseMap<Value, ExpertRouteOp> routes;
  for (ExpertLinearOp p : products) {
    Value ids = p.getExpertIds(), w = p.getWeight();
    const int64_t rows = typeOf(ids).getShape()[0];
    const int64_t experts = typeOf(w).getShape()[0];
    const int64_t received = receiveRows(ids, rows, ranks);
    ExpertRouteOp &route = routes[ids];
    if (!route) {
      b.setInsertionPointAfterValue(ids);
      auto plan = RankedTensorType::get({rows + 2 * ranks}, b.getI64Type());
      route = ExpertRouteOp::create(b, p.getLoc(), plan, withRows(ids, received), ids,
                                    b.getI64IntegerAttr(experts), grid, axes);
    } else if (route.getExperts() != experts) {
      p.emitError() << kPass << ": products routed by the same ids have " << experts
                    << " and " << route.getExperts() << " experts";
      return signalPassFailure();
    }
    b.setInsertionPoint(p);
    Value x = p.getInput(), plan = route.getPlan();
    // The input computed row by row from an earlier product's combine along this plan: on
    // the experts' side, with no exchange.
    Value sent = ExpertSide(route, rows, received).get(x, b);
    if (!sent)
      sent = ExpertDispatchOp::create(b, p.getLoc(), withRows(x, received), x, plan, grid,
                                      axes);
    Value local = ExpertLinearOp::create(b, p.getLoc(), withRows(p.getResult(), received),
                                         sent, w, route.getLocalIds(), p.getTransposedAttr());
    Value back = ExpertCombineOp::create(b, p.getLoc(), typeOf(p.getResult()), local, plan,
                                         grid, axes);
    p.getResult().replaceAllUsesWith(back);
    p.erase();
  }
  // What the experts' side made dead on the tokens' side (combines, the chains after them).
  SmallVector<Operation *> ops;
  forward.walk([&](Operation *op) { ops.push_back(op); });
  for (Operation *op : llvm::reverse(ops)) // users before what they read
    if (op->getNumResults() > 0 && op->use_empty() && op->getNumRegions() == 0 &&
        isMemoryEffectFree(op))
      op->erase();

  // Each rank holds its experts: dimension 0 split over ep, the state_dict names kept.
  for (auto &[name, param] : params) {
    RankedTensorType t = param.getTensorType();
    SmallVector<int64_t> shape(t.getShape());
    shape[0] /= ranks;
    auto part = RankedTensorType::get(shape, t.getElementType());
    SmallVector<Attribute> dims(t.getRank(), ArrayAttr::get(ctx, {}));
    dims[0] = ArrayAttr::get(ctx, {StringAttr::get(ctx, stringifyMeshAxis(MeshAxis::ep))});
    param.setType(part);
    param.setShardingAttr(ShardingAttr::get(ctx, ArrayAttr::get(ctx, dims)));
    module.walk([&](GetParameterOp g) {
      if (g.getNameAttr().getAttr() == name)
        g.getResult().setType(part);
    });
  }
}

} // namespace
