//===- Interpreter.cpp - control flow, Python values and prim ops ----------===//
#include "Interpreter.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::ts;
using torch::jit::Node;
using Kind = AV::Kind;

static constexpr int64_t kMaxLoopIterations = 1000000;

std::string AV::describe() const {
  switch (kind) {
  case Kind::Unknown: return "an unknown value";
  case Kind::None: return "None";
  case Kind::Bool: return b ? "True" : "False";
  case Kind::Int: return std::to_string(i);
  case Kind::Double: return std::to_string(d);
  case Kind::String: return "'" + s + "'";
  case Kind::Device: return "device";
  case Kind::Tensor: {
    std::string t;
    llvm::raw_string_ostream os(t);
    os << "a tensor " << formatShape(shape()) << " of " << type().getElementType();
    return t;
  }
  case Kind::List: return "a list";
  case Kind::Tuple: return "a tuple";
  case Kind::Object: return "a module";
  }
  return "?";
}

Location Interpreter::locationOf(Node *node) {
  auto range = node->sourceRange();
  if (auto original = range.findSourceRangeThatGenerated())
    range = *original;
  if (auto flc = range.file_line_col()) {
    auto [file, line, col] = *flc;
    Location own = FileLineColLoc::get(builder.getContext(), file, line, col + 1);
    // Library code (torch.nn) is inlined: the innermost line of the model's own code that
    // called it comes second (the diagnostics show the first; ds-run --trace names ops by the
    // last).
    auto library = [](const std::string &f) { return f.find("/torch/") != std::string::npos; };
    if (!library(file))
      return own;
    if (auto callstack = node->callstack()) {
      auto frames = (*callstack)->vec(); // outermost call first
      for (auto frame = frames.rbegin(); frame != frames.rend(); ++frame) {
        auto site = std::get<1>(*frame);
        if (auto original = site.findSourceRangeThatGenerated())
          site = *original;
        auto caller = site.file_line_col();
        if (!caller || std::get<0>(*caller).empty() || library(std::get<0>(*caller)))
          continue;
        return FusedLoc::get(builder.getContext(),
                             {own, FileLineColLoc::get(builder.getContext(),
                                                       std::get<0>(*caller),
                                                       std::get<1>(*caller),
                                                       std::get<2>(*caller) + 1)});
      }
    }
    return own;
  }
  return UnknownLoc::get(builder.getContext());
}

std::string Interpreter::sourceLine() const {
  FileLineColLoc flc;
  currentLoc->walk([&](Location l) {
    flc = dyn_cast<FileLineColLoc>(l);
    return flc ? WalkResult::interrupt() : WalkResult::advance();
  });
  if (flc) {
    std::string text = (flc.getFilename().str() + ":" + std::to_string(flc.getLine()));
    auto range = currentNode->sourceRange();
    if (auto original = range.findSourceRangeThatGenerated())
      range = *original;
    std::string code = range.text().str();
    code = code.substr(0, code.find('\n'));
    if (!code.empty())
      text += " `" + code + "`";
    // Library code (torch.nn) is inlined: say which lines of the model called it.
    if (auto callstack = currentNode->callstack()) {
      std::vector<std::string> callers;
      for (const auto &frame : (*callstack)->vec()) {
        auto site = std::get<1>(frame);
        if (auto original = site.findSourceRangeThatGenerated())
          site = *original;
        if (auto flc = site.file_line_col(); flc && !std::get<0>(*flc).empty())
          callers.push_back(std::get<0>(*flc) + ":" + std::to_string(std::get<1>(*flc)));
      }
      if (!callers.empty()) {
        text += " (called from ";
        for (size_t k = callers.size(); k-- > 0;)
          text += callers[k] + (k ? " <- " : ")");
      }
    }
    return text;
  }
  return "<no source line recorded>";
}

InFlightDiagnostic Interpreter::error() {
  return emitError(currentLoc) << (currentNode ? currentNode->kind().toQualString() : "import")
                               << " at " << sourceLine() << ": ";
}

Type Interpreter::elementTypeFromScalarType(int64_t scalarType) {
  return ts::elementTypeFromScalarType(builder.getContext(), scalarType);
}

std::optional<c10::ScalarType> mlir::ds::ts::scalarTypeFromElementType(Type t) {
  if (t.isF32()) return c10::ScalarType::Float;
  if (t.isF64()) return c10::ScalarType::Double;
  if (t.isF16()) return c10::ScalarType::Half;
  if (t.isBF16()) return c10::ScalarType::BFloat16;
  if (t.isInteger(1)) return c10::ScalarType::Bool;
  if (t.isInteger(8)) return t.isUnsignedInteger() ? c10::ScalarType::Byte : c10::ScalarType::Char;
  if (t.isInteger(16)) return c10::ScalarType::Short;
  if (t.isInteger(32)) return c10::ScalarType::Int;
  if (t.isInteger(64)) return c10::ScalarType::Long;
  return std::nullopt;
}

