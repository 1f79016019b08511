//===- ChatTemplate.cpp - HF chat templates: Jinja's lexer, parser and renderer ---===//
//
// Rendered as transformers does: Jinja with trim_blocks and lstrip_blocks, the loopcontrols
// extension (break, continue) and HF's {% generation %} marker, raise_exception and
// strftime_now as functions, tojson without ASCII escaping.
//
#include "ds/Tokenizer/ChatTemplate.h"

#include "JinjaValue.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <functional>

namespace dstok {

using jinja::Value;

namespace {
struct Failure {
  std::string message;
};
[[noreturn]] void raise(const std::string &m) { throw Failure{m}; }

//===--------------------------------------------------------------------===//
// Expressions.
//===--------------------------------------------------------------------===//

struct Token {
  enum Kind { Name, Number, Str, Op, End } kind = End;
  std::string text;
  Value number;
};

std::vector<Token> lex(const std::string &src) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < src.size()) {
    char c = src[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    Token t;
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < src.size() && (std::isalnum(static_cast<unsigned char>(src[j])) || src[j] == '_'))
        ++j;
      t.kind = Token::Name;
      t.text = src.substr(i, j - i);
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      bool isFloat = false;
      while (j < src.size() && (std::isdigit(static_cast<unsigned char>(src[j])) ||
                                (src[j] == '.' && j + 1 < src.size() &&
                                 std::isdigit(static_cast<unsigned char>(src[j + 1])))))
        isFloat |= src[j++] == '.';
      t.kind = Token::Number;
      t.text = src.substr(i, j - i);
      t.number = isFloat ? Value::real(std::stod(t.text))
                         : Value::integer(std::stoll(t.text));
      i = j;
    } else if (c == '\'' || c == '"') {
      size_t j = i + 1;
      std::string s;
      for (; j < src.size() && src[j] != c; ++j) {
        if (src[j] == '\\' && j + 1 < src.size()) {
          char e = src[++j];
          s.push_back(e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e);
        } else {
          s.push_back(src[j]);
        }
      }
      if (j >= src.size())
        raise("an unterminated string");
      t.kind = Token::Str;
      t.text = s;
      i = j + 1;
    } else {
      static const char *ops[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/",
                                  "%",  "~",  "<",  ">",  "(",  ")",  "[", "]", "{", "}",
                                  ",",  ":",  ".",  "|",  "="};
      bool found = false;
      for (const char *op : ops)
        if (src.compare(i, std::strlen(op), op) == 0) {
          t.kind = Token::Op;
          t.text = op;
          i += std::strlen(op);
          found = true;
          break;
        }
      if (!found)
        raise(std::string("the character '") + c + "'");
    }
    out.push_back(std::move(t));
  }
  out.push_back(Token{});
  return out;
}

struct Expr;
using ExprPtr = std::shared_ptr<Expr>;
struct Scope;

struct Expr {
  enum Kind { Lit, Var, Attr, Index, Slice, Call, Filter, Test, Unary, Binary, Cond, ListLit,
              DictLit } kind;
  Value value;                      ///< Lit
  std::string name;                 ///< Var, Attr, Call's function, Filter, Test, operators
  std::vector<ExprPtr> args;        ///< operands, call and filter arguments
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negated = false;             ///< Test: "is not"
  explicit Expr(Kind k) : kind(k) {}
};

class ExprParser {
public:
  explicit ExprParser(std::vector<Token> t) : toks(std::move(t)) {}
  ExprPtr parseAll() {
    ExprPtr e = expression();
    if (peek().kind != Token::End)
      raise("'" + peek().text + "' after an expression");
    return e;
  }
  const Token &peek(size_t k = 0) const { return toks[std::min(pos + k, toks.size() - 1)]; }
  bool isOp(const char *op, size_t k = 0) const {
    return peek(k).kind == Token::Op && peek(k).text == op;
  }
  bool isName(const char *n, size_t k = 0) const {
    return peek(k).kind == Token::Name && peek(k).text == n;
  }
  Token next() { return toks[std::min(pos++, toks.size() - 1)]; }
  void expect(const char *op) {
    if (!isOp(op))
      raise(std::string("'") + op + "' expected, not '" + peek().text + "'");
    ++pos;
  }
  std::string name() {
    if (peek().kind != Token::Name)
      raise("a name expected, not '" + peek().text + "'");
    return next().text;
  }
  bool atEnd() const { return peek().kind == Token::End; }

  ExprPtr expression() {
    ExprPtr e = orExpr();
    if (isName("if")) { // a if c else b
      ++pos;
      auto c = std::make_shared<Expr>(Expr::Cond);
      c->args.push_back(orExpr());
      c->args.push_back(e);
      if (isName("else")) {
        ++pos;
        c->args.push_back(expression());
      }
      return c;
    }
    return e;
  }

private:
  std::vector<Token> toks;
  size_t pos = 0;

