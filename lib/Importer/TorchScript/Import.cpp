//===- Import.cpp - TorchScript archive to ds module -----------------------===//
#include "Interpreter.h"
#include "dsrt/io.h"
#include "ds/Importer/ModelFile.h"
#include "ds/Importer/TorchScript.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Transforms/RegionUtils.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"

#include <torch/csrc/jit/passes/inliner.h>

#include <chrono>
#include <cstdlib>

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::ts;

namespace {
/// One state_dict key and the tensor behind it.
struct StateKey {
  std::string name;
  at::Tensor tensor;
  bool isParameter;
};

/// Walks the module tree in state_dict order: a module's parameters, its buffers, then its
/// children, recursively.
void collectState(const torch::jit::Module &m, const std::string &prefix,
                  std::vector<StateKey> &out) {
  auto type = m.type();
  auto object = m._ivalue();
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t k = 0; k < type->numAttributes(); ++k) {
      bool wanted = pass == 0 ? type->is_parameter(k) : type->is_buffer(k);
      if (!wanted)
        continue;
      c10::IValue v = object->getSlot(k);
      if (v.isTensor())
        out.push_back({prefix + type->getAttributeName(k), v.toTensor(), pass == 0});
    }
  }
  for (size_t k = 0; k < type->numAttributes(); ++k) {
    if (!type->getAttribute(k)->is_module())
      continue;
    torch::jit::Module child(object->getSlot(k).toObject());
    collectState(child, prefix + type->getAttributeName(k) + ".", out);
  }
}

/// The safetensors name of a LibTorch dtype ("" for one ds does not store).
std::string safetensorsDtype(c10::ScalarType t) {
  switch (t) {
  case c10::ScalarType::Float: return "F32";
  case c10::ScalarType::Double: return "F64";
  case c10::ScalarType::Half: return "F16";
  case c10::ScalarType::BFloat16: return "BF16";
  case c10::ScalarType::Long: return "I64";
  case c10::ScalarType::Int: return "I32";
  case c10::ScalarType::Short: return "I16";
  case c10::ScalarType::Char: return "I8";
  case c10::ScalarType::Byte: return "U8";
  case c10::ScalarType::Bool: return "BOOL";
  default: return "";
  }
}

std::string firstLine(const char *what) {
  std::string s(what);
  return s.substr(0, s.find('\n'));
}

bool hasTensorConstants(torch::jit::Graph &graph) {
  bool found = false;
  std::function<void(torch::jit::Block *)> walk = [&](torch::jit::Block *block) {
    for (torch::jit::Node *n : block->nodes()) {
      if (n->kind() == c10::prim::Constant && n->output()->type()->kind() == c10::TypeKind::TensorType)
        found = true;
      for (torch::jit::Block *b : n->blocks())
        walk(b);
    }
  };
  walk(graph.block());
  return found;
}

/// Phase times on stderr when DS_IMPORT_TIMING is set (used by bench/import_gpt.sh).
struct PhaseTimer {
  bool enabled = std::getenv("DS_IMPORT_TIMING") != nullptr;
  std::chrono::steady_clock::time_point last = std::chrono::steady_clock::now();
  void phase(const char *name) {
    auto now = std::chrono::steady_clock::now();
    if (enabled)
      llvm::errs() << "ds-import-timing " << name << " "
                   << std::chrono::duration<double>(now - last).count() << "\n";
    last = now;
  }
};

