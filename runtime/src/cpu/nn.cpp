// CPU kernels: softmax, embedding, cross-entropy and dropout.
#include "cpu_device.h"
#include "avx512_lanes.h"
#include "element_functions.h"
#include "half_rows.h"
#include "vector_math.h"
#include "../kernels/checks.h"
#include "../kernels/scalar_ops.h"
#ifdef DSRT_HAVE_DNNL
#include "dnnl_state.h"
#endif

#include <algorithm>
#include <cmath>
#include <vector>
#include <cstring>
#include <limits>

using namespace dsrt;
using dsrt::cpu::narrowRow;
using dsrt::cpu::widenRow;
using dsrt::cpu::WidenedCall;

namespace {

using checks::DimSplit;

int64_t indexAt(const dsrt_tensor *t, int64_t i) {
  return t->dtype == DSRT_I64 ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
}

} // namespace

#ifdef DSRT_HAVE_DNNL
/// Softmax or log-softmax over the last dim of an [outer, D] f32 view through oneDNN (vectorized
/// exp; the scalar loop below is the general path).
static void softmaxLastDimDnnl(dsrt_context *ctx, float *y, const float *x, int64_t outer,
                               int64_t D, bool log) {
  using dnnl::memory;
  DnnlState &st = dnnlState(ctx);
  memory::desc md({outer, D}, memory::data_type::f32, memory::format_tag::ab);
  std::string key = std::string(log ? "logsoftmax/" : "softmax/") + std::to_string(outer) + "x" +
                    std::to_string(D);
  auto &slot = cpuDevice(ctx).primitives[key];
  if (!slot) {
    dnnl::softmax_forward::primitive_desc pd(
        st.engine, dnnl::prop_kind::forward_training,
        log ? dnnl::algorithm::softmax_log : dnnl::algorithm::softmax_accurate, md, md, 1);
    slot = std::make_shared<dnnl::primitive>(dnnl::softmax_forward(pd));
  }
  memory src(md, st.engine, const_cast<float *>(x)), dst(md, st.engine, y);
  static_cast<dnnl::primitive *>(slot.get())
      ->execute(st.stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
  st.stream.wait();
}
#endif

namespace {
bool expRow(const float *x, int64_t C, float *buf, double &sum, double &lse);

// Row loops built per ISA (functions of their pointers, outside the OpenMP regions).
/// y = x - l (a log-softmax row).
DSRT_CPU_CLONES void shiftRow(float *y, const float *x, float l, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    y[i] = x[i] - l;
}
/// y *= a over n floats.
DSRT_CPU_CLONES void scaleRow(float *y, float a, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    y[i] *= a;
}
/// d = y * (g - sum(g * y)) (a softmax gradient row; the sum as cpu::blockSum).
DSRT_CPU_CLONES void softmaxGradRow(float *d, const float *y, const float *g, int64_t n) {
  const float sm = (float)cpu::blockSum(n, [g, y](int64_t j) { return g[j] * y[j]; });
#pragma omp simd
  for (int64_t j = 0; j < n; ++j)
    d[j] = y[j] * (g[j] - sm);
}
/// dst += src over n floats.
DSRT_CPU_CLONES void addRow(float *__restrict dst, const float *__restrict src, int64_t n) {
#pragma omp simd
  for (int64_t c = 0; c < n; ++c)
    dst[c] += src[c];
}
/// d = g * (e * inv - off) (a cross-entropy gradient row from its exponentials).
DSRT_CPU_CLONES void ceGradRow(float *d, const float *e, float g, float inv, float off,
                               int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    d[i] = g * (e[i] * inv - off);
}
} // namespace

namespace {
/// Rows of 16-bit softmax work go in blocks of about this many values: one widening and one
/// rounding call per block, not per (128-value) row.
constexpr int64_t kHalfBlock = 8192;

/// Softmax rows in f32: `x` (n values, rows of D) into `e`, each row's exponentials
/// vectorized (a masked -inf's exactly 0) and normalized.
void softmaxRowsF32(float *e, const float *x, int64_t n, int64_t D) {
  for (int64_t at = 0; at < n; at += D) {
    int nan = 0;
    const float mx = cpu::maxRange(x + at, D, nan);
    const float inv =
        nan ? std::numeric_limits<float>::quiet_NaN()
            : (float)(1.0 / cpu::vexpShiftSum(e + at, x + at, mx, D, /*flushLow=*/true));
    scaleRow(e + at, inv, D);
  }
}

/// One bf16 softmax row of D on AVX-512, converting inside its loops: the maximum, then
/// exp(x - max) into `e` (f32 scratch, in L1) and their sum (f32 lanes over blocks of
/// kSumBlock, the blocks in double, as vexpShiftSum; below exp's range, a masked -inf's, 0),
/// then the quotients rounded. False, having written nothing, for a row with NaN or an
/// infinite maximum (softmaxRowsF32 gives those PyTorch's NaN).
__attribute__((target("avx512f"))) bool softmaxRowBf16(uint16_t *y, const uint16_t *x,
                                                       float *e, int64_t D) {
  using cpu::loadBf16x16;
  __m512 mv = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __mmask16 nan = 0;
  int64_t j = 0;
  for (; j + 16 <= D; j += 16) {
    const __m512 v = loadBf16x16(x + j);
    nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    mv = _mm512_max_ps(mv, v);
  }
  float mx = _mm512_reduce_max_ps(mv);
  for (; j < D; ++j) {
    const float v = bf16ToFloat(x[j]);
    nan |= v != v;
    mx = v > mx ? v : mx;
  }
  if (nan || std::isinf(mx))
    return false;
  const __m512 shift = _mm512_set1_ps(mx), lo = _mm512_set1_ps(cpu::fn::kExpLo);
  double sum = 0;
  for (int64_t b = 0; b < D; b += cpu::kSumBlock) {
    const int64_t end = std::min(D, b + cpu::kSumBlock);
    __m512 acc = _mm512_setzero_ps();
    for (j = b; j + 16 <= end; j += 16) {
      const __m512 a = _mm512_sub_ps(loadBf16x16(x + j), shift);
      const __mmask16 in = _mm512_cmp_ps_mask(a, lo, _CMP_GE_OQ);
      const __m512 v = _mm512_maskz_mov_ps(in, cpu::exp16(_mm512_max_ps(a, lo)));
      _mm512_storeu_ps(e + j, v);
      acc = _mm512_add_ps(acc, v);
    }
    float part = _mm512_reduce_add_ps(acc);
    for (; j < end; ++j) {
      const float a = bf16ToFloat(x[j]) - mx;
      e[j] = a < cpu::fn::kExpLo ? 0.f : cpu::fn::exp(a);
      part += e[j];
    }
    sum += part;
  }
  const float inv = (float)(1.0 / sum);
  const __m512 iv = _mm512_set1_ps(inv);
  for (j = 0; j + 16 <= D; j += 16)
    cpu::storeBf16x16(y + j, _mm512_mul_ps(_mm512_loadu_ps(e + j), iv));
  for (; j < D; ++j)
    y[j] = floatToBf16(e[j] * inv);
  return true;
}

/// Softmax over the last dim of 16-bit rows: a block of rows widened into scratch rows of the
/// thread's, softmaxRowsF32, the block rounded once; bf16 rows on AVX-512 by softmaxRowBf16.
void softmaxRowsHalf(dsrt_tensor *out, const dsrt_tensor *in, const DimSplit &s) {
  const int32_t dt = in->dtype;
  const int64_t D = s.D, R = std::max<int64_t>(1, kHalfBlock / std::max<int64_t>(D, 1));
  const int64_t blocks = (s.outer + R - 1) / R;
  const bool lanes = dt == DSRT_BF16 && cpu::avx512Bf16Lanes();
#pragma omp parallel for schedule(static) if (in->numel > kParallelGrain)
  for (int64_t bi = 0; bi < blocks; ++bi) {
    const int64_t r0 = bi * R, n = std::min(R, s.outer - r0) * D;
    const uint16_t *x16 = (const uint16_t *)in->data + r0 * D;
    uint16_t *y16 = (uint16_t *)out->data + r0 * D;
    float *x = cpu::threadRow(0, std::max(n, D)), *e = cpu::threadRow(1, std::max(n, D));
    if (lanes) {
      for (int64_t at = 0; at < n; at += D) {
        if (softmaxRowBf16(y16 + at, x16 + at, e, D))
          continue;
        widenRow(dt, x, x16 + at, D);
        softmaxRowsF32(e, x, D, D);
        narrowRow(dt, y16 + at, e, nullptr, D);
      }
      continue;
    }
    widenRow(dt, x, x16, n);
    softmaxRowsF32(e, x, n, D);
    narrowRow(dt, y16, e, nullptr, n);
  }
}

/// softmaxGradRow over `rows` bf16 rows of D, converting inside its AVX-512 loops: a pass over
/// y and dy for the sum (as cpu::blockSum: f32 lanes over blocks of kSumBlock, the blocks added
/// in double), then one for the result, the row still in L1. Widening whole blocks into f32
/// first and rounding them after took 2.5x PyTorch's time: three passes that each waited on
/// memory.
__attribute__((target("avx512f"))) void softmaxGradRowsBf16(uint16_t *dx, const uint16_t *y,
                                                            const uint16_t *g, int64_t rows,
                                                            int64_t D) {
  using cpu::loadBf16x16;
  for (int64_t r = 0; r < rows; ++r, dx += D, y += D, g += D) {
    double sum = 0;
    for (int64_t b = 0; b < D; b += cpu::kSumBlock) {
      const int64_t e = std::min(D, b + cpu::kSumBlock);
      __m512 acc = _mm512_setzero_ps();
      int64_t j = b;
      for (; j + 16 <= e; j += 16)
        acc = _mm512_fmadd_ps(loadBf16x16(g + j), loadBf16x16(y + j), acc);
      float part = _mm512_reduce_add_ps(acc);
      for (; j < e; ++j)
        part += bf16ToFloat(g[j]) * bf16ToFloat(y[j]);
      sum += part;
    }
    const float sm = (float)sum;
    const __m512 smv = _mm512_set1_ps(sm);
    int64_t j = 0;
    for (; j + 16 <= D; j += 16)
      cpu::storeBf16x16(dx + j, _mm512_mul_ps(loadBf16x16(y + j),
                                              _mm512_sub_ps(loadBf16x16(g + j), smv)));
    for (; j < D; ++j)
      dx[j] = floatToBf16(bf16ToFloat(y[j]) * (bf16ToFloat(g[j]) - sm));
  }
}

/// The softmax gradient over the last dim of 16-bit rows, in blocks of rows as softmaxRowsHalf
/// (bf16 on AVX-512: converting in the row's own loops).
void softmaxGradRowsHalf(dsrt_tensor *dx, const dsrt_tensor *y, const dsrt_tensor *dy,
                         const DimSplit &s) {
  const int32_t dt = y->dtype;
  const int64_t D = s.D, R = std::max<int64_t>(1, kHalfBlock / std::max<int64_t>(D, 1));
  const int64_t blocks = (s.outer + R - 1) / R;
  if (dt == DSRT_BF16 && cpu::avx512Bf16Lanes()) {
#pragma omp parallel for schedule(static) if (y->numel > kParallelGrain)
    for (int64_t bi = 0; bi < blocks; ++bi) {
      const int64_t r0 = bi * R;
      softmaxGradRowsBf16((uint16_t *)dx->data + r0 * D, (const uint16_t *)y->data + r0 * D,
                          (const uint16_t *)dy->data + r0 * D, std::min(R, s.outer - r0), D);
    }
    return;
  }
#pragma omp parallel for schedule(static) if (y->numel > kParallelGrain)
  for (int64_t bi = 0; bi < blocks; ++bi) {
    const int64_t r0 = bi * R, n = std::min(R, s.outer - r0) * D;
    float *yr = cpu::threadRow(0, n), *g = cpu::threadRow(1, n);
    widenRow(dt, yr, (const uint16_t *)y->data + r0 * D, n);
    widenRow(dt, g, (const uint16_t *)dy->data + r0 * D, n);
    for (int64_t at = 0; at < n; at += D)
      softmaxGradRow(g + at, yr + at, g + at, D);
    narrowRow(dt, (uint16_t *)dx->data + r0 * D, g, nullptr, n);
  }
}
} // namespace

void dsrt::cpu::softmax(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *in,
                             int64_t dim, int32_t log) {
  DSRT_PROFILE("softmax");
  const char *k = "softmax";
  DimSplit s = checks::softmax(out, in, dim);
  if (isHalfType(in->dtype)) { // 16 bits: the last dim's rows, else an f32 copy
    if (!log && s.inner == 1)
      return softmaxRowsHalf(out, in, s);
    WidenedCall call(out, {in});
    return softmax(ctx, call.out(), call.in(0), dim, log);
  }
  // Softmax only: oneDNN's log-softmax is off by ~4e-6 absolute near 0 (the kernel test).
#ifdef DSRT_HAVE_DNNL
  if (!log && in->dtype == DSRT_F32 && s.inner == 1 && in->numel >= kParallelGrain) {
    softmaxLastDimDnnl(ctx, (float *)out->data, (const float *)in->data, s.outer, s.D, log);
    return;
  }
#endif
  // Log-softmax over the last dim in f32: rows of vectorized exponentials (cross-entropy's).
  if (log && in->dtype == DSRT_F32 && s.inner == 1) {
    const float *X = (const float *)in->data;
    float *Y = (float *)out->data;
    bool finite = true;
#pragma omp parallel for schedule(static) reduction(&& : finite) if (in->numel > kParallelGrain)
    for (int64_t o = 0; o < s.outer; ++o) {
      thread_local std::vector<float> buf;
      buf.resize(static_cast<size_t>(s.D));
      double sum, lse;
      const float *x = X + o * s.D;
      float *y = Y + o * s.D;
      if (!expRow(x, s.D, buf.data(), sum, lse)) {
        finite = false;
        continue;
      }
      shiftRow(y, x, static_cast<float>(lse), s.D);
    }
    if (finite)
      return; // else: the rows again, with NaN and infinities as PyTorch gives them
  }
  dispatchFloat(k, in->dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *X = (const T *)in->data;
    T *Y = (T *)out->data;
#pragma omp parallel for schedule(static) if (in->numel > kParallelGrain)
    for (int64_t oi = 0; oi < s.outer * s.inner; ++oi) {
      int64_t o = oi / s.inner, i = oi % s.inner;
      const T *x = X + o * s.D * s.inner + i;
      T *y = Y + o * s.D * s.inner + i;
      int64_t st = s.inner;
      T mx = -std::numeric_limits<T>::infinity();
      for (int64_t d = 0; d < s.D; ++d)
        mx = (x[d * st] > mx || std::isnan(x[d * st])) ? x[d * st] : mx;
      double sum = 0;
      if (log) {
        for (int64_t d = 0; d < s.D; ++d)
          sum += std::exp(x[d * st] - mx);
        T lse = (T)std::log(sum);
        for (int64_t d = 0; d < s.D; ++d)
          y[d * st] = x[d * st] - mx - lse;
      } else {
        for (int64_t d = 0; d < s.D; ++d) {
          T e = std::exp(x[d * st] - mx);
          y[d * st] = e;
          sum += e;
        }
        T inv = (T)(1.0 / sum);
        for (int64_t d = 0; d < s.D; ++d)
          y[d * st] *= inv;
      }
    }
  });
}

