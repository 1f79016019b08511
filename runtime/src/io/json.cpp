//===- json.cpp - a minimal JSON parser and writer helpers -----------------===//
#include "dsrt/io.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace dsrt::io {

const Json *Json::get(const std::string &key) const {
  if (kind != Object)
    return nullptr;
  for (const auto &m : members)
    if (m.first == key)
      return &m.second;
  return nullptr;
}

bool Json::asInt(int64_t lo, int64_t hi, int64_t &out) const {
  if (kind != Number || std::floor(number) != number ||
      !(number >= -9223372036854775808.0 && number < 9223372036854775808.0))
    return false;
  int64_t v = static_cast<int64_t>(number);
  if (v < lo || v > hi)
    return false;
  out = v;
  return true;
}

std::string Json::dump() const {
  switch (kind) {
  case Null:
    return "null";
  case Bool:
    return boolean ? "true" : "false";
  case Number:
    return text.empty() ? formatFloat(number) : text;
  case String:
    return jsonQuote(text);
  case Array: {
    std::string s = "[";
    for (size_t i = 0; i < items.size(); ++i)
      s += (i ? "," : "") + items[i].dump();
    return s + "]";
  }
  case Object: {
    std::string s = "{";
    for (size_t i = 0; i < members.size(); ++i)
      s += (i ? "," : "") + jsonQuote(members[i].first) + ":" + members[i].second.dump();
    return s + "}";
  }
  }
  return "null";
}

namespace {

class Parser {
public:
  Parser(const std::string &t) : text(t) {}

  bool parseDocument(Json &out, std::string &err) {
    skipSpace();
    if (!parseValue(out, 0))
      return fail(err);
    skipSpace();
    if (pos != text.size()) {
      cause = "unexpected text after the value";
      return fail(err);
    }
    return true;
  }

private:
  const std::string &text;
  size_t pos = 0;
  std::string cause;

