//===- EntryPoints.cpp - ds_init_slots and a pipeline's dispatching entry points ---===//
//
// The driver calls ds_init_slots once, then ds_micro_step and ds_optimizer_step. A pipeline's
// module holds every rank's programs: its slots are defined only on the ranks of their stage,
// and its two entry points call the programs of this rank's pp coordinate.
//
#include "RuntimeLowering.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::runtime;

namespace {
/// `body` runs when `cond` holds; the builder continues after it.
void emitIf(CallEmitter &e, Value cond, llvm::function_ref<void()> body) {
  OpBuilder &b = e.b;
  Region *region = b.getInsertionBlock()->getParent();
  Block *then = new Block(), *rest = new Block();
  region->push_back(then);
  region->push_back(rest);
  LLVM::CondBrOp::create(b, e.loc, cond, then, rest);
  b.setInsertionPointToStart(then);
  body();
  if (then->empty() || !then->back().hasTrait<mlir::OpTrait::IsTerminator>())
    LLVM::BrOp::create(b, e.loc, ValueRange{}, rest);
  b.setInsertionPointToStart(rest);
  e.lowering.emittedSite = -2; // the branch may or may not have named a site
}

/// A new function at the module's end, the builder at its entry, its context argument set.
Block *beginFunction(RuntimeLowering &l, OpBuilder &b, StringRef name, Type result,
                     unsigned args) {
  b.setInsertionPointToEnd(l.module.getBody());
  auto fn = LLVM::LLVMFuncOp::create(
      b, l.module.getLoc(), name,
      LLVM::LLVMFunctionType::get(result, SmallVector<Type>(args, l.ptrTy)));
  Block *entry = fn.addEntryBlock(b);
  b.setInsertionPointToStart(entry);
  l.ctxArg = entry->getArgument(0);
  l.emittedSite = -2;
  return entry;
}

Value isRank(CallEmitter &e, Value coord, int64_t rank) {
  Value r = LLVM::ConstantOp::create(e.b, e.loc, e.lowering.i32Ty, rank);
  return LLVM::ICmpOp::create(e.b, e.loc, LLVM::ICmpPredicate::eq, coord, r);
}
} // namespace

void mlir::ds::runtime::emitInitSlots(RuntimeLowering &l, OpBuilder &b) {
  OpBuilder::InsertionGuard guard(b);
  beginFunction(l, b, "ds_init_slots", l.voidTy, 1);
  CallEmitter e(l, b, l.module.getLoc(), /*site=*/nullptr);
  const MemoryPlan &plan = l.plan;
  // A pipeline rank defines only the slots of its stage.
  Value coord =
      plan.ppAxis >= 0 ? e.call(fn::dsrt_comm_coordinate, e.ctx(), e.i32(plan.ppAxis)) : Value();
  auto onItsRanks = [&](const PlannedSlot &s, llvm::function_ref<void()> define) {
    if (!coord || s.stages.empty() || static_cast<int64_t>(s.stages.size()) == plan.pipelineStages)
      return define();
    Value held;
    for (int64_t r : s.stages) {
      Value is = isRank(e, coord, r);
      held = held ? LLVM::OrOp::create(b, e.loc, held, is).getResult() : is;
    }
    emitIf(e, held, define);
  };
  ArrayRef<PlannedSlot> slots = plan.slots().slots();
  for (auto [i, s] : llvm::enumerate(slots)) {
    if (!s.owned())
      continue;
    onItsRanks(s, [&, i = i, &s = s] {
      RankedTensorType t = s.type;
      if (s.space != MemorySpace::device) // ds-offload's: host memory or the swap file
        e.call(fn::dsrt_slot_define_in, e.ctx(), e.i32(i), e.i32(static_cast<int32_t>(s.space)),
               e.dtype(t.getElementType()), e.i32(t.getRank()), e.i64Array(t.getShape()));
      else
        e.call(fn::dsrt_slot_define, e.ctx(), e.i32(i), e.dtype(t.getElementType()),
               e.i32(t.getRank()), e.i64Array(t.getShape()));
    });
  }
  for (auto [i, s] : llvm::enumerate(slots)) {
    if (s.viewOf < 0)
      continue;
    onItsRanks(s, [&, i = i, &s = s] {
      RankedTensorType t = s.type;
      e.call(fn::dsrt_slot_define_view, e.ctx(), e.i32(i), e.i32(s.viewOf), e.i64(s.offset),
             e.dtype(t.getElementType()), e.i32(t.getRank()), e.i64Array(t.getShape()));
    });
  }
  LLVM::ReturnOp::create(b, e.loc, ValueRange{});
}

void mlir::ds::runtime::emitPipelineEntryPoints(RuntimeLowering &l, OpBuilder &b) {
  OpBuilder::InsertionGuard guard(b);
  const MemoryPlan &plan = l.plan;
  auto dispatch = [&](StringRef name, StringRef target, unsigned nargs, bool returns) {
    Block *entry = beginFunction(l, b, name, returns ? l.ptrTy : l.voidTy, nargs);
    CallEmitter e(l, b, l.module.getLoc(), /*site=*/nullptr);
    Value coord = e.call(fn::dsrt_comm_coordinate, e.ctx(), e.i32(plan.ppAxis));
    for (int64_t r = 0; r < plan.pipelineStages; ++r) {
      emitIf(e, isRank(e, coord, r), [&] {
        auto callee = l.module.lookupSymbol<LLVM::LLVMFuncOp>((target + Twine(r)).str());
        auto c = LLVM::CallOp::create(b, e.loc, callee, entry->getArguments());
        LLVM::ReturnOp::create(b, e.loc, returns ? ValueRange{c.getResult()} : ValueRange{});
      });
    }
    Value none = returns ? LLVM::ZeroOp::create(b, e.loc, l.ptrTy).getResult() : Value();
    LLVM::ReturnOp::create(b, e.loc, returns ? ValueRange{none} : ValueRange{});
  };
  dispatch(entryPointName(kMicroStepName), entryPointName(kPipelineStepPrefix), 2, true);
  dispatch(entryPointName(kOptimizerStepName), entryPointName(kOptimizerStepPrefix), 5,
           false);
}
