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

#endif
