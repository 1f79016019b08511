//===- ConstantFolding.cpp - ops on constants, computed by LibTorch --------===//
//
// Models build much of their forward from constants: attention masks from arange, cumsum and
// index; rotary tables from cos and sin of a fixed frequency buffer. Where every tensor an op
// reads is a constant (nothing that depends on the inputs or the parameters), the importer
// runs the op itself in LibTorch and records the result as a ds.constant, handler or not:
// PyTorch computes it, so it is PyTorch's value bit for bit, and constants stay constants
// through any chain of ops.
//
#include "OpHelpers.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::ts;
using torch::jit::Node;
using Kind = AV::Kind;

namespace {
/// Results larger than this are not folded: the op is imported (its handler computes it in the
/// step) rather than becoming a huge constant.
constexpr int64_t kMaxFoldedElements = int64_t(1) << 22;


/// The value of `v` if the importer made it from constants alone.
std::optional<at::Tensor> constantValue(Value v) {
  Operation *def = v.getDefiningOp();
  if (!def)
    return std::nullopt;
  auto type = cast<RankedTensorType>(v.getType());
  std::vector<int64_t> shape(type.getShape().begin(), type.getShape().end());
  if (auto c = dyn_cast<ConstantOp>(def)) {
    auto attr = dyn_cast<DenseElementsAttr>(c.getValue());
    auto st = scalarTypeFromElementType(type.getElementType());
    if (!attr || !st || type.getNumElements() > kMaxFoldedElements)
      return std::nullopt;
    // Floats through double, integers through int64 (exact), then to the constant's dtype.
    bool isFloat = isa<FloatType>(type.getElementType());
    at::Tensor t = at::empty({type.getNumElements()},
                             at::TensorOptions().dtype(isFloat ? at::kDouble : at::kLong));
    int64_t k = 0;
    if (isFloat) {
      double *out = t.data_ptr<double>();
      for (APFloat f : attr.getValues<APFloat>()) {
        bool lost;
        f.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
        out[k++] = f.convertToDouble();
      }
    } else if (type.getElementType().isInteger(1)) {
      int64_t *out = t.data_ptr<int64_t>();
      for (bool b : attr.getValues<bool>())
        out[k++] = b;
    } else {
      int64_t *out = t.data_ptr<int64_t>();
      bool isUnsigned = type.getElementType().isUnsignedInteger();
      for (APInt i : attr.getValues<APInt>())
        out[k++] = isUnsigned ? (int64_t)i.getZExtValue() : i.getSExtValue();
    }
    return t.to(*st).reshape(shape);
  }
  if (auto c = dyn_cast<ConvertOp>(def)) {
    auto in = constantValue(c->getOperand(0));
    auto st = scalarTypeFromElementType(type.getElementType());
    if (!in || !st)
      return std::nullopt;
    return in->to(*st);
  }
  if (isa<ReshapeOp>(def)) {
    auto in = constantValue(def->getOperand(0));
    return in ? std::optional(in->reshape(shape)) : std::nullopt;
  }
  if (isa<BroadcastToOp>(def)) {
    auto in = constantValue(def->getOperand(0));
    return in ? std::optional(in->expand(shape).contiguous()) : std::nullopt;
  }
  return std::nullopt;
}

/// `v` as the IValue an argument of `type` takes, or nullopt.
std::optional<c10::IValue> toIValue(const AV &v, const c10::TypePtr &type) {
  using c10::TypeKind;
  switch (type->kind()) {
  case TypeKind::OptionalType:
    if (v.isNone())
      return c10::IValue();
    return toIValue(v, type->castRaw<c10::OptionalType>()->getElementType());
  case TypeKind::TensorType: {
    if (!v.isTensor() || v.requiresGrad)
      return std::nullopt;
    auto t = constantValue(v.tensor);
    return t ? std::optional<c10::IValue>(*t) : std::nullopt;
  }
  case TypeKind::ListType: {
    if (v.kind != Kind::List && v.kind != Kind::Tuple)
      return v.kind == Kind::Int ? std::optional<c10::IValue>(std::vector<int64_t>{v.i})
                                 : std::nullopt;
    c10::TypePtr elem = type->castRaw<c10::ListType>()->getElementType();
    c10::impl::GenericList list(elem);
    for (const AV &e : *v.elems) {
      auto iv = toIValue(e, elem);
      if (!iv)
        return std::nullopt;
      list.push_back(*iv);
    }
    return c10::IValue(list);
  }
  case TypeKind::IntType:
  case TypeKind::SymIntType:
    if (v.kind == Kind::Int || v.kind == Kind::Bool)
      return c10::IValue(v.kind == Kind::Int ? v.i : (int64_t)v.b);
    return std::nullopt;
  case TypeKind::FloatType:
    return v.isNumber() ? std::optional<c10::IValue>(v.asDouble()) : std::nullopt;
  case TypeKind::BoolType:
    return v.kind == Kind::Bool ? std::optional<c10::IValue>(v.b) : std::nullopt;
  case TypeKind::NumberType:
    if (v.kind == Kind::Int)
      return c10::IValue(v.i);
    if (v.kind == Kind::Double)
      return c10::IValue(v.d);
    if (v.kind == Kind::Bool)
      return c10::IValue(v.b);
    return std::nullopt;
  case TypeKind::StringType:
    return v.kind == Kind::String ? std::optional<c10::IValue>(v.s) : std::nullopt;
  case TypeKind::DeviceObjType:
    return c10::IValue(c10::Device(c10::DeviceType::CPU));
  default:
    return std::nullopt;
  }
}
} // namespace

