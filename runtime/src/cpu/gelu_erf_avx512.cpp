//===- gelu_erf_avx512.cpp - GELU's exact form in 16 AVX-512 lanes ----------===//
//
// GELU (erf) and dy * GELU'(x) on f32 and bf16 arrays, written out for AVX-512F, bf16 values
// converted inside the loop (avx512_lanes.h):
// - The forward takes erf(z), z = x / sqrt 2, as the rational z P(z^2) / Q(z^2) fitted on
//   [0, 3.9] (runtime/tools/fit_erf.py: 1.4e-9 in double, 2.8e-7 in f32 arithmetic, as ATen's
//   own f32 GELU's Abramowitz & Stegun 7.1.26 at 1.5e-7 plus its roundings), about 24
//   instructions a vector against ~46 for the exponential and polynomial of A&S, which ran at
//   1.8x PyTorch's time in f32 and 2.2x in bf16 here. Vectors with |x| > 5.5 or NaN take ATen's
//   scalar formula.
// - The gradient needs the density exp(-x^2 / 2) anyway: A&S 7.1.26 on it as
//   element_functions.h (left tail taken directly), the exponential inline (exp16),
//   1 / (1 + p|u|) from vrcp14ps and one Newton step.
//
#include "avx512_lanes.h"
#include "element_functions.h"
#include "vector_math.h"
#include "../core/half.h"
#include "../kernels/scalar_ops.h"

#include <algorithm>

using namespace dsrt;
using namespace dsrt::cpu;

namespace {

constexpr int64_t kChunk = 1 << 14;

/// fn::normalCdf in 16 lanes, |x| <= fn::kGeluHi: Phi(x), and the density in `pdf`.
__attribute__((target("avx512f"))) inline __m512 normalCdf16(__m512 x, __m512 &pdf) {
  const __m512 one = _mm512_set1_ps(1.f);
  const __m512 e = cpu::exp16(_mm512_mul_ps(_mm512_mul_ps(x, x), _mm512_set1_ps(-0.5f)));
  const __m512 d = _mm512_fmadd_ps(_mm512_set1_ps(0.3275911f * float(ops::kSqrt1_2)),
                                   _mm512_abs_ps(x), one);
  __m512 t = _mm512_rcp14_ps(d); // 14 bits; a Newton step: t (2 - d t), ~28
  t = _mm512_mul_ps(t, _mm512_fnmadd_ps(d, t, _mm512_set1_ps(2.f)));
  __m512 poly = _mm512_set1_ps(1.061405429f);
  poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(-1.453152027f));
  poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(1.421413741f));
  poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(-0.284496736f));
  poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(0.254829592f));
  poly = _mm512_mul_ps(poly, t);
  const __m512 tail = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), poly), e);
  pdf = _mm512_mul_ps(_mm512_set1_ps(float(ops::kGeluErfBeta)), e);
  const __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
  return _mm512_mask_blend_ps(neg, _mm512_sub_ps(one, tail), tail);
}

// erf(z) ~ z P(z^2) / Q(z^2) for |z| <= 3.9 (runtime/tools/fit_erf.py).
constexpr float kErfP[] = {1.128379180e+00f, 1.846899907e-01f, 5.426059684e-02f,
                           3.829856737e-03f, 3.796522913e-04f, 4.698442953e-06f,
                           -1.323255464e-08f};
constexpr float kErfQ[] = {1.000000000e+00f, 4.970107664e-01f, 1.137565714e-01f,
                           1.542332605e-02f, 1.303559993e-03f, 6.323741978e-05f};
constexpr float kRationalHi = 5.5f; // |x| <= 5.5: |z| <= 3.89