  bool fail(std::string &err) {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos && i < text.size(); ++i) {
      if (text[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    err = "line " + std::to_string(line) + " column " + std::to_string(col) + ": " + cause;
    return false;
  }

  bool error(const std::string &c) {
    cause = c;
    return false;
  }

  void skipSpace() {
    while (pos < text.size() &&
           (text[pos] == ' ' || text[pos] == '\t' || text[pos] == '\n' || text[pos] == '\r'))
      ++pos;
  }

  bool literal(const char *word) {
    size_t n = std::strlen(word);
    if (text.compare(pos, n, word) != 0)
      return error("invalid literal");
    pos += n;
    return true;
  }

  bool parseValue(Json &out, int depth) {
    if (depth > 256)
      return error("nesting too deep");
    if (pos >= text.size())
      return error("unexpected end of input");
    char c = text[pos];
    if (c == '{')
      return parseObject(out, depth);
    if (c == '[')
      return parseArray(out, depth);
    if (c == '"') {
      out.kind = Json::String;
      return parseString(out.text);
    }
    if (c == 't') {
      out.kind = Json::Bool;
      out.boolean = true;
      return literal("true");
    }
    if (c == 'f') {
      out.kind = Json::Bool;
      out.boolean = false;
      return literal("false");
    }
    if (c == 'n') {
      out.kind = Json::Null;
      return literal("null");
    }
    if (c == '-' || (c >= '0' && c <= '9'))
      return parseNumber(out);
    return error(std::string("unexpected character '") + c + "'");
  }

  bool parseNumber(Json &out) {
    size_t start = pos;
    if (text[pos] == '-')
      ++pos;
    auto digits = [&] {
      size_t s = pos;
      while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9')
        ++pos;
      return pos > s;
    };
    if (!digits())
      return error("invalid number");
    if (pos < text.size() && text[pos] == '.') {
      ++pos;
      if (!digits())
        return error("invalid number");
    }
    if (pos < text.size() && (text[pos] == 'e' || text[pos] == 'E')) {
      ++pos;
      if (pos < text.size() && (text[pos] == '+' || text[pos] == '-'))
        ++pos;
      if (!digits())
        return error("invalid number");
    }
    out.kind = Json::Number;
    out.text = text.substr(start, pos - start);
    out.number = std::strtod(out.text.c_str(), nullptr);
    return true;
  }

  static void appendUtf8(std::string &s, uint32_t cp) {
    if (cp < 0x80) {
      s += char(cp);
    } else if (cp < 0x800) {
      s += char(0xC0 | (cp >> 6));
      s += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      s += char(0xE0 | (cp >> 12));
      s += char(0x80 | ((cp >> 6) & 0x3F));
      s += char(0x80 | (cp & 0x3F));
    } else {
      s += char(0xF0 | (cp >> 18));
      s += char(0x80 | ((cp >> 12) & 0x3F));
      s += char(0x80 | ((cp >> 6) & 0x3F));
      s += char(0x80 | (cp & 0x3F));
    }
  }

  bool hex4(uint32_t &v) {
    if (pos + 4 > text.size())
      return error("truncated \\u escape");
    v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = text[pos++];
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= c - '0';
      else if (c >= 'a' && c <= 'f')
        v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        v |= c - 'A' + 10;
      else
        return error("invalid \\u escape");
    }
    return true;
  }

  bool parseString(std::string &out) {
    ++pos; // opening quote
    out.clear();
    while (true) {
      if (pos >= text.size())
        return error("unterminated string");
      char c = text[pos++];
      if (c == '"')
        return true;
      if (static_cast<unsigned char>(c) < 0x20)
        return error("control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos >= text.size())
        return error("unterminated string");
      char e = text[pos++];
      switch (e) {
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case '/': out += '/'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'u': {
        uint32_t cp;
        if (!hex4(cp))
          return false;
        if (cp >= 0xD800 && cp < 0xDC00 && text.compare(pos, 2, "\\u") == 0) {
          pos += 2;
          uint32_t lo;
          if (!hex4(lo))
            return false;
          if (lo >= 0xDC00 && lo < 0xE000)
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        appendUtf8(out, cp);
        break;
      }
      default:
        --pos;
        return error(std::string("invalid escape '\\") + e + "'");
      }
    }
  }

  bool parseArray(Json &out, int depth) {
    ++pos;
    out.kind = Json::Array;
    skipSpace();
    if (pos < text.size() && text[pos] == ']') {
      ++pos;
      return true;
    }
    while (true) {
      skipSpace();
      out.items.emplace_back();
      if (!parseValue(out.items.back(), depth + 1))
        return false;
      skipSpace();
      if (pos >= text.size())
        return error("unterminated array");
      if (text[pos] == ',') {
        ++pos;
        continue;
      }
      if (text[pos] == ']') {
        ++pos;
        return true;
      }
      return error("expected ',' or ']' in array");
    }
  }

  bool parseObject(Json &out, int depth) {
    ++pos;
    out.kind = Json::Object;
    skipSpace();
    if (pos < text.size() && text[pos] == '}') {
      ++pos;
      return true;
    }
    while (true) {
      skipSpace();
      if (pos >= text.size() || text[pos] != '"')
        return error("expected a string key in object");
      std::string key;
      if (!parseString(key))
        return false;
      skipSpace();
      if (pos >= text.size() || text[pos] != ':')
        return error("expected ':' after key");
      ++pos;
      skipSpace();
      out.members.emplace_back(std::move(key), Json());
      if (!parseValue(out.members.back().second, depth + 1))
        return false;
      skipSpace();
      if (pos >= text.size())
        return error("unterminated object");
      if (text[pos] == ',') {
        ++pos;
        continue;
      }
      if (text[pos] == '}') {
        ++pos;
        return true;
      }
      return error("expected ',' or '}' in object");
    }
  }
};

} // namespace

bool parseJson(const std::string &text, Json &out, std::string &err) {
  out = Json();
  return Parser(text).parseDocument(out, err);
}

std::string jsonQuote(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
    case '"': out += "\\\""; break;
    case '\\': out += "\\\\"; break;
    case '\n': out += "\\n"; break;
    case '\r': out += "\\r"; break;
    case '\t': out += "\\t"; break;
    case '\b': out += "\\b"; break;
    case '\f': out += "\\f"; break;
    default:
      if (static_cast<unsigned char>(c) < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
      } else {
        out += c;
      }
    }
  }
  return out + "\"";
}

std::string formatFloat(double v) {
  if (!std::isfinite(v))
    return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

bool readFile(const std::string &path, std::string &out, std::string &err) {
  std::FILE *f = std::fopen(path.c_str(), "rb");
  if (!f) {
    err = "cannot open '" + path + "': " + std::strerror(errno);
    return false;
  }
  out.clear();
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0)
    out.append(buf, n);
  bool bad = std::ferror(f);
  std::fclose(f);
  if (bad) {
    err = "cannot read '" + path + "'";
    return false;
  }
  return true;
}

} // namespace dsrt::io
