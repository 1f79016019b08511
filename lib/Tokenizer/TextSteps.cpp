//===- TextSteps.cpp - normalizers, pre-tokenizers and decoders ----------------===//
#include "TextSteps.h"

#include "Unicode.h"

namespace dstok {

namespace {
/// The pattern ByteLevel uses when use_regex is set (GPT-2's).
const char *const kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct ByteTable {
  char32_t toChar[256];
  std::vector<int> toByte;
  ByteTable() : toByte(512, -1) {
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
      toChar[b] = printable ? b : 256 + extra++;
      toByte[toChar[b]] = b;
    }
  }
};
const ByteTable &table() {
  static const ByteTable t;
  return t;
}

const llvm::json::Object *typed(const llvm::json::Value *v, std::string &type) {
  const llvm::json::Object *o = v ? v->getAsObject() : nullptr;
  if (o)
    if (auto t = o->getString("type"))
      type = t->str();
  return o;
}

bool unknown(const char *what, const std::string &type, std::string &err) {
  err = std::string("the ") + what + " '" + type + "' is not supported";
  return false;
}

std::string str(const llvm::json::Object &o, const char *key) {
  auto s = o.getString(key);
  return s ? s->str() : std::string();
}

void replaceAll(std::string &s, const std::string &from, const std::string &to) {
  if (from.empty())
    return;
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

bool isNull(const llvm::json::Value *v) { return !v || v->kind() == llvm::json::Value::Null; }
} // namespace

char32_t byteChar(unsigned char b) { return table().toChar[b]; }
int charByte(char32_t c) { return c < 512 ? table().toByte[c] : -1; }

bool Pattern::read(const llvm::json::Value *v, std::string &err) {
  const llvm::json::Object *o = v ? v->getAsObject() : nullptr;
  if (o && o->getString("String")) {
    literal = o->getString("String")->str();
    return true;
  }
  if (o && o->getString("Regex")) {
    std::string why;
    std::unique_ptr<Regex> r = Regex::compile(o->getString("Regex")->str(), why);
    if (!r) {
      err = "the pattern '" + o->getString("Regex")->str() + "' is not supported: " + why;
      return false;
    }
    regex = std::move(r);
    return true;
  }
  err = "a pattern is neither {\"String\": ...} nor {\"Regex\": ...}";
  return false;
}

std::string Pattern::replace(const std::string &text, const std::string &with) const {
  if (!regex) {
    std::string s = text;
    replaceAll(s, literal, with);
    return s;
  }
  std::vector<char32_t> cps = codePoints(text);
  std::string out;
  size_t last = 0;
  for (auto [b, e] : regex->findAll(cps)) {
    out += toUtf8(std::u32string_view(cps.data() + last, b - last));
    out += with;
    last = e;
  }
  out += toUtf8(std::u32string_view(cps.data() + last, cps.size() - last));
  return out;
}

bool Normalizer::read(const llvm::json::Value *v, std::string &err) {
  if (isNull(v))
    return true;
  std::string type;
  const llvm::json::Object *o = typed(v, type);
  if (!o)
    return unknown("normalizer", "(malformed)", err);
  if (type == "NFC") {
    kind = Nfc;
  } else if (type == "Prepend") {
    kind = Prepend;
    content = str(*o, "prepend");
  } else if (type == "Replace") {
    kind = Replace;
    content = str(*o, "content");
    return pattern.read(o->get("pattern"), err);
  } else if (type == "Sequence") {
    kind = Sequence;
    if (const llvm::json::Array *a = o->getArray("normalizers"))
      for (const llvm::json::Value &s : *a) {
        steps.emplace_back();
        if (!steps.back().read(&s, err))
          return false;
      }
  } else {
    return unknown("normalizer", type, err);
  }
  return true;
}

std::string Normalizer::apply(const std::string &text) const {
  switch (kind) {
  case None:
    return text;
  case Nfc:
    return nfc(text);
  case Prepend:
    return text.empty() ? text : content + text;
  case Replace:
    return pattern.replace(text, content);
  case Sequence: {
    std::string s = text;
    for (const Normalizer &n : steps)
      s = n.apply(s);
    return s;
  }
  }
  return text;
}

bool PreTokenizer::read(const llvm::json::Value *v, std::string &err) {
  if (isNull(v))
    return true;
  std::string type;
  const llvm::json::Object *o = typed(v, type);
  if (!o)
    return unknown("pre-tokenizer", "(malformed)", err);
  if (type == "ByteLevel") {
    kind = ByteLevel;
    addPrefixSpace = o->getBoolean("add_prefix_space").value_or(false);
    useRegex = o->getBoolean("use_regex").value_or(true);
    if (useRegex)
      regex = Regex::compile(kGpt2Pattern, err);
  } else if (type == "Split") {
    kind = Split;
    Pattern p;
    if (!p.read(o->get("pattern"), err))
      return false;
    if (!p.regex) { // a literal: the same as its escaped regex
      std::string escaped;
      for (char c : p.literal) {
        if (std::string("\\^$.|?*+()[]{}").find(c) != std::string::npos)
          escaped.push_back('\\');
        escaped.push_back(c);
      }
      p.regex = Regex::compile(escaped, err);
    }
    regex = p.regex;
    std::string behavior = str(*o, "behavior");
    if (o->getBoolean("invert").value_or(false) ||
        (behavior != "Isolated" && behavior != "Removed"))
      return unknown("Split behavior", behavior + (o->getBoolean("invert").value_or(false)
                                                       ? " (inverted)"
                                                       : ""),
                     err);
    removeMatches = behavior == "Removed";
  } else if (type == "Metaspace") {
    kind = Metaspace;
    replacement = str(*o, "replacement");
    if (auto s = o->getString("prepend_scheme"))
      prependScheme = s->str();
    else if (auto add = o->getBoolean("add_prefix_space"))
      prependScheme = *add ? "always" : "never";
    split = o->getBoolean("split").value_or(true);
  } else if (type == "Sequence") {
    kind = Sequence;
    if (const llvm::json::Array *a = o->getArray("pretokenizers"))
      for (const llvm::json::Value &s : *a) {
        steps.emplace_back();
        if (!steps.back().read(&s, err))
          return false;
      }
  } else {
    return unknown("pre-tokenizer", type, err);
  }
  return regex || kind != Split;
}

void PreTokenizer::apply(std::vector<std::string> &pieces, bool atStart) const {
  if (kind == None)
    return;
  if (kind == Sequence) {
    for (const PreTokenizer &p : steps)
      p.apply(pieces, atStart);
    return;
  }
  std::vector<std::string> out;
  for (size_t k = 0; k < pieces.size(); ++k) {
    std::string piece = pieces[k];
    if (kind == Metaspace) {
      replaceAll(piece, " ", replacement);
      bool prepend = prependScheme == "always" || (prependScheme == "first" && atStart && k == 0);
      if (prepend && piece.compare(0, replacement.size(), replacement) != 0)
        piece = replacement + piece;
      if (!split) {
        out.push_back(piece);
        continue;
      }
      // Each replacement character begins a new piece (merged with what follows it).
      size_t from = 0;
      for (size_t at = piece.find(replacement, 1); at != std::string::npos;
           at = piece.find(replacement, at + replacement.size())) {
        out.push_back(piece.substr(from, at - from));
        from = at;
      }
      out.push_back(piece.substr(from));
      continue;
    }
    if (kind == ByteLevel && addPrefixSpace && !piece.empty() && piece[0] != ' ')
      piece = " " + piece;
    std::vector<std::string> parts;
    if (regex) {
      std::vector<char32_t> cps = codePoints(piece);
      size_t last = 0;
      auto cut = [&](size_t b, size_t e) {
        if (e > b)
          parts.push_back(toUtf8(std::u32string_view(cps.data() + b, e - b)));
      };
      for (auto [b, e] : regex->findAll(cps)) {
        cut(last, b);
        if (!removeMatches)
          cut(b, e);
        last = e;
      }
      cut(last, cps.size());
    } else {
      parts.push_back(piece);
    }
    if (kind == ByteLevel)
      for (std::string &p : parts) {
        std::string mapped;
        for (unsigned char b : p)
          appendUtf8(mapped, byteChar(b));
        p = std::move(mapped);
      }
    for (std::string &p : parts)
      out.push_back(std::move(p));
  }
  pieces = std::move(out);
}

bool Decoder::read(const llvm::json::Value *v, std::string &err) {
  if (isNull(v))
    return true;
  std::string type;
  const llvm::json::Object *o = typed(v, type);
  if (!o)
    return unknown("decoder", "(malformed)", err);
  if (type == "ByteLevel") {
    kind = ByteLevel;
  } else if (type == "Replace") {
    kind = Replace;
    content = str(*o, "content");
    return pattern.read(o->get("pattern"), err);
  } else if (type == "ByteFallback") {
    kind = ByteFallback;
  } else if (type == "Fuse") {
    kind = Fuse;
  } else if (type == "Strip") {
    kind = Strip;
    content = str(*o, "content");
    start = o->getInteger("start").value_or(0);
    stop = o->getInteger("stop").value_or(0);
  } else if (type == "Metaspace") {
    kind = Metaspace;
    content = str(*o, "replacement");
    if (auto s = o->getString("prepend_scheme"))
      prependScheme = s->str();
    else if (auto add = o->getBoolean("add_prefix_space"))
      prependScheme = *add ? "always" : "never";
  } else if (type == "Sequence") {
    kind = Sequence;
    if (const llvm::json::Array *a = o->getArray("decoders"))
      for (const llvm::json::Value &s : *a) {
        steps.emplace_back();
        if (!steps.back().read(&s, err))
          return false;
      }
  } else {
    return unknown("decoder", type, err);
  }
  return true;
}

namespace {
/// The byte of a "<0xXX>" token, or -1.
int fallbackByte(const std::string &t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>')
    return -1;
  auto hex = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
  };
  int hi = hex(t[3]), lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}
} // namespace

