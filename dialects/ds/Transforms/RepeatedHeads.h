//===- RepeatedHeads.h - HF's repeat_kv of grouped-query attention, recognised ---===//
//
// ds-fuse-attention (which reads the heads themselves where there is no mask) and
// ds-derive-generation (whose cache holds the key/value heads, not their repeats) both look
// through it.
//
#ifndef DS_TRANSFORMS_REPEATEDHEADS_H
#define DS_TRANSFORMS_REPEATEDHEADS_H

#include "ds/IR/DSOps.h"

namespace mlir::ds {
/// The key/value heads that `x` repeats as HF's repeat_kv does (reshape [B, Hk, S, E] to
/// [B, Hk, 1, S, E], broadcast to [B, Hk, g, S, E], reshape to [B, Hk g, S, E]), or null.
Value repeatedHeads(Value x);
} // namespace mlir::ds

#endif // DS_TRANSFORMS_REPEATEDHEADS_H
