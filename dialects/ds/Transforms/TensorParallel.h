//===- TensorParallel.h - shared state of ds-tensor-parallel's rewrites -*- C++ -*-===//
//
// ds-tensor-parallel rewrites @forward in two parts: Megatron regions of column- and
// row-parallel linears (TensorParallel.cpp) and the vocabulary-parallel embedding, LM head
// and cross-entropy (VocabParallel.cpp). This is what both share.
//
#ifndef DS_TRANSFORMS_TENSORPARALLEL_H
#define DS_TRANSFORMS_TENSORPARALLEL_H

#include "Mesh.h"

#include "ds/IR/DSOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir::ds {

struct TensorParallelRewriter {
  ModuleOp module;
  int64_t tp = 1;
  MeshAxisRef axis;
  /// Linears already in a region or made an LM head.
  llvm::DenseSet<Operation *> assigned;

  /// The parameter that `v` reads, or null.
  ParameterOp parameterOf(Value v) {
    auto get = v.getDefiningOp<GetParameterOp>();
    return get ? module.lookupSymbol<ParameterOp>(get.getNameAttr()) : ParameterOp();
  }
  /// Makes `param` this rank's part of dimension `dim` over tp (in `segments` segments): its
  /// type, its sharding and the type of every read of it.
  void splitParameter(ParameterOp param, int64_t dim, int64_t segments);
  /// The vocabulary-parallel embedding tables and LM heads of `forward`.
  void vocabParallel(ModuleOp module, func::FuncOp forward);
};

} // namespace mlir::ds

#endif // DS_TRANSFORMS_TENSORPARALLEL_H
