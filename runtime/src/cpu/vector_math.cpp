//===- vector_math.cpp - vectorized f32 elementwise functions --------------===//
#include "vector_math.h"
#ifdef DSRT_HAVE_DNNL
#include "dnnl_state.h"
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <immintrin.h>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

using namespace dsrt;

namespace {

// Below this many elements the scalar loops win over a primitive's call overhead.
constexpr int64_t kVectorGrain = 4096;

#ifdef DSRT_HAVE_DNNL
/// The oneDNN algorithm (and alpha, beta) of `op`, or false.
bool dnnlAlgorithm(int32_t op, bool gradient, dnnl::algorithm &alg, float &alpha, float &beta) {
  alpha = 0.f;
  beta = 0.f;
  if (gradient) {
    switch (op) {
    case DSRT_GELU_ERF_GRAD:
      alg = dnnl::algorithm::eltwise_gelu_erf;
      return true;
    case DSRT_GELU_TANH_GRAD:
      alg = dnnl::algorithm::eltwise_gelu_tanh;
      return true;
    default:
      return false;
    }
  }
  switch (op) {
  case DSRT_TANH:
    alg = dnnl::algorithm::eltwise_tanh;
    return true;
  case DSRT_SIGMOID:
    alg = dnnl::algorithm::eltwise_logistic;
    return true;
  case DSRT_GELU_ERF:
    alg = dnnl::algorithm::eltwise_gelu_erf;
    return true;
  case DSRT_GELU_TANH:
    alg = dnnl::algorithm::eltwise_gelu_tanh;
    return true;
  default:
    return false;
  }
}

bool dnnlEltwise(dsrt_context *ctx, int32_t op, bool gradient, float *dst, const float *x,
                 const float *dy, int64_t n) {
  dnnl::algorithm alg;
  float alpha, beta;
  if (!dnnlAlgorithm(op, gradient, alg, alpha, beta))
    return false;
  using dnnl::memory;
  DnnlState &st = dnnlState(ctx);
  memory::desc md({n}, memory::data_type::f32, memory::format_tag::a);
  std::string key = "eltwise/" + std::to_string(op) + (gradient ? "/bwd/" : "/fwd/") +
                    std::to_string(n);
  auto &slot = cpuDevice(ctx).primitives[key];
  if (!slot) {
    dnnl::eltwise_forward::primitive_desc fpd(
        dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_training, alg, md, alpha, beta),
        st.engine);
    if (gradient) {
      dnnl::eltwise_backward::primitive_desc bpd(
          dnnl::eltwise_backward::desc(alg, md, md, alpha, beta), st.engine, fpd);
      slot = std::make_shared<dnnl::primitive>(dnnl::eltwise_backward(bpd));
    } else {
      slot = std::make_shared<dnnl::primitive>(dnnl::eltwise_forward(fpd));
    }
  }
  memory src(md, st.engine, const_cast<float *>(x));
  memory out(md, st.engine, dst);
  auto *prim = static_cast<dnnl::primitive *>(slot.get());
  if (gradient) {
    memory diff(md, st.engine, const_cast<float *>(dy));
    prim->execute(st.stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, diff},
                              {DNNL_ARG_DIFF_SRC, out}});
  } else {
    prim->execute(st.stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, out}});
  }
  st.stream.wait();
  return true;
}

/// dnnlEltwise on the calling thread, from any thread at once (a 16-bit kernel's chunks): the
/// primitives kept for the process under a lock, a stream per thread. Inside a parallel region
/// oneDNN runs the primitive on the calling thread.
bool dnnlEltwiseHere(int32_t op, bool gradient, float *dst, const float *x, const float *dy,
                     int64_t n) {
  dnnl::algorithm alg;
  float alpha, beta;
  if (!dnnlAlgorithm(op, gradient, alg, alpha, beta))
    return false;
  using dnnl::memory;
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  static std::mutex mu;
  static std::unordered_map<std::string, std::shared_ptr<dnnl::primitive>> cache;
  const memory::desc md({n}, memory::data_type::f32, memory::format_tag::a);
  const std::string key = std::to_string(op) + (gradient ? "/bwd/" : "/fwd/") + std::to_string(n);
  std::shared_ptr<dnnl::primitive> prim;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto &slot = cache[key];
    if (!slot) {
      dnnl::eltwise_forward::primitive_desc fpd(
          dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_training, alg, md, alpha, beta),
          engine);
      if (gradient)
        slot = std::make_shared<dnnl::eltwise_backward>(dnnl::eltwise_backward::primitive_desc(
            dnnl::eltwise_backward::desc(alg, md, md, alpha, beta), engine, fpd));
      else
        slot = std::make_shared<dnnl::eltwise_forward>(fpd);
    }
    prim = slot;
  }
  thread_local dnnl::stream stream(engine);
  memory src(md, engine, const_cast<float *>(x)), out(md, engine, dst);
  if (gradient)
    prim->execute(stream, {{DNNL_ARG_SRC, src},
                           {DNNL_ARG_DIFF_DST, memory(md, engine, const_cast<float *>(dy))},
                           {DNNL_ARG_DIFF_SRC, out}});
  else
    prim->execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, out}});
  stream.wait();
  return true;
}
#endif

