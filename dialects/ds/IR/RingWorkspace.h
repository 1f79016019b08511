//===- RingWorkspace.h - the workspace sizes of ds.ring_attention -----*- C++ -*-===//
//
// One home for the compiler's side (the verifiers, the gradient, ds-sequence-parallel); the
// runtime (runtime/src/core/ring_attention.cpp) checks the same sizes of what it is given.
//
#ifndef DS_IR_RINGWORKSPACE_H
#define DS_IR_RINGWORKSPACE_H

#include "mlir/IR/BuiltinTypes.h"

namespace mlir::ds {
/// f32 elements of ds.ring_attention's workspace: two key/value blocks, a partial result and
/// three log-sum-exp rows.
inline RankedTensorType ringAttentionWorkspace(RankedTensorType key, RankedTensorType value,
                                               RankedTensorType result, RankedTensorType lse) {
  int64_t n = 2 * (key.getNumElements() + value.getNumElements()) + result.getNumElements() +
              3 * lse.getNumElements();
  return RankedTensorType::get({n}, Float32Type::get(key.getContext()));
}
/// f32 elements of ds.ring_attention_grad's: two travelling blocks (keys, values and their
/// gradients) and one block's partial gradients.
inline RankedTensorType ringAttentionGradWorkspace(RankedTensorType query,
                                                   RankedTensorType key,
                                                   RankedTensorType value) {
  int64_t n = 5 * (key.getNumElements() + value.getNumElements()) + query.getNumElements();
  return RankedTensorType::get({n}, Float32Type::get(key.getContext()));
}
} // namespace mlir::ds

#endif // DS_IR_RINGWORKSPACE_H