void eraseDeadOps(func::FuncOp func) {
  Block &body = func.getBody().front();
  Operation *op = body.getTerminator()->getPrevNode();
  while (op) {
    Operation *prev = op->getPrevNode();
    if (isOpTriviallyDead(op))
      op->erase();
    op = prev;
  }
}
/// One ds.parameter per distinct tensor of the state_dict (tied weights share one, the other
/// names its aliases), and the interpreter's view of each.
LogicalResult declareState(OpBuilder &builder, Location fileLoc, ArrayRef<StateKey> keys,
                           llvm::DenseMap<c10::TensorImpl *, StateEntry> &state) {
  llvm::DenseMap<c10::TensorImpl *, ParameterOp> params;
  for (const StateKey &key : keys) {
    c10::TensorImpl *impl = key.tensor.unsafeGetTensorImpl();
    auto it = params.find(impl);
    if (it != params.end()) {
      SmallVector<Attribute> aliases;
      if (auto existing = it->second.getAliases())
        aliases.assign(existing->begin(), existing->end());
      aliases.push_back(builder.getStringAttr(key.name));
      it->second.setAliasesAttr(builder.getArrayAttr(aliases));
      continue;
    }
    Type et = elementTypeFromScalarType(builder.getContext(), (int64_t)key.tensor.scalar_type());
    if (!et) {
      emitError(fileLoc) << "state_dict entry '" << key.name << "' has unsupported dtype "
                         << c10::toString(key.tensor.scalar_type());
      return failure();
    }
    auto type = RankedTensorType::get(
        SmallVector<int64_t>(key.tensor.sizes().begin(), key.tensor.sizes().end()), et);
    bool trainable = key.isParameter && key.tensor.requires_grad();
    auto param = ParameterOp::create(builder, fileLoc, key.name, type, trainable,
                                     /*aliases=*/nullptr, /*sharding=*/nullptr);
    params[impl] = param;
    state[impl] = StateEntry{key.name, type, trainable, !key.isParameter};
  }
  return success();
}

/// The type of each of forward's arguments, from the --input flags.
FailureOr<std::vector<RankedTensorType>> matchInputs(Location fileLoc,
                                                     ArrayRef<std::string> argNames,
                                                     const TorchScriptImportOptions &options) {
  // Match --input flags to forward's arguments.
  std::string expected = "forward(" + llvm::join(argNames, ", ") + ")";
  std::vector<RankedTensorType> argTypes(argNames.size());
  for (const InputSpec &spec : options.inputs) {
    auto pos = std::find(argNames.begin(), argNames.end(), spec.name);
    if (pos == argNames.end()) {
      emitError(fileLoc) << "--input " << spec.name << ": the model's " << expected
                         << " has no argument '" << spec.name << "'";
      return failure();
    }
    if (argTypes[pos - argNames.begin()]) {
      emitError(fileLoc) << "--input " << spec.name << " is given twice";
      return failure();
    }
    argTypes[pos - argNames.begin()] = spec.type;
  }
  for (size_t k = 0; k < argNames.size(); ++k)
    if (!argTypes[k] && options.everyInput)
      argTypes[k] = *options.everyInput;
  for (size_t k = 0; k < argNames.size(); ++k)
    if (!argTypes[k]) {
      emitError(fileLoc) << "missing --input " << argNames[k] << "=TYPE for the model's "
                         << expected << " (e.g. --input " << argNames[k]
                         << "=tensor<8x128xi64>)";
      return failure();
    }
  return argTypes;
}

/// A torch.export program is specialized to its example shapes, except the dimensions the
/// export declared dynamic: the --input types must agree.
LogicalResult checkExportedShapes(Location fileLoc, ArrayRef<std::string> argNames,
                                  ArrayRef<RankedTensorType> argTypes,
                                  const LoadedModel &loaded) {
  for (const ExampleInput &ex : loaded.exampleInputs) {
    auto pos = std::find(argNames.begin(), argNames.end(), ex.name);
    if (pos == argNames.end())
      continue;
    RankedTensorType given = argTypes[pos - argNames.begin()];
    bool same = given.getRank() == (int64_t)ex.sizes.size();
    for (size_t d = 0; same && d < ex.sizes.size(); ++d)
      same = ex.sizes[d] < 0 || ex.sizes[d] == given.getShape()[d];
    Type exType = elementTypeFromScalarType(fileLoc.getContext(), ex.scalarType);
    same = same && (!exType || exType == given.getElementType());
    if (!same) {
      std::string shape;
      for (int64_t d : ex.sizes)
        shape += (d < 0 ? std::string("?") : std::to_string(d)) + "x";
      std::string exTypeText;
      llvm::raw_string_ostream os(exTypeText);
      if (exType)
        os << exType;
      std::string givenText;
      llvm::raw_string_ostream gs(givenText);
      gs << given;
      emitError(fileLoc) << "--input " << ex.name << "=" << gs.str()
                         << " does not match the shape the program was exported with, tensor<"
                         << shape << os.str() << "> ('?' marks a dynamic dimension): pass that "
                         << "type, or export with the shape you train with (or a dynamic batch "
                         << "dimension: torch.export.export(..., dynamic_shapes={'" << ex.name
                         << "': {0: torch.export.Dim('batch')}}))";
      return failure();
    }
  }
  return success();
}