void dsrt::cpu::softmax_grad(dsrt_context *ctx, dsrt_tensor *dx, const dsrt_tensor *y,
                                  const dsrt_tensor *dy, int64_t dim, int32_t log) {
  DSRT_PROFILE("softmax_grad");
  const char *k = "softmax_grad";
  DimSplit s = checks::softmaxGrad(dx, y, dy, dim);
  if (isHalfType(y->dtype)) {
    if (!log && s.inner == 1)
      return softmaxGradRowsHalf(dx, y, dy, s);
    WidenedCall call(dx, {y, dy});
    return softmax_grad(ctx, call.out(), call.in(0), call.in(1), dim, log);
  }
  dispatchFloat(k, y->dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *Y = (const T *)y->data, *G = (const T *)dy->data;
    T *DX = (T *)dx->data;
#pragma omp parallel for schedule(static) if (y->numel > kParallelGrain)
    for (int64_t oi = 0; oi < s.outer * s.inner; ++oi) {
      int64_t o = oi / s.inner, i = oi % s.inner, base = o * s.D * s.inner + i, st = s.inner;
      const T *yy = Y + base, *g = G + base;
      T *d = DX + base;
      if constexpr (std::is_same_v<T, float>)
        if (!log && st == 1) {
          softmaxGradRow(d, yy, g, s.D);
          continue;
        }
      double sum = 0;
      if (log) {
        for (int64_t j = 0; j < s.D; ++j)
          sum += g[j * st];
        T sm = (T)sum;
        for (int64_t j = 0; j < s.D; ++j)
          d[j * st] = g[j * st] - std::exp(yy[j * st]) * sm;
      } else if (st == 1) { // vectorized (the sum reassociated, in double)
#pragma omp simd reduction(+ : sum)
        for (int64_t j = 0; j < s.D; ++j)
          sum += (double)g[j] * yy[j];
        T sm = (T)sum;
#pragma omp simd
        for (int64_t j = 0; j < s.D; ++j)
          d[j] = yy[j] * (g[j] - sm);
      } else {
        for (int64_t j = 0; j < s.D; ++j)
          sum += (double)g[j * st] * yy[j * st];
        T sm = (T)sum;
        for (int64_t j = 0; j < s.D; ++j)
          d[j * st] = yy[j * st] * (g[j * st] - sm);
      }
    }
  });
}

