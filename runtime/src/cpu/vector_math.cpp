//===- vector_math.cpp - vectorized f32 elementwise functions --------------===//
#include "vector_math.h"
#include "avx512_lanes.h"
#include "element_functions.h"
#include "elementwise_loops.h"
#include "half_rows.h"
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
#include <type_traits>
#include <unordered_map>

using namespace dsrt;
using namespace dsrt::cpu;

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
    dnnl::eltwise_forward::primitive_desc fpd(st.engine, dnnl::prop_kind::forward_training, alg,
                                              md, md, alpha, beta);
    if (gradient) {
      dnnl::eltwise_backward::primitive_desc bpd(st.engine, alg, md, md, md, alpha, beta, fpd);
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
      dnnl::eltwise_forward::primitive_desc fpd(engine, dnnl::prop_kind::forward_training, alg,
                                                md, md, alpha, beta);
      if (gradient)
        slot = std::make_shared<dnnl::eltwise_backward>(
            dnnl::eltwise_backward::primitive_desc(engine, alg, md, md, md, alpha, beta, fpd));
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

// Functions with a vector form of our own (element_functions.h) run in one pass: each block
// of kCheckBlock values computes its results and, in the same vector loop, whether an argument
// fell outside the form's range (a NaN does); such a block is done again element by element,
// ATen's scalar formula for those outside. A separate range-check pass first read the array
// from memory on its own: exp on [2048, 2048] spent a third of its 2.6 ms there.
constexpr int64_t kCheckBlock = 1024;

/// dst[i] = f(x[i], y[i]) over one block of f32 values; whether some x[i] was outside
/// [lo, hi] or NaN.
template <class F>
DSRT_CPU_CLONES int mapBlock(float *__restrict dst, const float *__restrict x,
                             const float *__restrict y, int64_t n, float lo, float hi, F f) {
  int outside = 0;
#pragma omp simd reduction(| : outside)
  for (int64_t i = 0; i < n; ++i) {
    outside |= (x[i] >= lo) & (x[i] <= hi) ? 0 : 1;
    dst[i] = f(x[i], y[i]);
  }
  return outside;
}

/// dst[i] = f(x[i], y[i]) over `n` values of L's type (F32Elements, Bf16Elements,
/// F16Elements) on the calling thread, `exact` where x[i] is outside [lo, hi] (a unary function
/// passes y = x and ignores it); dst may be x or y. 16-bit values are widened a block at a time
/// into f32 rows in L1 and the results rounded from there: GCC vectorizes a loop that converts
/// inside at half width (ymm without FMA: GELU in bf16 at 2x its f32 time).
template <class L, class F, class E>
void checkedMap(typename L::T *dst, const typename L::T *x, const typename L::T *y, int64_t n,
                float lo, float hi, F f, E exact) {
  constexpr bool wide = std::is_same_v<typename L::T, float>;
  alignas(64) float a[kCheckBlock], b[kCheckBlock], c[kCheckBlock];
  const bool inPlace = (const void *)dst == x || (const void *)dst == y;
  for (int64_t at = 0; at < n; at += kCheckBlock) {
    const int64_t len = std::min(kCheckBlock, n - at);
    const float *u, *v;
    float *w;
    if constexpr (wide) {
      u = x + at, v = y + at, w = inPlace ? c : dst + at;
    } else {
      widenRow(L::kDtype, a, x + at, len);
      if (y != x)
        widenRow(L::kDtype, b, y + at, len);
      u = a, v = y != x ? b : a, w = c;
    }
    if (mapBlock(w, u, v, len, lo, hi, f))
      for (int64_t i = 0; i < len; ++i) // u and v are intact: w is neither
        w[i] = u[i] >= lo && u[i] <= hi ? f(u[i], v[i]) : exact(u[i], v[i]);
    if constexpr (wide) {
      if (inPlace)
        std::memcpy(dst + at, c, static_cast<size_t>(len) * sizeof(float));
    } else {
      narrowRow(L::kDtype, dst + at, w, nullptr, len);
    }
  }
}

/// Calls run(lo, hi, f, exact) with `op`'s vector form (f) and ATen's formula (exact), both
/// taking (x, dy); false where `op` has none.
template <class R> bool withVectorForm(int32_t op, bool gradient, R &&run) {
  if (gradient) {
    if (op != DSRT_GELU_ERF_GRAD)
      return false;
    run(fn::kGeluLo, fn::kGeluHi, [](float x, float g) { return fn::geluErfGrad(x, g); },
        [](float x, float g) { return ops::binary<float>(DSRT_GELU_ERF_GRAD, x, g); });
    return true;
  }
  auto exact = [op](float x, float) { return ops::unary<float>(op, x); };
  switch (op) {
  case DSRT_EXP:
    run(fn::kExpLo, fn::kExpHi, [](float x, float) { return fn::exp(x); }, exact);
    return true;
  case DSRT_LOG:
    run(fn::kLogLo, fn::kLogHi, [](float x, float) { return fn::log(x); }, exact);
    return true;
  case DSRT_SIN:
    run(-fn::kSinCosLimit, fn::kSinCosLimit, [](float x, float) { return fn::sinCos<false>(x); },
        exact);
    return true;
  case DSRT_COS:
    run(-fn::kSinCosLimit, fn::kSinCosLimit, [](float x, float) { return fn::sinCos<true>(x); },
        exact);
    return true;
  case DSRT_GELU_ERF:
    run(fn::kGeluLo, fn::kGeluHi, [](float x, float) { return fn::geluErf(x); }, exact);
    return true;
  case DSRT_SIGMOID: // ATen's 1 / (1 + exp(-x)); oneDNN's logistic ran at 1.8x its time
    run(-fn::kExpHi, -fn::kExpLo, [](float x, float) { return 1.f / (1.f + fn::exp(-x)); },
        exact);
    return true;
  default:
    return false;
  }
}

/// `op`'s vector form over `n` values of L's type, in chunks over the threads when `parallel`
/// (else on the calling thread); false where `op` has none.
template <class L>
bool checkedFunction(int32_t op, bool gradient, typename L::T *dst, const typename L::T *x,
                     const typename L::T *dy, int64_t n, bool parallel) {
  return withVectorForm(op, gradient, [&](float lo, float hi, auto f, auto exact) {
    const typename L::T *y = dy ? dy : x;
#pragma omp parallel for schedule(static) if (parallel && n > 4 * kChunk)
    for (int64_t at = 0; at < n; at += kChunk)
      checkedMap<L>(dst + at, x + at, y + at, std::min(kChunk, n - at), lo, hi, f, exact);
  });
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
      const bool low = flushLow & (a < fn::kExpLo);
      out |= low | ((a >= fn::kExpLo) & (a <= fn::kExpHi)) ? 0 : 1;
      const float v = low ? 0.f : fn::exp(a);
      dst[i] = v;
      part += v;
    }
    s += part;
  }
  outside = out;
  return s;
}

