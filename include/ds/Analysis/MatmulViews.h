//===- MatmulViews.h - matmuls that read and write strided views ----------===//
//
// The slices, reshapes and transposes around a batched matmul (f32, bf16 or f16: attention's
// heads split out of a fused QKV projection and merged back) are index arithmetic: it reads its
// operands from the tensors they were taken from, and writes its result where the transposes
// after it would have moved it (dsrt_matmul_view). Those ops are then not lowered at all when
// every use of theirs is absorbed so; a concatenation of such results (dq, dk, dv into dqkv)
// is written in place. A multiplication by a power of two on an operand or on the result
// (attention's 1/sqrt(64), and its gradient's) becomes the product's alpha, which scales each
// sum exactly (f32 and bf16; not f16, whose subnormals are within attention's reach).
//
//===----------------------------------------------------------------------===//
#ifndef DS_ANALYSIS_MATMULVIEWS_H
#define DS_ANALYSIS_MATMULVIEWS_H

#include "mlir/IR/Block.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

namespace mlir::ds {

/// One matmul's lowering onto dsrt_matmul_view.
struct MatmulViewPlan {
  Value lhsRoot, rhsRoot; ///< the tensors its operands are read from
  /// The value whose storage it writes (null: its own result): the last of the transposes
  /// after it, or the concatenation those (reshaped) are a piece of.
  Value resultBuffer;
  /// dsrt_matmul_view's descriptor: b0, b1, M, N, K, then {offset, s0, s1, rows, columns}
  /// for lhs, rhs and the result.
  SmallVector<int64_t, 20> views;
  double alpha = 1.0; ///< a power of two
};

struct MatmulViews {
  llvm::DenseMap<Operation *, MatmulViewPlan> plans;
  /// Slices, reshapes, transposes and scalings with no lowering of their own.
  llvm::DenseSet<Operation *> absorbed;
  /// Concatenations some of whose pieces matmuls write in place (the others are copied in).
  llvm::DenseSet<Operation *> concatsWritten;
};

/// The plans of the matmuls in `body` (f32, batched, equal batch dims, not on the host) whose
/// operands or result move through slices, reshapes, transposes or power-of-two scalings
/// beyond a single transpose of the last two dims (which dsrt_matmul's flags already take).
MatmulViews planMatmulViews(Block &body);

} // namespace mlir::ds

#endif
