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
#include "llvm/Support/Regex.h"

#include <memory>

namespace mlir::ds {

/// A value's part along one dimension: `dim` is `segments` equal segments (or of `sizes`
/// elements each: a fused projection of grouped-query heads) and each of the `parts` ranks
/// holds its contiguous share of every segment (one segment: one block).
struct Split {
  int64_t dim = -1;
  int64_t segments = 1;
  SmallVector<int64_t, 3> sizes; ///< unequal segments' sizes (empty: equal)
  bool operator==(const Split &o) const {
    return dim == o.dim && segments == o.segments && sizes == o.sizes;
  }
  bool operator!=(const Split &o) const { return !(*this == o); }
};

/// Where a split of a tensor of shape `in` lands when it is reshaped to `out` (whole shapes):
/// within the group of dimensions whose products match, the dimension whose blocks are whole
/// rows of each rank's part. Fails, with the cause in `why`, when a rank's part would not be
/// such a block.
FailureOr<Split> splitThroughReshape(ArrayRef<int64_t> in, ArrayRef<int64_t> out, Split s,
                                     int64_t parts, std::string &why);

/// A rank-0 constant of `elem` (float or integer) with value `v`.
Value scalarConstant(OpBuilder &b, Location loc, Type elem, double v);

struct TensorParallelRewriter {
  ModuleOp module;
  int64_t tp = 1;
  MeshAxisRef axis;
  /// Linears already in a region or made an LM head.
  llvm::DenseSet<Operation *> assigned;
  /// The config's rules (layer-specs), parsed: the role ("column", "row", "skip") of the
  /// first whose pattern matches a parameter's name from its start.
  SmallVector<std::pair<std::string, std::shared_ptr<llvm::Regex>>> rules;
  bool useDefaultSpecs = true;
  StringRef roleOf(StringRef name) const {
    for (const auto &[role, re] : rules) {
      SmallVector<StringRef> m;
      if (re->match(name, &m) && m[0].data() == name.data())
        return role;
    }
    return "";
  }
  /// Why the rules keep parameter `name` whole, or "" when they let the pass decide.
  std::string keptByRules(StringRef name) const {
    StringRef role = roleOf(name);
    if (role == "skip")
      return "tensor_parallel.partition_config keeps it whole (partition_type skip)";
    if (role.empty() && !useDefaultSpecs)
      return "no tensor_parallel.partition_config layer spec matches it (use_default_specs "
             "is false)";
    return "";
  }

  /// The parameter that `v` reads, or null.
  ParameterOp parameterOf(Value v) {
    auto get = v.getDefiningOp<GetParameterOp>();
    return get ? module.lookupSymbol<ParameterOp>(get.getNameAttr()) : ParameterOp();
  }
  /// Makes `param` this rank's part of dimension `dim` over tp (in `segments` segments, of
  /// `sizes` rows when unequal): its type, its sharding and the type of every read of it.
  void splitParameter(ParameterOp param, int64_t dim, int64_t segments,
                      ArrayRef<int64_t> sizes = {});
  /// The vocabulary-parallel embedding tables and LM heads of `forward`.
  void vocabParallel(ModuleOp module, func::FuncOp forward);
};

} // namespace mlir::ds

#endif // DS_TRANSFORMS_TENSORPARALLEL_H