  ExprPtr binary(const std::string &op, ExprPtr a, ExprPtr b) {
    auto e = std::make_shared<Expr>(Expr::Binary);
    e->name = op;
    e->args = {std::move(a), std::move(b)};
    return e;
  }
  ExprPtr orExpr() {
    ExprPtr e = andExpr();
    while (isName("or")) {
      ++pos;
      e = binary("or", e, andExpr());
    }
    return e;
  }
  ExprPtr andExpr() {
    ExprPtr e = notExpr();
    while (isName("and")) {
      ++pos;
      e = binary("and", e, notExpr());
    }
    return e;
  }
  ExprPtr notExpr() {
    if (isName("not")) {
      ++pos;
      auto e = std::make_shared<Expr>(Expr::Unary);
      e->name = "not";
      e->args.push_back(notExpr());
      return e;
    }
    return comparison();
  }
  ExprPtr comparison() {
    ExprPtr e = concat();
    for (;;) {
      if (peek().kind == Token::Op &&
          (peek().text == "==" || peek().text == "!=" || peek().text == "<" ||
           peek().text == ">" || peek().text == "<=" || peek().text == ">=")) {
        std::string op = next().text;
        e = binary(op, e, concat());
      } else if (isName("in")) {
        ++pos;
        e = binary("in", e, concat());
      } else if (isName("not") && isName("in", 1)) {
        pos += 2;
        e = binary("not in", e, concat());
      } else if (isName("is")) {
        ++pos;
        auto t = std::make_shared<Expr>(Expr::Test);
        if (isName("not")) {
          ++pos;
          t->negated = true;
        }
        t->name = name();
        t->args.push_back(e);
        if (peek().kind == Token::Str || peek().kind == Token::Number)
          t->args.push_back(primary());
        e = t;
      } else {
        return e;
      }
    }
  }
  ExprPtr concat() {
    ExprPtr e = additive();
    while (isOp("~")) {
      ++pos;
      e = binary("~", e, additive());
    }
    return e;
  }
  ExprPtr additive() {
    ExprPtr e = multiplicative();
    while (isOp("+") || isOp("-")) {
      std::string op = next().text;
      e = binary(op, e, multiplicative());
    }
    return e;
  }
  ExprPtr multiplicative() {
    ExprPtr e = unary();
    while (isOp("*") || isOp("/") || isOp("//") || isOp("%")) {
      std::string op = next().text;
      e = binary(op, e, unary());
    }
    return e;
  }
  ExprPtr unary() {
    if (isOp("-") || isOp("+")) {
      auto e = std::make_shared<Expr>(Expr::Unary);
      e->name = next().text;
      e->args.push_back(unary());
      return e;
    }
    return postfix(primary());
  }
  void callArgs(Expr &e) {
    expect("(");
    while (!isOp(")")) {
      if (peek().kind == Token::Name && isOp("=", 1)) {
        std::string k = name();
        ++pos;
        e.kwargs.emplace_back(k, expression());
      } else {
        e.args.push_back(expression());
      }
      if (!isOp(","))
        break;
      ++pos;
    }
    expect(")");
  }
  ExprPtr postfix(ExprPtr e) {
    for (;;) {
      if (isOp(".")) {
        ++pos;
        auto a = std::make_shared<Expr>(Expr::Attr);
        a->name = name();
        a->args.push_back(e);
        e = a;
      } else if (isOp("[")) {
        ++pos;
        ExprPtr lo, hi;
        if (!isOp(":"))
          lo = expression();
        if (isOp(":")) {
          ++pos;
          auto s = std::make_shared<Expr>(Expr::Slice);
          if (!isOp("]") && !isOp(":"))
            hi = expression();
          ExprPtr step;
          if (isOp(":")) {
            ++pos;
            if (!isOp("]"))
              step = expression();
          }
          s->args = {e, lo, hi, step};
          e = s;
        } else {
          auto x = std::make_shared<Expr>(Expr::Index);
          x->args = {e, lo};
          e = x;
        }
        expect("]");
      } else if (isOp("(")) {
        auto c = std::make_shared<Expr>(Expr::Call);
        c->args.push_back(e);
        callArgs(*c);
        e = c;
      } else if (isOp("|")) {
        ++pos;
        auto f = std::make_shared<Expr>(Expr::Filter);
        f->name = name();
        f->args.push_back(e);
        if (isOp("("))
          callArgs(*f);
        e = f;
      } else {
        return e;
      }
    }
  }
  ExprPtr primary() {
    Token t = next();
    switch (t.kind) {
    case Token::Number: {
      auto e = std::make_shared<Expr>(Expr::Lit);
      e->value = t.number;
      return e;
    }
    case Token::Str: {
      auto e = std::make_shared<Expr>(Expr::Lit);
      e->value = Value::string(t.text);
      while (peek().kind == Token::Str) // adjacent strings join
        e->value.s += next().text;
      return e;
    }
    case Token::Name: {
      auto e = std::make_shared<Expr>(Expr::Lit);
      if (t.text == "true" || t.text == "True")
        e->value = Value::boolean(true);
      else if (t.text == "false" || t.text == "False")
        e->value = Value::boolean(false);
      else if (t.text == "none" || t.text == "None")
        e->value = Value::none();
      else {
        e = std::make_shared<Expr>(Expr::Var);
        e->name = t.text;
      }
      return e;
    }
    case Token::Op:
      if (t.text == "(") {
        ExprPtr e = expression();
        if (isOp(",")) { // a tuple: a list here
          auto l = std::make_shared<Expr>(Expr::ListLit);
          l->args.push_back(e);
          while (isOp(",")) {
            ++pos;
            if (isOp(")"))
              break;
            l->args.push_back(expression());
          }
          e = l;
        }
        expect(")");
        return e;
      }
      if (t.text == "[") {
        auto l = std::make_shared<Expr>(Expr::ListLit);
        while (!isOp("]")) {
          l->args.push_back(expression());
          if (!isOp(","))
            break;
          ++pos;
        }
        expect("]");
        return l;
      }
      if (t.text == "{") {
        auto d = std::make_shared<Expr>(Expr::DictLit);
        while (!isOp("}")) {
          d->args.push_back(expression());
          expect(":");
          d->args.push_back(expression());
          if (!isOp(","))
            break;
          ++pos;
        }
        expect("}");
        return d;
      }
      raise("'" + t.text + "' where a value belongs");
    case Token::End:
      raise("an expression ends too early");
    }
    raise("a malformed expression");
  }
};

