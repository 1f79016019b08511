//===- TorchScript.h - import of TorchScript archives into the ds dialect --===//
//
// The only interface to the code that links LibTorch. Errors are reported as MLIR
// diagnostics at the Python source location TorchScript recorded.
//
#ifndef DS_IMPORTER_TORCHSCRIPT_H
#define DS_IMPORTER_TORCHSCRIPT_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include <optional>
#include <string>
#include <vector>

namespace mlir::ds {

/// One `--input NAME=TYPE`: the per-rank micro-batch type of a forward argument.
struct InputSpec {
  std::string name;
  RankedTensorType type;
};

struct TorchScriptImportOptions {
  /// One entry per forward argument (after self), in any order.
  std::vector<InputSpec> inputs;
  /// The type of every argument `inputs` does not name (generation's token inputs, all
  /// i64 [batch, tokens]); without it, each argument needs an entry.
  std::optional<RankedTensorType> everyInput;
  /// Which element of a returned tuple is the loss; default: the last scalar.
  std::optional<int64_t> lossIndex;
  /// Return forward's logits instead of a loss (a causal LM's forward, which
  /// ds-derive-generation makes a generation program of): the one tensor it returns, or the
  /// first float tensor of rank 3 of the tuple it returns (HF's output without a loss).
  bool logits = false;
  /// Where to write the state_dict as safetensors; empty: don't write. A weight-free export
  /// (shapes, no bytes) writes nothing and marks the module ds.weight_free instead.
  std::string weightsPath;
};

/// Parses `NAME=TYPE` (e.g. `idx=tensor<8x128xi64>`); reports errors through `ctx`.
FailureOr<InputSpec> parseInputSpec(llvm::StringRef spec, MLIRContext *ctx);

/// Imports `forward` of the TorchScript archive at `path` as `func.func @forward` returning
/// the loss, with every parameter and buffer as a `ds.parameter`.
OwningOpRef<ModuleOp> importTorchScript(llvm::StringRef path,
                                        const TorchScriptImportOptions &options,
                                        MLIRContext *ctx);

/// The aten/prim operators the importer converts, sorted (for `ds-opt --list-torch-ops`).
std::vector<std::string> supportedTorchOps();

/// True if the file starts like a TorchScript archive (a zip file).
bool looksLikeTorchScriptArchive(llvm::StringRef path);

} // namespace mlir::ds

#endif // DS_IMPORTER_TORCHSCRIPT_H
