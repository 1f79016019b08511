//===- Bpe.h - tokenizer.json's BPE model --------------------------------------===//
//
// A pre-token's characters as vocabulary ids (a character not in the vocabulary as its
// UTF-8 bytes' <0xXX> tokens with byte_fallback, else the unknown token), then the merges
// applied lowest rank first, leftmost first among equals: HF's BPE::merge_word.
//
#ifndef DS_LIB_TOKENIZER_BPE_H
#define DS_LIB_TOKENIZER_BPE_H

#include "llvm/Support/JSON.h"

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace dstok {

class Bpe {
public:
  /// Reads the "model" object; on failure returns false with the cause in `err`.
  bool read(const llvm::json::Object &model, std::string &err);
  /// Appends the ids of `word` to `out`.
  void encode(const std::string &word, std::vector<int64_t> &out) const;
  /// The vocabulary's token for `id`, or null.
  const std::string *token(int64_t id) const {
    return id >= 0 && id < static_cast<int64_t>(tokens_.size()) && !tokens_[id].empty()
               ? &tokens_[id]
               : nullptr;
  }
  int64_t id(const std::string &token) const {
    auto it = vocab_.find(token);
    return it == vocab_.end() ? -1 : it->second;
  }
  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }

private:
  std::unordered_map<std::string, int64_t> vocab_;
  std::vector<std::string> tokens_;
  /// (left id << 32 | right id) -> (rank, merged id).
  std::unordered_map<uint64_t, std::pair<int64_t, int64_t>> merges_;
  int64_t unk_ = -1;
  bool byteFallback_ = false, fuseUnk_ = false, ignoreMerges_ = false;
  int64_t byteIds_[256];
  mutable std::mutex cacheLock_;
  mutable std::unordered_map<std::string, std::vector<int64_t>> cache_;
};

} // namespace dstok

#endif
