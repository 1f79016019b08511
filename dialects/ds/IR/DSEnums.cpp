//===- DSEnums.cpp - the ds dialect's enums (names to values and back) -----===//
//
// A library of its own (DSEnums, LLVM's support library only), so that the DeepSpeed config
// parser names the dialect's enums without linking MLIR.
//
#include "ds/IR/DSEnums.h"

#include "llvm/ADT/StringSwitch.h"

#include "ds/IR/DSEnums.cpp.inc"
