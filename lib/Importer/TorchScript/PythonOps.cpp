//===- PythonOps.cpp - prim ops, run-time queries and Python arithmetic ----===//
//
// Everything here is evaluated at import time: the answers to run-time queries are those of
// CPU training (grad enabled, no autocast, not tracing, CPU tensors), and Python numbers,
// strings and lists are computed, never emitted.
//
#include "Interpreter.h"

#include <cmath>
#include <sstream>

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::ts;
using torch::jit::Node;
using Kind = AV::Kind;

namespace {
int64_t floorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0)))
    --q;
  return q;
}
int64_t floorMod(int64_t a, int64_t b) { return a - floorDiv(a, b) * b; }

bool sameValue(const AV &a, const AV &b) {
  if (a.isNumber() && b.isNumber())
    return a.asDouble() == b.asDouble();
  if (a.kind != b.kind)
    return false;
  switch (a.kind) {
  case Kind::None: return true;
  case Kind::String:
  case Kind::Device: return a.s == b.s;
  case Kind::Tensor: return a.tensor == b.tensor;
  case Kind::Object: return a.object == b.object;
  case Kind::List:
  case Kind::Tuple:
    if (a.elems->size() != b.elems->size())
      return false;
    for (size_t k = 0; k < a.elems->size(); ++k)
      if (!sameValue((*a.elems)[k], (*b.elems)[k]))
        return false;
    return true;
  default: return false;
  }
}

std::string toPythonString(const AV &v) {
  switch (v.kind) {
  case Kind::String:
  case Kind::Device: return v.s;
  case Kind::Double: {
    std::ostringstream os;
    os << v.d;
    return os.str();
  }
  case Kind::List:
  case Kind::Tuple: {
    std::string s = v.kind == Kind::List ? "[" : "(";
    for (size_t k = 0; k < v.elems->size(); ++k)
      s += (k ? ", " : "") + toPythonString((*v.elems)[k]);
    return s + (v.kind == Kind::List ? "]" : ")");
  }
  default: return v.describe();
  }
}

} // namespace

FailureOr<std::vector<AV>> Interpreter::runPrim(Node *node, std::vector<AV> &in, bool &handled) {
  using R = std::vector<AV>;
  handled = true;
  std::string kind = node->kind().toQualString();
  auto one = [](AV v) -> FailureOr<R> { return R{std::move(v)}; };

  if (kind == "prim::Constant") {
    auto iv = torch::jit::toIValue(node->output());
    if (!iv)
      return one(AV::none());
    auto av = fromIValue(*iv);
    if (failed(av))
      return failure();
    return one(*av);
  }
  if (kind == "prim::GetAttr") {
    if (in[0].kind != Kind::Object)
      return error() << "attribute access on " << in[0].describe(), failure();
    std::string name = node->s(c10::Symbol::attr("name"));
    auto av = fromIValue(in[0].object->getAttr(name));
    if (failed(av))
      return failure();
    return one(*av);
  }
  if (kind == "prim::SetAttr")
    return error() << "the forward assigns module attribute '"
                   << node->s(c10::Symbol::attr("name"))
                   << "'; ds needs a forward whose module state changes only through "
                      "in-place buffer updates",
           failure();
  if (kind == "prim::RaiseException") {
    std::string msg = in.empty() ? "" : toPythonString(in[0]);
    return error() << "the model raises an exception for these input shapes: " << msg,
           failure();
  }
  if (kind == "prim::TupleConstruct")
    return one(AV::tuple(in));
  if (kind == "prim::ListConstruct")
    return one(AV::list(in));
  if (kind == "prim::TupleUnpack" || kind == "prim::ListUnpack") {
    if (in[0].kind != Kind::Tuple && in[0].kind != Kind::List)
      return error() << "cannot unpack " << in[0].describe(), failure();
    if (in[0].elems->size() != node->outputs().size())
      return error() << "unpacking " << in[0].elems->size() << " values into "
                     << node->outputs().size(),
             failure();
    return R(*in[0].elems);
  }
  if (kind == "prim::TupleIndex" || kind == "aten::__getitem__" || kind == "prim::ListIndex") {
    if ((in[0].kind == Kind::Tuple || in[0].kind == Kind::List) && in[1].kind == Kind::Int) {
      int64_t n = in[0].elems->size(), k = in[1].i < 0 ? in[1].i + n : in[1].i;
      if (k < 0 || k >= n)
        return error() << "index " << in[1].i << " out of range for " << n << " elements",
               failure();
      return one((*in[0].elems)[k]);
    }
    handled = false;
    return failure();
  }
  if (kind == "prim::unchecked_cast" || kind == "aten::_unwrap_optional" ||
      kind == "prim::Uninitialized" || kind == "aten::contiguous" || kind == "aten::clone" ||
      kind == "aten::alias") {
    if (kind == "prim::Uninitialized")
      return one(AV());
    return one(in[0]);
  }
  FailureOr<R> r = runPrimQuery(node, kind, in, handled);
  if (handled)
    return r;
  return runPrimCollection(node, kind, in, handled);
}

