//===- Generation.h - ds-opt --inference: generation programs from a forward --*- C++ -*-===//
//
// The config of `ds-opt MODEL --inference --config F` (DeepSpeed init_inference's keys at
// its top level, and ds's cache keys) and the module it builds: @prefill and @decode
// (ds-derive-generation) over one set of weights and one key/value cache.
//
#ifndef DS_PIPELINES_GENERATION_H
#define DS_PIPELINES_GENERATION_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

namespace mlir::ds {

/// An --inference config; every default is here.
struct GenerationConfig {
  /// init_inference's `max_tokens` (alias `max_out_tokens`): the positions the cache holds,
  /// over every sequence.
  int64_t maxTokens = 1024;
  /// `max_batch`: the sequences one call runs (continuous batching's slots).
  int64_t maxBatch = 1;
  /// `page_size`: positions per page of the cache.
  int64_t pageSize = 16;
  /// `prefill_chunk`: the prompt tokens one @prefill call takes per sequence (at most
  /// max_tokens).
  int64_t prefillChunk = 64;
  /// The cache's pages: max_tokens in pages.
  int64_t pages() const { return (maxTokens + pageSize - 1) / pageSize; }
};

/// Reads an --inference config; an error names the key and what it takes.
llvm::Expected<GenerationConfig> parseGenerationConfig(const llvm::json::Object &config);

/// Makes generation's module of two imports of a causal LM's forward (its logits, at
/// [max_batch, prefill_chunk] and at [max_batch, 1] tokens): `prefill` becomes @prefill and
/// takes @decode from `decode`, both over the same weights and cache. Diagnostics go to the
/// modules' context.
LogicalResult buildGenerationModule(ModuleOp prefill, ModuleOp decode,
                                    const GenerationConfig &config);

} // namespace mlir::ds

#endif // DS_PIPELINES_GENERATION_H