void Decoder::apply(std::vector<std::string> &tokens) const {
  switch (kind) {
  case None:
    return;
  case Sequence:
    for (const Decoder &d : steps)
      d.apply(tokens);
    return;
  case ByteLevel: {
    std::string bytes;
    for (const std::string &t : tokens) {
      std::string mine;
      bool all = true;
      for (char32_t c : codePoints(t)) {
        int b = charByte(c);
        all = all && b >= 0;
        mine.push_back(static_cast<char>(b));
      }
      bytes += all ? mine : t;
    }
    tokens = {lossyUtf8(bytes)};
    return;
  }
  case Replace:
    for (std::string &t : tokens)
      t = pattern.replace(t, content);
    return;
  case ByteFallback: {
    std::vector<std::string> out;
    std::string pending;
    auto flush = [&] {
      if (pending.empty())
        return;
      if (validUtf8(pending)) {
        out.push_back(pending);
      } else {
        for (size_t k = 0; k < pending.size(); ++k)
          out.push_back("\xEF\xBF\xBD");
      }
      pending.clear();
    };
    for (const std::string &t : tokens) {
      int b = fallbackByte(t);
      if (b >= 0) {
        pending.push_back(static_cast<char>(b));
        continue;
      }
      flush();
      out.push_back(t);
    }
    flush();
    tokens = std::move(out);
    return;
  }
  case Fuse: {
    std::string all;
    for (const std::string &t : tokens)
      all += t;
    tokens = {all};
    return;
  }
  case Strip:
    for (std::string &t : tokens) {
      std::vector<char32_t> cps = codePoints(t);
      std::vector<char32_t> c = codePoints(content);
      size_t b = 0, e = cps.size();
      for (int64_t k = 0; k < start && b < e && c.size() == 1 && cps[b] == c[0]; ++k)
        ++b;
      for (int64_t k = 0; k < stop && e > b && c.size() == 1 && cps[e - 1] == c[0]; ++k)
        --e;
      t = toUtf8(std::u32string_view(cps.data() + b, e - b));
    }
    return;
  case Metaspace:
    // The first token loses every replacement character (HF's Metaspace decoder), the
    // others have them as spaces.
    for (size_t k = 0; k < tokens.size(); ++k)
      replaceAll(tokens[k], content, k == 0 && prependScheme != "never" ? "" : " ");
    return;
  }
}

} // namespace dstok