//===--------------------------------------------------------------------===//
// Statements.
//===--------------------------------------------------------------------===//

} // namespace

struct ChatTemplate::Node {
  enum Kind { Block, Text, Output, If, For, Set, Break, Continue } kind = Block;
  std::string text;                                     ///< Text
  std::vector<std::unique_ptr<Node>> body;              ///< Block
  ExprPtr expr;                                         ///< Output, Set's value, For's iterable
  std::vector<std::pair<ExprPtr, std::unique_ptr<Node>>> branches; ///< If (null: else)
  std::vector<std::string> vars;                        ///< For's names; Set's target (a.b)
  ExprPtr filter;                                       ///< For ... if
  std::unique_ptr<Node> elseBody;                       ///< For's else
};

namespace {
using Node = ChatTemplate::Node;

/// The template as text, expression and statement pieces, whitespace control applied
/// (trim_blocks, lstrip_blocks, '-' and '+').
struct Piece {
  enum Kind { Text, Expr, Stmt } kind;
  std::string text;
};

std::vector<Piece> split(const std::string &src) {
  std::vector<Piece> out;
  size_t i = 0;
  bool trimNext = false, lstripNext = false; // from the previous tag's end
  while (i <= src.size()) {
    size_t open = src.find('{', i);
    while (open != std::string::npos && open + 1 < src.size() && src[open + 1] != '{' &&
           src[open + 1] != '%' && src[open + 1] != '#')
      open = src.find('{', open + 1);
    if (open + 1 >= src.size())
      open = std::string::npos;
    std::string text = src.substr(i, open == std::string::npos ? std::string::npos : open - i);
    bool lineStart = i == 0 || src[i - 1] == '\n';
    if (lstripNext) {
      size_t k = text.find_first_not_of(" \t\r\n");
      text = k == std::string::npos ? "" : text.substr(k);
    } else if (trimNext && !text.empty() && text[0] == '\n') {
      text.erase(0, 1);
      lineStart = true;
    }
    if (open == std::string::npos) {
      out.push_back({Piece::Text, text});
      break;
    }
    char kind = src[open + 1];
    const char *close = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
    size_t end = src.find(close, open + 2);
    if (end == std::string::npos)
      raise(std::string("an unclosed '{") + kind + "'");
    std::string inner = src.substr(open + 2, end - open - 2);
    bool stripBefore = !inner.empty() && inner[0] == '-';
    bool keepBefore = !inner.empty() && inner[0] == '+';
    bool stripAfter = !inner.empty() && inner.back() == '-';
    if (stripBefore || keepBefore)
      inner.erase(0, 1);
    if (stripAfter)
      inner.pop_back();
    if (stripBefore) {
      size_t k = text.find_last_not_of(" \t\r\n");
      text = k == std::string::npos ? "" : text.substr(0, k + 1);
    } else if (kind != '{' && !keepBefore) { // lstrip_blocks
      size_t nl = text.rfind('\n');
      size_t from = nl == std::string::npos ? 0 : nl + 1;
      if ((nl != std::string::npos || lineStart) &&
          text.find_first_not_of(" \t", from) == std::string::npos)
        text.resize(from);
    }
    out.push_back({Piece::Text, text});
    if (kind != '#')
      out.push_back({kind == '{' ? Piece::Expr : Piece::Stmt, inner});
    lstripNext = stripAfter;
    trimNext = kind != '{'; // trim_blocks
    i = end + 2;
  }
  return out;
}

class StmtParser {
public:
  explicit StmtParser(std::vector<Piece> p) : pieces(std::move(p)) {}
  std::unique_ptr<Node> parse() {
    std::string ended;
    auto root = block({}, ended);
    return root;
  }

private:
  std::vector<Piece> pieces;
  size_t pos = 0;

