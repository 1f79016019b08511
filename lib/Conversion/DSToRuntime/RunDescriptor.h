//===- RunDescriptor.h - the program descriptor's "run" section ------------===//
#ifndef DS_CONVERSION_DSTORUNTIME_RUNDESCRIPTOR_H
#define DS_CONVERSION_DSTORUNTIME_RUNDESCRIPTOR_H

#include "ds/IR/DSDialect.h"

#include "llvm/Support/JSON.h"

namespace mlir::ds::runtime {
/// Adds to the descriptor `root` what the driver needs of `run` ("run"), and the normalized
/// config, its numbers and how a config names its precision, which it compares without
/// knowing DeepSpeed's keys ("config", "numeric_config", "config_precision").
void describeRun(RunAttr run, llvm::json::Object &root);
} // namespace mlir::ds::runtime

#endif // DS_CONVERSION_DSTORUNTIME_RUNDESCRIPTOR_H
