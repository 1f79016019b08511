//===- TextSteps.h - tokenizer.json's normalizers, pre-tokenizers and decoders ---===//
//
// Each step as its "type" names it in tokenizer.json; Sequence runs its steps in order. A
// type not listed here is refused when read, by name.
//
#ifndef DS_LIB_TOKENIZER_TEXTSTEPS_H
#define DS_LIB_TOKENIZER_TEXTSTEPS_H

#include "Regex.h"

#include "llvm/Support/JSON.h"

#include <memory>
#include <string>
#include <vector>

namespace dstok {

/// A string-or-regex pattern ({"String": s} or {"Regex": r}) and its replacement.
struct Pattern {
  std::string literal;
  std::shared_ptr<Regex> regex;
  bool read(const llvm::json::Value *v, std::string &err);
  /// `text` with every match replaced by `with`.
  std::string replace(const std::string &text, const std::string &with) const;
};

/// NFC, Prepend, Replace, Sequence.
struct Normalizer {
  enum Kind { None, Nfc, Prepend, Replace, Sequence } kind = None;
  std::string content;
  Pattern pattern;
  std::vector<Normalizer> steps;
  bool read(const llvm::json::Value *v, std::string &err);
  std::string apply(const std::string &text) const;
};

/// ByteLevel, Split, Metaspace, Sequence: a segment's text into pre-tokens.
struct PreTokenizer {
  enum Kind { None, ByteLevel, Split, Metaspace, Sequence } kind = None;
  bool addPrefixSpace = false, useRegex = true; ///< ByteLevel
  std::shared_ptr<Regex> regex;                  ///< Split (and ByteLevel's GPT-2 pattern)
  bool removeMatches = false;                    ///< Split's behavior: Removed (else Isolated)
  std::string replacement;                       ///< Metaspace
  std::string prependScheme = "always";          ///< Metaspace: always, first or never
  bool split = true;                             ///< Metaspace
  std::vector<PreTokenizer> steps;
  bool read(const llvm::json::Value *v, std::string &err);
  /// Splits each piece further; `atStart`: the segment begins the input (Metaspace's
  /// "first").
  void apply(std::vector<std::string> &pieces, bool atStart) const;
};

/// ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, Sequence: tokens into text.
struct Decoder {
  enum Kind { None, ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, Sequence } kind =
      None;
  Pattern pattern;
  std::string content;
  int64_t start = 0, stop = 0;
  std::string prependScheme = "always";
  std::vector<Decoder> steps;
  bool read(const llvm::json::Value *v, std::string &err);
  void apply(std::vector<std::string> &tokens) const;
};

/// GPT-2's byte-to-character table (bytes as printable code points) and its inverse (-1 for a
/// character that is not a byte's).
char32_t byteChar(unsigned char b);
int charByte(char32_t c);

} // namespace dstok

#endif