FailureOr<std::vector<AV>> Interpreter::runPrimQuery(Node *node, const std::string &kind,
                                                     std::vector<AV> &in, bool &handled) {
  using R = std::vector<AV>;
  handled = true;
  auto one = [](AV v) -> FailureOr<R> { return R{std::move(v)}; };
  if (kind == "aten::warn" || kind == "prim::Print")
    return R{};
  if (kind == "aten::is_grad_enabled")
    return one(AV::boolean(true));
  if (kind == "aten::is_autocast_enabled" || kind == "aten::is_autocast_cpu_enabled" ||
      kind == "aten::_get_tracing_state" || kind == "prim::is_cuda" || kind == "prim::is_xpu" ||
      kind == "prim::is_sparse" || kind == "prim::is_sparse_csr" || kind == "prim::is_mkldnn" ||
      kind == "prim::is_quantized" || kind == "prim::is_meta" || kind == "prim::is_nested" ||
      kind == "prim::is_mps" || kind == "prim::is_vulkan" || kind == "prim::is_ipu" ||
      kind == "prim::is_ort" || kind == "aten::is_nested" || kind == "aten::is_complex")
    return one(AV::boolean(false));
  if (kind == "prim::device") {
    AV d = AV::make(Kind::Device);
    d.s = "cpu";
    return one(d);
  }
  if (kind == "prim::requires_grad")
    return one(AV::boolean(in[0].isTensor() && in[0].requiresGrad));
  if (kind == "prim::layout")
    return one(AV::integer(0));
  if (kind == "prim::dtype" && in[0].isTensor())
    return one(AV::integer(
        (int64_t)scalarTypeFromElementType(in[0].type().getElementType()).value_or(c10::kLong)));
  if (kind == "aten::is_floating_point" && in[0].isTensor())
    return one(AV::boolean(isa<FloatType>(in[0].type().getElementType())));
  if (kind == "aten::dim" && in[0].isTensor())
    return one(AV::integer(in[0].rank()));
  if (kind == "aten::numel" && in[0].isTensor())
    return one(AV::integer(numElements(in[0].shape())));
  if ((kind == "aten::size" || kind == "aten::sym_size") && in[0].isTensor()) {
    if (in.size() == 1) {
      std::vector<AV> dims;
      for (int64_t d : in[0].shape())
        dims.push_back(AV::integer(d));
      return one(AV::list(dims));
    }
    int64_t r = in[0].rank(), d = in[1].i < 0 ? in[1].i + r : in[1].i;
    if (d < 0 || d >= r)
      return error() << "dimension " << in[1].i << " out of range for rank " << r, failure();
    return one(AV::integer(in[0].shape()[d]));
  }
  if (kind == "prim::NumToTensor" || kind == "aten::scalar_tensor") {
    // NumToTensor keeps a Python float's double; scalar_tensor(s, dtype=None) makes the
    // default dtype, f32, unless given one.
    Type et = in[0].kind == Kind::Double ? builder.getF64Type() : Type();
    if (kind == "aten::scalar_tensor") {
      auto given = dtypeArg(in.size() > 1 ? in[1] : AV::none(), builder.getF32Type());
      if (failed(given))
        return failure();
      et = *given;
    }
    auto t = asTensor(in[0], et);
    if (failed(t))
      return failure();
    return one(*t);
  }
  if ((kind == "aten::Int" || kind == "aten::Float" || kind == "aten::Bool" ||
       kind == "aten::ScalarImplicit" || kind == "aten::item") &&
      in[0].isTensor()) {
    if (!in[0].scalar)
      return error() << "reads the value of a computed tensor; ds imports only programs whose "
                        "control and shapes do not depend on tensor data",
             failure();
    double v = *in[0].scalar;
    if (kind == "aten::Int")
      return one(AV::integer((int64_t)v));
    if (kind == "aten::Float")
      return one(AV::real(v));
    if (kind == "aten::Bool")
      return one(AV::boolean(v != 0));
    return one(isa<FloatType>(in[0].type().getElementType()) ? AV::real(v)
                                                              : AV::integer((int64_t)v));
  }
  handled = false;
  return failure();
}

