//===- DeriveGeneration.cpp - ds-derive-generation: a forward as prefill or decode ---===//
//
// A causal LM's imported forward `(input_ids, [attention_mask,] position_ids) -> logits`
// becomes a generation program over a paged key/value cache: every attention writes its keys
// and values to its layer's cache and attends to the sequence's cached positions; the logits
// of each sequence's last real token are kept and its next token chosen on the device. The
// rest of the forward (embeddings, rotary tables from position_ids, norms, MLPs) is the
// model's own, unchanged.
//
#include "ds/Transforms/Passes.h"

#include "RepeatedHeads.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSDERIVEGENERATION
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {
RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// The program's inputs after the model's own two, in order: name, and whether it is one
/// per token ([B, T]), the page table ([B, max pages]) or one per sequence ([B]) of i64 or
/// f32.
struct NewInput {
  const char *name;
  enum Shape { PerToken, PageTable, PerSequence } shape;
  bool f32;
};
constexpr NewInput kNewInputs[] = {
    {"slots", NewInput::PerToken, false},        {"pages", NewInput::PageTable, false},
    {"context_lens", NewInput::PerSequence, false}, {"q_lens", NewInput::PerSequence, false},
    {"temperature", NewInput::PerSequence, true}, {"top_k", NewInput::PerSequence, false},
    {"top_p", NewInput::PerSequence, true},       {"seeds", NewInput::PerSequence, false},
    {"steps", NewInput::PerSequence, false},
};

struct DeriveGenerationPass : mlir::ds::impl::DSDeriveGenerationBase<DeriveGenerationPass> {
  using DSDeriveGenerationBase::DSDeriveGenerationBase;
  void runOnOperation() override;

  /// The state `name` of `type` (role kv_cache), created before the first function; one
  /// that exists must have that type (the module's other program made it).
  LogicalResult cacheState(ModuleOp module, StringRef name, RankedTensorType type,
                           Location loc);
};

LogicalResult DeriveGenerationPass::cacheState(ModuleOp module, StringRef name,
                                               RankedTensorType type, Location loc) {
  if (auto existing = module.lookupSymbol<StateOp>(name)) {
    if (existing.getRole() == SlotRole::kv_cache && existing.getType() == type)
      return success();
    return emitError(loc) << "ds-derive-generation: the module's state @\"" << name
                          << "\" is not the cache this program needs, " << type
                          << " (derive the programs with the same pages and page size)";
  }
  if (module.lookupSymbol(name))
    return emitError(loc) << "ds-derive-generation: the name @\"" << name
                          << "\" is taken by another symbol";
  OpBuilder b(module.getContext());
  b.setInsertionPointToStart(module.getBody());
  func::FuncOp first = *module.getOps<func::FuncOp>().begin();
  b.setInsertionPoint(first);
  StateOp::create(b, loc, name, FlatSymbolRefAttr(), SlotRole::kv_cache, type);
  return success();
}

/// Erases `f`'s ops that compute only what nobody reads (the dropped attentions' masks, the
/// logits rows no sequence keeps, the attention_mask's uses).
void eraseDeadOps(func::FuncOp f) {
  bool changed = true;
  while (changed) {
    changed = false;
    SmallVector<Operation *> ops;
    for (Operation &op : f.getBody().front())
      ops.push_back(&op);
    for (Operation *op : llvm::reverse(ops))
      if (op->use_empty() && isMemoryEffectFree(op) && !op->hasTrait<OpTrait::IsTerminator>()) {
        op->erase();
        changed = true;
      }
  }
}

void DeriveGenerationPass::runOnOperation() {
  ModuleOp module = getOperation();
  MLIRContext *ctx = &getContext();
  auto fail = [&](Operation *at, const Twine &msg) {
    emitError(at->getLoc()) << "ds-derive-generation: " << msg;
    signalPassFailure();
  };
  if (name != kPrefillName && name != kDecodeName)
    return fail(module, "name=" + name + " is not a generation program's: prefill or decode");
  if (pages <= 0 || pageSize <= 0 || maxPages <= 0)
    return fail(module, "needs pages, page-size and max-pages > 0 (the cache's pages, the "
                        "positions per page and the pages one sequence can hold)");
  auto f = module.lookupSymbol<func::FuncOp>(kForwardName);
  if (!f)
    return fail(module, "needs @forward, a causal LM's forward as ds-opt imports it");
  if (module.lookupSymbol(name))
    return fail(f, "the module already has @" + name);

  // The logits [B, T, V].
  auto resultType = f.getNumResults() == 1
                        ? dyn_cast<RankedTensorType>(f.getResultTypes()[0])
                        : RankedTensorType();
  if (!resultType || resultType.getRank() != 3 ||
      !isa<FloatType>(resultType.getElementType()))
    return fail(f, "@forward must return the logits [batch, tokens, vocabulary] alone (export "
                   "the model's logits, not a loss or a tuple)");
  RankedTensorType logitsType = resultType;
  const int64_t B = logitsType.getDimSize(0), T = logitsType.getDimSize(1),
                V = logitsType.getDimSize(2);

  // The inputs by name: input_ids and position_ids [B, T] kept, attention_mask dropped.
  Block &body = f.getBody().front();
  Value ids, positions, mask;
  for (BlockArgument a : body.getArguments()) {
    auto n = f.getArgAttrOfType<StringAttr>(a.getArgNumber(), kInputNameAttrName);
    if (!n)
      return fail(f, "argument #" + Twine(a.getArgNumber()) +
                         " has no ds.input_name (import the model with ds-opt, which names "
                         "each input)");
    StringRef argName = n.getValue();
    Value *into = argName == "input_ids"        ? &ids
                  : argName == "position_ids"   ? &positions
                  : argName == "attention_mask" ? &mask
                                                : nullptr;
    if (!into)
      return fail(f, "input '" + argName +
                         "' is not one a generation program takes (input_ids, position_ids "
                         "and attention_mask)");
    auto t = typeOf(a);
    if (t.getShape() != ArrayRef<int64_t>{B, T} || !t.getElementType().isInteger(64))
      return fail(f, "input '" + argName + "' must be i64 [" + Twine(B) + ", " + Twine(T) +
                         "], as the logits' batch and tokens");
    *into = a;
  }
  if (!ids)
    return fail(f, "@forward has no input_ids");
  if (!positions)
    return fail(f, "@forward takes no position_ids: export the model with them as an input "
                   "(model(input_ids, attention_mask=..., position_ids=...)), so that each "
                   "token's position comes from the program's caller");

  OpBuilder b(ctx);
  Type i64 = IntegerType::get(ctx, 64), f32 = Float32Type::get(ctx);
  auto tensor = [&](ArrayRef<int64_t> shape, Type e) { return RankedTensorType::get(shape, e); };
  // The new inputs, after the model's.
  SmallVector<Value> added;
  for (const NewInput &in : kNewInputs) {
    SmallVector<int64_t> shape{B};
    if (in.shape != NewInput::PerSequence)
      shape.push_back(in.shape == NewInput::PerToken ? T : int64_t(maxPages));
    added.push_back(body.addArgument(tensor(shape, in.f32 ? f32 : i64), f.getLoc()));
  }
  Value slots = added[0], pageTable = added[1], contextLens = added[2], qLens = added[3];

  // Each attention: its keys and values to its layer's cache, attention against the cache.
  SmallVector<AttentionOp> attentions;
  f.walk([&](AttentionOp a) { attentions.push_back(a); });
  if (attentions.empty())
    return fail(f, "@forward has no ds.attention to cache");
  for (auto [layer, a] : llvm::enumerate(attentions)) {
    if (!a.getCausal() && !a.getMask())
      return fail(a, "attention without a causal mask (bidirectional) cannot generate "
                     "token by token");
    if (!a.getLse().use_empty())
      return fail(a, "the attention's log-sum-exp is read (a training step, not a forward)");
    Value k = a.getKey(), v = a.getValue();
    if (Value base = repeatedHeads(k))
      k = base;
    if (Value base = repeatedHeads(v))
      v = base;
    RankedTensorType kt = typeOf(k), vt = typeOf(v);
    if (kt.getDimSize(1) != vt.getDimSize(1) || kt.getDimSize(2) != T)
      return fail(a, "keys " + Twine(kt.getDimSize(1)) + " heads and values " +
                         Twine(vt.getDimSize(1)) + " heads of " + Twine(kt.getDimSize(2)) +
                         " positions: the cache needs one head count and the call's " +
                         Twine(T) + " tokens");
    std::string prefix = ("cache." + Twine(layer) + ".").str();
    auto kCache = tensor({pages, kt.getDimSize(1), pageSize, kt.getDimSize(3)},
                         kt.getElementType());
    auto vCache = tensor({pages, vt.getDimSize(1), pageSize, vt.getDimSize(3)},
                         vt.getElementType());
    if (failed(cacheState(module, prefix + "key", kCache, a.getLoc())) ||
        failed(cacheState(module, prefix + "value", vCache, a.getLoc())))
      return signalPassFailure();
    b.setInsertionPoint(a);
    Location loc = a.getLoc();
    Value kc = GetParameterOp::create(b, loc, kCache, prefix + "key");
    Value vc = GetParameterOp::create(b, loc, vCache, prefix + "value");
    auto write = CacheWriteOp::create(b, loc, kc, vc, k, v, slots);
    AssignOp::create(b, loc, prefix + "key", write.getNewKCache());
    AssignOp::create(b, loc, prefix + "value", write.getNewVCache());
    Value out = PagedAttentionOp::create(b, loc, typeOf(a.getResult()), a.getQuery(),
                                         write.getNewKCache(), write.getNewVCache(),
                                         pageTable, contextLens, qLens, a.getScaleAttr());
    a.getResult().replaceAllUsesWith(out);
    a->erase();
  }

  // The logits of each sequence's last real token: row b T + max(q_lens[b] - 1, 0).
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  b.setInsertionPoint(ret);
  Location loc = ret.getLoc();
  auto rowType = tensor({B}, i64);
  SmallVector<int64_t> starts;
  for (int64_t i = 0; i < B; ++i)
    starts.push_back(i * T);
  auto scalar = [&](int64_t x) {
    return ConstantOp::create(b, loc, DenseElementsAttr::get(tensor({}, i64), x));
  };
  Value last = SubOp::create(b, loc, rowType, qLens, scalar(1));
  last = MaximumOp::create(b, loc, rowType, last, scalar(0));
  Value rows = AddOp::create(
      b, loc, rowType,
      ConstantOp::create(b, loc, DenseElementsAttr::get(rowType, ArrayRef<int64_t>(starts))),
      last);
  // The LM head runs on the kept rows only (HF's logits_to_keep): a linear read only by the
  // return takes the rows of its input; any other producer of the logits has its rows taken.
  Type element = logitsType.getElementType();
  Value result = ret.getOperand(0), logits;
  auto head = result.getDefiningOp<LinearOp>();
  if (head && result.hasOneUse() && typeOf(head.getInput()).getRank() == 3) {
    int64_t D = typeOf(head.getInput()).getDimSize(2);
    Value hidden = ReshapeOp::create(b, loc, tensor({B * T, D}, element), head.getInput());
    Value kept = EmbeddingOp::create(b, loc, tensor({B, D}, element), hidden, rows, IntegerAttr());
    logits = LinearOp::create(b, loc, tensor({B, V}, element), kept, head.getWeight(),
                              head.getBias());
  } else {
    Value table = ReshapeOp::create(b, loc, tensor({B * T, V}, element), result);
    logits = EmbeddingOp::create(b, loc, tensor({B, V}, element), table, rows, IntegerAttr());
  }
  Value tokens = SampleOp::create(b, loc, rowType, logits, added[4], added[5], added[6],
                                  added[7], added[8]);
  func::ReturnOp::create(b, loc, ValueRange{tokens, logits});
  ret->erase();

  // The attention_mask's readers (the dropped masks) go; then the input itself.
  if (mask) {
    b.setInsertionPointToStart(&body);
    Value ones = ConstantOp::create(b, f.getLoc(), DenseElementsAttr::get(typeOf(mask), 1L));
    mask.replaceAllUsesWith(ones);
  }
  eraseDeadOps(f);
  if (mask)
    body.eraseArgument(cast<BlockArgument>(mask).getArgNumber());

  // The signature: input_ids and position_ids (in the export's order), then the new inputs.
  SmallVector<DictionaryAttr> argAttrs;
  for (BlockArgument a : body.getArguments()) {
    StringRef n = a == ids ? "input_ids" : a == positions ? "position_ids" : "";
    if (n.empty())
      n = kNewInputs[a.getArgNumber() - (body.getNumArguments() - std::size(kNewInputs))].name;
    argAttrs.push_back(
        DictionaryAttr::get(ctx, {NamedAttribute(StringAttr::get(ctx, kInputNameAttrName),
                                                 StringAttr::get(ctx, n))}));
  }
  f.setType(FunctionType::get(ctx, body.getArgumentTypes(),
                              {tokens.getType(), logits.getType()}));
  f.setAllArgAttrs(argAttrs);
  f.setSymName(name);
}
} // namespace
