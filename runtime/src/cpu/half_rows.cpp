//===- half_rows.cpp - 16-bit rows as f32 and back (half_rows.h) ----------===//
#include "half_rows.h"

using namespace dsrt;

// Built per ISA: the conversions are memory-bound passes over the operands. The lambdas inline
// into each clone.
DSRT_CPU_CLONES void dsrt::cpu::widenRow(int32_t dtype, float *__restrict y,
                                         const uint16_t *__restrict x, int64_t n) {
  auto loop = [&](auto widen1) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i)
      y[i] = widen1(x[i]);
  };
  if (dtype == DSRT_BF16)
    loop([](uint16_t v) { return bf16ToFloat(v); });
  else
    loop([](uint16_t v) { return f16ToFloat(v); });
}

DSRT_CPU_CLONES void dsrt::cpu::narrowRow(int32_t dtype, uint16_t *__restrict y,
                                          const float *__restrict x,
                                          const float *__restrict bias, int64_t n) {
  auto loop = [&](auto round) {
    if (bias) {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i)
        y[i] = round(x[i] + bias[i]);
    } else {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i)
        y[i] = round(x[i]);
    }
  };
  if (dtype == DSRT_BF16)
    loop([](float v) { return floatToBf16(v); });
  else
    loop([](float v) { return floatToF16(v); });
}