/// GELU(x) = x (1 + erf(x / sqrt 2)) / 2 in 16 lanes, |x| <= kRationalHi.
__attribute__((target("avx512f"))) inline __m512 geluRational16(__m512 x) {
  const __m512 z = _mm512_mul_ps(x, _mm512_set1_ps(float(ops::kSqrt1_2)));
  const __m512 z2 = _mm512_mul_ps(z, z);
  __m512 p = _mm512_set1_ps(kErfP[6]), q = _mm512_set1_ps(kErfQ[5]);
  for (int i = 5; i >= 0; --i)
    p = _mm512_fmadd_ps(p, z2, _mm512_set1_ps(kErfP[i]));
  for (int i = 4; i >= 0; --i)
    q = _mm512_fmadd_ps(q, z2, _mm512_set1_ps(kErfQ[i]));
  const __m512 erf = _mm512_div_ps(_mm512_mul_ps(z, p), q);
  const __m512 h = _mm512_mul_ps(x, _mm512_set1_ps(0.5f));
  return _mm512_fmadd_ps(h, erf, h);
}

template <bool Bf16> struct Io;
template <> struct Io<false> {
  using T = float;
  __attribute__((target("avx512f"))) static __m512 load(const float *p) {
    return _mm512_loadu_ps(p);
  }
  __attribute__((target("avx512f"))) static void store(float *p, __m512 v) {
    _mm512_storeu_ps(p, v);
  }
  static float get(float v) { return v; }
  static float put(float v) { return v; }
};
template <> struct Io<true> {
  using T = uint16_t;
  __attribute__((target("avx512f"))) static __m512 load(const uint16_t *p) {
    return cpu::loadBf16x16(p);
  }
  __attribute__((target("avx512f"))) static void store(uint16_t *p, __m512 v) {
    cpu::storeBf16x16(p, v);
  }
  static float get(uint16_t v) { return bf16ToFloat(v); }
  static float put(float v) { return floatToBf16(v); }
};

/// dst = GELU(x), or with dy, dy * GELU'(x), over n values: 16 at a time where all 16 are
/// within the vector form's range (|x| <= 5.5 forward, 13 for the gradient), ATen's scalar
/// formula for the others (and NaN) and for the last n % 16. dst may be x or dy.
template <bool Bf16>
__attribute__((target("avx512f"))) void geluErfRange(typename Io<Bf16>::T *dst,
                                                     const typename Io<Bf16>::T *x,
                                                     const typename Io<Bf16>::T *dy,
                                                     int64_t n) {
  using IO = Io<Bf16>;
  auto scalar = [&](int64_t from, int64_t to) { // ATen's formula, element by element
    for (int64_t j = from; j < to; ++j) {
      const float u = IO::get(x[j]);
      dst[j] = IO::put(dy ? ops::binary<float>(DSRT_GELU_ERF_GRAD, u, IO::get(dy[j]))
                          : ops::unary<float>(DSRT_GELU_ERF, u));
    }
  };
  const __m512 hi = _mm512_set1_ps(dy ? fn::kGeluHi : kRationalHi);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = IO::load(x + i);
    if (_mm512_cmp_ps_mask(_mm512_abs_ps(v), hi, _CMP_LE_OQ) != 0xffff) {
      scalar(i, i + 16); // an edge in these 16
      continue;
    }
    if (!dy) {
      IO::store(dst + i, geluRational16(v));
      continue;
    }
    __m512 pdf;
    const __m512 cdf = normalCdf16(v, pdf);
    IO::store(dst + i, _mm512_mul_ps(IO::load(dy + i), _mm512_fmadd_ps(v, pdf, cdf)));
  }
  scalar(i, n); // the last n % 16
}

template <bool Bf16>
void geluErfChunks(void *dst, const void *x, const void *dy, int64_t n, bool parallel) {
  using T = typename Io<Bf16>::T;
#pragma omp parallel for schedule(static) if (parallel && n > 4 * kChunk)
  for (int64_t at = 0; at < n; at += kChunk)
    geluErfRange<Bf16>((T *)dst + at, (const T *)x + at, dy ? (const T *)dy + at : nullptr,
                       std::min(kChunk, n - at));
}

} // namespace

bool dsrt::cpu::vgeluErf(int32_t dtype, void *dst, const void *x, const void *dy, int64_t n,
                         bool parallel) {
  if (!avx512Bf16Lanes() || (dtype != DSRT_F32 && dtype != DSRT_BF16))
    return false;
  if (dtype == DSRT_BF16)
    geluErfChunks<true>(dst, x, dy, n, parallel);
  else
    geluErfChunks<false>(dst, x, dy, n, parallel);
  return true;
}
