//===- gelu_grad.cpp - GELU gradients on glibc's vector expf and tanhf ----------===//
//
// dy * GELU'(x), both forms, ATen's formulas (kernels/scalar_ops.h) evaluated 16 or 8 lanes at
// a time with libmvec's expf and tanhf (within 4 ulp; PyTorch's f32 tolerance is about 11).
// The normal CDF of the exact form is Abramowitz & Stegun 7.1.26 (erf within 1.5e-7, as
// oneDNN's gelu_erf), on the same exponential as the density: 0.5 * erfc(|x| / sqrt 2) taken
// directly on the negative side, so the left tail keeps its relative precision. oneDNN 2.6's
// eltwise backward ran at ~4 ms on [2048, 2048] in some processes and at half that speed in
// others here (binary_gelu_erf_grad in separate runs of dsrt-kernel-bench: 3.7-4.3 or 7.4-9.9
// ms, gelu_tanh_grad with it), which these loops do not.
//
#include "vector_math.h"
#include "../kernels/scalar_ops.h"

#include <algorithm>
#include <immintrin.h>

#pragma GCC diagnostic ignored "-Wpsabi" // the vector functions are only called with their ISA
extern "C" {
__attribute__((target("avx512f"))) __m512 _ZGVeN16v_expf(__m512);
__attribute__((target("avx512f"))) __m512 _ZGVeN16v_tanhf(__m512);
__attribute__((target("avx2"))) __m256 _ZGVdN8v_expf(__m256);
__attribute__((target("avx2"))) __m256 _ZGVdN8v_tanhf(__m256);
}

namespace {

using namespace dsrt;

// One loop body in W lanes of vector type V (a macro, since lambdas inside a target("...")
// function do not inherit its ISA): whole vectors, the tail by the scalar formula.
#define DSRT_GELU_GRAD_LANES(V, W, SET1, LOAD, STORE, ADD, SUB, MUL, DIV, ABS, NEGSEL, EXP,    \
                             TANH)                                                             \
  const V half = SET1(0.5f), one = SET1(1.f);                                                  \
  int64_t i = 0;                                                                               \
  if (op == DSRT_GELU_ERF_GRAD) {                                                              \
    const V sqrt1_2 = SET1(float(ops::kSqrt1_2)), beta = SET1(float(ops::kGeluErfBeta)),        \
            mhalf = SET1(-0.5f), p = SET1(0.3275911f), a1 = SET1(0.254829592f),                 \
            a2 = SET1(-0.284496736f), a3 = SET1(1.421413741f), a4 = SET1(-1.453152027f),        \
            a5 = SET1(1.061405429f);                                                           \
    for (; i + W <= n; i += W) {                                                               \
      const V a = LOAD(x + i), b = LOAD(dy + i);                                               \
      const V e = EXP(MUL(MUL(a, a), mhalf)); /* exp(-x^2 / 2) = exp(-u^2), u = x / sqrt 2 */  \
      const V t = DIV(one, ADD(one, MUL(p, ABS(MUL(a, sqrt1_2)))));                            \
      const V poly = MUL(t, ADD(a1, MUL(t, ADD(a2, MUL(t, ADD(a3, MUL(t, ADD(a4, MUL(t, a5))))))))); \
      const V tail = MUL(half, MUL(poly, e)); /* 0.5 * erfc(|u|) */                            \
      const V cdf = NEGSEL(a, tail, SUB(one, tail));                                           \
      const V pdf = MUL(beta, e);                                                              \
      STORE(z + i, MUL(b, ADD(cdf, MUL(a, pdf))));                                             \
    }                                                                                          \
  } else {                                                                                     \
    const V beta = SET1(float(ops::kGeluTanhBeta)), kappa = SET1(float(ops::kGeluTanhKappa)),  \
            kappa3 = SET1(3.f * float(ops::kGeluTanhKappa));                                   \
    for (; i + W <= n; i += W) {                                                               \
      const V a = LOAD(x + i), b = LOAD(dy + i);                                               \
      const V xSq = MUL(a, a), xCube = MUL(xSq, a);                                            \
      const V t = TANH(MUL(beta, ADD(a, MUL(kappa, xCube))));                                  \
      const V left = MUL(half, a), leftDerivative = MUL(half, ADD(one, t));                    \
      const V tanhDerivative = SUB(one, MUL(t, t));                                            \
      const V innerDerivative = MUL(beta, ADD(one, MUL(kappa3, xSq)));                         \
      STORE(z + i, MUL(b, ADD(leftDerivative, MUL(MUL(left, tanhDerivative), innerDerivative)))); \
    }                                                                                          \
  }                                                                                            \
  for (; i < n; ++i)                                                                           \
    z[i] = ops::binary<float>(op, x[i], dy[i]);

