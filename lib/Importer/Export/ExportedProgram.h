//===- ExportedProgram.h - a torch.export program as a TorchScript module --===//
#ifndef DS_LIB_IMPORTER_EXPORT_EXPORTEDPROGRAM_H
#define DS_LIB_IMPORTER_EXPORT_EXPORTEDPROGRAM_H

#include "ds/Importer/ModelFile.h"

#include <caffe2/serialize/inline_container.h>

namespace mlir::ds::exported {

/// Builds `out` from the program whose JSON is the archive's record `programRecord`
/// (models/NAME.json, export schema 8). Returns "" or the reason it cannot.
std::string loadProgram(caffe2::serialize::PyTorchStreamReader &archive,
                        const std::string &programRecord, LoadedModel &out);

} // namespace mlir::ds::exported

namespace mlir::ds {
/// Registers `qualifiedName` (ns::name) in LibTorch with a reference implementation if it is a
/// model library's custom operator ds knows (CustomOps.cpp) and the process lacks it.
void ensureModelCustomOp(const std::string &qualifiedName);
} // namespace mlir::ds

#endif
