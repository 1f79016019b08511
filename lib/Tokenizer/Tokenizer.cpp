//===- Tokenizer.cpp - tokenizer.json: added tokens, the pipeline, post-processing ---===//
#include "ds/Tokenizer/Tokenizer.h"

#include "Bpe.h"
#include "TextSteps.h"
#include "Unicode.h"

#include "llvm/Support/MemoryBuffer.h"

#include <map>

namespace dstok {

namespace {
struct AddedToken {
  int64_t id = 0;
  std::string content;
  bool special = false, lstrip = false, rstrip = false;
};

/// One element of a TemplateProcessing template: a special token's ids, or the sequence.
struct TemplatePiece {
  std::vector<int64_t> ids; ///< empty: the encoded sequence
};

bool asciiSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
} // namespace

struct Tokenizer::Impl {
  Bpe model;
  Normalizer normalizer;
  PreTokenizer preTokenizer;
  Decoder decoder;
  std::vector<AddedToken> added;
  std::map<int64_t, size_t> addedById;
  std::map<std::string, size_t> addedByContent;
  bool hasTemplate = false;
  std::vector<TemplatePiece> single;

  bool readPostProcessor(const llvm::json::Value *v, std::string &err);
  /// `text` cut at the added tokens (leftmost, longest first): each segment's text and the
  /// added token's index (-1 for text between them).
  std::vector<std::pair<std::string, int64_t>> splitAdded(const std::string &text) const;
};

bool Tokenizer::Impl::readPostProcessor(const llvm::json::Value *v, std::string &err) {
  if (!v || v->kind() == llvm::json::Value::Null)
    return true;
  const llvm::json::Object *o = v->getAsObject();
  std::string type = o && o->getString("type") ? o->getString("type")->str() : "";
  if (type == "ByteLevel")
    return true; // offsets only
  if (type == "Sequence") {
    if (const llvm::json::Array *a = o->getArray("processors"))
      for (const llvm::json::Value &p : *a)
        if (!readPostProcessor(&p, err))
          return false;
    return true;
  }
  if (type == "TemplateProcessing") {
    const llvm::json::Array *s = o->getArray("single");
    const llvm::json::Object *specials = o->getObject("special_tokens");
    if (!s) {
      err = "the post-processor's template has no \"single\"";
      return false;
    }
    hasTemplate = true;
    for (const llvm::json::Value &e : *s) {
      const llvm::json::Object *eo = e.getAsObject();
      TemplatePiece piece;
      if (const llvm::json::Object *st = eo ? eo->getObject("SpecialToken") : nullptr) {
        std::string name = st->getString("id") ? st->getString("id")->str() : "";
        const llvm::json::Object *spec = specials ? specials->getObject(name) : nullptr;
        const llvm::json::Array *ids = spec ? spec->getArray("ids") : nullptr;
        if (!ids) {
          err = "the post-processor's template names '" + name + "' without its ids";
          return false;
        }
        for (const llvm::json::Value &id : *ids)
          piece.ids.push_back(id.getAsInteger().value_or(0));
      } else if (!eo || !eo->getObject("Sequence")) {
        err = "the post-processor's template has an element other than SpecialToken and "
              "Sequence";
        return false;
      }
      single.push_back(std::move(piece));
    }
    return true;
  }
  err = "the post-processor '" + type + "' is not supported";
  return false;
}

std::vector<std::pair<std::string, int64_t>>
Tokenizer::Impl::splitAdded(const std::string &text) const {
  std::vector<std::pair<std::string, int64_t>> out;
  size_t from = 0; // the start of the text not yet cut
  size_t at = 0;
  while (at < text.size()) {
    int64_t best = -1;
    for (size_t k = 0; k < added.size(); ++k) {
      const std::string &c = added[k].content;
      if (!c.empty() && text.compare(at, c.size(), c) == 0 &&
          (best < 0 || c.size() > added[best].content.size()))
        best = static_cast<int64_t>(k);
    }
    if (best < 0) {
      ++at;
      continue;
    }
    const AddedToken &a = added[best];
    size_t begin = at, end = at + a.content.size();
    if (a.lstrip)
      while (begin > from && asciiSpace(text[begin - 1]))
        --begin;
    if (a.rstrip)
      while (end < text.size() && asciiSpace(text[end]))
        ++end;
    if (begin > from)
      out.emplace_back(text.substr(from, begin - from), -1);
    out.emplace_back(a.content, best);
    from = at = end;
  }
  if (from < text.size())
    out.emplace_back(text.substr(from), -1);
  return out;
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::load(const std::string &path, std::string &err) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer) {
    err = "cannot read the tokenizer '" + path + "': " + buffer.getError().message();
    return nullptr;
  }
  auto parsed = llvm::json::parse((*buffer)->getBuffer());
  if (!parsed) {
    err = "the tokenizer '" + path + "' is not JSON: " + llvm::toString(parsed.takeError());
    return nullptr;
  }
  const llvm::json::Object *root = parsed->getAsObject();
  auto impl = std::make_unique<Impl>();
  std::string why;
  auto bad = [&](const std::string &what) {
    err = "the tokenizer '" + path + "': " + what + " (ds reads tokenizer.json files of BPE "
          "models, as GPT-2, Llama, Qwen2 and Mistral ship them)";
    return nullptr;
  };
  if (!root || !root->getObject("model"))
    return bad("no \"model\"");
  if (!impl->model.read(*root->getObject("model"), why) ||
      !impl->normalizer.read(root->get("normalizer"), why) ||
      !impl->preTokenizer.read(root->get("pre_tokenizer"), why) ||
      !impl->decoder.read(root->get("decoder"), why) ||
      !impl->readPostProcessor(root->get("post_processor"), why))
    return bad(why);
  if (const llvm::json::Array *added = root->getArray("added_tokens"))
    for (const llvm::json::Value &v : *added) {
      const llvm::json::Object *o = v.getAsObject();
      if (!o || !o->getInteger("id") || !o->getString("content"))
        return bad("an added token lacks its id or content");
      AddedToken a;
      a.id = *o->getInteger("id");
      a.content = o->getString("content")->str();
      a.special = o->getBoolean("special").value_or(false);
      a.lstrip = o->getBoolean("lstrip").value_or(false);
      a.rstrip = o->getBoolean("rstrip").value_or(false);
      impl->addedById[a.id] = impl->added.size();
      impl->addedByContent[a.content] = impl->added.size();
      impl->added.push_back(std::move(a));
    }
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

std::vector<int64_t> Tokenizer::encode(const std::string &text, bool addSpecial) const {
  const Impl &t = *impl_;
  std::vector<int64_t> ids;
  std::string clean = validUtf8(text) ? text : lossyUtf8(text);
  bool atStart = true;
  for (const auto &[segment, addedIndex] : t.splitAdded(clean)) {
    if (addedIndex >= 0) {
      ids.push_back(t.added[addedIndex].id);
    } else {
      std::vector<std::string> pieces{t.normalizer.apply(segment)};
      t.preTokenizer.apply(pieces, atStart);
      for (const std::string &p : pieces)
        if (!p.empty())
          t.model.encode(p, ids);
    }
    atStart = false;
  }
  if (!addSpecial || !t.hasTemplate)
    return ids;
  std::vector<int64_t> out;
  for (const TemplatePiece &p : t.single)
    if (p.ids.empty())
      out.insert(out.end(), ids.begin(), ids.end());
    else
      out.insert(out.end(), p.ids.begin(), p.ids.end());
  return out;
}

std::string Tokenizer::decode(const std::vector<int64_t> &ids, bool skipSpecial) const {
  const Impl &t = *impl_;
  std::vector<std::string> tokens;
  for (int64_t id : ids) {
    if (auto it = t.addedById.find(id); it != t.addedById.end()) {
      if (!(skipSpecial && t.added[it->second].special))
        tokens.push_back(t.added[it->second].content);
    } else if (const std::string *tok = t.model.token(id)) {
      tokens.push_back(*tok);
    }
  }
  if (t.decoder.kind == Decoder::None) {
    std::string joined;
    for (size_t k = 0; k < tokens.size(); ++k)
      joined += (k ? " " : "") + tokens[k];
    return joined;
  }
  t.decoder.apply(tokens);
  std::string out;
  for (const std::string &s : tokens)
    out += s;
  return out;
}

int64_t Tokenizer::tokenId(const std::string &token) const {
  if (auto it = impl_->addedByContent.find(token); it != impl_->addedByContent.end())
    return impl_->added[it->second].id;
  return impl_->model.id(token);
}

int64_t Tokenizer::vocabSize() const {
  int64_t n = impl_->model.size();
  for (const AddedToken &a : impl_->added)
    n = std::max(n, a.id + 1);
  return n;
}

bool Tokenizer::isSpecial(int64_t id) const {
  auto it = impl_->addedById.find(id);
  return it != impl_->addedById.end() && impl_->added[it->second].special;
}

std::string StreamDecoder::push(int64_t id) {
  ids_.push_back(id);
  std::string text = t_.decode(ids_, skip_);
  // A character still waiting for its bytes decodes as U+FFFD at the end: hold it back.
  static const std::string replacement = "\xEF\xBF\xBD";
  if (text.size() >= replacement.size() &&
      text.compare(text.size() - replacement.size(), replacement.size(), replacement) == 0)
    return "";
  if (text.size() < emitted_)
    return "";
  std::string fresh = text.substr(emitted_);
  emitted_ = text.size();
  return fresh;
}

std::string StreamDecoder::finish() {
  std::string text = t_.decode(ids_, skip_);
  std::string rest = text.size() > emitted_ ? text.substr(emitted_) : "";
  emitted_ = text.size();
  return rest;
}

} // namespace dstok