Type mlir::ds::ts::elementTypeFromScalarType(MLIRContext *ctx, int64_t scalarType) {
  Builder builder(ctx);
  switch (static_cast<c10::ScalarType>(scalarType)) {
  case c10::ScalarType::Byte: return IntegerType::get(ctx, 8, IntegerType::Unsigned);
  case c10::ScalarType::Char: return builder.getI8Type();
  case c10::ScalarType::Short: return builder.getI16Type();
  case c10::ScalarType::Int: return builder.getI32Type();
  case c10::ScalarType::Long: return builder.getI64Type();
  case c10::ScalarType::Half: return builder.getF16Type();
  case c10::ScalarType::Float: return builder.getF32Type();
  case c10::ScalarType::Double: return builder.getF64Type();
  case c10::ScalarType::Bool: return builder.getI1Type();
  case c10::ScalarType::BFloat16: return builder.getBF16Type();
  default: return {};
  }
}

FailureOr<Type> Interpreter::dtypeArg(const AV &v, Type fallback) {
  if (v.isNone())
    return fallback;
  if (v.kind == Kind::Int)
    if (Type t = elementTypeFromScalarType(v.i))
      return t;
  error() << "unsupported dtype " << v.describe();
  return failure();
}

Value Interpreter::constant(Attribute value, RankedTensorType type) {
  (void)type;
  return ConstantOp::create(builder, currentLoc, cast<ElementsAttr>(value));
}

Value Interpreter::scalarConstant(double v, Type elementType) {
  auto type = RankedTensorType::get({}, elementType);
  Attribute attr;
  if (auto ft = dyn_cast<FloatType>(elementType))
    attr = DenseElementsAttr::get(type, builder.getFloatAttr(ft, v));
  else if (elementType.isInteger(1))
    attr = DenseElementsAttr::get(type, v != 0);
  else
    attr = DenseElementsAttr::get(type, builder.getIntegerAttr(elementType, (int64_t)v));
  return ConstantOp::create(builder, currentLoc, cast<ElementsAttr>(attr));
}

Value Interpreter::convert(Value v, Type elementType) {
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getElementType() == elementType)
    return v;
  return ConvertOp::create(builder, currentLoc, type.clone(elementType), v);
}

FailureOr<AV> Interpreter::asTensor(const AV &v, Type elementType) {
  if (v.isTensor()) {
    if (!elementType || v.type().getElementType() == elementType)
      return v;
    AV out = v;
    out.tensor = convert(v.tensor, elementType);
    out.stateSymbol.clear();
    return out;
  }
  if (!v.isNumber()) {
    error() << "expected a tensor or a number, got " << v.describe();
    return failure();
  }
  if (!elementType)
    elementType = v.kind == Kind::Double ? Type(builder.getF32Type())
                  : v.kind == Kind::Int  ? Type(builder.getI64Type())
                                         : Type(builder.getI1Type());
  AV out = AV::ofTensor(scalarConstant(v.asDouble(), elementType), false);
  out.scalar = v.asDouble();
  return out;
}

AV Interpreter::readState(const StateEntry &entry) {
  auto it = stateValues.find(entry.symbol);
  if (it != stateValues.end())
    return it->second;
  Value v = GetParameterOp::create(builder, currentLoc, entry.type,
                                   FlatSymbolRefAttr::get(builder.getContext(), entry.symbol));
  AV av = AV::ofTensor(v, entry.trainable);
  av.stateSymbol = entry.symbol;
  stateValues[entry.symbol] = av;
  return av;
}

LogicalResult Interpreter::assignInPlace(torch::jit::Value *target, const AV &current,
                                         const AV &result) {
  AV updated = result;
  if (!current.stateSymbol.empty()) {
    const StateEntry *entry = nullptr;
    for (auto &kv : state)
      if (kv.second.symbol == current.stateSymbol)
        entry = &kv.second;
    if (!entry || !entry->isBuffer)
      return error() << "the forward updates the parameter '" << current.stateSymbol
                     << "' in place; only buffers can change during a training step";
    if (result.shape() != entry->type.getShape())
      return error() << "in-place update changes the shape of buffer '" << entry->symbol
                     << "' from " << formatShape(entry->type.getShape()) << " to "
                     << formatShape(result.shape());
    Value v = convert(result.tensor, entry->type.getElementType());
    AssignBufferOp::create(builder, currentLoc,
                           FlatSymbolRefAttr::get(builder.getContext(), entry->symbol), v);
    updated = AV::ofTensor(v, false);
    updated.stateSymbol = entry->symbol;
    stateValues[entry->symbol] = updated;
  } else if (result.type() != current.type()) {
    // PyTorch keeps the destination's dtype and shape for in-place ops.
    if (result.shape() != current.shape())
      return error() << "in-place op would change the shape " << formatShape(current.shape())
                     << " to " << formatShape(result.shape());
    updated.tensor = convert(result.tensor, current.type().getElementType());
  }
  env[target] = updated;
  return success();
}

