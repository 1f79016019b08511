//===- FunctionPatterns.cpp - a step's functions as the runtime's entry points ---===//
//
// A micro-step (or a pipeline rank's step) becomes `ptr (ptr ctx, ptr inputs)`, its arguments
// loaded from the inputs array; an update becomes `void (ptr ctx, ptr lr, ptr step, ptr beta1,
// ptr aux_lr)`; a generation program `void (ptr ctx, ptr inputs, ptr results)`, its results
// stored into the results array. At the return, every transfer still in flight is waited for.
//
#include "RuntimeLowering.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::runtime;

namespace {
struct FuncLowering : OpConversionPattern<func::FuncOp> {
  FuncLowering(const TypeConverter &types, MLIRContext *ctx, RuntimeLowering &lowering)
      : OpConversionPattern(types, ctx), lowering(lowering) {}

  LogicalResult matchAndRewrite(func::FuncOp func, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    const MemoryPlan::PlannedFunction *planned = nullptr;
    for (const MemoryPlan::PlannedFunction &f : lowering.plan.functions())
      if (f.func == func)
        planned = &f;
    if (!planned)
      return rewriter.notifyMatchFailure(func, "not a function of the plan");
    lowering.fn = &lowering.plan.function(func);
    lowering.lowered.clear();
    lowering.emittedSite = -2;
    Type ptr = lowering.ptrTy;
    SmallVector<Type> args = {ptr};
    if (planned->microStep)
      args.push_back(ptr);
    else
      args.append(func.getNumArguments(), ptr);
    if (planned->generation)
      args.push_back(ptr); // the results array
    Type result = func.getNumResults() && !planned->generation ? ptr : lowering.voidTy;
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPointToEnd(lowering.module.getBody());
    auto fn = LLVM::LLVMFuncOp::create(rewriter, func.getLoc(), planned->symbol,
                                       LLVM::LLVMFunctionType::get(result, args));
    Block *entry = rewriter.createBlock(&fn.getBody(), {}, args,
                                        SmallVector<Location>(args.size(), func.getLoc()));
    lowering.ctxArg = entry->getArgument(0);
    // Arguments: inputs owned by the caller (the plan counts them as the caller's).
    SmallVector<Value> casts;
    for (auto [i, arg] : llvm::enumerate(func.getArguments())) {
      Value t;
      if (planned->microStep) {
        Value slot = LLVM::GEPOp::create(rewriter, func.getLoc(), ptr, ptr, entry->getArgument(1),
                                         ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(i)});
        t = LLVM::LoadOp::create(rewriter, func.getLoc(), ptr, slot);
      } else {
        t = entry->getArgument(1 + i);
      }
      lowering.lowered[arg] = t;
      casts.push_back(
          UnrealizedConversionCastOp::create(rewriter, func.getLoc(), arg.getType(), t)
              .getResult(0));
    }
    Block *body = &func.getBody().front();
    rewriter.inlineRegionBefore(func.getBody(), fn.getBody(), fn.getBody().end());
    rewriter.mergeBlocks(body, entry, casts);
    rewriter.eraseOp(func);
    return success();
  }

  RuntimeLowering &lowering;
};

struct ReturnLowering : OpConversionPattern<func::ReturnOp> {
  ReturnLowering(const TypeConverter &types, MLIRContext *ctx, RuntimeLowering &lowering)
      : OpConversionPattern(types, ctx), lowering(lowering) {}

  LogicalResult matchAndRewrite(func::ReturnOp ret, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    const OpPlan &plan = lowering.fn->of(ret);
    CallEmitter e(lowering, rewriter, ret.getLoc(), /*site=*/nullptr);
    e.waitFor(plan.waits);
    e.waitStores(plan.storesWaited);
    SmallVector<Value> results;
    if (isGeneration()) {
      // Into the caller's results array (the function's last argument).
      Value array = ret->getParentOfType<LLVM::LLVMFuncOp>().getArguments().back();
      Type ptr = lowering.ptrTy;
      for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
        Value slot = LLVM::GEPOp::create(rewriter, ret.getLoc(), ptr, ptr, array,
                                         ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(i)});
        LLVM::StoreOp::create(rewriter, ret.getLoc(), lowering.lowered.lookup(v), slot);
      }
    } else if (ret.getNumOperands()) {
      results.push_back(lowering.lowered.lookup(ret.getOperand(0)));
    }
    rewriter.replaceOpWithNewOp<LLVM::ReturnOp>(ret, results);
    return success();
  }

  /// Whether `ret` ends a generation program (the function being converted).
  bool isGeneration() const {
    for (const MemoryPlan::PlannedFunction &f : lowering.plan.functions())
      if (f.func == lowering.fn->owner)
        return f.generation;
    return false;
  }

  RuntimeLowering &lowering;
};
} // namespace

void mlir::ds::runtime::populateFunctionPatterns(const TypeConverter &types,
                                                 RewritePatternSet &patterns,
                                                 RuntimeLowering &lowering) {
  patterns.add<FuncLowering, ReturnLowering>(types, patterns.getContext(), lowering);
}
