//===- MuonRule.h - which parameters DeepSpeed's Muon updates with Newton-Schulz -===//
//
// Shared by ds-optimizer and ds-reference (the oracle applies the same selection).
//
#ifndef DS_TRANSFORMS_MUONRULE_H
#define DS_TRANSFORMS_MUONRULE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>

namespace mlir::ds {
/// Whether DeepSpeed's Muon updates a parameter with Newton-Schulz rather than its auxiliary
/// AdamW: `set_optimizer_flags` takes every >= 2-D parameter whose lower-cased name contains
/// neither "embed" nor "lm_head". ds also leaves out, whatever their names, the embedding
/// tables (what an embedding lookup reads: nanoGPT's `wte`, `wpe`) and the LM head (the
/// weight of the linear layer whose output, through reshapes, is the cross-entropy's logits),
/// and parameters tied to an excluded name. `names` are the parameter's name and its aliases.
inline bool usesMuon(llvm::ArrayRef<std::string> names, int64_t rank, bool embeddingOrHead) {
  if (rank < 2 || embeddingOrHead)
    return false;
  for (const std::string &n : names) {
    std::string lower = llvm::StringRef(n).lower();
    if (lower.find("embed") != std::string::npos || lower.find("lm_head") != std::string::npos)
      return false;
  }
  return true;
}
} // namespace mlir::ds

#endif // DS_TRANSFORMS_MUONRULE_H