FailureOr<AV> Interpreter::fromIValue(const c10::IValue &v) {
  if (v.isNone())
    return AV::none();
  if (v.isBool())
    return AV::boolean(v.toBool());
  if (v.isInt())
    return AV::integer(v.toInt());
  if (v.isDouble())
    return AV::real(v.toDouble());
  if (v.isString())
    return AV::string(v.toStringRef());
  if (v.isDevice()) {
    AV d = AV::make(Kind::Device);
    d.s = v.toDevice().str();
    return d;
  }
  if (v.isList() || v.isTuple()) {
    std::vector<AV> elems;
    auto items = v.isList() ? v.toListRef().vec() : v.toTupleRef().elements().vec();
    for (const c10::IValue &e : items) {
      auto av = fromIValue(e);
      if (failed(av))
        return failure();
      elems.push_back(*av);
    }
    return v.isList() ? AV::list(std::move(elems)) : AV::tuple(std::move(elems));
  }
  if (v.isObject()) {
    AV o = AV::make(Kind::Object);
    o.object = v.toObject();
    return o;
  }
  if (v.isTensor()) {
    at::Tensor t = v.toTensor();
    auto it = state.find(t.unsafeGetTensorImpl());
    if (it != state.end())
      return readState(it->second);
    // A tensor constant that is not part of the state_dict (e.g. a traced literal).
    if (t.is_meta()) {
      error() << "the program needs the values of a constant tensor of shape "
              << c10::str(t.sizes())
              << " that the export does not hold (it was exported on the meta device or "
                 "under FakeTensorMode): keep the model's buffers and constants real when "
                 "exporting it without weights (accelerate's init_empty_weights() does)";
      return failure();
    }
    Type et = elementTypeFromScalarType((int64_t)t.scalar_type());
    if (!et) {
      error() << "unsupported constant tensor dtype " << c10::toString(t.scalar_type());
      return failure();
    }
    auto type = RankedTensorType::get(SmallVector<int64_t>(t.sizes().begin(), t.sizes().end()), et);
    at::Tensor c = t.contiguous();
    DenseElementsAttr attr;
    if (et.isInteger(1)) {
      SmallVector<bool> bits(c.numel());
      auto *p = c.data_ptr<bool>();
      for (int64_t k = 0; k < c.numel(); ++k)
        bits[k] = p[k];
      attr = DenseElementsAttr::get(type, ArrayRef<bool>(bits));
    } else {
      ArrayRef<char> raw(static_cast<const char *>(c.data_ptr()), c.nbytes());
      attr = DenseElementsAttr::getFromRawBuffer(type, raw);
    }
    AV out = AV::ofTensor(ConstantOp::create(builder, currentLoc, cast<ElementsAttr>(attr)), false);
    if (t.dim() == 0)
      out.scalar = t.item<double>();
    return out;
  }
  error() << "unsupported constant " << v.tagKind();
  return failure();
}

FailureOr<std::vector<AV>> Interpreter::run(torch::jit::Graph &graph, std::vector<AV> inputs) {
  return runBlock(graph.block(), std::move(inputs));
}

FailureOr<std::vector<AV>> Interpreter::runBlock(torch::jit::Block *block,
                                                 std::vector<AV> inputs) {
  for (auto [param, value] : llvm::zip(block->inputs(), inputs))
    env[param] = value;
  for (Node *node : block->nodes())
    if (failed(runNode(node)))
      return failure();
  std::vector<AV> outputs;
  for (torch::jit::Value *v : block->outputs())
    outputs.push_back(env.at(v));
  return outputs;
}

LogicalResult Interpreter::verifyNewOps(Block *block, Operation *before) {
  // A handler that took a form of its op it does not support would leave the module's
  // verifier to say so in the dialect's terms: say it here, in the model's.
  Block::iterator end = builder.getInsertionBlock() == block ? builder.getInsertionPoint()
                                                             : block->end();
  for (Block::iterator op = before ? std::next(before->getIterator()) : block->begin();
       op != end; ++op) {
    bool invalid = false;
    {
      ScopedDiagnosticHandler quiet(builder.getContext(), [&](Diagnostic &d) {
        invalid |= d.getSeverity() == DiagnosticSeverity::Error;
        return success();
      });
      if (succeeded(verify(&*op, /*verifyRecursively=*/false)) && !invalid)
        continue;
    }
    InFlightDiagnostic diag = error() << "ds does not import this form of it (operands: ";
    for (auto [k, v] : llvm::enumerate(currentNode->inputs())) {
      auto a = env.find(v);
      diag << (k ? ", " : "") << (a == env.end() ? std::string("?") : a->second.describe());
    }
    diag << "); docs/importer/supported-ops.md lists the forms it takes";
    return failure();
  }
  return success();
}

