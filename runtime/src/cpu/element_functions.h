//===- element_functions.h - f32 functions that vectorize, for the CPU ------===//
//
// The transcendental functions as branch-free scalar code that a `#pragma omp simd` loop turns
// into vector code at the loop's ISA (vector_math.cpp's loops, built per ISA). Each is exact
// to a few ulp on a range of arguments (its k...Lo, k...Hi); outside, and for NaN, callers
// take ATen's scalar formula (ops::unary), so that the edges are PyTorch's.
//
#ifndef DSRT_CPU_ELEMENT_FUNCTIONS_H
#define DSRT_CPU_ELEMENT_FUNCTIONS_H

#include "../kernels/scalar_ops.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace dsrt::cpu::fn {

// The exponential (Cephes' expf: x = n ln2 + r with |r| <= ln2 / 2, a degree-6 polynomial in
// r, 2^n from the exponent bits): within 1 ulp of libm on [-87.3, 88.7].
constexpr float kExpLo = -87.3f, kExpHi = 88.7f;
/// exp(x) for x in [kExpLo, kExpHi] only (outside, 2^n wraps: the caller checks the range).
inline float expInRange(float c) {
  float n = std::floor(c * 1.44269504088896341f + 0.5f);
  float r = c - n * 0.693359375f + n * 2.12194440e-4f;
  float p = ((((1.9875691500e-4f * r + 1.3981999507e-3f) * r + 8.3334519073e-3f) * r +
              4.1665795894e-2f) * r + 1.6666665459e-1f) * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  return p * scale;
}
/// exp(x), the argument clamped into [kExpLo, kExpHi] first.
inline float exp(float x) { return expInRange(x < kExpLo ? kExpLo : (x > kExpHi ? kExpHi : x)); }

// PyTorch's fast exponential for values stored in 16 bits next (ATen's fexp_u20, which its
// CPU flash attention takes for a bf16/f16 row of probabilities): s = x log2(e); 2^frac(s)
// approximated by a cubic in the fraction, subtracted from s; the float's bits are the
// truncation of 2^23 (s + 127). 1.1e-4 relative at worst, against a 16-bit rounding of 2e-3
// to 4e-3, yet about one probability in forty rounds to its other neighbour than exp's: so it
// is written out step by step (one rounding each, fused where ATen fuses) to give ATen's bits.
// 0 below ln(FLT_MIN) (a masked -inf), inf above ln(FLT_MAX); NaN stays NaN (ATen's lanes give
// -0).
constexpr float kFastExpLo = -87.3365478515625f, kFastExpHi = 88.72283935546875f;
constexpr float kFastExpLog2e = 1.44269502162933349609375f;
constexpr float kFastExpPoly[4] = {0.00010703434948458272f, 0.30354260500649682f,
                                   -0.22433836478672356f, -0.079204240219773236f};
inline float fastExp16(float x) {
  if (x < kFastExpLo)
    return 0.f;
  if (!(x <= kFastExpHi))
    return x != x ? x : INFINITY;
  float s = x * kFastExpLog2e;
  const float f = s - std::floor(s);
  float p = std::fma(f, kFastExpPoly[3], kFastExpPoly[2]);
  p = std::fma(f, p, kFastExpPoly[1]);
  p = std::fma(f, p, kFastExpPoly[0]);
  s = s - p;
  const int32_t bits = static_cast<int32_t>(std::fma(8388608.f, s, 8388608.f * 127.f));
  float v;
  std::memcpy(&v, &bits, 4);
  return v;
}

