//===- Regex.cpp - a backtracking matcher for pre-tokenizer patterns -----------===//
#include "Regex.h"

#include "Unicode.h"

#include <functional>

namespace dstok {

/// One item of a class: a range of code points, or a set of general categories, white space
/// or word characters, each possibly negated.
struct ClassItem {
  enum Kind { Range, Categories, Space, Word } kind = Range;
  char32_t lo = 0, hi = 0;
  uint32_t mask = 0;
  bool negated = false;
  bool matches(char32_t c, bool icase) const {
    bool in = false;
    switch (kind) {
    case Range:
      in = c >= lo && c <= hi;
      if (!in && icase) {
        char32_t f = foldCase(c);
        in = (f >= lo && f <= hi) || (lo == hi && foldCase(lo) == f);
      }
      break;
    case Categories:
      in = inCategories(c, mask);
      break;
    case Space:
      in = isSpace(c);
      break;
    case Word:
      in = c == '_' || inCategories(c, categoryMask("L") | categoryMask("M") |
                                           categoryMask("Nd"));
      break;
    }
    return in != negated;
  }
};

struct Regex::Node {
  enum Kind { Alt, Seq, Repeat, Class, Any, Ahead } kind = Seq;
  std::vector<std::unique_ptr<Node>> kids;
  std::vector<ClassItem> items; ///< Class: matches when any item does (`negated`: none)
  bool negated = false, icase = false, greedy = true;
  size_t min = 0, max = 0; ///< Repeat; max SIZE_MAX: unbounded
  bool singleChar() const { return kind == Class || kind == Any; }
  bool matchChar(char32_t c) const {
    if (kind == Any)
      return c != '\n';
    bool any = false;
    for (const ClassItem &i : items)
      any = any || i.matches(c, icase);
    return any != negated;
  }
};

namespace {
using Node = Regex::Node;
using Cont = std::function<bool(size_t)>;

class Parser {
public:
  Parser(const std::string &pattern) : p(codePoints(pattern)) {}
  std::unique_ptr<Node> parse(std::string &err) {
    auto n = alt(false);
    if (error.empty() && i != p.size())
      error = "an unmatched ')'";
    if (!error.empty()) {
      err = error;
      return nullptr;
    }
    return n;
  }

private:
  std::vector<char32_t> p;
  size_t i = 0;
  std::string error;

  bool more() const { return i < p.size() && error.empty(); }
  void fail(const std::string &why) {
    if (error.empty())
      error = why + " at offset " + std::to_string(i);
  }

  std::unique_ptr<Node> alt(bool icase) {
    auto n = std::make_unique<Node>();
    n->kind = Node::Alt;
    n->kids.push_back(seq(icase));
    while (more() && p[i] == '|') {
      ++i;
      n->kids.push_back(seq(icase));
    }
    return n;
  }

  std::unique_ptr<Node> seq(bool icase) {
    auto n = std::make_unique<Node>();
    n->kind = Node::Seq;
    while (more() && p[i] != '|' && p[i] != ')') {
      auto atom = this->atom(icase);
      if (!atom)
        return n;
      n->kids.push_back(quantified(std::move(atom)));
    }
    return n;
  }

  bool number(size_t &v) {
    size_t start = i;
    v = 0;
    while (i < p.size() && p[i] >= '0' && p[i] <= '9')
      v = v * 10 + (p[i++] - '0');
    return i > start;
  }

  std::unique_ptr<Node> quantified(std::unique_ptr<Node> atom) {
    if (!more())
      return atom;
    size_t lo = 0, hi = 0;
    char32_t q = p[i];
    if (q == '?' || q == '*' || q == '+') {
      ++i;
      lo = q == '+' ? 1 : 0;
      hi = q == '?' ? 1 : SIZE_MAX;
    } else if (q == '{') {
      size_t save = i++;
      if (!number(lo)) {
        i = save; // a literal '{'
        return atom;
      }
      hi = lo;
      if (i < p.size() && p[i] == ',') {
        ++i;
        if (!number(hi))
          hi = SIZE_MAX;
      }
      if (i >= p.size() || p[i] != '}') {
        fail("a malformed {m,n}");
        return atom;
      }
      ++i;
    } else {
      return atom;
    }
    auto r = std::make_unique<Node>();
    r->kind = Node::Repeat;
    r->min = lo;
    r->max = hi;
    if (i < p.size() && p[i] == '?') {
      r->greedy = false;
      ++i;
    } else if (i < p.size() && p[i] == '+') {
      fail("a possessive quantifier (not supported)");
    }
    r->kids.push_back(std::move(atom));
    return quantified(std::move(r));
  }

