//===- Tokenizer.h - text to token ids and back, from an HF tokenizer.json ------===//
//
// Reads the tokenizer.json that HF `tokenizers` writes (and every HF model ships) and
// encodes and decodes as its `Tokenizer.encode(text).ids` and `decode(ids)` do, for BPE
// models: byte-level ones (GPT-2, Qwen2, Llama 3) and SentencePiece-style ones with byte
// fallback (Llama 2, Mistral). No PyTorch, no Python: what ds-serve and ds-generate read.
// A component it does not know is refused when loaded, naming it.
//
#ifndef DS_TOKENIZER_TOKENIZER_H
#define DS_TOKENIZER_TOKENIZER_H

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dstok {

class Tokenizer {
public:
  /// Loads `path` (tokenizer.json); on failure returns null with the cause in `err`.
  static std::unique_ptr<Tokenizer> load(const std::string &path, std::string &err);
  ~Tokenizer();

  /// `text`'s ids; `addSpecial`: with the post-processor's tokens (Llama's BOS), as HF's
  /// encode(text, add_special_tokens=True).
  std::vector<int64_t> encode(const std::string &text, bool addSpecial = true) const;
  /// The text of `ids`, as HF's decode(ids, skip_special_tokens).
  std::string decode(const std::vector<int64_t> &ids, bool skipSpecial = false) const;
  /// The id of the token `token` (a vocabulary entry or an added token), or -1.
  int64_t tokenId(const std::string &token) const;
  /// One more than the largest id.
  int64_t vocabSize() const;
  /// Whether `id` is a special added token (<|endoftext|>, </s>, ...).
  bool isSpecial(int64_t id) const;

  struct Impl;

private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// Decodes a growing sequence for streaming: each new token's text as soon as it is whole
/// (a character split over byte tokens waits for its last byte).
class StreamDecoder {
public:
  StreamDecoder(const Tokenizer &t, bool skipSpecial = true) : t_(t), skip_(skipSpecial) {}
  /// The text that `id` adds to what was returned before (possibly empty).
  std::string push(int64_t id);
  /// What is left at the end (an incomplete character as U+FFFD).
  std::string finish();

private:
  const Tokenizer &t_;
  bool skip_;
  std::vector<int64_t> ids_;
  size_t emitted_ = 0; ///< bytes of decode(ids_) already returned
};

} // namespace dstok

#endif
