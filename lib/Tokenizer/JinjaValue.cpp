//===- JinjaValue.cpp - the values a chat template computes with ---------------===//
#include "JinjaValue.h"

#include <cmath>
#include <cstdio>

namespace dstok::jinja {

bool Value::truthy() const {
  switch (kind) {
  case Undefined:
  case None:
    return false;
  case Bool:
    return b;
  case Int:
    return i != 0;
  case Float:
    return f != 0;
  case String:
    return !s.empty();
  case List:
    return !list->empty();
  case Dict:
    return !dict->empty();
  }
  return false;
}

Value Value::get(const std::string &key) const {
  if (kind == Dict)
    for (const auto &[k, v] : *dict)
      if (k == key)
        return v;
  return Value();
}

void Value::set(const std::string &key, Value v) {
  for (auto &[k, old] : *dict)
    if (k == key) {
      old = std::move(v);
      return;
    }
  dict->emplace_back(key, std::move(v));
}

size_t Value::length() const {
  switch (kind) {
  case String: {
    size_t n = 0; // code points
    for (unsigned char c : s)
      n += (c & 0xC0) != 0x80;
    return n;
  }
  case List:
    return list->size();
  case Dict:
    return dict->size();
  default:
    return 0;
  }
}

namespace {
std::string floatText(double f) {
  if (std::isfinite(f) && f == std::floor(f) && std::fabs(f) < 1e16) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", f);
    return buf;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", f);
  // The shortest text that reads back the same, as Python's repr.
  for (int p = 1; p <= 17; ++p) {
    char t[32];
    std::snprintf(t, sizeof t, "%.*g", p, f);
    if (std::strtod(t, nullptr) == f)
      return t;
  }
  return buf;
}

std::string quoteJson(const std::string &s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    case '\b':
      out += "\\b";
      break;
    case '\f':
      out += "\\f";
      break;
    default:
      if (c < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
      } else {
        out.push_back(static_cast<char>(c));
      }
    }
  }
  return out + "\"";
}
} // namespace

std::string Value::repr() const {
  if (kind != String)
    return str();
  char quote = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"'
                                                                                      : '\'';
  std::string out(1, quote);
  for (char c : s) {
    if (c == quote || c == '\\')
      out.push_back('\\');
    if (c == '\n')
      out += "\\n";
    else
      out.push_back(c);
  }
  return out + quote;
}

std::string Value::str() const {
  switch (kind) {
  case Undefined:
    return "";
  case None:
    return "None";
  case Bool:
    return b ? "True" : "False";
  case Int:
    return std::to_string(i);
  case Float:
    return floatText(f);
  case String:
    return s;
  case List: {
    std::string out = "[";
    for (size_t k = 0; k < list->size(); ++k)
      out += (k ? ", " : "") + (*list)[k].repr();
    return out + "]";
  }
  case Dict: {
    std::string out = "{";
    for (size_t k = 0; k < dict->size(); ++k)
      out += (k ? ", " : "") + Value::string((*dict)[k].first).repr() + ": " +
             (*dict)[k].second.repr();
    return out + "}";
  }
  }
  return "";
}

std::string Value::json(int indent, int depth) const {
  std::string nl, pad, padIn;
  if (indent >= 0) {
    nl = "\n";
    pad = std::string(static_cast<size_t>(indent * depth), ' ');
    padIn = std::string(static_cast<size_t>(indent * (depth + 1)), ' ');
  }
  const char *sep = indent >= 0 ? "," : ", ";
  switch (kind) {
  case Undefined:
  case None:
    return "null";
  case Bool:
    return b ? "true" : "false";
  case Int:
    return std::to_string(i);
  case Float:
    return floatText(f);
  case String:
    return quoteJson(s);
  case List: {
    if (list->empty())
      return "[]";
    std::string out = "[" + nl;
    for (size_t k = 0; k < list->size(); ++k)
      out += (k ? sep + nl : "") + padIn + (*list)[k].json(indent, depth + 1);
    return out + nl + pad + "]";
  }
  case Dict: {
    if (dict->empty())
      return "{}";
    std::string out = "{" + nl;
    for (size_t k = 0; k < dict->size(); ++k)
      out += (k ? sep + nl : "") + padIn + quoteJson((*dict)[k].first) + ": " +
             (*dict)[k].second.json(indent, depth + 1);
    return out + nl + pad + "}";
  }
  }
  return "null";
}

bool equal(const Value &a, const Value &b) {
  if (a.isNumber() && b.isNumber())
    return a.number() == b.number();
  if (a.kind != b.kind)
    return (a.kind == Value::Undefined || a.kind == Value::None) &&
           (b.kind == Value::Undefined || b.kind == Value::None) && a.kind == b.kind;
  switch (a.kind) {
  case Value::String:
    return a.s == b.s;
  case Value::List:
    if (a.list->size() != b.list->size())
      return false;
    for (size_t k = 0; k < a.list->size(); ++k)
      if (!equal((*a.list)[k], (*b.list)[k]))
        return false;
    return true;
  case Value::Dict:
    if (a.dict->size() != b.dict->size())
      return false;
    for (const auto &[k, v] : *a.dict)
      if (!equal(b.get(k), v))
        return false;
    return true;
  default:
    return true;
  }
}

int compare(const Value &a, const Value &b, bool &ok) {
  ok = true;
  if (a.isNumber() && b.isNumber())
    return a.number() < b.number() ? -1 : a.number() > b.number() ? 1 : 0;
  if (a.kind == Value::String && b.kind == Value::String)
    return a.s < b.s ? -1 : a.s > b.s ? 1 : 0;
  ok = false;
  return 0;
}

} // namespace dstok::jinja