/// Whether lo <= x[i] <= hi for every i (false for a NaN): which chunks the polynomials cover
/// whole. Built per ISA, as the loops it guards: at the baseline's width this pass cost
/// as much as the function.
DSRT_CPU_CLONES bool allWithin(const float *x, int64_t n, float lo, float hi) {
  int outside = 0;
#pragma omp simd reduction(| : outside)
  for (int64_t i = 0; i < n; ++i)
    outside |= (x[i] >= lo) & (x[i] <= hi) ? 0 : 1;
  return !outside;
}

// Sine and cosine (Cephes' sinf/cosf: reduction by pi/4 in three parts, then a degree-7
// polynomial): within 2 ulp of libm for |x| <= 8192, branch-free so that the loop
// vectorizes. Larger arguments, where the three-part reduction loses bits, go to libm.
constexpr float kFourOverPi = 1.27323954473516f;
constexpr float kDP1 = 0.78515625f, kDP2 = 2.4187564849853515625e-4f,
                kDP3 = 3.77489497744594108e-8f;
constexpr float kReduceLimit = 8192.f;

template <bool Cosine> inline float sinCosOne(float x) {
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

template <bool Cosine>
DSRT_CPU_CLONES void
sinCosLoop(float *dst, const float *x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    dst[i] = sinCosOne<Cosine>(x[i]);
}

void sinCos(float *dst, const float *x, int64_t n, bool cosine) {
  const int64_t chunk = 1 << 14;
#pragma omp parallel for schedule(static) if (n > 4 * chunk)
  for (int64_t at = 0; at < n; at += chunk) {
    int64_t len = std::min(chunk, n - at);
    if (!allWithin(x + at, len, -kReduceLimit, kReduceLimit)) {
      // What the reduction cannot do: libm, element by element (dst may be x).
      for (int64_t i = at; i < at + len; ++i)
        dst[i] = std::fabs(x[i]) <= kReduceLimit ? (cosine ? sinCosOne<true>(x[i])
                                                           : sinCosOne<false>(x[i]))
                                                 : (cosine ? std::cos(x[i]) : std::sin(x[i]));
    } else if (cosine) {
      sinCosLoop<true>(dst + at, x + at, len);
    } else {
      sinCosLoop<false>(dst + at, x + at, len);
    }
  }
}

// The natural logarithm (Cephes' logf: the exponent split off by its bits, the mantissa
// reduced to [sqrt(1/2) - 1, sqrt(2) - 1), a degree-9 polynomial): within 1 ulp of libm,
// accurate near 1 (oneDNN's log is not: 1e-4 relative there). Zero, negative, subnormal,
// infinite and NaN arguments go to libm.
constexpr float kLogLo = 1.17549435e-38f, kLogHi = 3.40282347e38f; // the normal numbers
inline float logOne(float x) {
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

DSRT_CPU_CLONES void
logLoop(float *dst, const float *x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    dst[i] = logOne(x[i]);
}

void logArray(float *dst, const float *x, int64_t n) {
  const int64_t chunk = 1 << 14;
#pragma omp parallel for schedule(static) if (n > 4 * chunk)
  for (int64_t at = 0; at < n; at += chunk) {
    int64_t len = std::min(chunk, n - at);
    if (allWithin(x + at, len, kLogLo, kLogHi)) {
      logLoop(dst + at, x + at, len);
      continue;
    }
    for (int64_t i = at; i < at + len; ++i) // element by element: dst may be x
      dst[i] = x[i] >= kLogLo && x[i] <= kLogHi ? logOne(x[i]) : std::log(x[i]);
  }
}

// The exponential (Cephes' expf: x = n ln2 + r with |r| <= ln2 / 2, a degree-6 polynomial in
// r, 2^n from the exponent bits): within 1 ulp of libm on [-87.3, 88.7]; outside, and for
// NaN, libm.
constexpr float kExpLo = -87.3f, kExpHi = 88.7f;
inline float expOne(float x) {
  float c = x < kExpLo ? kExpLo : (x > kExpHi ? kExpHi : x);
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

DSRT_CPU_CLONES void
expLoop(float *dst, const float *x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    dst[i] = expOne(x[i]);
}

/// dst = exp(x - shift) and its sum (f32 lanes over blocks, as cpu::blockSum), in one pass;
/// `outside` says whether an argument fell outside the polynomial's range (the caller then
/// redoes the row with libm).
DSRT_CPU_CLONES double expShiftSumLoop(float *dst, const float *x, float shift, int64_t n,
                                       int &outside, bool flushLow) {
  double s = 0;
  int out = 0;
  for (int64_t b = 0; b < n; b += cpu::kSumBlock) {
    const int64_t e = std::min(n, b + cpu::kSumBlock);
    float part = 0;
#pragma omp simd reduction(+ : part) reduction(| : out)
    for (int64_t i = b; i < e; ++i) {
      const float a = x[i] - shift;
      const bool low = flushLow & (a < kExpLo);
      out |= low | ((a >= kExpLo) & (a <= kExpHi)) ? 0 : 1;
      const float v = low ? 0.f : expOne(a);
      dst[i] = v;
      part += v;
    }
    s += part;
  }
  outside = out;
  return s;
}

} // namespace

double dsrt::cpu::vexpShiftSum(float *dst, const float *x, float shift, int64_t n,
                                bool flushLow) {
  int outside = 0;
  double s = expShiftSumLoop(dst, x, shift, n, outside, flushLow);
  if (!outside)
    return s;
  s = 0;
  for (int64_t i = 0; i < n; ++i) {
    dst[i] = std::exp(x[i] - shift);
    s += dst[i];
  }
  return s;
}

void dsrt::cpu::vexp(float *dst, const float *x, int64_t n) {
  // What the polynomial does not cover, from libm (checked first: dst may be x).
  if (allWithin(x, n, kExpLo, kExpHi))
    return expLoop(dst, x, n);
  for (int64_t i = 0; i < n; ++i)
    dst[i] = std::exp(x[i]);
}

namespace {
/// vectorEltwise's functions: through the device's oneDNN state with `ctx`, without it on the
/// calling thread from any thread (the array functions thread only outside a parallel region).
bool vectorFunction(dsrt_context *ctx, int32_t op, bool gradient, float *dst, const float *x,
                    const float *dy, int64_t n) {
  if (!gradient && op == DSRT_EXP) {
    const int64_t chunk = 1 << 14;
#pragma omp parallel for schedule(static) if (n > 4 * chunk)
    for (int64_t at = 0; at < n; at += chunk)
      cpu::vexp(dst + at, x + at, std::min(chunk, n - at));
    return true;
  }
  if (!gradient && op == DSRT_LOG) {
    logArray(dst, x, n);
    return true;
  }
  if (!gradient && (op == DSRT_SIN || op == DSRT_COS)) {
    sinCos(dst, x, n, op == DSRT_COS);
    return true;
  }
  if (gradient && cpu::vgeluGrad(op, dst, x, dy, n))
    return true;
#ifdef DSRT_HAVE_DNNL
  return ctx ? dnnlEltwise(ctx, op, gradient, dst, x, dy, n)
             : dnnlEltwiseHere(op, gradient, dst, x, dy, n);
#else
  (void)ctx;
  return false;
#endif
}
} // namespace

bool dsrt::cpu::vectorEltwise(dsrt_context *ctx, int32_t op, bool gradient, float *dst,
                              const float *x, const float *dy, int64_t n) {
  return n >= kVectorGrain && vectorFunction(ctx, op, gradient, dst, x, dy, n);
}

bool dsrt::cpu::vectorEltwiseHere(int32_t op, bool gradient, float *dst, const float *x,
                                  const float *dy, int64_t n) {
  return vectorFunction(nullptr, op, gradient, dst, x, dy, n);
}

// torch.pow on f32 tensors: glibc's vector powf (libmvec, within 4 ulp as Sleef's is within 1;
// PyTorch's f32 tolerance is 1.3e-6, about 11 ulp), in 16 / 8 / 4 lanes by the CPU's ISA.
// An exponent of exactly 2 keeps the scalar kernel's a * a.
#pragma GCC diagnostic ignored "-Wpsabi" // the vector functions are only called with their ISA
extern "C" {
__attribute__((target("avx512f"))) __m512 _ZGVeN16vv_powf(__m512, __m512);
__attribute__((target("avx2"))) __m256 _ZGVdN8vv_powf(__m256, __m256);
__m128 _ZGVbN4vv_powf(__m128, __m128);
}

namespace {
// One body in W lanes of vector type V: load, pow, store are the ISA's (a macro, since
// lambdas inside a target("...") function do not inherit its ISA).
#define DSRT_POW_LANES(W, LOAD, POW, STORE)                                                   \
  alignas(64) float a[W], b[W], r[W];                                                         \
  for (int64_t i = 0; i < n; i += W) {                                                        \
    int64_t len = std::min<int64_t>(W, n - i);                                                \
    for (int j = 0; j < W; ++j) {                                                             \
      a[j] = j < len ? x[(i + j) * xs] : 1.f;                                                 \
      b[j] = j < len ? y[(i + j) * ys] : 1.f;                                                 \
    }                                                                                         \
    STORE(r, POW(LOAD(a), LOAD(b)));                                                          \
    for (int j = 0; j < len; ++j)                                                             \
      z[i + j] = b[j] == 2.f ? a[j] * a[j] : r[j];                                            \
  }
__attribute__((target("avx512f"))) void pow16(float *z, const float *x, int64_t xs,
                                                const float *y, int64_t ys, int64_t n) {
  if (xs == 1 && ys == 1) { // the contiguous body: whole vectors, then the tail below
    const __m512 two = _mm512_set1_ps(2.f);
    int64_t whole = n / 16 * 16;
    for (int64_t i = 0; i < whole; i += 16) {
      __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(y + i);
      __m512 r = _ZGVeN16vv_powf(a, b);
      r = _mm512_mask_mul_ps(r, _mm512_cmp_ps_mask(b, two, _CMP_EQ_OQ), a, a);
      _mm512_storeu_ps(z + i, r);
    }
    z += whole, x += whole, y += whole, n -= whole;
  }
  DSRT_POW_LANES(16, _mm512_load_ps, _ZGVeN16vv_powf, _mm512_store_ps)
}
__attribute__((target("avx2"))) void pow8(float *z, const float *x, int64_t xs, const float *y,
                                          int64_t ys, int64_t n) {
  if (xs == 1 && ys == 1) {
    const __m256 two = _mm256_set1_ps(2.f);
    int64_t whole = n / 8 * 8;
    for (int64_t i = 0; i < whole; i += 8) {
      __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(y + i);
      __m256 r = _ZGVdN8vv_powf(a, b);
      r = _mm256_blendv_ps(r, _mm256_mul_ps(a, a), _mm256_cmp_ps(b, two, _CMP_EQ_OQ));
      _mm256_storeu_ps(z + i, r);
    }
    z += whole, x += whole, y += whole, n -= whole;
  }
  DSRT_POW_LANES(8, _mm256_load_ps, _ZGVdN8vv_powf, _mm256_store_ps)
}
void pow4(float *z, const float *x, int64_t xs, const float *y, int64_t ys, int64_t n) {
  DSRT_POW_LANES(4, _mm_load_ps, _ZGVbN4vv_powf, _mm_store_ps)
}
#undef DSRT_POW_LANES
} // namespace

void dsrt::cpu::vpow(float *z, const float *x, int64_t xs, const float *y, int64_t ys,
                     int64_t n) {
  static const int lanes = __builtin_cpu_supports("avx512f") ? 16
                           : __builtin_cpu_supports("avx2") ? 8
                                                            : 4;
  if (lanes == 16)
    pow16(z, x, xs, y, ys, n);
  else if (lanes == 8)
    pow8(z, x, xs, y, ys, n);
  else
    pow4(z, x, xs, y, ys, n);
}