void dsrt::cpu::embedding(dsrt_context *, dsrt_tensor *out, const dsrt_tensor *weight,
                               const dsrt_tensor *indices) {
  DSRT_PROFILE("embedding");
  const char *k = "embedding";
  const checks::EmbeddingShape e = checks::embedding(out, weight, indices);
  const int64_t V = e.V, D = e.D;
  size_t row = D * dsrt_dtype_size(weight->dtype);
  int64_t n = indices->numel;
#pragma omp parallel for schedule(static) if (out->numel > kParallelGrain)
  for (int64_t i = 0; i < n; ++i) {
    int64_t ix = indexAt(indices, i);
    if (ix < 0 || ix >= V)
      fail(k, "index %lld out of range for %lld rows", (long long)ix, (long long)V);
    std::memcpy((char *)out->data + i * row, (const char *)weight->data + ix * row, row);
  }
}

void dsrt::cpu::embedding_grad(dsrt_context *, dsrt_tensor *dweight, const dsrt_tensor *dy,
                                    const dsrt_tensor *indices, int64_t padding_idx) {
  DSRT_PROFILE("embedding_grad");
  const char *k = "embedding_grad";
  const checks::EmbeddingShape e = checks::embeddingGrad(dweight, dy, indices);
  const int64_t V = e.V, D = e.D, n = e.n;
  for (int64_t i = 0; i < n; ++i) {
    int64_t ix = indexAt(indices, i);
    if (ix < 0 || ix >= V)
      fail(k, "index %lld out of range for %lld rows", (long long)ix, (long long)V);
  }
  const bool half = dweight->dtype != DSRT_F32;
  std::memset(dweight->data, 0, dweight->numel * dsrt_dtype_size(dweight->dtype));
  // Threads own column blocks, so the scatter-add needs no atomics and keeps index order.
  // 16-bit rows are summed as PyTorch's CPU embedding backward sums them: in 16 bits, in the
  // order of the indices, each addition rounded.
  const int64_t block = 64;
  int64_t blocks = (D + block - 1) / block;
#pragma omp parallel for schedule(static) if (dy->numel > kParallelGrain && blocks > 1)
  for (int64_t bl = 0; bl < blocks; ++bl) {
    int64_t c0 = bl * block, c1 = std::min(D, c0 + block);
    for (int64_t i = 0; i < n; ++i) {
      int64_t ix = indexAt(indices, i);
      if (ix == padding_idx && padding_idx >= 0)
        continue;
      if (half)
        halfAccumulate(dweight->dtype, (uint16_t *)dweight->data + ix * D + c0,
                       (const uint16_t *)dy->data + i * D + c0, c1 - c0);
      else
        addRow((float *)dweight->data + ix * D + c0, (const float *)dy->data + i * D + c0,
               c1 - c0);
    }
  }
}