/// expShiftSumLoop in AVX-512 lanes written out: GCC's `omp simd` sum ended each block with
/// 16 serial adds of its lanes through the stack (cross_entropy_grad on [2048, 1024] at
/// 1.4-1.5x PyTorch's time); here a block's lanes are summed as a tree. exp16 runs on the
/// unclamped argument (its scalef takes any exponent) and lanes below the range are zeroed by
/// its last step's mask: two compares per 16 values besides the polynomial (attention's
/// softmax, forward and backward, spends a fifth of its time here).
__attribute__((target("avx512f"))) double expShiftSumAvx512(float *dst, const float *x,
                                                            float shift, int64_t n,
                                                            int &outside, bool flushLow) {
  const __m512 sh = _mm512_set1_ps(shift), lo = _mm512_set1_ps(fn::kExpLo),
               hi = _mm512_set1_ps(fn::kExpHi);
  double s = 0;
  __mmask16 out = 0;
  for (int64_t b = 0; b < n; b += cpu::kSumBlock) {
    const int64_t e = std::min(n, b + cpu::kSumBlock);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = b; i < e; i += 16) {
      const __mmask16 m = e - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (e - i)) - 1);
      const __m512 a = _mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), sh);
      // Above the range or NaN: outside. Below it: outside, or 0 where flushed.
      out |= _mm512_mask_cmp_ps_mask(m, a, hi, _CMP_NLE_UQ);
      const __mmask16 inRange = _mm512_mask_cmp_ps_mask(m, a, lo, _CMP_GE_OQ);
      if (!flushLow)
        out |= m & ~inRange;
      const __m512 v = cpu::exp16(a, inRange);
      _mm512_mask_storeu_ps(dst + i, m, v);
      acc = _mm512_add_ps(acc, v);
    }
    s += _mm512_reduce_add_ps(acc);
  }
  outside = out != 0;
  return s;
}

} // namespace

double dsrt::cpu::vexpShiftSum(float *dst, const float *x, float shift, int64_t n,
                                bool flushLow) {
  int outside = 0;
  double s = avx512Bf16Lanes() ? expShiftSumAvx512(dst, x, shift, n, outside, flushLow)
                    : expShiftSumLoop(dst, x, shift, n, outside, flushLow);
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
  checkedMap<F32Elements>(dst, x, x, n, fn::kExpLo, fn::kExpHi,
                          [](float v, float) { return fn::exp(v); },
                          [](float v, float) { return std::exp(v); });
}

namespace {
/// vectorEltwise's functions: through the device's oneDNN state with `ctx`, without it on the
/// calling thread from any thread (the loops of our own thread only outside a parallel region).
bool vectorFunction(dsrt_context *ctx, int32_t op, bool gradient, float *dst, const float *x,
                    const float *dy, int64_t n) {
  if ((gradient ? op == DSRT_GELU_ERF_GRAD : op == DSRT_GELU_ERF) &&
      cpu::vgeluErf(DSRT_F32, dst, x, gradient ? dy : nullptr, n, ctx != nullptr))
    return true;
  if (gradient && cpu::vgeluGrad(op, dst, x, dy, n))
    return true;
  if (checkedFunction<F32Elements>(op, gradient, dst, x, dy, n, /*parallel=*/ctx != nullptr))
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

bool dsrt::cpu::vectorEltwiseHalf(int32_t op, bool gradient, int32_t dtype, uint16_t *dst,
                                  const uint16_t *x, const uint16_t *dy, int64_t n) {
  if ((gradient ? op == DSRT_GELU_ERF_GRAD : op == DSRT_GELU_ERF) &&
      vgeluErf(dtype, dst, x, gradient ? dy : nullptr, n, /*parallel=*/true))
    return true;
  if (dtype == DSRT_BF16)
    return checkedFunction<Bf16Elements>(op, gradient, dst, x, dy, n, /*parallel=*/true);
  return checkedFunction<F16Elements>(op, gradient, dst, x, dy, n, /*parallel=*/true);
}

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
