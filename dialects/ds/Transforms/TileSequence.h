//===- TileSequence.h - ds-tile-sequence's rewrites -------------------*- C++ -*-===//
#ifndef DS_TRANSFORMS_TILESEQUENCE_H
#define DS_TRANSFORMS_TILESEQUENCE_H

#include "ds/IR/DSOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::ds {
/// Cuts every widening position-wise region (an MLP) of `forward` into `tiles` tiles of
/// rows (0: ALST's ceil(sequence / hidden)); returns how many regions it cut.
int64_t tileMlps(func::FuncOp forward, int64_t tiles);
} // namespace mlir::ds

#endif // DS_TRANSFORMS_TILESEQUENCE_H
