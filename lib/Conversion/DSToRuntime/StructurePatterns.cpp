//===- StructurePatterns.cpp - collectives, transfers, mesh coordinates, constants ---===//
//
// The upstream shard dialect's collectives run in the runtime group of their grid axes (the
// plan's `group`, a mask of mesh axes) and return an event that the plan waits for; a
// pipeline's send completes before the rank goes on, a receive is waited for at its first use.
// Constants are filled buffers (splats) or bytes borrowed from a global.
//
#include "RuntimeLowering.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::runtime;

namespace {
RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

dsrt_comm_op reductionCode(shard::ReductionKind k) {
  switch (k) {
  case shard::ReductionKind::Sum:
    return DSRT_COMM_SUM;
  case shard::ReductionKind::Max:
    return DSRT_COMM_MAX;
  case shard::ReductionKind::Min:
    return DSRT_COMM_MIN;
  default: // (shard's other reductions: the plan refused them)
    return DSRT_COMM_SUM;
  }
}

struct AllReduceLowering : RuntimeOpPattern<shard::AllReduceOp> {
  using RuntimeOpPattern::RuntimeOpPattern;
  LogicalResult lower(shard::AllReduceOp op, const OpPlan &plan, CallEmitter &e) const override {
    // In place when a slot read used only here goes back to the same slot (a view of it).
    Tensor out = e.place(op.getResult(), plan.results[0]);
    lowering.events[op.getResult()] =
        e.call(fn::dsrt_all_reduce, e.ctx(), e.i32(plan.group), out, e.operand(op.getInput()),
               e.i32(reductionCode(op.getReduction())));
    return success();
  }
};

struct AllGatherLowering : RuntimeOpPattern<shard::AllGatherOp> {
  using RuntimeOpPattern::RuntimeOpPattern;
  LogicalResult lower(shard::AllGatherOp op, const OpPlan &plan, CallEmitter &e) const override {
    // Into a flat buffer whose shard the input is (ZeRO's parameters), or a new tensor.
    Tensor out = e.place(op.getResult(), plan.results[0]);
    lowering.events[op.getResult()] = e.call(fn::dsrt_all_gather, e.ctx(), e.i32(plan.group),
                                             out, e.operand(op.getInput()));
    return success();
  }
};

struct AllToAllLowering : RuntimeOpPattern<shard::AllToAllOp> {
  using RuntimeOpPattern::RuntimeOpPattern;
  LogicalResult lower(shard::AllToAllOp op, const OpPlan &plan, CallEmitter &e) const override {
    Arg<int32_t> group = e.i32(plan.group);
    Tensor out = e.place(op.getResult(), plan.results[0]);
    lowering.events[op.getResult()] =
        e.call(fn::dsrt_all_to_all, e.ctx(), group, out, e.operand(op.getInput()));
    return success();
  }
};

struct ReduceScatterLowering : RuntimeOpPattern<shard::ReduceScatterOp> {
  using RuntimeOpPattern::RuntimeOpPattern;
  LogicalResult lower(shard::ReduceScatterOp op, const OpPlan &plan,
                      CallEmitter &e) const override {
    Tensor out = e.place(op.getResult(), plan.results[0]);
    lowering.events[op.getResult()] =
        e.call(fn::dsrt_reduce_scatter, e.ctx(), e.i32(plan.group), out,
               e.operand(op.getInput()), e.i32(reductionCode(op.getReduction())));
    return success();
  }
};

struct AllSliceLowering : RuntimeOpPattern<shard::AllSliceOp> {
  using RuntimeOpPattern::RuntimeOpPattern;
  LogicalResult lower(shard::AllSliceOp op, const OpPlan &plan, CallEmitter &e) const override {
    // This rank's chunk along dimension 0: a view, no communication.
    RankedTensorType type = typeOf(op.getResult());
    e.bind(op.getResult(),
           e.call(fn::dsrt_comm_chunk, e.ctx(), e.i32(plan.group), e.operand(op.getInput()),
                  e.i32(type.getRank()), e.i64Array(type.getShape())));
    return success();
  }
};

struct MeshCoordinateLowering : RuntimeOpPattern<MeshCoordinateOp> {
  using RuntimeOpPattern::RuntimeOpPattern;
  LogicalResult lower(MeshCoordinateOp op, const OpPlan &plan, CallEmitter &e) const override {
    // This rank's index along the axis (the runtime's mesh mirrors the grid).
    Value coord = e.call(fn::dsrt_comm_coordinate, e.ctx(),
                         e.i32(static_cast<int64_t>(op.getGridAxis())));
    Tensor out = e.place(op.getResult(), plan.results[0]);
    e.call(fn::dsrt_fill, e.ctx(), out,
           Arg<double>(LLVM::SIToFPOp::create(e.b, e.loc, lowering.f64Ty, coord)));
    return success();
  }
};

struct SendLowering : RuntimeOpPattern<shard::SendOp> {
  using RuntimeOpPattern::RuntimeOpPattern;
  LogicalResult lower(shard::SendOp op, const OpPlan &plan, CallEmitter &e) const override {
    // Completed before the rank goes on: its input may be freed right after.
    Event event = e.call(fn::dsrt_send_recv, e.ctx(), e.i32(plan.group), e.null(), e.i32(-1),
                         e.operand(op.getInput()), e.i32(op.getDestination()[0]));
    e.call(fn::dsrt_event_wait, e.ctx(), event);
    e.call(fn::dsrt_event_release, event);
    return success();
  }
};

struct RecvLowering : RuntimeOpPattern<shard::RecvOp> {
  using RuntimeOpPattern::RuntimeOpPattern;
  LogicalResult lower(shard::RecvOp op, const OpPlan &plan, CallEmitter &e) const override {
    Tensor out = e.place(op.getResult(), plan.results[0]);
    lowering.events[op.getResult()] =
        e.call(fn::dsrt_send_recv, e.ctx(), e.i32(plan.group), out, e.i32((*op.getSource())[0]),
               e.null(), e.i32(-1));
    return success();
  }
};

struct ConstantLowering : RuntimeOpPattern<ConstantOp> {
  using RuntimeOpPattern::RuntimeOpPattern;
  LogicalResult lower(ConstantOp c, const OpPlan &plan, CallEmitter &e) const override {
    // A receive's operand only gives its type: nothing to make.
    if (c->hasOneUse() && isa<shard::RecvOp>(*c->getUsers().begin()))
      return success();
    auto attr = cast<DenseElementsAttr>(c.getValue());
    RankedTensorType type = typeOf(c.getResult());
    if (attr.isSplat()) {
      // A filled buffer: a new one, or (ZeRO's gradient zeroing) a slot's buffer itself.
      Tensor t = e.place(c.getResult(), plan.results[0]);
      double v = isa<FloatType>(type.getElementType())
                     ? attr.getSplatValue<APFloat>().convertToDouble()
                     : static_cast<double>(attr.getSplatValue<APInt>().getSExtValue());
      if (type.getElementType().isInteger(1))
        v = attr.getSplatValue<bool>() ? 1.0 : 0.0;
      e.call(fn::dsrt_fill, e.ctx(), t, e.f64(v));
      return success();
    }
    // Bytes in a global, borrowed (not counted in the arena); i1 as bytes.
    DenseElementsAttr data = attr;
    Type elem = type.getElementType();
    if (elem.isInteger(1)) {
      SmallVector<int8_t> bytes;
      for (bool b : attr.getValues<bool>())
        bytes.push_back(b);
      elem = IntegerType::get(c.getContext(), 8);
      data = DenseElementsAttr::get(
          RankedTensorType::get({static_cast<int64_t>(bytes.size())}, elem),
          ArrayRef<int8_t>(bytes));
    } else {
      data = attr.reshape(RankedTensorType::get({type.getNumElements()}, elem));
    }
    Arg<const void *> bytes(lowering.global(e.b, e.loc, data, elem));
    e.bind(c.getResult(), e.call(fn::dsrt_tensor_borrow, e.ctx(), e.dtype(type.getElementType()),
                                 e.i32(type.getRank()), e.i64Array(type.getShape()), bytes));
    return success();
  }
};
} // namespace

void mlir::ds::runtime::populateStructurePatterns(const TypeConverter &types,
                                                  RewritePatternSet &patterns,
                                                  RuntimeLowering &lowering) {
  patterns.add<AllReduceLowering, AllGatherLowering, AllToAllLowering, ReduceScatterLowering,
               AllSliceLowering, MeshCoordinateLowering, SendLowering, RecvLowering,
               ConstantLowering>(types, patterns.getContext(), lowering);
}