/// The training loss among forward's outputs (--loss-index, or the one float scalar).
FailureOr<Value> pickLoss(Location fileLoc, ArrayRef<AV> outputs,
                          const TorchScriptImportOptions &options) {
  AV out = outputs[0];
  AV loss;
  auto isScalarLoss = [](const AV &v) {
    return v.isTensor() && v.rank() == 0 && isa<FloatType>(v.type().getElementType());
  };
  if (out.kind == AV::Kind::Tuple || out.kind == AV::Kind::List) {
    auto &elems = *out.elems;
    if (options.lossIndex) {
      if (*options.lossIndex < 0 || *options.lossIndex >= (int64_t)elems.size()) {
        emitError(fileLoc) << "--loss-index " << *options.lossIndex << " is out of range: "
                           << "forward returns " << elems.size() << " values";
        return failure();
      }
      loss = elems[*options.lossIndex];
    } else {
      for (const AV &e : elems)
        if (isScalarLoss(e))
          loss = e;
    }
  } else {
    if (options.lossIndex && *options.lossIndex != 0) {
      emitError(fileLoc) << "--loss-index " << *options.lossIndex
                         << " given but forward returns a single value";
      return failure();
    }
    loss = out;
  }
  if (!isScalarLoss(loss)) {
    emitError(fileLoc) << "forward must return the scalar training loss (or a tuple containing "
                       << "it; choose it with --loss-index), but it returns "
                       << (loss.kind == AV::Kind::Unknown ? out.describe() : loss.describe());
    return failure();
  }
  return loss.tensor;
}

/// A causal LM's logits among forward's outputs: [batch, tokens, vocabulary] of floats.
FailureOr<Value> pickLogits(Location fileLoc, ArrayRef<AV> outputs) {
  AV out = outputs[0];
  auto isLogits = [](const AV &v) {
    return v.isTensor() && v.rank() == 3 && isa<FloatType>(v.type().getElementType());
  };
  if (out.kind == AV::Kind::Tuple || out.kind == AV::Kind::List) {
    for (const AV &e : *out.elems)
      if (isLogits(e))
        return e.tensor;
  } else if (isLogits(out)) {
    return out.tensor;
  }
  emitError(fileLoc) << "for generation, forward must return the logits [batch, tokens, "
                        "vocabulary] (export the model's forward without labels), but it "
                        "returns "
                     << out.describe();
  return failure();
}

/// The state_dict's tensors as a .safetensors file at `path` (ds-opt -o's weights), written
/// by the runtime's writer (dsrt/io.h), which checkpoints and ds-reference also use.
LogicalResult writeWeights(Location fileLoc, ArrayRef<StateKey> keys, StringRef path) {
  std::vector<at::Tensor> keep;
  std::vector<dsrt::io::SafetensorsEntry> entries;
  for (const StateKey &key : keys) {
    at::Tensor t = key.tensor.detach().contiguous();
    keep.push_back(t);
    int32_t dtype = dsrt::io::dtypeFromSafetensors(safetensorsDtype(t.scalar_type()));
    if (dtype < 0) {
      emitError(fileLoc) << "state_dict entry '" << key.name << "' has dtype "
                         << c10::toString(t.scalar_type()) << ", which .safetensors files of ds "
                         << "do not hold";
      return failure();
    }
    entries.push_back({key.name, dtype,
                       std::vector<int64_t>(t.sizes().begin(), t.sizes().end()), t.data_ptr(),
                       t.nbytes()});
  }
  std::string err;
  if (!dsrt::io::writeSafetensors(path.str(), entries, err)) {
    emitError(fileLoc) << err;
    return failure();
  }
  return success();
}
} // namespace

bool mlir::ds::looksLikeTorchScriptArchive(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFileSlice(path, 4, 0);
  return buffer && (*buffer)->getBuffer() == llvm::StringRef("PK\x03\x04", 4);
}

std::vector<std::string> mlir::ds::supportedTorchOps() {
  std::vector<std::string> ops;
  for (const auto &entry : atenHandlers())
    ops.push_back(entry.getKey().str());
  llvm::sort(ops);
  return ops;
}

