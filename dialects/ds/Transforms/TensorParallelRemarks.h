//===- TensorParallelRemarks.h - why ds-tensor-parallel keeps a parameter whole -*- C++ -*-===//
#ifndef DS_TRANSFORMS_TENSORPARALLELREMARKS_H
#define DS_TRANSFORMS_TENSORPARALLELREMARKS_H

#include "mlir/IR/Operation.h"
#include <string>

namespace mlir::ds {
/// ds-tensor-parallel's remark on a trainable parameter it keeps whole ("ds-tensor-parallel:
/// 'NAME' stays replicated: WHY"), and its reader (ds-opt's summary of the step).
void remarkStaysWhole(Operation *at, StringRef param, const Twine &why);
bool readStaysWholeRemark(StringRef message, std::string &param, std::string &why);
} // namespace mlir::ds

#endif // DS_TRANSFORMS_TENSORPARALLELREMARKS_H