  /// Parses until a statement whose first word is in `enders` (returned in `ended`, its
  /// parser left at the rest of that statement in `rest`).
  std::unique_ptr<Node> block(const std::vector<std::string> &enders, std::string &ended) {
    auto node = std::make_unique<Node>();
    node->kind = Node::Block;
    while (pos < pieces.size()) {
      Piece &p = pieces[pos++];
      if (p.kind == Piece::Text) {
        if (!p.text.empty()) {
          auto t = std::make_unique<Node>();
          t->kind = Node::Text;
          t->text = p.text;
          node->body.push_back(std::move(t));
        }
        continue;
      }
      if (p.kind == Piece::Expr) {
        auto o = std::make_unique<Node>();
        o->kind = Node::Output;
        o->expr = ExprParser(lex(p.text)).parseAll();
        node->body.push_back(std::move(o));
        continue;
      }
      ExprParser ep(lex(p.text));
      std::string word = ep.name();
      if (std::find(enders.begin(), enders.end(), word) != enders.end()) {
        ended = word;
        rest = std::make_unique<ExprParser>(std::move(ep));
        return node;
      }
      node->body.push_back(statement(word, ep));
    }
    if (!enders.empty())
      raise("'{% " + enders.back() + " %}' is missing");
    return node;
  }

  std::unique_ptr<ExprParser> rest;

  std::unique_ptr<Node> statement(const std::string &word, ExprParser &ep) {
    auto n = std::make_unique<Node>();
    if (word == "if") {
      n->kind = Node::If;
      ExprPtr cond = ep.expression();
      for (;;) {
        std::string ended;
        auto body = block({"elif", "else", "endif"}, ended);
        n->branches.emplace_back(cond, std::move(body));
        if (ended == "endif")
          break;
        if (ended == "else") {
          auto elseBody = block({"endif"}, ended);
          n->branches.emplace_back(nullptr, std::move(elseBody));
          break;
        }
        cond = rest->expression();
      }
      return n;
    }
    if (word == "for") {
      n->kind = Node::For;
      n->vars.push_back(ep.name());
      while (ep.isOp(",")) {
        ep.next();
        n->vars.push_back(ep.name());
      }
      if (!ep.isName("in"))
        raise("'in' expected in a for loop");
      ep.next();
      n->expr = ep.expression();
      if (n->expr->kind == Expr::Cond && n->expr->args.size() == 2) { // for x in xs if c
        n->filter = n->expr->args[0];
        n->expr = n->expr->args[1];
      }
      std::string ended;
      auto body = block({"else", "endfor"}, ended);
      n->body.push_back(std::move(body));
      if (ended == "else")
        n->elseBody = block({"endfor"}, ended);
      return n;
    }
    if (word == "set") {
      n->kind = Node::Set;
      n->vars.push_back(ep.name());
      if (ep.isOp(".")) {
        ep.next();
        n->vars.push_back(ep.name());
      }
      if (!ep.isOp("="))
        raise("'{% set %}' blocks (without '=') are not supported");
      ep.next();
      n->expr = ep.expression();
      return n;
    }
    if (word == "break" || word == "continue") {
      n->kind = word == "break" ? Node::Break : Node::Continue;
      return n;
    }
    if (word == "generation") { // HF's marker of the assistant's tokens: its body as is
      std::string ended;
      return block({"endgeneration"}, ended);
    }
    raise("the statement '{% " + word + " %}' is not supported");
  }
};

//===--------------------------------------------------------------------===//
// Rendering.
//===--------------------------------------------------------------------===//

struct Scope {
  std::vector<std::map<std::string, Value>> frames;
  Value lookup(const std::string &name) const {
    for (auto f = frames.rbegin(); f != frames.rend(); ++f)
      if (auto it = f->find(name); it != f->end())
        return it->second;
    return Value();
  }
};

enum class Flow { Normal, Break, Continue };

std::string replaceAll(std::string s, const std::string &from, const std::string &to) {
  if (!from.empty())
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
      s.replace(at, from.size(), to);
  return s;
}

std::string strip(const std::string &s, const std::string &chars, bool left, bool right) {
  size_t b = left ? s.find_first_not_of(chars) : 0;
  if (b == std::string::npos)
    return "";
  size_t e = right ? s.find_last_not_of(chars) : s.size() - 1;
  return s.substr(b, e - b + 1);
}

class Renderer {
public:
  Scope scope;
  std::string out;

  Flow exec(const Node &n) {
    switch (n.kind) {
    case Node::Block:
      for (const auto &c : n.body)
        if (Flow f = exec(*c); f != Flow::Normal)
          return f;
      return Flow::Normal;
    case Node::Text:
      out += n.text;
      return Flow::Normal;
    case Node::Output:
      out += eval(*n.expr).str();
      return Flow::Normal;
    case Node::If:
      for (const auto &[cond, body] : n.branches)
        if (!cond || eval(*cond).truthy())
          return exec(*body);
      return Flow::Normal;
    case Node::Set: {
      Value v = eval(*n.expr);
      if (n.vars.size() == 2) {
        Value target = scope.lookup(n.vars[0]);
        if (target.kind != Value::Dict)
          raise("'" + n.vars[0] + "' is not a namespace");
        target.set(n.vars[1], v);
      } else {
        scope.frames.back()[n.vars[0]] = v;
      }
      return Flow::Normal;
    }
    case Node::Break:
      return Flow::Break;
    case Node::Continue:
      return Flow::Continue;
    case Node::For:
      return loop(n);
    }
    return Flow::Normal;
  }

