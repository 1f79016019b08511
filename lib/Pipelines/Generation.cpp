//===- Generation.cpp - ds-opt --inference: generation programs from a forward ---===//
#include "ds/Pipelines/Generation.h"

#include "ds/IR/DSDialect.h"
#include "ds/IR/DSOps.h"
#include "ds/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace mlir::ds;

namespace {
llvm::Error configError(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), "--inference config: " + msg);
}

/// A positive integer at `key`, if present.
llvm::Error readPositive(const llvm::json::Object &o, llvm::StringRef key, int64_t &into) {
  const llvm::json::Value *v = o.get(key);
  if (!v)
    return llvm::Error::success();
  std::optional<int64_t> n = v->getAsInteger();
  if (!n || *n <= 0)
    return configError("'" + key + "' must be a positive integer");
  into = *n;
  return llvm::Error::success();
}
} // namespace

llvm::Expected<GenerationConfig>
mlir::ds::parseGenerationConfig(const llvm::json::Object &config) {
  static const char *const known[] = {"dtype",      "tensor_parallel", "max_tokens",
                                      "max_out_tokens", "max_batch", "page_size",
                                      "prefill_chunk"};
  for (const auto &kv : config)
    if (!llvm::is_contained(known, kv.first.str()))
      return configError("unknown key '" + kv.first.str() + "' (the keys are " +
                         llvm::join(std::begin(known), std::end(known), ", ") + ")");
  GenerationConfig c;
  if (const llvm::json::Value *d = config.get("dtype")) {
    std::optional<llvm::StringRef> s = d->getAsString();
    if (!s)
      return configError("'dtype' must be a string");
    if (!llvm::is_contained({"fp32", "float32", "float", "torch.float32"}, *s))
      return configError("dtype '" + *s +
                         "': generation runs in fp32 so far (bf16 and fp16 are not built "
                         "yet); use \"fp32\"");
  }
  if (const llvm::json::Value *tp = config.get("tensor_parallel")) {
    const llvm::json::Object *o = tp->getAsObject();
    std::optional<int64_t> size = o && o->get("tp_size") ? o->getInteger("tp_size") : 1;
    if (!o || !size)
      return configError("'tensor_parallel' must be {\"tp_size\": N}");
    if (*size != 1)
      return configError("tensor_parallel.tp_size " + llvm::Twine(*size) +
                         ": generation over tensor-parallel ranks is not built yet; use 1");
  }
  if (config.get("max_tokens") && config.get("max_out_tokens"))
    return configError("give 'max_tokens' or its alias 'max_out_tokens', not both");
  for (auto [key, into] : {std::pair<const char *, int64_t *>{"max_tokens", &c.maxTokens},
                           {"max_out_tokens", &c.maxTokens},
                           {"max_batch", &c.maxBatch},
                           {"page_size", &c.pageSize},
                           {"prefill_chunk", &c.prefillChunk}})
    if (llvm::Error e = readPositive(config, key, *into))
      return std::move(e);
  if (!config.get("prefill_chunk"))
    c.prefillChunk = std::min(c.prefillChunk, c.maxTokens);
  if (c.prefillChunk > c.maxTokens)
    return configError("prefill_chunk " + llvm::Twine(c.prefillChunk) +
                       " is more than the cache's max_tokens " + llvm::Twine(c.maxTokens));
  return c;
}

LogicalResult mlir::ds::buildGenerationModule(ModuleOp prefill, ModuleOp decode,
                                              const GenerationConfig &config) {
  auto derive = [&](ModuleOp m, llvm::StringRef name) {
    PassManager pm(m.getContext());
    DSDeriveGenerationOptions o;
    o.name = name.str();
    o.pages = config.pages();
    o.pageSize = config.pageSize;
    o.maxPages = config.pages(); // one sequence may take the whole cache
    pm.addPass(createDSDeriveGeneration(o));
    return pm.run(m);
  };
  if (failed(derive(prefill, kPrefillName)) || failed(derive(decode, kDecodeName)))
    return failure();
  // @decode joins @prefill's module: the weights and caches are the same symbols.
  auto fn = decode.lookupSymbol<func::FuncOp>(kDecodeName);
  for (Operation &op : *decode.getBody())
    if (auto sym = dyn_cast<SymbolOpInterface>(op); sym && !isa<func::FuncOp>(op) &&
                                                    !prefill.lookupSymbol(sym.getName()))
      return op.emitError() << "ds-opt --inference: @" << sym.getName()
                            << " of the decode program is not in the prefill program's module";
  fn->moveBefore(prefill.getBody(), prefill.getBody()->end());
  return success();
}