  std::unique_ptr<Node> literal(char32_t c, bool icase) {
    auto n = std::make_unique<Node>();
    n->kind = Node::Class;
    n->icase = icase;
    n->items.push_back({ClassItem::Range, c, c});
    return n;
  }

  /// An escape after '\': fills `item`; returns false when it is not a class escape.
  bool escape(ClassItem &item, char32_t &literalOut) {
    if (i >= p.size()) {
      fail("a trailing '\\'");
      return false;
    }
    char32_t e = p[i++];
    switch (e) {
    case 's':
    case 'S':
      item = {ClassItem::Space};
      item.negated = e == 'S';
      return true;
    case 'd':
    case 'D':
      item = {ClassItem::Categories};
      item.mask = categoryMask("Nd");
      item.negated = e == 'D';
      return true;
    case 'w':
    case 'W':
      item = {ClassItem::Word};
      item.negated = e == 'W';
      return true;
    case 'p':
    case 'P': {
      std::string name;
      if (i < p.size() && p[i] == '{') {
        ++i;
        while (i < p.size() && p[i] != '}')
          name.push_back(static_cast<char>(p[i++]));
        ++i;
      } else if (i < p.size()) {
        name.push_back(static_cast<char>(p[i++]));
      }
      item = {ClassItem::Categories};
      item.mask = categoryMask(name);
      item.negated = e == 'P';
      if (!item.mask)
        fail("the property \\p{" + name + "} (not a general category)");
      return true;
    }
    case 'r':
      literalOut = '\r';
      return false;
    case 'n':
      literalOut = '\n';
      return false;
    case 't':
      literalOut = '\t';
      return false;
    case 'f':
      literalOut = '\f';
      return false;
    case 'v':
      literalOut = '\v';
      return false;
    default:
      if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9'))
        fail(std::string("the escape \\") + static_cast<char>(e) + " (not supported)");
      literalOut = e;
      return false;
    }
  }

  std::unique_ptr<Node> bracket(bool icase) {
    auto n = std::make_unique<Node>();
    n->kind = Node::Class;
    n->icase = icase;
    if (i < p.size() && p[i] == '^') {
      n->negated = true;
      ++i;
    }
    bool first = true;
    while (i < p.size() && (p[i] != ']' || first) && error.empty()) {
      first = false;
      char32_t c = p[i++];
      ClassItem item;
      if (c == '\\') {
        if (escape(item, c)) {
          n->items.push_back(item);
          continue;
        }
      } else if (c == '[') {
        fail("a nested class (not supported)");
      }
      char32_t hi = c;
      if (i + 1 < p.size() && p[i] == '-' && p[i + 1] != ']') {
        ++i;
        hi = p[i++];
        if (hi == '\\') {
          ClassItem unused;
          if (escape(unused, hi))
            fail("a range ending in a class escape");
        }
      }
      n->items.push_back({ClassItem::Range, c, hi});
    }
    if (i >= p.size())
      fail("an unclosed '['");
    ++i;
    return n;
  }