// The natural logarithm (Cephes' logf: the exponent split off by its bits, the mantissa
// reduced to [sqrt(1/2) - 1, sqrt(2) - 1), a degree-9 polynomial): within 1 ulp of libm on the
// normal numbers, accurate near 1 (oneDNN's log is not: 1e-4 relative there).
constexpr float kLogLo = 1.17549435e-38f, kLogHi = 3.40282347e38f;
inline float log(float x) {
  int32_t bits;
  std::memcpy(&bits, &x, 4);
  int32_t e = ((bits >> 23) & 0xff) - 126;
  int32_t mbits = (bits & 0x7fffff) | 0x3f000000; // the mantissa in [0.5, 1)
  float m;
  std::memcpy(&m, &mbits, 4);
  bool low = m < 0.707106781186547524f;
  float fe = static_cast<float>(low ? e - 1 : e);
  float r = low ? m + m - 1.0f : m - 1.0f;
  float z = r * r;
  float y = ((((((((7.0376836292e-2f * r - 1.1514610310e-1f) * r + 1.1676998740e-1f) * r -
                  1.2420140846e-1f) * r + 1.4249322787e-1f) * r - 1.6668057665e-1f) * r +
               2.0000714765e-1f) * r - 2.4999993993e-1f) * r + 3.3333331174e-1f) * r * z;
  y += -2.12194440e-4f * fe;
  y += -0.5f * z;
  return r + y + 0.693359375f * fe;
}

// Sine and cosine (Cephes' sinf/cosf: reduction by pi/4 in three parts, then a degree-7
// polynomial): within 2 ulp of libm for |x| <= 8192, where the three-part reduction keeps its
// bits.
constexpr float kSinCosLimit = 8192.f;
template <bool Cosine> inline float sinCos(float x) {
  constexpr float kFourOverPi = 1.27323954473516f;
  constexpr float kDP1 = 0.78515625f, kDP2 = 2.4187564849853515625e-4f,
                  kDP3 = 3.77489497744594108e-8f;
  float ax = std::fabs(x);
  int32_t j = static_cast<int32_t>(ax * kFourOverPi);
  j = (j + 1) & ~1; // even: the nearest multiple of pi/4 with an even index
  float y = static_cast<float>(j);
  float r = ((ax - y * kDP1) - y * kDP2) - y * kDP3;
  int32_t octant = Cosine ? j + 2 : j; // cos(x) = sin(x + pi/2)
  float z = r * r;
  float s = ((-1.9515295891e-4f * z + 8.3321608736e-3f) * z - 1.6666654611e-1f) * z * r + r;
  float c = ((2.443315711809948e-5f * z - 1.388731625493765e-3f) * z + 4.166664568298827e-2f) *
                z * z -
            0.5f * z + 1.0f;
  float v = (octant & 2) ? c : s;
  // The sign: the octant's, and for the sine the argument's (odd function).
  int32_t flip = (octant & 4) ^ (!Cosine && x < 0.f ? 4 : 0);
  return flip ? -v : v;
}

// GELU's normal CDF, Phi(x) = (1 + erf(x / sqrt 2)) / 2, by Abramowitz & Stegun 7.1.26 (erf
// within 1.5e-7, the form ATen's and oneDNN's vector GELUs use) on exp above: the left side is
// 0.5 * erfc(|x| / sqrt 2) taken directly, so its tail keeps relative precision (ATen's
// 1 + erf(x) cancels there). |x| <= 13: beyond, exp(-x^2 / 2) leaves exp's range.
constexpr float kGeluLo = -13.f, kGeluHi = 13.f;
/// Phi(x), and in `pdf` the normal density exp(-x^2 / 2) / sqrt(2 pi).
inline float normalCdf(float x, float &pdf) {
  const float e = expInRange(x * x * -0.5f); // >= -84.5 for |x| <= 13
  const float t = 1.f / (1.f + 0.3275911f * std::fabs(x * float(ops::kSqrt1_2)));
  const float poly =
      t * (0.254829592f +
           t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
  const float tail = 0.5f * poly * e; // 0.5 * erfc(|x| / sqrt 2)
  pdf = float(ops::kGeluErfBeta) * e;
  return x < 0.f ? tail : 1.f - tail;
}
/// GELU, the exact (erf) form: x * Phi(x).
inline float geluErf(float x) {
  float pdf;
  return x * normalCdf(x, pdf);
}
/// dy * GELU'(x), the exact form: dy * (Phi(x) + x * pdf(x)).
inline float geluErfGrad(float x, float dy) {
  float pdf;
  const float cdf = normalCdf(x, pdf);
  return dy * (cdf + x * pdf);
}

} // namespace dsrt::cpu::fn

#endif // DSRT_CPU_ELEMENT_FUNCTIONS_H
