// CPU kernels: a row of 16-bit softmax probabilities as PyTorch's CPU flash attention computes
// it (exp(x - shift) by ATen's fast exponential, fn::fastExp16, over whole vectors and libm's
// expf over the rest; the sum in ATen's lane order). Built without contraction: every fused
// multiply-add here is written as one.
#include "avx512_lanes.h"
#include "cpu_device.h"
#include "element_functions.h"
#include "vector_math.h"

#include <cmath>

using namespace dsrt;

namespace {

/// fn::fastExp16 in 16 lanes, the same steps (ATen's AVX-512 fexp_u20 masks NaN to -0; here
/// it stays NaN, as in the scalar form).
__attribute__((target("avx512f"))) __m512 fastExp16x16(__m512 x) {
  const __mmask16 low = _mm512_cmp_ps_mask(x, _mm512_set1_ps(cpu::fn::kFastExpLo), _CMP_LT_OS);
  const __mmask16 high = _mm512_cmp_ps_mask(x, _mm512_set1_ps(cpu::fn::kFastExpHi), _CMP_GT_OS);
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  __m512 s = _mm512_mul_ps(x, _mm512_set1_ps(cpu::fn::kFastExpLog2e));
  const __m512 f = _mm512_sub_ps(s, _mm512_floor_ps(s));
  __m512 p = _mm512_fmadd_ps(f, _mm512_set1_ps(cpu::fn::kFastExpPoly[3]),
                             _mm512_set1_ps(cpu::fn::kFastExpPoly[2]));
  p = _mm512_fmadd_ps(f, p, _mm512_set1_ps(cpu::fn::kFastExpPoly[1]));
  p = _mm512_fmadd_ps(f, p, _mm512_set1_ps(cpu::fn::kFastExpPoly[0]));
  s = _mm512_sub_ps(s, p);
  __m512i bits = _mm512_cvttps_epi32(
      _mm512_fmadd_ps(_mm512_set1_ps(8388608.f), s, _mm512_set1_ps(8388608.f * 127.f)));
  bits = _mm512_mask_mov_epi32(bits, low, _mm512_setzero_si512());
  bits = _mm512_mask_mov_epi32(bits, high, _mm512_set1_epi32(0x7f800000));
  return _mm512_mask_mov_ps(_mm512_castsi512_ps(bits), nan, x);
}

/// The row in AVX-512: pairs of 16 lanes in two sums, one more 16 into the first, the sums
/// added lane by lane and then as a tree (ATen's VectorizedN<float, 2> and vec_reduce_all).
__attribute__((target("avx512f"))) float rowAvx512(float *dst, const float *x, float shift,
                                                   int64_t n) {
  const __m512 sh = _mm512_set1_ps(shift);
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, tail = a0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 v0 = fastExp16x16(_mm512_sub_ps(_mm512_loadu_ps(x + i), sh));
    const __m512 v1 = fastExp16x16(_mm512_sub_ps(_mm512_loadu_ps(x + i + 16), sh));
    a0 = _mm512_add_ps(a0, v0);
    a1 = _mm512_add_ps(a1, v1);
    _mm512_storeu_ps(dst + i, v0);
    _mm512_storeu_ps(dst + i + 16, v1);
  }
  for (; i + 16 <= n; i += 16) {
    const __m512 v = fastExp16x16(_mm512_sub_ps(_mm512_loadu_ps(x + i), sh));
    tail = _mm512_add_ps(tail, v);
    _mm512_storeu_ps(dst + i, v);
  }
  float sum = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, tail), a1));
  for (; i < n; ++i) {
    dst[i] = std::exp(x[i] - shift);
    sum += dst[i];
  }
  return sum;
}

/// The same order in `W` lanes of scalars (ATen's AVX2 build: 8).
template <int W> float rowLanes(float *dst, const float *x, float shift, int64_t n) {
  float a0[W] = {}, a1[W] = {}, tail[W] = {};
  int64_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W)
    for (int l = 0; l < W; ++l) {
      dst[i + l] = cpu::fn::fastExp16(x[i + l] - shift);
      dst[i + W + l] = cpu::fn::fastExp16(x[i + W + l] - shift);
      a0[l] += dst[i + l];
      a1[l] += dst[i + W + l];
    }
  for (; i + W <= n; i += W)
    for (int l = 0; l < W; ++l) {
      dst[i + l] = cpu::fn::fastExp16(x[i + l] - shift);
      tail[l] += dst[i + l];
    }
  for (int l = 0; l < W; ++l)
    a0[l] = (a0[l] + tail[l]) + a1[l];
  for (int half = W / 2; half >= 1; half /= 2) // lane l with l + half, as the shuffles pair
    for (int l = 0; l < half; ++l)
      a0[l] += a0[l + half];
  float sum = a0[0];
  for (; i < n; ++i) {
    dst[i] = std::exp(x[i] - shift);
    sum += dst[i];
  }
  return sum;
}

} // namespace

float dsrt::cpu::vexpShiftSumHalfSoftmax(float *dst, const float *x, float shift, int64_t n) {
  return avx512Bf16Lanes() ? rowAvx512(dst, x, shift, n) : rowLanes<8>(dst, x, shift, n);
}