  std::unique_ptr<Node> atom(bool icase) {
    char32_t c = p[i++];
    switch (c) {
    case '(': {
      bool ahead = false, negAhead = false, inner = icase;
      if (i < p.size() && p[i] == '?') {
        ++i;
        if (i < p.size() && (p[i] == '=' || p[i] == '!')) {
          ahead = true;
          negAhead = p[i++] == '!';
        } else if (i < p.size() && p[i] == ':') {
          ++i;
        } else if (i + 1 < p.size() && p[i] == 'i' && p[i + 1] == ':') {
          inner = true;
          i += 2;
        } else {
          fail("a group kind other than (?:, (?i:, (?= and (?!");
          return nullptr;
        }
      }
      auto body = alt(inner);
      if (i >= p.size() || p[i] != ')') {
        fail("an unclosed '('");
        return nullptr;
      }
      ++i;
      if (!ahead)
        return body;
      auto n = std::make_unique<Node>();
      n->kind = Node::Ahead;
      n->negated = negAhead;
      n->kids.push_back(std::move(body));
      return n;
    }
    case '[':
      return bracket(icase);
    case '.': {
      auto n = std::make_unique<Node>();
      n->kind = Node::Any;
      return n;
    }
    case '\\': {
      ClassItem item;
      char32_t lit = 0;
      if (escape(item, lit)) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Class;
        n->items.push_back(item);
        return n;
      }
      return literal(lit, icase);
    }
    case '^':
    case '$':
      fail("anchors (not supported)");
      return nullptr;
    case '*':
    case '+':
    case '?':
      fail("a quantifier with nothing before it");
      return nullptr;
    default:
      return literal(c, icase);
    }
  }
};

class Matcher {
public:
  explicit Matcher(const std::vector<char32_t> &t) : t(t) {}

  bool match(const Node &n, size_t at, const Cont &k) const {
    switch (n.kind) {
    case Node::Alt:
      for (const auto &kid : n.kids)
        if (match(*kid, at, k))
          return true;
      return false;
    case Node::Seq:
      return seq(n, 0, at, k);
    case Node::Class:
    case Node::Any:
      return at < t.size() && n.matchChar(t[at]) && k(at + 1);
    case Node::Ahead: {
      bool found = match(*n.kids[0], at, [](size_t) { return true; });
      return found != n.negated && k(at);
    }
    case Node::Repeat:
      if (n.kids[0]->singleChar())
        return repeatChar(n, at, k);
      return repeat(n, 0, at, k);
    }
    return false;
  }

private:
  const std::vector<char32_t> &t;

  bool seq(const Node &n, size_t from, size_t at, const Cont &k) const {
    if (from == n.kids.size())
      return k(at);
    return match(*n.kids[from], at, [&](size_t j) { return seq(n, from + 1, j, k); });
  }

  /// A repeated single character: the longest run first (or the shortest when lazy), no
  /// recursion per character.
  bool repeatChar(const Node &n, size_t at, const Cont &k) const {
    const Node &c = *n.kids[0];
    size_t run = 0;
    while (run < n.max && at + run < t.size() && c.matchChar(t[at + run]))
      ++run;
    if (run < n.min)
      return false;
    if (n.greedy) {
      for (size_t r = run + 1; r-- > n.min;)
        if (k(at + r))
          return true;
    } else {
      for (size_t r = n.min; r <= run; ++r)
        if (k(at + r))
          return true;
    }
    return false;
  }

  bool repeat(const Node &n, size_t count, size_t at, const Cont &k) const {
    auto again = [&](size_t j) { return j != at && repeat(n, count + 1, j, k); };
    if (!n.greedy && count >= n.min && k(at))
      return true;
    if (count < n.max && match(*n.kids[0], at, again))
      return true;
    return n.greedy && count >= n.min && k(at);
  }
};
} // namespace

Regex::Regex(std::unique_ptr<Node> root) : root_(std::move(root)) {}
Regex::~Regex() = default;

std::unique_ptr<Regex> Regex::compile(const std::string &pattern, std::string &err) {
  Parser parser(pattern);
  std::unique_ptr<Node> root = parser.parse(err);
  if (!root)
    return nullptr;
  return std::unique_ptr<Regex>(new Regex(std::move(root)));
}

std::vector<std::pair<size_t, size_t>>
Regex::findAll(const std::vector<char32_t> &text) const {
  std::vector<std::pair<size_t, size_t>> out;
  Matcher m(text);
  size_t end = 0;
  for (size_t at = 0; at < text.size();) {
    if (m.match(*root_, at, [&](size_t j) {
          end = j;
          return true;
        }) &&
        end > at) {
      out.emplace_back(at, end);
      at = end;
    } else {
      ++at;
    }
  }
  return out;
}

} // namespace dstok
