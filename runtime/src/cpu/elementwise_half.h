//===- elementwise_half.h - the CPU's elementwise kernels on 16-bit tensors ===//
//
// unary, binary and cmp on bf16 and f16 operands: each element widened to f32, computed as the
// f32 kernel computes it, the result rounded once to nearest even (PyTorch's 16-bit CPU
// kernels), in one pass over memory instead of a conversion, the f32 kernel and a rounding.
//
#ifndef DSRT_CPU_ELEMENTWISE_HALF_H
#define DSRT_CPU_ELEMENTWISE_HALF_H

#include "cpu_device.h"

namespace dsrt::cpu {

/// The kernels' 16-bit forms; the checks are the caller's (elementwise.cpp).
void unaryHalf(int32_t op, dsrt_tensor *out, const dsrt_tensor *in);
void binaryHalf(int32_t op, dsrt_tensor *out, const dsrt_tensor *a, const dsrt_tensor *b);
void cmpHalf(int32_t pred, dsrt_tensor *out, const dsrt_tensor *a, const dsrt_tensor *b);

} // namespace dsrt::cpu

#endif // DSRT_CPU_ELEMENTWISE_HALF_H
