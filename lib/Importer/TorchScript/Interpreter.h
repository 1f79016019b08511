//===- Interpreter.h - abstract interpretation of a TorchScript graph -----===//
//
// The importer runs the inlined forward graph once, as CPU training would, on abstract values:
// Python scalars, strings, lists, tuples and module objects are evaluated at import time (all
// shapes are static, so every size query has an answer), and tensors are SSA values of ds ops.
// `prim::If` runs only the taken branch and `prim::Loop` is unrolled, so the fast paths, None
// checks and shape asserts of scripted torch.nn code disappear.
//
#ifndef DS_LIB_IMPORTER_TORCHSCRIPT_INTERPRETER_H
#define DS_LIB_IMPORTER_TORCHSCRIPT_INTERPRETER_H

#include "ds/IR/DSOps.h"
#include "ds/IR/DSShapes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

#include <torch/script.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mlir::ds::ts {

struct AV;
using AVList = std::shared_ptr<std::vector<AV>>;

/// An abstract value: what a TorchScript value is while the forward is interpreted.
struct AV {
  enum class Kind { Unknown, None, Bool, Int, Double, String, Device, Tensor, List, Tuple, Object };
  Kind kind = Kind::Unknown;
  bool b = false;
  int64_t i = 0;
  double d = 0;
  std::string s;
  // Tensors.
  Value tensor;
  bool requiresGrad = false;
  std::string stateSymbol;      // set when the tensor is the current value of a parameter/buffer
  std::optional<double> scalar; // known value of a 0-d tensor made from a Python number
  // Lists and tuples (lists are shared so aten::append mutates every alias).
  AVList elems;
  // Modules.
  c10::intrusive_ptr<c10::ivalue::Object> object;

  static AV none() { return make(Kind::None); }
  static AV boolean(bool v) { AV a = make(Kind::Bool); a.b = v; return a; }
  static AV integer(int64_t v) { AV a = make(Kind::Int); a.i = v; return a; }
  static AV real(double v) { AV a = make(Kind::Double); a.d = v; return a; }
  static AV string(std::string v) { AV a = make(Kind::String); a.s = std::move(v); return a; }
  static AV list(std::vector<AV> v) {
    AV a = make(Kind::List);
    a.elems = std::make_shared<std::vector<AV>>(std::move(v));
    return a;
  }
  static AV tuple(std::vector<AV> v) { AV a = list(std::move(v)); a.kind = Kind::Tuple; return a; }
  static AV ofTensor(Value v, bool requiresGrad) {
    AV a = make(Kind::Tensor);
    a.tensor = v;
    a.requiresGrad = requiresGrad;
    return a;
  }
  static AV make(Kind k) { AV a; a.kind = k; return a; }

  bool isTensor() const { return kind == Kind::Tensor; }
  bool isNone() const { return kind == Kind::None; }
  bool isNumber() const { return kind == Kind::Bool || kind == Kind::Int || kind == Kind::Double; }
  double asDouble() const { return kind == Kind::Double ? d : kind == Kind::Int ? (double)i : b; }
  RankedTensorType type() const { return cast<RankedTensorType>(tensor.getType()); }
  ArrayRef<int64_t> shape() const { return type().getShape(); }
  int64_t rank() const { return type().getRank(); }
  std::string describe() const;
};

/// The MLIR element type of a c10::ScalarType code, or null if ds has none.
Type elementTypeFromScalarType(MLIRContext *ctx, int64_t scalarType);
/// The c10::ScalarType of an MLIR element type, or nullopt if LibTorch has none.
std::optional<c10::ScalarType> scalarTypeFromElementType(Type t);

class Interpreter;
/// Converts one aten node; inputs are already evaluated. Returns the node's outputs.
using OpHandler =
    std::function<FailureOr<std::vector<AV>>(Interpreter &, torch::jit::Node *, std::vector<AV> &)>;

/// The table of aten/prim ops with tensor semantics (AtenOps.cpp).
const llvm::StringMap<OpHandler> &atenHandlers();