LogicalResult Interpreter::runNode(Node *node) {
  currentNode = node;
  currentLoc = locationOf(node);
  std::vector<AV> in;
  for (torch::jit::Value *v : node->inputs()) {
    auto it = env.find(v);
    if (it == env.end())
      return error() << "internal error: input %" << v->debugName() << " has no value";
    in.push_back(it->second);
  }
  std::string kind = node->kind().toQualString();

  FailureOr<std::vector<AV>> out = failure();
  if (kind == "prim::If") {
    if (in[0].kind != Kind::Bool)
      return error() << "the condition depends on tensor data (" << in[0].describe()
                     << "); ds needs control flow that is fixed by shapes and flags";
    out = runBlock(node->blocks()[in[0].b ? 0 : 1], {});
  } else if (kind == "prim::Loop") {
    if (in[0].kind != Kind::Int || in[1].kind != Kind::Bool)
      return error() << "a loop whose trip count or condition depends on tensor data "
                        "cannot be unrolled";
    std::vector<AV> carried(in.begin() + 2, in.end());
    bool cond = in[1].b;
    for (int64_t i = 0; i < in[0].i && cond; ++i) {
      if (++loopIterations > kMaxLoopIterations)
        return error() << "more than " << kMaxLoopIterations << " loop iterations to unroll";
      std::vector<AV> bodyIn{AV::integer(i)};
      bodyIn.insert(bodyIn.end(), carried.begin(), carried.end());
      auto res = runBlock(node->blocks()[0], bodyIn);
      if (failed(res))
        return failure();
      currentNode = node;
      currentLoc = locationOf(node);
      if ((*res)[0].kind != Kind::Bool)
        return error() << "a loop whose condition depends on tensor data cannot be unrolled";
      cond = (*res)[0].b;
      carried.assign(res->begin() + 1, res->end());
    }
    out = carried;
  } else {
    bool handled = false;
    out = runPrim(node, in, handled);
    if (!handled) {
      bool anyTensor = llvm::any_of(in, [](const AV &a) { return a.isTensor(); });
      bool allKnownScalars = llvm::all_of(in, [](const AV &a) {
        return !a.isTensor() || a.scalar.has_value();
      });
      if (!anyTensor || allKnownScalars) {
        // Arithmetic on Python numbers, or on 0-d tensors that a trace made from them.
        std::vector<AV> numbers;
        for (const AV &a : in) {
          if (a.isTensor()) {
            Type et = a.type().getElementType();
            numbers.push_back(isa<FloatType>(et) ? AV::real(*a.scalar)
                              : et.isInteger(1)  ? AV::boolean(*a.scalar != 0)
                                                 : AV::integer((int64_t)*a.scalar));
          } else {
            numbers.push_back(a);
          }
        }
        out = runScalar(node, numbers, handled);
        if (handled && succeeded(out) && anyTensor) {
          for (AV &o : *out) {
            if (!o.isNumber())
              continue;
            Type et = o.kind == Kind::Double ? Type(builder.getF64Type())
                      : o.kind == Kind::Int  ? Type(builder.getI64Type())
                                             : Type(builder.getI1Type());
            auto t = asTensor(o, et);
            if (failed(t))
              return failure();
            o = *t;
          }
        }
      }
    }
    if (!handled) {
      auto &handlers = atenHandlers();
      auto it = handlers.find(kind);
      bool folded = false;
      out = foldWithLibTorch(node, in, folded);
      if (!folded && it != handlers.end()) {
        Block *block = builder.getInsertionBlock();
        Block::iterator at = builder.getInsertionPoint();
        Operation *before = at == block->begin() ? nullptr : &*std::prev(at);
        out = it->second(*this, node, in);
        if (succeeded(out) && failed(verifyNewOps(block, before)))
          return failure();
      } else if (!folded)
        return error() << "unsupported op " << kind
                       << "; the supported ops are listed in docs/importer/supported-ops.md "
                          "(and by 'ds-opt --list-torch-ops')";
    }
  }
  if (failed(out))
    return failure();
  currentNode = node;
  currentLoc = locationOf(node);
  if (out->size() != node->outputs().size())
    return error() << "internal error: " << out->size() << " results for "
                   << node->outputs().size() << " outputs";
  for (auto [v, av] : llvm::zip(node->outputs(), *out))
    env[v] = av;
  return success();
}