FailureOr<std::vector<AV>> Interpreter::foldWithLibTorch(Node *node, std::vector<AV> &in,
                                                         bool &folded) {
  // `folded`: whether the op was computed here (or its failure reported); when false the op
  // reads something that is not a constant and nothing was reported.
  folded = false;
  const c10::FunctionSchema *schema = node->maybeSchema();
  if (!schema || node->isNondeterministic() || schema->is_vararg() ||
      schema->arguments().size() != in.size())
    return failure();
  auto isTensorLike = [](const AV &v) {
    return v.isTensor() || ((v.kind == Kind::List || v.kind == Kind::Tuple) &&
                            llvm::any_of(*v.elems, [](const AV &e) { return e.isTensor(); }));
  };
  if (!llvm::any_of(in, isTensorLike))
    return failure(); // factories: their handlers make constants already
  torch::jit::Stack stack;
  for (size_t k = 0; k < in.size(); ++k) {
    auto iv = toIValue(in[k], schema->arguments()[k].type());
    if (!iv)
      return failure();
    // In-place ops write their first operand: give them a copy.
    if (iv->isTensor())
      *iv = iv->toTensor().clone();
    stack.push_back(*iv);
  }
  folded = true; // from here on, a failure has been reported
  try {
    node->getOperation()(stack);
  } catch (const std::exception &e) {
    return error() << "computing this op on constants in LibTorch failed: "
                   << e.what(), failure();
  }
  std::vector<AV> out;
  for (const c10::IValue &r : stack) {
    auto toAV = [&](const at::Tensor &t0) -> FailureOr<AV> {
      at::Tensor t = t0.contiguous();
      Type et = elementTypeFromScalarType((int64_t)t.scalar_type());
      if (t.numel() > kMaxFoldedElements) { // imported as an op instead (a causal mask
        folded = false;                       // of a long sequence): nothing reported
        return failure();
      }
      if (!et)
        return error() << "a constant of " << c10::toString(t.scalar_type())
                       << " is of a dtype ds has no element type for", failure();
      std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
      if (t.scalar_type() == at::kLong) { // exact 64-bit integers (constantTensor goes
        const int64_t *data = t.data_ptr<int64_t>(); // through double)
        auto type = RankedTensorType::get(shape, et);
        SmallVector<APInt> vals;
        for (int64_t k = 0; k < t.numel(); ++k)
          vals.push_back(APInt(64, data[k], true));
        AV a = AV::ofTensor(constant(DenseElementsAttr::get(type, vals), type), false);
        if (shape.empty())
          a.scalar = (double)data[0];
        return a;
      }
      at::Tensor d = t.to(at::kDouble);
      const double *data = d.data_ptr<double>();
      return ops::constantTensor(*this, shape, et, [&](int64_t k) { return data[k]; });
    };
    if (r.isTensor()) {
      TRY(a, toAV(r.toTensor()));
      out.push_back(*a);
    } else if (r.isTensorList()) {
      std::vector<AV> elems;
      for (const at::Tensor &t : r.toTensorVector()) {
        TRY(a, toAV(t));
        elems.push_back(*a);
      }
      out.push_back(AV::list(elems));
    } else if (r.isInt()) {
      out.push_back(AV::integer(r.toInt()));
    } else if (r.isDouble()) {
      out.push_back(AV::real(r.toDouble()));
    } else if (r.isBool()) {
      out.push_back(AV::boolean(r.toBool()));
    } else {
      return error() << "computing this op on constants gave a " << r.tagKind()
                     << ", which ds cannot hold", failure();
    }
  }
  std::string kind = node->kind().toQualString();
  bool inPlace = kind.back() == '_' && !llvm::StringRef(kind).ends_with("__"); // not __and__
  if (inPlace && !out.empty() && out[0].isTensor() &&
      failed(assignInPlace(node->inputs()[0], in[0], out[0])))
    return failure();
  return out;
}