namespace {

using checks::CEShape;

/// A row's exp(x - max) in `buf` (C floats, vectorized) and their sum in double; returns
/// false, with NaN or the infinite max in `lse`, where the row has no finite softmax.
DSRT_CPU_CLONES bool expRow(const float *x, int64_t C, float *buf, double &sum, double &lse) {
  int nan = 0;
  const float mx = cpu::maxRange(x, C, nan);
  if (nan || std::isinf(mx)) {
    lse = nan ? std::numeric_limits<double>::quiet_NaN() : mx;
    return false;
  }
  const double s = cpu::vexpShiftSum(buf, x, mx, C);
  sum = s;
  lse = mx + std::log(s);
  return true;
}

/// log(sum exp(x)) of a row.
double logSumExp(const float *x, int64_t C, float *buf) {
  double sum, lse;
  expRow(x, C, buf, sum, lse);
  return lse;
}

int64_t targetAt(const char *k, const dsrt_tensor *target, int64_t n, int64_t C, int64_t ignore) {
  int64_t t = indexAt(target, n);
  if (t != ignore && (t < 0 || t >= C))
    fail(k, "target %lld out of range for %lld classes", (long long)t, (long long)C);
  return t;
}

} // namespace

void dsrt::cpu::cross_entropy(dsrt_context *, dsrt_tensor *out, const dsrt_tensor *logits,
                                   const dsrt_tensor *target, int64_t ignore_index,
                                   int32_t reduction, double label_smoothing) {
  DSRT_PROFILE("cross_entropy");
  const char *k = "cross_entropy";
  CEShape s = checks::crossEntropy(k, logits, target, out, reduction);
  const float *X = (const float *)logits->data;
  float *Y = (float *)out->data;
  const double ls = label_smoothing;
  double total = 0;
  int64_t count = 0;
  // torch 1.13: (1 - ls) * nll + ls / C * (-sum_c logp_c), ignored rows contributing 0.
#pragma omp parallel for schedule(static) reduction(+ : total, count) if (logits->numel > kParallelGrain)
  for (int64_t n = 0; n < s.N; ++n) {
    thread_local std::vector<float> buf;
    buf.resize(static_cast<size_t>(s.C));
    int64_t t = targetAt(k, target, n, s.C, ignore_index);
    double loss = 0;
    if (t != ignore_index) {
      const float *x = X + n * s.C;
      double lse = logSumExp(x, s.C, buf.data());
      double sumX = 0;
      if (ls > 0)
        for (int64_t c = 0; c < s.C; ++c)
          sumX += x[c];
      loss = ops::crossEntropyLoss(lse, x[t], sumX, s.C, ls);
      ++count;
    }
    if (reduction == DSRT_REDUCTION_NONE)
      Y[n] = (float)loss;
    total += loss;
  }
  if (reduction == DSRT_REDUCTION_SUM)
    Y[0] = (float)total;
  else if (reduction == DSRT_REDUCTION_MEAN)
    Y[0] = (float)(total / (double)count);
  else if (reduction != DSRT_REDUCTION_NONE)
    fail(k, "unknown reduction %d", reduction);
}

