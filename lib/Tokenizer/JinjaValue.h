//===- JinjaValue.h - the values a chat template computes with -----------------===//
//
// Jinja's values as Python has them: undefined, none, booleans, integers, floats, strings,
// lists and dicts (shared, so that a namespace() is changed in place), with Python's
// truthiness, equality, ordering and printing.
//
#ifndef DS_LIB_TOKENIZER_JINJAVALUE_H
#define DS_LIB_TOKENIZER_JINJAVALUE_H

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace dstok::jinja {

struct Value {
  enum Kind { Undefined, None, Bool, Int, Float, String, List, Dict } kind = Undefined;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::shared_ptr<std::vector<Value>> list;
  /// Keys in insertion order (Python dicts keep it).
  std::shared_ptr<std::vector<std::pair<std::string, Value>>> dict;

  static Value none() { return make(None); }
  static Value boolean(bool v) {
    Value x = make(Bool);
    x.b = v;
    return x;
  }
  static Value integer(int64_t v) {
    Value x = make(Int);
    x.i = v;
    return x;
  }
  static Value real(double v) {
    Value x = make(Float);
    x.f = v;
    return x;
  }
  static Value string(std::string v) {
    Value x = make(String);
    x.s = std::move(v);
    return x;
  }
  static Value newList() {
    Value x = make(List);
    x.list = std::make_shared<std::vector<Value>>();
    return x;
  }
  static Value newDict() {
    Value x = make(Dict);
    x.dict = std::make_shared<std::vector<std::pair<std::string, Value>>>();
    return x;
  }

  bool defined() const { return kind != Undefined; }
  bool isNumber() const { return kind == Int || kind == Float || kind == Bool; }
  double number() const { return kind == Float ? f : kind == Bool ? b : static_cast<double>(i); }
  /// Python's bool().
  bool truthy() const;
  /// A dict's entry, or undefined.
  Value get(const std::string &key) const;
  void set(const std::string &key, Value v);
  /// str() as Jinja prints it (None, True, lists as Python's repr).
  std::string str() const;
  /// Python's repr() (strings quoted).
  std::string repr() const;
  /// json.dumps with HF's tojson defaults (no ASCII escaping).
  std::string json(int indent = -1, int depth = 0) const;
  size_t length() const;

private:
  static Value make(Kind k) {
    Value x;
    x.kind = k;
    return x;
  }
};

bool equal(const Value &a, const Value &b);
/// -1, 0, 1; false in `ok` when the two cannot be ordered.
int compare(const Value &a, const Value &b, bool &ok);

} // namespace dstok::jinja

#endif
