//===- bf16_lanes.h - bf16 values in AVX-512 registers ------------------===//
//
// Sixteen bf16 values widened into an f32 zmm and rounded back (to nearest even, NaN kept
// quiet: floatToBf16), for the kernels that convert inside their own AVX-512 loops. Call them
// from functions built with target("avx512f") only, after checking avx512Bf16Lanes().
//
#ifndef DSRT_CPU_BF16_LANES_H
#define DSRT_CPU_BF16_LANES_H

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

} // namespace dsrt::cpu

#endif // DSRT_CPU_BF16_LANES_H
