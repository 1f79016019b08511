//===- CommandLine.h - ds's tools' --help without LLVM's own options -*- C++ -*-===//
//
// libLLVM registers hundreds of codegen and target options when it loads; ds's tools hide them
// from --help (--help-hidden still lists them, as LLVM's tools do). Called first in main(),
// before MLIR registers its options, which stay visible.
//
#ifndef DS_TOOLS_COMMANDLINE_H
#define DS_TOOLS_COMMANDLINE_H

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/CommandLine.h"

namespace mlir::ds {

/// Hides every option registered so far that is in none of `keep`, except the help and
/// version options.
inline void hideLLVMOptions(llvm::ArrayRef<const llvm::cl::OptionCategory *> keep) {
  for (auto &entry : llvm::cl::getRegisteredOptions()) {
    llvm::cl::Option *o = entry.second;
    llvm::StringRef name = entry.first;
    if (name.starts_with("help") || name == "version" ||
        o->getOptionHiddenFlag() != llvm::cl::NotHidden ||
        llvm::any_of(o->Categories,
                     [&](llvm::cl::OptionCategory *c) { return llvm::is_contained(keep, c); }))
      continue;
    o->setHiddenFlag(llvm::cl::Hidden);
  }
}

} // namespace mlir::ds

#endif // DS_TOOLS_COMMANDLINE_H