/// Where the interpreter reads parameters and buffers from.
struct StateEntry {
  std::string symbol;
  RankedTensorType type;
  bool trainable = false;
  bool isBuffer = false;
};

class Interpreter {
public:
  Interpreter(OpBuilder &builder, llvm::DenseMap<c10::TensorImpl *, StateEntry> state)
      : builder(builder), state(std::move(state)), errorFn([this] { return error(); }) {}

  /// Runs `graph` with `inputs` bound to its inputs; returns its outputs.
  FailureOr<std::vector<AV>> run(torch::jit::Graph &graph, std::vector<AV> inputs);

  // Helpers for the op handlers.
  OpBuilder &b() { return builder; }
  Location loc() const { return currentLoc; }
  torch::jit::Node *node() const { return currentNode; }
  /// An error at the current node, prefixed with its op name and Python source line.
  InFlightDiagnostic error();
  /// A callback for the shape functions of DSShapes.h.
  EmitErrorFn shapeError() { return errorFn; }
  /// The tensor for an AV that is a tensor or a number (numbers become 0-d constants of `like`'s
  /// category, following PyTorch's type promotion for Python scalars).
  FailureOr<AV> asTensor(const AV &v, Type elementType = {});
  Value constant(Attribute value, RankedTensorType type);
  Value scalarConstant(double v, Type elementType);
  Value convert(Value v, Type elementType);
  /// The current value of a state tensor, read once per assignment.
  AV readState(const StateEntry &entry);
  /// Records an in-place update of `target` (a jit value) to `result`.
  LogicalResult assignInPlace(torch::jit::Value *target, const AV &current, const AV &result);
  /// Source location text "file:line" of the current node, or "<unknown>".
  std::string sourceLine() const;
  Type elementTypeFromScalarType(int64_t scalarType);
  FailureOr<Type> dtypeArg(const AV &v, Type fallback);

  /// Computes an op whose tensor operands are all constants in LibTorch (ConstantFolding.cpp).
  /// Verifies the ops a handler made after `before` in `block` (null: from its start); an
  /// invalid one fails with an error naming the node's op, its line and its operands.
  LogicalResult verifyNewOps(Block *block, Operation *before);
  FailureOr<std::vector<AV>> foldWithLibTorch(torch::jit::Node *node, std::vector<AV> &in,
                                              bool &folded);

private:
  FailureOr<std::vector<AV>> runBlock(torch::jit::Block *block, std::vector<AV> inputs);
  LogicalResult runNode(torch::jit::Node *node);
  FailureOr<std::vector<AV>> runPrim(torch::jit::Node *node, std::vector<AV> &in, bool &handled);
  /// runPrim's queries (grad mode, devices, dtypes, sizes) and scalar conversions.
  FailureOr<std::vector<AV>> runPrimQuery(torch::jit::Node *node, const std::string &kind,
                                          std::vector<AV> &in, bool &handled);
  /// runPrim's identity tests, lists and strings.
  FailureOr<std::vector<AV>> runPrimCollection(torch::jit::Node *node, const std::string &kind,
                                               std::vector<AV> &in, bool &handled);
  FailureOr<std::vector<AV>> runScalar(torch::jit::Node *node, std::vector<AV> &in, bool &handled);
  FailureOr<AV> fromIValue(const c10::IValue &v);
  Location locationOf(torch::jit::Node *node);

  OpBuilder &builder;
  llvm::DenseMap<c10::TensorImpl *, StateEntry> state;
  llvm::StringMap<AV> stateValues;
  std::unordered_map<const torch::jit::Value *, AV> env;
  torch::jit::Node *currentNode = nullptr;
  Location currentLoc = UnknownLoc::get(builder.getContext());
  int64_t loopIterations = 0;
  std::function<InFlightDiagnostic()> errorFn; // what shapeError() refers to
};

} // namespace mlir::ds::ts

#endif
