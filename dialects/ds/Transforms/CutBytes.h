//===- CutBytes.h - the bytes that cross each cut of a straight-line program -*- C++ -*-===//
//
// Shared by the cuts that ds-pipeline-partition (stages) and ds-activation-checkpoint
// (recomputed segments) place: both want the bytes of the values live across a cut.
//
#ifndef DS_TRANSFORMS_CUTBYTES_H
#define DS_TRANSFORMS_CUTBYTES_H

#include "ds/IR/DSShapes.h"

#include "mlir/IR/Operation.h"
#include "llvm/ADT/DenseMap.h"

namespace mlir::ds {

/// Entry j (0 <= j <= ops.size() + 1): the bytes of the results of ops[0, j) that an op of
/// ops[j, ...) reads; `index` is each op's position in `ops`. A use by `end` (an op past
/// them, such as the terminator) counts as a read at ops.size(); other uses not in `index`
/// count for nothing.
inline SmallVector<int64_t> cutBytes(ArrayRef<Operation *> ops,
                                     const llvm::DenseMap<Operation *, int64_t> &index,
                                     Operation *end = nullptr) {
  const int64_t n = static_cast<int64_t>(ops.size());
  SmallVector<int64_t> crossing(n + 2, 0);
  for (int64_t d = 0; d < n; ++d)
    for (Value r : ops[d]->getResults()) {
      int64_t last = -1;
      for (Operation *u : r.getUsers()) {
        if (auto it = index.find(u); it != index.end())
          last = std::max(last, it->second);
        else if (end && u == end)
          last = n;
      }
      if (last > d) {
        crossing[d + 1] += tensorBytes(r.getType());
        crossing[last + 1] -= tensorBytes(r.getType());
      }
    }
  for (int64_t j = 1; j <= n + 1; ++j)
    crossing[j] += crossing[j - 1];
  return crossing;
}

} // namespace mlir::ds

#endif // DS_TRANSFORMS_CUTBYTES_H