  Flow loop(const Node &n) {
    Value it = eval(*n.expr);
    std::vector<Value> items;
    if (it.kind == Value::List)
      items = *it.list;
    else if (it.kind == Value::Dict)
      for (const auto &kv : *it.dict)
        items.push_back(Value::string(kv.first));
    else if (it.kind == Value::String)
      for (char c : it.s)
        items.push_back(Value::string(std::string(1, c)));
    else if (it.defined() && it.kind != Value::None)
      raise("a for loop over " + it.str() + ", which is not a sequence");
    scope.frames.emplace_back();
    std::vector<Value> kept;
    for (const Value &x : items) {
      bind(n.vars, x);
      if (!n.filter || eval(*n.filter).truthy())
        kept.push_back(x);
    }
    for (size_t k = 0; k < kept.size(); ++k) {
      bind(n.vars, kept[k]);
      Value info = Value::newDict();
      info.set("index", Value::integer(static_cast<int64_t>(k + 1)));
      info.set("index0", Value::integer(static_cast<int64_t>(k)));
      info.set("revindex", Value::integer(static_cast<int64_t>(kept.size() - k)));
      info.set("revindex0", Value::integer(static_cast<int64_t>(kept.size() - k - 1)));
      info.set("first", Value::boolean(k == 0));
      info.set("last", Value::boolean(k + 1 == kept.size()));
      info.set("length", Value::integer(static_cast<int64_t>(kept.size())));
      info.set("previtem", k ? kept[k - 1] : Value());
      info.set("nextitem", k + 1 < kept.size() ? kept[k + 1] : Value());
      scope.frames.back()["loop"] = info;
      if (exec(*n.body[0]) == Flow::Break)
        break;
    }
    if (kept.empty() && n.elseBody)
      exec(*n.elseBody);
    scope.frames.pop_back();
    return Flow::Normal;
  }

  void bind(const std::vector<std::string> &vars, const Value &x) {
    if (vars.size() == 1) {
      scope.frames.back()[vars[0]] = x;
      return;
    }
    if (x.kind != Value::List || x.list->size() != vars.size())
      raise("a for loop unpacks " + x.str() + " into " + std::to_string(vars.size()) +
            " names");
    for (size_t k = 0; k < vars.size(); ++k)
      scope.frames.back()[vars[k]] = (*x.list)[k];
  }

  Value eval(const Expr &e) {
    switch (e.kind) {
    case Expr::Lit:
      return e.value;
    case Expr::Var:
      return scope.lookup(e.name);
    case Expr::Attr:
      return member(eval(*e.args[0]), e.name);
    case Expr::Index:
      return index(eval(*e.args[0]), eval(*e.args[1]));
    case Expr::Slice:
      return slice(e);
    case Expr::Call:
      return call(e);
    case Expr::Filter:
      return filter(e);
    case Expr::Test: {
      bool r = test(e);
      return Value::boolean(r != e.negated);
    }
    case Expr::Unary: {
      Value v = eval(*e.args[0]);
      if (e.name == "not")
        return Value::boolean(!v.truthy());
      if (v.kind == Value::Int)
        return Value::integer(e.name == "-" ? -v.i : v.i);
      return Value::real(e.name == "-" ? -v.number() : v.number());
    }
    case Expr::Binary:
      return binary(e);
    case Expr::Cond:
      if (eval(*e.args[0]).truthy())
        return eval(*e.args[1]);
      return e.args.size() > 2 ? eval(*e.args[2]) : Value();
    case Expr::ListLit: {
      Value l = Value::newList();
      for (const auto &a : e.args)
        l.list->push_back(eval(*a));
      return l;
    }
    case Expr::DictLit: {
      Value d = Value::newDict();
      for (size_t k = 0; k + 1 < e.args.size(); k += 2)
        d.set(eval(*e.args[k]).str(), eval(*e.args[k + 1]));
      return d;
    }
    }
    return Value();
  }

  Value member(const Value &v, const std::string &name) {
    if (v.kind == Value::Dict)
      return v.get(name);
    return Value(); // methods are looked up by call()
  }

  Value index(const Value &v, const Value &i) {
    if (v.kind == Value::Dict)
      return v.get(i.str());
    if ((v.kind == Value::List || v.kind == Value::String) && i.kind == Value::Int) {
      int64_t n = static_cast<int64_t>(v.kind == Value::List ? v.list->size() : v.s.size());
      int64_t k = i.i < 0 ? i.i + n : i.i;
      if (k < 0 || k >= n)
        return Value();
      return v.kind == Value::List ? (*v.list)[k] : Value::string(std::string(1, v.s[k]));
    }
    return Value();
  }