FailureOr<std::vector<AV>> Interpreter::runPrimCollection(Node *node, const std::string &kind,
                                                          std::vector<AV> &in, bool &handled) {
  using R = std::vector<AV>;
  handled = true;
  auto one = [](AV v) -> FailureOr<R> { return R{std::move(v)}; };
  if (kind == "aten::__is__" || kind == "aten::__isnot__") {
    bool same = sameValue(in[0], in[1]);
    return one(AV::boolean(kind == "aten::__is__" ? same : !same));
  }
  if (kind == "prim::isinstance") {
    // Only None-ness matters for the values the interpreter sees.
    auto types = node->tys(c10::Symbol::attr("types"));
    bool match = false;
    for (const auto &t : types)
      match |= (t->kind() == c10::TypeKind::NoneType) == in[0].isNone();
    return one(AV::boolean(match));
  }
  if (kind == "aten::append") {
    if (in[0].kind != Kind::List)
      return error() << "append to " << in[0].describe(), failure();
    in[0].elems->push_back(in[1]);
    return one(in[0]);
  }
  if (kind == "aten::len" && (in[0].kind == Kind::List || in[0].kind == Kind::Tuple))
    return one(AV::integer(in[0].elems->size()));
  if (kind == "aten::len" && in[0].isTensor()) {
    if (in[0].rank() == 0)
      return error() << "len() of a 0-d tensor", failure();
    return one(AV::integer(in[0].shape()[0]));
  }
  if (kind == "aten::len" && in[0].kind == Kind::String)
    return one(AV::integer(in[0].s.size()));
  if (kind == "aten::list" && in[0].kind == Kind::List)
    return one(AV::list(*in[0].elems));
  if (kind == "aten::__contains__" && in[0].kind == Kind::List) {
    bool found = llvm::any_of(*in[0].elems, [&](const AV &e) { return sameValue(e, in[1]); });
    return one(AV::boolean(found));
  }
  if (kind == "aten::slice" && in[0].kind == Kind::List) {
    int64_t n = in[0].elems->size();
    auto norm = [&](const AV &v, int64_t dflt) {
      if (v.kind != Kind::Int)
        return dflt;
      int64_t x = v.i < 0 ? v.i + n : v.i;
      return std::clamp<int64_t>(x, 0, n);
    };
    int64_t start = norm(in[1], 0), end = norm(in[2], n), step = in[3].i;
    std::vector<AV> out;
    for (int64_t k = start; k < end; k += step)
      out.push_back((*in[0].elems)[k]);
    return one(AV::list(out));
  }
  if (kind == "aten::str")
    return one(AV::string(toPythonString(in[0])));
  if (kind == "aten::format") {
    std::string fmt = in[0].s, out;
    size_t arg = 1;
    for (size_t k = 0; k < fmt.size(); ++k) {
      if (fmt[k] == '{' && k + 1 < fmt.size() && fmt[k + 1] == '}' && arg < in.size()) {
        out += toPythonString(in[arg++]);
        ++k;
      } else {
        out += fmt[k];
      }
    }
    return one(AV::string(out));
  }
  handled = false;
  return failure();
}

