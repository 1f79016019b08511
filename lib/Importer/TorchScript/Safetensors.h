//===- Safetensors.h - a writer of the safetensors format ------------------===//
#ifndef DS_LIB_IMPORTER_TORCHSCRIPT_SAFETENSORS_H
#define DS_LIB_IMPORTER_TORCHSCRIPT_SAFETENSORS_H

#include <cstdint>
#include <string>
#include <vector>

namespace mlir::ds {
struct SafetensorsEntry {
  std::string name;
  std::string dtype; // "F32", "I64", "BOOL", ...
  std::vector<int64_t> shape;
  const void *data = nullptr;
  size_t bytes = 0;
};

/// Writes `entries` (in order) to `path`; returns an error message or "".
std::string writeSafetensors(const std::string &path, const std::vector<SafetensorsEntry> &entries);
} // namespace mlir::ds

#endif
