//===- RuntimeLowering.cpp - the patterns' shared state and call emission ---===//
#include "RuntimeLowering.h"

#include "llvm/Support/Path.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::runtime;

RuntimeLowering::RuntimeLowering(ModuleOp module, const MemoryPlan &plan)
    : module(module), plan(plan) {
  MLIRContext *ctx = module.getContext();
  ptrTy = LLVM::LLVMPointerType::get(ctx);
  i32Ty = IntegerType::get(ctx, 32);
  i64Ty = IntegerType::get(ctx, 64);
  f64Ty = Float64Type::get(ctx);
  voidTy = LLVM::LLVMVoidType::get(ctx);
}

LLVM::LLVMFuncOp RuntimeLowering::declare(OpBuilder &b, StringRef name,
                                          LLVM::LLVMFunctionType type) {
  LLVM::LLVMFuncOp &fn = funcs[name];
  if (!fn) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    fn = LLVM::LLVMFuncOp::create(b, module.getLoc(), name, type);
    fn.setLinkage(LLVM::Linkage::External);
  }
  return fn;
}

Value RuntimeLowering::materialize(OpBuilder &b, Location loc, const Operand &o) {
  if (o.value)
    return o.value;
  if (auto i = dyn_cast<IntegerAttr>(o.constant))
    return LLVM::ConstantOp::create(b, loc, i.getType(), i);
  if (auto f = dyn_cast<FloatAttr>(o.constant))
    return LLVM::ConstantOp::create(b, loc, f.getType(), f);
  if (isa<UnitAttr>(o.constant))
    return LLVM::ZeroOp::create(b, loc, ptrTy);
  auto attr = cast<DenseElementsAttr>(o.constant);
  LLVM::GlobalOp &g = arrays[attr];
  if (!g) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    g = LLVM::GlobalOp::create(b, module.getLoc(),
                               LLVM::LLVMArrayType::get(i64Ty, attr.getNumElements()),
                               /*isConstant=*/true, LLVM::Linkage::Internal,
                               ("__ds_i64_" + Twine(globals++)).str(), attr);
  }
  return LLVM::AddressOfOp::create(b, loc, g);
}

Value RuntimeLowering::global(OpBuilder &b, Location loc, DenseElementsAttr data,
                              Type element) {
  LLVM::GlobalOp g;
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    g = LLVM::GlobalOp::create(b, module.getLoc(),
                               LLVM::LLVMArrayType::get(element, data.getNumElements()), true,
                               LLVM::Linkage::Internal, ("__ds_const_" + Twine(globals++)).str(),
                               data);
  }
  return LLVM::AddressOfOp::create(b, loc, g);
}

int RuntimeLowering::siteOf(Operation *op) {
  if (!op)
    return -1;
  if (auto it = siteOfOp.find(op); it != siteOfOp.end())
    return it->second;
  // The last file location: the model's line where the importer fused it after a library
  // line (torch.nn's code, inlined).
  std::string where;
  op->getLoc()->walk([&](Location l) {
    if (auto flc = dyn_cast<FileLineColLoc>(l))
      where = (llvm::sys::path::filename(flc.getFilename().getValue()) + ":" +
               Twine(flc.getLine()))
                  .str();
    return WalkResult::advance();
  });
  std::string name = op->getName().getStringRef().str() + (where.empty() ? "" : " " + where);
  auto [it, inserted] = siteIndex.try_emplace(name, static_cast<int>(sites.size()));
  if (inserted)
    sites.push_back(name);
  return siteOfOp[op] = it->second;
}

// --- one op's calls ---------------------------------------------------------------------------

Value CallEmitter::emitCall(StringRef name, LLVM::LLVMFunctionType type,
                            ArrayRef<Operand> operands) {
  SmallVector<Value> args;
  for (const Operand &o : operands)
    args.push_back(lowering.materialize(b, loc, o));
  if ((site || lowering.emittedSite >= 0) && name != fn::dsrt_trace_site.name) {
    int s = lowering.siteOf(site);
    if (s != lowering.emittedSite) {
      lowering.emittedSite = s;
      call(fn::dsrt_trace_site, ctx(), i32(s));
    }
  }
  auto c = LLVM::CallOp::create(b, loc, lowering.declare(b, name, type), args);
  return c.getNumResults() ? c.getResult() : Value();
}

Tensor CallEmitter::operand(Value v) {
  return v ? Tensor(lowering.lowered.lookup(v)) : Tensor(null());
}

Arg<int32_t> CallEmitter::dtype(Type element) {
  return i32(dtypeCodeOf(element)); // the plan refused a type the runtime does not store
}

Tensor CallEmitter::alloc(RankedTensorType type, bool host) {
  if (host) // the host optimizer's work: host memory, not the arena
    return call(fn::dsrt_tensor_alloc_host, ctx(), dtype(type.getElementType()),
                i32(type.getRank()), i64Array(type.getShape()));
  return call(fn::dsrt_tensor_alloc, ctx(), dtype(type.getElementType()), i32(type.getRank()),
              i64Array(type.getShape()));
}

Tensor CallEmitter::view(Tensor of, RankedTensorType type) {
  return call(fn::dsrt_tensor_view, ctx(), of, i32(type.getRank()), i64Array(type.getShape()));
}

Tensor CallEmitter::place(Value result, const Placement &p) {
  auto type = cast<RankedTensorType>(result.getType());
  switch (p.kind) {
  case Placement::Alloc:
  case Placement::AllocHost:
    return bind(result, alloc(type, p.kind == Placement::AllocHost));
  case Placement::ViewOf:
    return bind(result, view(operand(p.source), type));
  case Placement::SlotValue:
    return bind(result, call(fn::dsrt_slot_get, ctx(), i32(p.slot)));
  case Placement::None:
  case Placement::Op:
    break;
  }
  return Tensor(null());
}

void CallEmitter::waitFor(ArrayRef<EventWait> waits) {
  for (const EventWait &w : waits) {
    Event event(lowering.events.lookup(w.value));
    call(fn::dsrt_event_wait, ctx(), event);
    call(fn::dsrt_event_release, event);
    for (Value chained : w.alsoRelease)
      call(fn::dsrt_event_release, Event(lowering.events.lookup(chained)));
    for (Value chained : w.alsoRelease)
      lowering.events.erase(chained);
    lowering.events.erase(w.value);
  }
}

void CallEmitter::waitStores(unsigned count) {
  for (unsigned i = 0; i < count; ++i) {
    Event event(lowering.stores.front());
    lowering.stores.pop_front();
    call(fn::dsrt_event_wait, ctx(), event);
    call(fn::dsrt_event_release, event);
  }
}

void CallEmitter::free(ArrayRef<Value> values) {
  for (Value v : values)
    call(fn::dsrt_tensor_free, ctx(), operand(v));
}

Tensor CallEmitter::temporary(RankedTensorType type, Operation *op) {
  return alloc(type, op->hasAttr(kOnHostAttrName));
}

void CallEmitter::releaseTemporary(Tensor t) { call(fn::dsrt_tensor_free, ctx(), t); }