OwningOpRef<ModuleOp> mlir::ds::importTorchScript(llvm::StringRef path,
                                                  const TorchScriptImportOptions &options,
                                                  MLIRContext *ctx) {
  ctx->loadDialect<DSDialect, func::FuncDialect>();
  Location fileLoc = FileLineColLoc::get(ctx, path, 0, 0);
  if (!llvm::sys::fs::exists(path)) {
    emitError(fileLoc) << "cannot open '" << path << "': no such file";
    return nullptr;
  }
  PhaseTimer timer;
  LoadedModel loaded;
  std::string loadError = loadModelFile(path.str(), loaded);
  if (!loadError.empty()) {
    emitError(fileLoc) << loadError;
    return nullptr;
  }
  torch::jit::Module module = loaded.module;
  timer.phase("load");
  auto method = module.find_method("forward");
  if (!method) {
    emitError(fileLoc) << "'" << path << "' has no forward method";
    return nullptr;
  }

  // The state_dict: keys in order, one symbol per distinct tensor (tied weights share one).
  std::vector<StateKey> keys;
  collectState(module, "", keys);
  std::shared_ptr<torch::jit::Graph> graph = method->graph()->copy();
  if (keys.empty() && hasTensorConstants(*graph)) {
    emitError(fileLoc) << "'" << path << "' is a frozen TorchScript module (torch.jit.freeze): "
                       << "its parameters were folded into constants and cannot be trained; "
                       << "save the module without freezing";
    return nullptr;
  }
  torch::jit::Inline(*graph);

  OpBuilder builder(ctx);
  OwningOpRef<ModuleOp> result = ModuleOp::create(fileLoc);
  builder.setInsertionPointToEnd(result->getBody());
  llvm::DenseMap<c10::TensorImpl *, StateEntry> state;
  if (failed(declareState(builder, fileLoc, keys, state)))
    return nullptr;

  // Match --input flags to forward's arguments.
  const auto &schema = method->function().getSchema();
  std::vector<std::string> argNames;
  for (size_t k = 1; k < schema.arguments().size(); ++k)
    argNames.push_back(schema.arguments()[k].name());
  FailureOr<std::vector<RankedTensorType>> argTypes = matchInputs(fileLoc, argNames, options);
  if (failed(argTypes) || failed(checkExportedShapes(fileLoc, argNames, *argTypes, loaded)))
    return nullptr;

  SmallVector<Type> inputTypes(argTypes->begin(), argTypes->end());
  auto func = func::FuncOp::create(builder, fileLoc, kForwardName,
                                   builder.getFunctionType(inputTypes, {}));
  Block *entry = func.addEntryBlock();
  for (size_t k = 0; k < argNames.size(); ++k)
    func.setArgAttr(k, kInputNameAttrName, builder.getStringAttr(argNames[k]));
  builder.setInsertionPointToEnd(entry);

  Interpreter interp(builder, state);
  std::vector<AV> inputs;
  AV self = AV::make(AV::Kind::Object);
  self.object = module._ivalue();
  inputs.push_back(self);
  for (BlockArgument arg : entry->getArguments())
    inputs.push_back(AV::ofTensor(arg, false));
  if (graph->inputs().size() != inputs.size()) {
    emitError(fileLoc) << "forward's graph has " << graph->inputs().size() - 1
                       << " inputs but its schema " << argNames.size();
    return nullptr;
  }
  FailureOr<std::vector<AV>> outputs = failure();
  try {
    outputs = interp.run(*graph, inputs);
  } catch (const std::exception &e) {
    emitError(fileLoc) << "internal error while importing: " << firstLine(e.what());
    return nullptr;
  }
  if (failed(outputs))
    return nullptr;

  FailureOr<Value> loss = options.logits ? pickLogits(fileLoc, *outputs)
                                         : pickLoss(fileLoc, *outputs, options);
  if (failed(loss))
    return nullptr;
  func::ReturnOp::create(builder, fileLoc, *loss);
  func.setFunctionType(builder.getFunctionType(inputTypes, {loss->getType()}));
  eraseDeadOps(func);
  if (failed(verify(*result)))
    return nullptr;
  timer.phase("interpret");

  // A weight-free export: shapes only, so there are no weights to write.
  if (llvm::any_of(keys, [](const StateKey &k) { return k.tensor.is_meta(); })) {
    (*result)->setAttr(kWeightFreeAttrName, builder.getUnitAttr());
  } else if (!options.weightsPath.empty()) {
    if (failed(writeWeights(fileLoc, keys, options.weightsPath)))
      return nullptr;
    timer.phase("weights");
  }
  return result;
}
