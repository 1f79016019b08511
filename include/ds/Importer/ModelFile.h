//===- ModelFile.h - PyTorch model files as TorchScript modules ------------===//
//
// Loads what a user exports from PyTorch: a TorchScript archive (torch.jit.save, `.pt`) or a
// torch.export program (torch.export.save, `.pt2`), as a torch::jit::Module whose `forward`
// the importer interprets and ds-reference trains. A `.pt2` is read without Python: its graph
// (models/model.json) becomes a TorchScript graph of the same ATen ops, each node carrying the
// model's source line that PyTorch recorded, and its weights become the module's parameters and
// buffers under their state_dict names (tied weights are one tensor). A `.pt2` exported
// without weights (on the meta device or under FakeTensorMode) gives meta tensors: shapes only.
//
// Only code that links LibTorch includes this header (the importer, ds-reference, tests).
//
#ifndef DS_IMPORTER_MODELFILE_H
#define DS_IMPORTER_MODELFILE_H

#include <torch/script.h>

#include <string>
#include <vector>

namespace mlir::ds {

/// A forward input of a `.pt2` as exported: its sizes (-1 where the export declared the
/// dimension dynamic) and its c10::ScalarType.
struct ExampleInput {
  std::string name;
  std::vector<int64_t> sizes;
  int64_t scalarType = 0;
};

struct LoadedModel {
  torch::jit::Module module;
  /// True for a torch.export program.
  bool exported = false;
  /// The export's example inputs, in forward's order (`.pt2` only).
  std::vector<ExampleInput> exampleInputs;
};

/// Loads `path`. Returns an empty string on success, else one message naming the cause and
/// the fix (a missing file, a damaged archive with LibTorch's reason, an archive or program
/// saved by a newer PyTorch than this build's LibTorch, an op or feature a `.pt2` uses that
/// ds cannot read).
std::string loadModelFile(const std::string &path, LoadedModel &out);

/// The LibTorch version this build links (e.g. "2.15.0").
std::string libTorchVersion();

} // namespace mlir::ds

#endif // DS_IMPORTER_MODELFILE_H
