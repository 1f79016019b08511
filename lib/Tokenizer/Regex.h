//===- Regex.h - the regular expressions of tokenizer.json's Split ------------===//
//
// A backtracking matcher over code points for the syntax pre-tokenizers use (Oniguruma's,
// leftmost match, alternatives tried in order): alternation, non-capturing groups with an
// (?i) flag, classes with ranges, \p{..}/\P{..} general categories, \s \S \d \D \w \W \r \n
// \t and escaped punctuation, '.', quantifiers ? * + {m} {m,} {m,n} (greedy or lazy) and
// look-ahead (?=..) (?!..). Anything else is refused by name when compiled.
//
#ifndef DS_LIB_TOKENIZER_REGEX_H
#define DS_LIB_TOKENIZER_REGEX_H

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace dstok {

class Regex {
public:
  /// Compiles `pattern`; on failure returns null with the reason in `err`.
  static std::unique_ptr<Regex> compile(const std::string &pattern, std::string &err);
  ~Regex();
  /// Every non-overlapping match in `text`, leftmost first, as [begin, end) code point
  /// indices (empty matches skipped).
  std::vector<std::pair<size_t, size_t>> findAll(const std::vector<char32_t> &text) const;

  struct Node;

private:
  explicit Regex(std::unique_ptr<Node> root);
  std::unique_ptr<Node> root_;
};

} // namespace dstok

#endif
