//===- DSEnums.h - the ds dialect's enums, without the rest of the dialect -===//
//
// ODS's enums (roles, spaces, precisions, schedules generated from dsrt.h; optimizers,
// pipeline schedules, offload devices; op attributes), for code that names them without
// building IR (the DeepSpeed config parser).
//
#ifndef DS_IR_DSENUMS_H
#define DS_IR_DSENUMS_H

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/DenseMapInfo.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/LogicalResult.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>

#include "ds/IR/DSEnums.h.inc"

#endif // DS_IR_DSENUMS_H