FailureOr<std::vector<AV>> Interpreter::runScalar(Node *node, std::vector<AV> &in,
                                                  bool &handled) {
  using R = std::vector<AV>;
  handled = true;
  std::string kind = node->kind().toQualString();
  auto one = [](AV v) -> FailureOr<R> { return R{std::move(v)}; };
  auto isInt = [](const AV &v) { return v.kind == Kind::Int || v.kind == Kind::Bool; };
  auto intOf = [](const AV &v) { return v.kind == Kind::Bool ? (int64_t)v.b : v.i; };
  bool numeric2 = in.size() >= 2 && in[0].isNumber() && in[1].isNumber();
  bool ints2 = numeric2 && isInt(in[0]) && isInt(in[1]);

  if (numeric2 && (kind == "aten::add" || kind == "aten::sub" || kind == "aten::mul")) {
    char op = kind[6];
    if (ints2) {
      int64_t a = intOf(in[0]), b = intOf(in[1]);
      return one(AV::integer(op == 'a' ? a + b : op == 's' ? a - b : a * b));
    }
    double a = in[0].asDouble(), b = in[1].asDouble();
    return one(AV::real(op == 'a' ? a + b : op == 's' ? a - b : a * b));
  }
  if (kind == "aten::add" && in.size() == 2 && in[0].kind == Kind::String)
    return one(AV::string(in[0].s + in[1].s));
  if (kind == "aten::add" && in.size() == 2 && in[0].kind == Kind::List)
    return [&] {
      std::vector<AV> all(*in[0].elems);
      all.insert(all.end(), in[1].elems->begin(), in[1].elems->end());
      return one(AV::list(all));
    }();
  if (numeric2 && kind == "aten::div") {
    if (in[1].asDouble() == 0)
      return error() << "division by zero", failure();
    return one(AV::real(in[0].asDouble() / in[1].asDouble()));
  }
  if (numeric2 && (kind == "aten::floordiv" || kind == "aten::floor_divide")) {
    if (in[1].asDouble() == 0)
      return error() << "division by zero", failure();
    if (ints2)
      return one(AV::integer(floorDiv(intOf(in[0]), intOf(in[1]))));
    return one(AV::real(std::floor(in[0].asDouble() / in[1].asDouble())));
  }
  if (numeric2 && (kind == "aten::remainder" || kind == "aten::__mod__" || kind == "aten::fmod")) {
    if (in[1].asDouble() == 0)
      return error() << "modulo by zero", failure();
    if (ints2)
      return one(AV::integer(floorMod(intOf(in[0]), intOf(in[1]))));
    double a = in[0].asDouble(), b = in[1].asDouble();
    return one(AV::real(a - std::floor(a / b) * b));
  }
  if (numeric2 && kind == "aten::pow")
    return one(AV::real(std::pow(in[0].asDouble(), in[1].asDouble())));
  if (kind == "aten::neg" && in[0].isNumber())
    return one(isInt(in[0]) ? AV::integer(-intOf(in[0])) : AV::real(-in[0].d));
  if ((kind == "prim::max" || kind == "prim::min") && numeric2) {
    bool mx = kind == "prim::max";
    if (ints2)
      return one(AV::integer(mx ? std::max(intOf(in[0]), intOf(in[1]))
                                : std::min(intOf(in[0]), intOf(in[1]))));
    return one(AV::real(mx ? std::max(in[0].asDouble(), in[1].asDouble())
                           : std::min(in[0].asDouble(), in[1].asDouble())));
  }
  if ((kind == "prim::max" || kind == "prim::min") && in.size() == 1 &&
      in[0].kind == Kind::List && !in[0].elems->empty()) {
    AV best = (*in[0].elems)[0];
    for (const AV &e : *in[0].elems)
      if (kind == "prim::max" ? e.asDouble() > best.asDouble() : e.asDouble() < best.asDouble())
        best = e;
    return one(best);
  }
  static const char *cmps[] = {"aten::eq", "aten::ne", "aten::lt", "aten::le", "aten::gt",
                               "aten::ge"};
  for (int c = 0; c < 6; ++c) {
    if (kind != cmps[c] || in.size() != 2)
      continue;
    if (c < 2 && !(numeric2)) {
      bool eq = sameValue(in[0], in[1]);
      return one(AV::boolean(c == 0 ? eq : !eq));
    }
    if (in[0].kind == Kind::String && in[1].kind == Kind::String) {
      int r = in[0].s.compare(in[1].s);
      bool v = c == 2 ? r < 0 : c == 3 ? r <= 0 : c == 4 ? r > 0 : r >= 0;
      return one(AV::boolean(v));
    }
    if (!numeric2)
      break;
    double a = in[0].asDouble(), b = in[1].asDouble();
    bool v = c == 0 ? a == b : c == 1 ? a != b : c == 2 ? a < b : c == 3 ? a <= b
             : c == 4 ? a > b : a >= b;
    return one(AV::boolean(v));
  }
  if ((kind == "aten::__and__" || kind == "aten::__or__" || kind == "aten::__xor__") && ints2) {
    int64_t a = intOf(in[0]), b = intOf(in[1]);
    int64_t v = kind == "aten::__and__" ? (a & b) : kind == "aten::__or__" ? (a | b) : (a ^ b);
    if (in[0].kind == Kind::Bool && in[1].kind == Kind::Bool)
      return one(AV::boolean(v != 0));
    return one(AV::integer(v));
  }
  if (kind == "aten::__not__" && in[0].kind == Kind::Bool)
    return one(AV::boolean(!in[0].b));
  if (kind == "aten::Int" && in[0].isNumber())
    return one(AV::integer((int64_t)in[0].asDouble()));
  if (kind == "aten::Float" && in[0].isNumber())
    return one(AV::real(in[0].asDouble()));
  if (kind == "aten::Bool" && in[0].isNumber())
    return one(AV::boolean(in[0].asDouble() != 0));
  if (kind == "aten::ScalarImplicit" && in[0].isNumber())
    return one(in[0]);
  static const std::pair<const char *, double (*)(double)> math[] = {
      {"aten::sqrt", [](double x) { return std::sqrt(x); }},
      {"aten::exp", [](double x) { return std::exp(x); }},
      {"aten::log", [](double x) { return std::log(x); }},
      {"aten::fabs", [](double x) { return std::fabs(x); }},
  };
  for (auto [name, fn] : math)
    if (kind == name && in.size() == 1 && in[0].isNumber())
      return one(AV::real(fn(in[0].asDouble())));
  if ((kind == "aten::floor" || kind == "aten::ceil") && in.size() == 1 && in[0].isNumber()) {
    double x = in[0].asDouble();
    return one(AV::integer((int64_t)(kind == "aten::floor" ? std::floor(x) : std::ceil(x))));
  }
  if (kind == "aten::abs" && in.size() == 1 && in[0].isNumber())
    return one(isInt(in[0]) ? AV::integer(std::abs(intOf(in[0]))) : AV::real(std::fabs(in[0].d)));
  if (kind == "aten::__range_length" && in.size() == 3) {
    int64_t lo = in[0].i, hi = in[1].i, step = in[2].i;
    if (step == 0)
      return error() << "range() step must not be zero", failure();
    int64_t n = step > 0 ? (hi > lo ? (hi - lo + step - 1) / step : 0)
                         : (lo > hi ? (lo - hi - step - 1) / -step : 0);
    return one(AV::integer(n));
  }
  if (kind == "aten::__derive_index" && in.size() == 3)
    return one(AV::integer(in[1].i + in[0].i * in[2].i));
  if (kind == "aten::__contains__" && in[0].kind == Kind::String)
    return one(AV::boolean(in[0].s.find(in[1].s) != std::string::npos));
  if (kind == "aten::find" && in[0].kind == Kind::String) {
    size_t p = in[0].s.find(in[1].s);
    return one(AV::integer(p == std::string::npos ? -1 : (int64_t)p));
  }
  handled = false;
  return failure();
}