  Value slice(const Expr &e) {
    Value v = eval(*e.args[0]);
    int64_t n = static_cast<int64_t>(v.kind == Value::List ? v.list->size() : v.s.size());
    int64_t step = e.args[3] ? eval(*e.args[3]).i : 1;
    if (step == 0)
      raise("a slice step of 0");
    auto bound = [&](const ExprPtr &x, int64_t dflt) {
      if (!x)
        return dflt;
      int64_t k = eval(*x).i;
      if (k < 0)
        k += n;
      return std::clamp<int64_t>(k, step < 0 ? -1 : 0, step < 0 ? n - 1 : n);
    };
    int64_t lo = bound(e.args[1], step < 0 ? n - 1 : 0), hi = bound(e.args[2], step < 0 ? -1 : n);
    Value out = v.kind == Value::List ? Value::newList() : Value::string("");
    for (int64_t k = lo; step > 0 ? k < hi : k > hi; k += step) {
      if (v.kind == Value::List)
        out.list->push_back((*v.list)[k]);
      else
        out.s.push_back(v.s[k]);
    }
    return out;
  }

  Value arg(const Expr &e, size_t k, const char *kw, Value dflt = Value()) {
    // Call and Filter keep their subject first.
    if (k + 1 < e.args.size())
      return eval(*e.args[k + 1]);
    for (const auto &[name, x] : e.kwargs)
      if (name == kw)
        return eval(*x);
    return dflt;
  }

  Value call(const Expr &e) {
    const Expr &callee = *e.args[0];
    if (callee.kind == Expr::Var) {
      const std::string &f = callee.name;
      if (f == "raise_exception")
        raise(arg(e, 0, "message").str());
      if (f == "namespace") {
        Value ns = Value::newDict();
        for (const auto &[k, x] : e.kwargs)
          ns.set(k, eval(*x));
        return ns;
      }
      if (f == "range") {
        int64_t a = arg(e, 0, "start").i, b = a;
        if (e.args.size() > 2)
          b = arg(e, 1, "stop").i;
        else
          a = 0;
        Value l = Value::newList();
        for (int64_t k = a; k < b; ++k)
          l.list->push_back(Value::integer(k));
        return l;
      }
      if (f == "strftime_now") {
        char buf[128];
        std::time_t now = std::time(nullptr);
        std::strftime(buf, sizeof buf, arg(e, 0, "format").str().c_str(), std::localtime(&now));
        return Value::string(buf);
      }
      raise("the function '" + f + "' is not supported");
    }
    if (callee.kind != Expr::Attr)
      raise("a call of something that is not a function");
    Value self = eval(*callee.args[0]);
    const std::string &m = callee.name;
    if (self.kind == Value::String) {
      const std::string &s = self.s;
      std::string ws = " \t\n\r\f\v";
      if (m == "strip" || m == "lstrip" || m == "rstrip") {
        Value chars = arg(e, 0, "chars");
        return Value::string(strip(s, chars.kind == Value::String ? chars.s : ws, m != "rstrip",
                                   m != "lstrip"));
      }
      if (m == "upper" || m == "lower") {
        std::string r = s;
        for (char &c : r)
          c = static_cast<char>(m == "upper" ? std::toupper(static_cast<unsigned char>(c))
                                             : std::tolower(static_cast<unsigned char>(c)));
        return Value::string(r);
      }
      if (m == "startswith" || m == "endswith") {
        std::string x = arg(e, 0, "prefix").str();
        bool r = x.size() <= s.size() &&
                 (m == "startswith" ? s.compare(0, x.size(), x) == 0
                                    : s.compare(s.size() - x.size(), x.size(), x) == 0);
        return Value::boolean(r);
      }
      if (m == "replace")
        return Value::string(replaceAll(s, arg(e, 0, "old").str(), arg(e, 1, "new").str()));
      if (m == "split") {
        Value sep = arg(e, 0, "sep");
        Value l = Value::newList();
        if (sep.kind != Value::String) {
          size_t i = 0;
          while ((i = s.find_first_not_of(ws, i)) != std::string::npos) {
            size_t j = s.find_first_of(ws, i);
            l.list->push_back(Value::string(s.substr(i, j - i)));
            i = j;
          }
        } else {
          size_t i = 0, j;
          while ((j = s.find(sep.s, i)) != std::string::npos) {
            l.list->push_back(Value::string(s.substr(i, j - i)));
            i = j + sep.s.size();
          }
          l.list->push_back(Value::string(s.substr(i)));
        }
        return l;
      }
    }
    if (self.kind == Value::Dict) {
      if (m == "get") {
        Value v = self.get(arg(e, 0, "key").str());
        return v.defined() ? v : arg(e, 1, "default", Value::none());
      }
      if (m == "items" || m == "keys" || m == "values") {
        Value l = Value::newList();
        for (const auto &[k, v] : *self.dict) {
          if (m == "items") {
            Value pair = Value::newList();
            pair.list->push_back(Value::string(k));
            pair.list->push_back(v);
            l.list->push_back(pair);
          } else {
            l.list->push_back(m == "keys" ? Value::string(k) : v);
          }
        }
        return l;
      }
    }
    raise("the method '" + m + "' is not supported");
  }

