//===- ModelFile.cpp - load a .pt or .pt2, or say why not ------------------===//
#include "ExportedProgram.h"

#include <caffe2/serialize/versions.h>
#include <torch/version.h>

#include <fstream>
#include <regex>

using namespace mlir::ds;

namespace {
/// LibTorch's reason: the first non-empty line of its message, without the C++ backtrace.
std::string reasonOf(const std::exception &e) {
  const char *what = e.what();
  if (auto *c10error = dynamic_cast<const c10::Error *>(&e))
    what = c10error->what_without_backtrace();
  std::string text(what);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    std::string line = text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    if (line.find_first_not_of(" \t\r") != std::string::npos)
      return line.substr(line.find_first_not_of(" \t\r"));
    if (end == std::string::npos)
      break;
    pos = end + 1;
  }
  return "no reason given";
}

const char *kExportHint =
    "export the model with torch.export.save(torch.export.export(model, example_inputs), "
    "'model.pt2'), or as TorchScript with torch.jit.save(torch.jit.script(model), 'model.pt')";

/// Names the cause of a load failure: a newer producer, an operator this LibTorch does not
/// have, or a damaged file.
std::string explain(const std::string &path, const std::string &reason) {
  static const std::regex newerFile(
      R"(Attempted to read a PyTorch file with version (\d+), but the maximum supported version for reading is (\d+))");
  std::smatch m;
  if (std::regex_search(reason, m, newerFile))
    return "cannot load '" + path + "': it was saved by a newer PyTorch than this build " +
           "supports (producer version " + m[1].str() + "; this LibTorch " +
           libTorchVersion() + " reads up to " + m[2].str() +
           "): save it with PyTorch " + libTorchVersion() + ", or rebuild ds against a "
           "newer LibTorch (scripts/setup.sh pins it)";
  static const std::regex unknownOp(R"(Unknown builtin op: ([A-Za-z0-9_]+::[A-Za-z0-9_]+))");
  if (std::regex_search(reason, m, unknownOp))
    return "cannot load '" + path + "': it calls " + m[1].str() + ", which this LibTorch (" +
           libTorchVersion() + ") does not have; it was probably saved by a newer PyTorch: " +
           "save it with PyTorch " + libTorchVersion() + " (LibTorch says: " + reason + ")";
  return "cannot load '" + path + "' (is it truncated or damaged?): " + reason + "; " +
         kExportHint;
}
} // namespace

std::string mlir::ds::libTorchVersion() { return TORCH_VERSION; }

std::string mlir::ds::loadModelFile(const std::string &path, LoadedModel &out) {
  std::ifstream probe(path, std::ios::binary);
  if (!probe)
    return "cannot open '" + path + "': no such file";
  char magic[4] = {0, 0, 0, 0};
  probe.read(magic, 4);
  if (std::string(magic, 4) != std::string("PK\x03\x04", 4))
    return "'" + path + "' is not a PyTorch model file (not a zip archive); " + kExportHint;

  // A torch.export program has models/NAME.json; anything else goes to torch::jit::load.
  std::string program;
  try {
    caffe2::serialize::PyTorchStreamReader archive(path);
    std::vector<std::string> models;
    for (const std::string &record : archive.getAllRecords())
      if (record.rfind("models/", 0) == 0 && record.size() > 12 &&
          record.compare(record.size() - 5, 5, ".json") == 0)
        models.push_back(record);
    if (!models.empty()) {
      program = archive.hasRecord("models/model.json") ? "models/model.json" : models[0];
      if (models.size() > 1 && program != "models/model.json")
        return "'" + path + "' holds " + std::to_string(models.size()) +
               " exported programs and none is named 'model'; save one program per file";
      std::string err = exported::loadProgram(archive, program, out);
      if (!err.empty())
        return "cannot import the torch.export program '" + path + "': " + err;
      return "";
    }
  } catch (const std::exception &e) {
    return explain(path, reasonOf(e));
  }
  try {
    out.module = torch::jit::load(path);
  } catch (const std::exception &e) {
    return explain(path, reasonOf(e));
  }
  out.exported = false;
  return "";
}
