//===- avx512_lanes.h - bf16 values and exp in AVX-512 registers --------===//
//
// Sixteen bf16 values widened into an f32 zmm and rounded back (to nearest even, NaN kept
// quiet: floatToBf16), and exp in 16 lanes, for the kernels that convert inside their own
// AVX-512 loops. Call them from functions built with target("avx512f") only, after checking
// avx512Bf16Lanes().
//
#ifndef DSRT_CPU_AVX512_LANES_H
#define DSRT_CPU_AVX512_LANES_H

#include <cstdint>
#include <immintrin.h>

namespace dsrt::cpu {

/// Whether this CPU runs the functions below (AVX-512F).
inline bool avx512Bf16Lanes() {
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
}

__attribute__((target("avx512f"))) inline __m512 loadBf16x16(const uint16_t *p) {
  const __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
}

__attribute__((target("avx512f"))) inline void storeBf16x16(uint16_t *p, __m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i high = _mm512_srli_epi32(u, 16);
  const __m512i odd = _mm512_and_si512(high, _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(
      _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd)), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  r = _mm512_mask_or_epi32(r, nan, high, _mm512_set1_epi32(0x40));
  _mm256_storeu_si256((__m256i *)p, _mm512_cvtepi32_epi16(r));
}

/// exp(x) in the lanes of `keep` for x in [fn::kExpLo, fn::kExpHi] (-87.3, 88.7; outside,
/// the caller masks), 0 in the others whatever their argument (inf and NaN too): Cephes'
/// polynomial as fn::expInRange, 2^n by vscalefps.
__attribute__((target("avx512f"))) inline __m512 exp16(__m512 x, __mmask16 keep) {
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.f));
  return _mm512_maskz_scalef_ps(keep, p, n);
}
__attribute__((target("avx512f"))) inline __m512 exp16(__m512 x) {
  return exp16(x, (__mmask16)0xffff);
}

} // namespace dsrt::cpu

#endif // DSRT_CPU_AVX512_LANES_H