  Value filter(const Expr &e) {
    Value v = eval(*e.args[0]);
    const std::string &f = e.name;
    if (f == "trim")
      return Value::string(strip(v.str(), " \t\n\r\f\v", true, true));
    if (f == "length" || f == "count")
      return Value::integer(static_cast<int64_t>(v.length()));
    if (f == "string")
      return Value::string(v.str());
    if (f == "int")
      return Value::integer(v.kind == Value::String ? std::atoll(v.s.c_str())
                                                    : static_cast<int64_t>(v.number()));
    if (f == "upper" || f == "lower" || f == "capitalize" || f == "title") {
      std::string s = v.str();
      bool start = true;
      for (char &c : s) {
        unsigned char u = static_cast<unsigned char>(c);
        bool up = f == "upper" || ((f == "capitalize" || f == "title") && start);
        c = static_cast<char>(up ? std::toupper(u) : std::tolower(u));
        start = f == "title" ? !std::isalpha(u) : false;
      }
      return Value::string(s);
    }
    if (f == "tojson") {
      Value indent = arg(e, 0, "indent");
      return Value::string(v.json(indent.kind == Value::Int ? static_cast<int>(indent.i) : -1));
    }
    if (f == "replace")
      return Value::string(replaceAll(v.str(), arg(e, 0, "old").str(), arg(e, 1, "new").str()));
    if (f == "first" || f == "last") {
      if (v.kind != Value::List || v.list->empty())
        return Value();
      return f == "first" ? v.list->front() : v.list->back();
    }
    if (f == "join") {
      std::string sep = arg(e, 0, "d", Value::string("")).str(), r;
      if (v.kind == Value::List)
        for (size_t k = 0; k < v.list->size(); ++k)
          r += (k ? sep : "") + (*v.list)[k].str();
      return Value::string(r);
    }
    if (f == "default" || f == "d") {
      bool boolean = arg(e, 1, "boolean", Value::boolean(false)).truthy();
      return (boolean ? v.truthy() : v.defined()) ? v : arg(e, 0, "default_value", Value::string(""));
    }
    if (f == "items") {
      Value l = Value::newList();
      if (v.kind == Value::Dict)
        for (const auto &[k, x] : *v.dict) {
          Value pair = Value::newList();
          pair.list->push_back(Value::string(k));
          pair.list->push_back(x);
          l.list->push_back(pair);
        }
      return l;
    }
    if (f == "list")
      return v.kind == Value::List ? v : Value::newList();
    raise("the filter '" + f + "' is not supported");
  }

  bool test(const Expr &e) {
    Value v = eval(*e.args[0]);
    const std::string &t = e.name;
    if (t == "defined")
      return v.defined();
    if (t == "undefined")
      return !v.defined();
    if (t == "none")
      return v.kind == Value::None;
    if (t == "string")
      return v.kind == Value::String;
    if (t == "mapping")
      return v.kind == Value::Dict;
    if (t == "sequence" || t == "iterable")
      return v.kind == Value::List || v.kind == Value::String || v.kind == Value::Dict;
    if (t == "number")
      return v.kind == Value::Int || v.kind == Value::Float;
    if (t == "integer")
      return v.kind == Value::Int;
    if (t == "boolean")
      return v.kind == Value::Bool;
    if (t == "true" || t == "false")
      return v.kind == Value::Bool && v.b == (t == "true");
    if (t == "even" || t == "odd")
      return v.kind == Value::Int && (v.i % 2 == 0) == (t == "even");
    if (t == "equalto" || t == "eq")
      return e.args.size() > 1 && jinja::equal(v, eval(*e.args[1]));
    raise("the test 'is " + t + "' is not supported");
  }

  Value binary(const Expr &e) {
    const std::string &op = e.name;
    if (op == "and") {
      Value a = eval(*e.args[0]);
      return a.truthy() ? eval(*e.args[1]) : a;
    }
    if (op == "or") {
      Value a = eval(*e.args[0]);
      return a.truthy() ? a : eval(*e.args[1]);
    }
    Value a = eval(*e.args[0]), b = eval(*e.args[1]);
    if (op == "~")
      return Value::string(a.str() + b.str());
    if (op == "==" || op == "!=")
      return Value::boolean(jinja::equal(a, b) == (op == "=="));
    if (op == "in" || op == "not in") {
      bool found = false;
      if (b.kind == Value::String)
        found = b.s.find(a.str()) != std::string::npos;
      else if (b.kind == Value::List)
        found = std::any_of(b.list->begin(), b.list->end(),
                            [&](const Value &x) { return jinja::equal(a, x); });
      else if (b.kind == Value::Dict)
        found = b.get(a.str()).defined();
      return Value::boolean(found == (op == "in"));
    }
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      bool ok;
      int c = jinja::compare(a, b, ok);
      if (!ok)
        raise("cannot order " + a.repr() + " and " + b.repr());
      return Value::boolean(op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0);
    }
    if (op == "+" && a.kind == Value::String && b.kind == Value::String)
      return Value::string(a.s + b.s);
    if (op == "+" && a.kind == Value::List && b.kind == Value::List) {
      Value l = Value::newList();
      *l.list = *a.list;
      l.list->insert(l.list->end(), b.list->begin(), b.list->end());
      return l;
    }
    if (!a.isNumber() || !b.isNumber())
      raise("cannot apply '" + op + "' to " + a.repr() + " and " + b.repr());
    bool ints = a.kind != Value::Float && b.kind != Value::Float;
    double x = a.number(), y = b.number();
    if (op == "/")
      return Value::real(x / y);
    if (ints) {
      int64_t p = static_cast<int64_t>(x), q = static_cast<int64_t>(y);
      if ((op == "//" || op == "%") && q == 0)
        raise("division by zero");
      if (op == "+")
        return Value::integer(p + q);
      if (op == "-")
        return Value::integer(p - q);
      if (op == "*")
        return Value::integer(p * q);
      int64_t d = p / q, r = p % q;
      if (r != 0 && ((r < 0) != (q < 0))) { // Python's floor division
        --d;
        r += q;
      }
      return Value::integer(op == "//" ? d : r);
    }
    if (op == "+")
      return Value::real(x + y);
    if (op == "-")
      return Value::real(x - y);
    if (op == "*")
      return Value::real(x * y);
    if (op == "//")
      return Value::real(std::floor(x / y));
    return Value::real(x - y * std::floor(x / y));
  }
};
} // namespace