__attribute__((target("avx512f"))) void geluGrad16(int32_t op, float *z, const float *x,
                                                   const float *dy, int64_t n) {
  const __m512 zero = _mm512_setzero_ps();
#define DSRT_NEGSEL16(a, neg, other) _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, zero, _CMP_LT_OQ), other, neg)
  DSRT_GELU_GRAD_LANES(__m512, 16, _mm512_set1_ps, _mm512_loadu_ps, _mm512_storeu_ps,
                       _mm512_add_ps, _mm512_sub_ps, _mm512_mul_ps, _mm512_div_ps, _mm512_abs_ps,
                       DSRT_NEGSEL16, _ZGVeN16v_expf, _ZGVeN16v_tanhf)
#undef DSRT_NEGSEL16
}
__attribute__((target("avx2"))) void geluGrad8(int32_t op, float *z, const float *x,
                                               const float *dy, int64_t n) {
  const __m256 zero = _mm256_setzero_ps(), sign = _mm256_set1_ps(-0.f);
#define DSRT_ABS8(v) _mm256_andnot_ps(sign, v)
#define DSRT_NEGSEL8(a, neg, other) _mm256_blendv_ps(other, neg, _mm256_cmp_ps(a, zero, _CMP_LT_OQ))
  DSRT_GELU_GRAD_LANES(__m256, 8, _mm256_set1_ps, _mm256_loadu_ps, _mm256_storeu_ps,
                       _mm256_add_ps, _mm256_sub_ps, _mm256_mul_ps, _mm256_div_ps, DSRT_ABS8,
                       DSRT_NEGSEL8, _ZGVdN8v_expf, _ZGVdN8v_tanhf)
#undef DSRT_ABS8
#undef DSRT_NEGSEL8
}
#undef DSRT_GELU_GRAD_LANES

} // namespace

// In 8 lanes these loops ran at half the speed of 16 here (5.4 and 7.2 ms on [2048, 2048]
// against 2.7-3.5 and 2.8-3.3): with oneDNN, CPUs without AVX-512 keep its eltwise backward.
#ifdef DSRT_HAVE_DNNL
constexpr bool kEightLanes = false;
#else
constexpr bool kEightLanes = true;
#endif

bool dsrt::cpu::vgeluGrad(int32_t op, float *dst, const float *x, const float *dy, int64_t n) {
  static const int lanes = __builtin_cpu_supports("avx512f")                  ? 16
                           : kEightLanes && __builtin_cpu_supports("avx2") ? 8
                                                                            : 0;
  if (!lanes || (op != DSRT_GELU_ERF_GRAD && op != DSRT_GELU_TANH_GRAD))
    return false;
  const int64_t chunk = 1 << 14;
#pragma omp parallel for schedule(static) if (n > 4 * chunk)
  for (int64_t at = 0; at < n; at += chunk) {
    const int64_t len = std::min(chunk, n - at);
    if (lanes == 16)
      geluGrad16(op, dst + at, x + at, dy + at, len);
    else
      geluGrad8(op, dst + at, x + at, dy + at, len);
  }
  return true;
}