void dsrt::cpu::cross_entropy_grad(dsrt_context *, dsrt_tensor *dlogits,
                                        const dsrt_tensor *logits, const dsrt_tensor *target,
                                        const dsrt_tensor *dy, int64_t ignore_index,
                                        int32_t reduction, double label_smoothing) {
  DSRT_PROFILE("cross_entropy_grad");
  const char *k = "cross_entropy_grad";
  CEShape s = checks::crossEntropy(k, logits, target, dy, reduction);
  checkSameShape(k, dlogits, logits);
  checkDtype(k, dlogits, DSRT_F32, "dlogits");
  const float *X = (const float *)logits->data, *G = (const float *)dy->data;
  float *DX = (float *)dlogits->data;
  double scale = 1.0;
  if (reduction == DSRT_REDUCTION_MEAN) {
    int64_t count = 0;
    for (int64_t n = 0; n < s.N; ++n)
      count += targetAt(k, target, n, s.C, ignore_index) != ignore_index;
    scale = 1.0 / (double)count;
  }
  const double ls = label_smoothing;
#pragma omp parallel for schedule(static) if (logits->numel > kParallelGrain)
  for (int64_t n = 0; n < s.N; ++n) {
    int64_t t = targetAt(k, target, n, s.C, ignore_index);
    float *d = DX + n * s.C;
    if (t == ignore_index) {
      std::memset(d, 0, s.C * sizeof(float));
      continue;
    }
    double g = (reduction == DSRT_REDUCTION_NONE ? G[n] : G[0]) * scale;
    const float *x = X + n * s.C;
    // The exponentials go to the row of d itself, rescaled in place while it is in L1; to a
    // buffer where d is the logits (expRow's libm fallback reads them again).
    thread_local std::vector<float> buf;
    float *e = d;
    if (d == x) {
      buf.resize(static_cast<size_t>(s.C));
      e = buf.data();
    }
    double sum, lse;
    const float gf = static_cast<float>(g), off = static_cast<float>(ls / s.C);
    if (!expRow(x, s.C, e, sum, lse)) { // no finite softmax: as PyTorch, NaN
      for (int64_t c = 0; c < s.C; ++c)
        d[c] = (float)(g * ops::crossEntropyGrad(x[c], lse, c == t, s.C, ls));
      continue;
    }
    // ops::crossEntropyGrad's formula with p = exp(x - max) / sum, in float, vectorized.
    const float inv = static_cast<float>(1.0 / sum);
    ceGradRow(d, e, gf, inv, off, s.C);
    d[t] -= gf * static_cast<float>(1.0 - ls);
  }
}

void dsrt::cpu::dropout_mask(dsrt_context *ctx, dsrt_tensor *out, double p) {
  DSRT_PROFILE("dropout_mask");
  const char *k = "dropout_mask";
  if (p < 0 || p > 1)
    fail(k, "probability %g out of [0, 1]", p);
  dispatchFloat(k, out->dtype, [&](auto tag) {
    using T = decltype(tag);
    T *y = (T *)out->data;
    T keep = p >= 1 ? T(0) : T(1.0 / (1.0 - p));
    for (int64_t i = 0; i < out->numel; ++i) {
      double u = (double)(ctx->rng() >> 11) * 0x1.0p-53;
      y[i] = u < p ? T(0) : keep;
    }
  });
}