ChatTemplate::ChatTemplate(std::unique_ptr<Node> root) : root_(std::move(root)) {}
ChatTemplate::~ChatTemplate() = default;

std::unique_ptr<ChatTemplate> ChatTemplate::parse(const std::string &source, std::string &err) {
  try {
    StmtParser p(split(source));
    return std::unique_ptr<ChatTemplate>(new ChatTemplate(p.parse()));
  } catch (const Failure &f) {
    err = "the chat template cannot be read: " + f.message;
    return nullptr;
  }
}

std::unique_ptr<ChatTemplate> ChatTemplate::load(const std::string &tokenizerConfig,
                                                 std::string &err) {
  auto buffer = llvm::MemoryBuffer::getFile(tokenizerConfig);
  if (!buffer) {
    err = "cannot read '" + tokenizerConfig + "': " + buffer.getError().message();
    return nullptr;
  }
  auto v = llvm::json::parse((*buffer)->getBuffer());
  if (!v) {
    err = "'" + tokenizerConfig + "' is not JSON: " + llvm::toString(v.takeError());
    return nullptr;
  }
  const llvm::json::Object *o = v->getAsObject();
  std::string source;
  if (auto s = o ? o->getString("chat_template") : std::nullopt) {
    source = s->str();
  } else if (const llvm::json::Array *named = o ? o->getArray("chat_template") : nullptr) {
    for (const llvm::json::Value &t : *named) // [{"name": "default", "template": ...}]
      if (const llvm::json::Object *to = t.getAsObject();
          to && to->getString("name") == llvm::StringRef("default") && to->getString("template"))
        source = to->getString("template")->str();
  }
  // Newer HF models keep the template beside, in chat_template.jinja.
  llvm::SmallString<256> jinjaPath(llvm::sys::path::parent_path(tokenizerConfig));
  llvm::sys::path::append(jinjaPath, "chat_template.jinja");
  if (auto j = llvm::MemoryBuffer::getFile(jinjaPath); j && source.empty())
    source = (*j)->getBuffer().str();
  if (source.empty()) {
    err = "'" + tokenizerConfig + "' has no chat_template (nor chat_template.jinja beside it)";
    return nullptr;
  }
  std::unique_ptr<ChatTemplate> t = parse(source, err);
  if (!t) {
    err = "'" + tokenizerConfig + "': " + err;
    return nullptr;
  }
  // The special tokens' strings, as apply_chat_template passes them.
  for (const auto &kv : *o) {
    llvm::StringRef key = kv.first;
    if (!key.ends_with("_token"))
      continue;
    if (auto s = kv.second.getAsString())
      t->globals_[key.str()] = s->str();
    else if (const llvm::json::Object *tok = kv.second.getAsObject())
      if (auto c = tok->getString("content"))
        t->globals_[key.str()] = c->str();
  }
  return t;
}

bool ChatTemplate::render(const std::vector<ChatMessage> &messages, bool addGenerationPrompt,
                          std::string &out, std::string &err) const {
  Renderer r;
  r.scope.frames.emplace_back();
  auto &top = r.scope.frames.back();
  for (const auto &[k, v] : globals_)
    top[k] = Value::string(v);
  Value list = Value::newList();
  for (const ChatMessage &m : messages) {
    Value d = Value::newDict();
    d.set("role", Value::string(m.role));
    d.set("content", Value::string(m.content));
    list.list->push_back(d);
  }
  top["messages"] = list;
  top["add_generation_prompt"] = Value::boolean(addGenerationPrompt);
  // apply_chat_template passes these always (none without tools or documents).
  top["tools"] = Value::none();
  top["documents"] = Value::none();
  try {
    r.exec(*root_);
  } catch (const Failure &f) {
    err = f.message;
    return false;
  }
  out = std::move(r.out);
  return true;
}

} // namespace dstok
