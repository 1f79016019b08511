//===- ChatTemplate.h - an HF chat template (Jinja) turned into a prompt --------===//
//
// HF models ship their chat format as a Jinja template (tokenizer_config.json's
// "chat_template"); transformers' apply_chat_template renders it with `messages`,
// `add_generation_prompt` and the special tokens' strings (bos_token, eos_token, ...). This
// renders the part of Jinja those templates use: {{ }}, {% if/elif/else %}, {% for %} with
// `loop`, {% set %} (and namespace()), whitespace control, filters (trim, length, tojson,
// upper, lower, capitalize, string, first, last, join, default, items), tests (defined, none,
// string, mapping, sequence, number, true, false), raise_exception and the usual operators. A
// template using anything else is refused when parsed, by name.
//
#ifndef DS_TOKENIZER_CHATTEMPLATE_H
#define DS_TOKENIZER_CHATTEMPLATE_H

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace dstok {

struct ChatMessage {
  std::string role, content;
};

class ChatTemplate {
public:
  /// Parses `source`; null with the cause in `err` when it uses what is not supported.
  static std::unique_ptr<ChatTemplate> parse(const std::string &source, std::string &err);
  /// Reads "chat_template" (and the special tokens' strings) from `tokenizerConfig`
  /// (tokenizer_config.json); null with `err` when it has none or cannot be parsed.
  static std::unique_ptr<ChatTemplate> load(const std::string &tokenizerConfig,
                                            std::string &err);
  ~ChatTemplate();
  /// The prompt for `messages`; `addGenerationPrompt` ends it with the assistant's header.
  /// False with `err` when the template raises (raise_exception) or fails.
  bool render(const std::vector<ChatMessage> &messages, bool addGenerationPrompt,
              std::string &out, std::string &err) const;
  /// Variables the template sees besides messages (bos_token, eos_token, ...).
  std::map<std::string, std::string> &globals() { return globals_; }

  struct Node;

private:
  explicit ChatTemplate(std::unique_ptr<Node> root);
  std::unique_ptr<Node> root_;
  std::map<std::string, std::string> globals_;
};

} // namespace dstok

#endif
