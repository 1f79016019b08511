//===- binary_bf16_avx512.cpp - bf16 add, sub, mul, div in 16 AVX-512 lanes ---===//
//
// Same-shape bf16 arithmetic with the values widened and rounded inside the vector loop
// (avx512_lanes.h), as PyTorch's bf16 kernels compute it: both operands widened to f32, one
// f32 operation, rounded to nearest even. GCC vectorized the generic loop
// (elementwise_half.cpp) at 8 lanes only, since 16-bit lanes of a zmm need AVX512BW, which
// its target_clones cannot name: bf16 add ran at 1.24x PyTorch's time.
//
#include "avx512_lanes.h"
#include "vector_math.h"
#include "../core/half.h"
#include "../kernels/scalar_ops.h"

#include <algorithm>

using namespace dsrt;
using namespace dsrt::cpu;

namespace {

constexpr int64_t kChunk = 1 << 14;

template <int32_t Op> __attribute__((target("avx512f"))) inline __m512 apply(__m512 u, __m512 v) {
  if constexpr (Op == DSRT_ADD)
    return _mm512_add_ps(u, v);
  else if constexpr (Op == DSRT_SUB)
    return _mm512_sub_ps(u, v);
  else if constexpr (Op == DSRT_MUL)
    return _mm512_mul_ps(u, v);
  else
    return _mm512_div_ps(u, v);
}

template <int32_t Op>
__attribute__((target("avx512f"))) void chunk(uint16_t *z, const uint16_t *x, const uint16_t *y,
                                              int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    storeBf16x16(z + i, apply<Op>(loadBf16x16(x + i), loadBf16x16(y + i)));
  for (; i < n; ++i)
    z[i] = floatToBf16(ops::binary(Op, bf16ToFloat(x[i]), bf16ToFloat(y[i])));
}

template <int32_t Op>
void chunks(uint16_t *z, const uint16_t *x, const uint16_t *y, int64_t n) {
#pragma omp parallel for schedule(static) if (n > 4 * kChunk)
  for (int64_t at = 0; at < n; at += kChunk)
    chunk<Op>(z + at, x + at, y + at, std::min(kChunk, n - at));
}

} // namespace

bool dsrt::cpu::vbinaryBf16(int32_t op, uint16_t *z, const uint16_t *x, const uint16_t *y,
                            int64_t n) {
  if (!avx512Bf16Lanes())
    return false;
  switch (op) {
  case DSRT_ADD:
    return chunks<DSRT_ADD>(z, x, y, n), true;
  case DSRT_SUB:
    return chunks<DSRT_SUB>(z, x, y, n), true;
  case DSRT_MUL:
    return chunks<DSRT_MUL>(z, x, y, n), true;
  case DSRT_DIV:
    return chunks<DSRT_DIV>(z, x, y, n), true;
  default:
    return false;
  }
}
