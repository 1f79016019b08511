// CPU kernels: batch normalization in training (statistics, normalization and gradients) in
// PyTorch 2.x's CPU arithmetic, bit for bit (ATen's cpu/batch_norm_kernel.cpp, f32, at the same
// thread count): with few values per channel (ResNet's last stages: 8 images of 1x1 or 2x2)
// the gradient cancels, and 20 steps of ResNet-18 drifted 10x further from PyTorch than
// PyTorch's own CPU paths from each other while the sums were in another order.
#include "cpu_device.h"
#include "../kernels/checks.h"

#include <immintrin.h>
#include <omp.h>

#include <cmath>
#include <vector>

using namespace dsrt;

namespace {

/// Lanes of the ATen Vectorized<float> whose reductions these sums follow: 8, PyTorch 2.15's
/// batch-norm kernel reduces in AVX2 vectors on AVX-512 machines too (Kernels.BatchNormAsPyTorch
/// checks every result bit for bit).
constexpr int kLanes = 8;


/// Folds kLanes partial sums as ATen's AVX-512 vec_reduce_all does: each lane adds the lane
/// 8, 4, 2 and 1 away (its 256-, 128-, 64- and 32-bit shuffles); lane 0 is the sum.
float foldLanes(float v[kLanes]) {
  for (int h = kLanes / 2; h >= 1; h /= 2) {
    float w[kLanes];
    for (int i = 0; i < kLanes; ++i)
      w[i] = v[i] + v[i ^ h];
    for (int i = 0; i < kLanes; ++i)
      v[i] = w[i];
  }
  return v[0];
}

/// The sum of n terms as at::vec::reduce_all / map2_reduce_all: fewer than kLanes terms in
/// order; else lane j starts from term j and `acc(a, i)` adds terms j + kLanes, j + 2 kLanes, ...
/// (a short last block into the first lanes), then foldLanes.
template <class Term, class Acc> float vecReduce(int64_t n, const Term &term, const Acc &acc) {
  if (n == 0)
    return 0.f;
  if (n < kLanes) {
    float s = term(0);
    for (int64_t i = 1; i < n; ++i)
      s = s + term(i);
    return s;
  }
  float v[kLanes];
  for (int j = 0; j < kLanes; ++j)
    v[j] = term(j);
  for (int64_t i = kLanes; i < n; ++i)
    v[i % kLanes] = acc(v[i % kLanes], i);
  return foldLanes(v);
}

/// The [t*chunk, (t+1)*chunk) blocks at::parallel_for(0, n, 1) gives ATen's T threads.
struct Chunks {
  int64_t n, chunk;
  int count;
  Chunks(int64_t n, int T) : n(n) {
    const int64_t used = std::max<int64_t>(1, std::min<int64_t>(T, n));
    chunk = (n + used - 1) / used;
    count = (int)((n + chunk - 1) / chunk);
  }
  int64_t begin(int t) const { return t * chunk; }
  int64_t end(int t) const { return std::min(n, (t + 1) * chunk); }
};

/// A channel's mean and sum of squared deviations, as batch_norm_cpu_collect_stats_*_impl:
/// planes of S > 1 values (the contiguous kernel) or N > T rows of one value (the
/// channels-last kernel, which NC11 is: T threads' float partial sums) or else double sums.
void channelStats(const float *X, int64_t N, int64_t C, int64_t S, int64_t c, int T, float &mean,
                  float &varSum) {
  const int64_t count = N * S;
  auto at = [&](int64_t n, int64_t i) { return X[(n * C + c) * S + i]; };
  if (S == 1 && N > T) {
    Chunks ch(N, T);
    double sum = 0;
    for (int t = 0; t < ch.count; ++t) {
      float part = 0;
      for (int64_t n = ch.begin(t); n < ch.end(t); ++n)
        part = at(n, 0) + part;
      sum += part;
    }
    mean = (float)(sum / count);
    double sq = 0;
    for (int t = 0; t < ch.count; ++t) {
      float part = 0;
      for (int64_t n = ch.begin(t); n < ch.end(t); ++n) {
        float d = at(n, 0) - mean;
        part = std::fma(d, d, part); // GCC contracts ATen's y + d * d
      }
      sq += part;
    }
    varSum = (float)sq;
    return;
  }
  double sum = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < S; ++i)
      sum += at(n, i);
  mean = (float)(sum / count);
  double sq = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < S; ++i) {
      float d = at(n, i) - mean;
      float dd = d * d;
      sq += dd;
    }
  varSum = (float)sq;
}

/// 1/sqrt(var + eps) as ATen's VarTransform: the f32 variance widened, the result rounded.
inline float invStd(float var, double eps) { return (float)(1.0 / std::sqrt((double)var + eps)); }

// The plane loops in ATen's 8 lanes (AVX2 with FMA; the file is built without contraction, so
// a product and a sum stay two roundings unless an FMA is written), the same sums and roundings
// as the scalar forms above and below, which CPUs without AVX2 keep. Without the ISA named, the
// scalar std::fma was a call into libm per element: 2.2x and 6.2x PyTorch's time.
bool haveAvx2Fma() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}

/// y = x * alpha + beta in one rounding, over n values.
__attribute__((target("avx2,fma"))) void affine8(float *y, const float *x, float alpha,
                                                  float beta, int64_t n) {
  const __m256 a = _mm256_set1_ps(alpha), b = _mm256_set1_ps(beta);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(_mm256_loadu_ps(x + i), a, b));
  for (; i < n; ++i)
    y[i] = std::fma(x[i], alpha, beta);
}

/// vecReduce of g's n >= kLanes values (`dot`: of (p - mu) * g, the whole blocks' products
/// rounded, the short last block's contracted into its addition).
__attribute__((target("avx2,fma"))) float planeSum8(const float *g, const float *p, float mu,
                                                    int64_t n, bool dot) {
  // Two loops, not a lambda: a lambda inside a target("...") function does not inherit it.
  const __m256 m = _mm256_set1_ps(mu);
  __m256 acc;
  int64_t i = kLanes;
  if (dot) {
    acc = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(p), m), _mm256_loadu_ps(g));
    for (; i + kLanes <= n; i += kLanes)
      acc = _mm256_add_ps(
          acc, _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(p + i), m), _mm256_loadu_ps(g + i)));
  } else {
    acc = _mm256_loadu_ps(g);
    for (; i + kLanes <= n; i += kLanes)
      acc = _mm256_add_ps(acc, _mm256_loadu_ps(g + i));
  }
  float v[kLanes];
  _mm256_storeu_ps(v, acc);
  for (int j = 0; i + j < n; ++j)
    v[j] = dot ? std::fma(p[i + j] - mu, g[i + j], v[j]) : v[j] + g[i + j];
  return foldLanes(v);
}

/// dx = (dy - gradMean - (x - mu) * k2) * invstd * w, the product contracted, over n values.
__attribute__((target("avx2,fma"))) void planeGrad8(float *q, const float *p, const float *g,
                                                     float mu, float k2, float gradMean,
                                                     float invstd, float w, int64_t n) {
  const __m256 m = _mm256_set1_ps(mu), k = _mm256_set1_ps(k2), gm = _mm256_set1_ps(gradMean),
               is = _mm256_set1_ps(invstd), wv = _mm256_set1_ps(w);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(p + i), m);
    const __m256 lhs = _mm256_sub_ps(_mm256_loadu_ps(g + i), gm);
    _mm256_storeu_ps(q + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_fnmadd_ps(d, k, lhs), is), wv));
  }
  for (; i < n; ++i)
    q[i] = std::fma(-(p[i] - mu), k2, g[i] - gradMean) * invstd * w;
}

} // namespace

void dsrt::cpu::batch_norm(dsrt_context *, dsrt_tensor *out, dsrt_tensor *mean, dsrt_tensor *var,
                           const dsrt_tensor *x, const dsrt_tensor *weight,
                           const dsrt_tensor *bias, double eps) {
  DSRT_PROFILE("batch_norm");
  const char *k = "batch_norm";
  const checks::BNOperands o = checks::batchNormOperands(k, x, out, nullptr, weight, bias, mean,
                                                         var, nullptr, nullptr, false);
  const checks::BNShape s = o.s;
  const float *w = o.w, *b = o.b;
  float *M = o.mean, *V = o.var;
  const float *X = (const float *)x->data;
  float *Y = (float *)out->data;
  const int64_t count = s.N * s.S;
  const int T = omp_get_max_threads();
#pragma omp parallel for schedule(static) if (x->numel > kParallelGrain)
  for (int64_t c = 0; c < s.C; ++c) {
    float mu = 0, varSum = 0;
    if (count)
      channelStats(X, s.N, s.C, s.S, c, T, mu, varSum);
    // The biased variance in f32 (ATen divides the f32 sum by the count).
    const float v = count ? varSum / (float)count : 0.f;
    if (M)
      M[c] = mu;
    if (V)
      V[c] = v;
    const float invstd = invStd(v, eps);
    const float alpha = invstd * (w ? w[c] : 1.f);
    // ATen's b - mean * alpha and x * alpha + beta, each contracted to one FMA.
    const float beta = std::fma(-mu, alpha, b ? b[c] : 0.f);
    for (int64_t n = 0; n < s.N; ++n) {
      const float *p = X + (n * s.C + c) * s.S;
      float *q = Y + (n * s.C + c) * s.S;
      if (s.S >= kLanes && haveAvx2Fma()) {
        affine8(q, p, alpha, beta, s.S);
        continue;
      }
      for (int64_t i = 0; i < s.S; ++i)
        q[i] = std::fma(p[i], alpha, beta);
    }
  }
}

void dsrt::cpu::batch_norm_grad(dsrt_context *, dsrt_tensor *dx, dsrt_tensor *dweight,
                                dsrt_tensor *dbias, const dsrt_tensor *x,
                                const dsrt_tensor *weight, const dsrt_tensor *mean,
                                const dsrt_tensor *var, const dsrt_tensor *dy, double eps) {
  DSRT_PROFILE("batch_norm_grad");
  const char *k = "batch_norm_grad";
  const checks::BNOperands o = checks::batchNormOperands(k, x, dx, dy, weight, nullptr, mean,
                                                         var, dweight, dbias, true);
  const checks::BNShape s = o.s;
  const float *w = o.w, *M = o.mean, *V = o.var;
  float *dW = o.dW, *dB = o.dB;
  const float *X = (const float *)x->data, *DY = (const float *)dy->data;
  float *DX = dx ? (float *)dx->data : nullptr;
  const int64_t count = s.N * s.S;
  const int T = omp_get_max_threads();
#pragma omp parallel for schedule(static) if (x->numel > kParallelGrain)
  for (int64_t c = 0; c < s.C; ++c) {
    const float mu = M[c], invstd = invStd(V[c], eps);
    float sumF, dotF, k2, gradMean;
    if (s.S == 1) {
      // batch_norm_cpu_backward_channels_last_impl: T threads' f32 partial sums, summed in
      // double and rounded to f32.
      Chunks ch(s.N, T);
      double sum = 0, dot = 0;
      for (int t = 0; t < ch.count; ++t) {
        float ps = 0, pd = 0;
        for (int64_t n = ch.begin(t); n < ch.end(t); ++n) {
          const float g = DY[n * s.C + c], d = X[n * s.C + c] - mu;
          ps = ps + g;
          pd = std::fma(d, g, pd); // ATen's dotp + (x - mean) * dy, contracted
        }
        sum += ps;
        dot += pd;
      }
      sumF = (float)sum;
      dotF = (float)dot;
      k2 = dotF * invstd * invstd / (float)count;
      gradMean = sumF / (float)count;
      if (dW)
        dW[c] = dotF * invstd;
      if (dB)
        dB[c] = sumF;
    } else {
      // batch_norm_cpu_backward_contiguous_impl: each plane's Vec reduction, summed in double.
      // The products of whole vectors are rounded before they are added; those of a short last
      // block are contracted into its addition.
      double sum = 0, dot = 0;
      for (int64_t n = 0; n < s.N; ++n) {
        const float *p = X + (n * s.C + c) * s.S, *g = DY + (n * s.C + c) * s.S;
        if (s.S >= kLanes && haveAvx2Fma()) {
          sum += planeSum8(g, p, mu, s.S, false);
          dot += planeSum8(g, p, mu, s.S, true);
          continue;
        }
        sum += vecReduce(
            s.S, [g](int64_t i) { return g[i]; }, [g](float a, int64_t i) { return a + g[i]; });
        const int64_t tail = s.S - s.S % kLanes;
        dot += vecReduce(
            s.S, [&](int64_t i) { return (p[i] - mu) * g[i]; },
            [&](float a, int64_t i) {
              return i >= tail ? std::fma(p[i] - mu, g[i], a) : a + (p[i] - mu) * g[i];
            });
      }
      k2 = (float)dot * invstd * invstd / (float)count;
      gradMean = (float)(sum / count);
      if (dW)
        dW[c] = (float)(dot * invstd);
      if (dB)
        dB[c] = (float)sum;
    }
    if (!DX)
      continue;
    const float wc = w ? w[c] : 1.f;
    // ATen's (dy - grad_mean - (x - mean) * k) * invstd * w, the product contracted, except in
    // the channels-last kernel's short last vector of channels.
    const bool fused = s.S > 1 || c < s.C - s.C % kLanes;
    for (int64_t n = 0; n < s.N; ++n) {
      const float *p = X + (n * s.C + c) * s.S, *g = DY + (n * s.C + c) * s.S;
      float *q = DX + (n * s.C + c) * s.S;
      if (fused && s.S >= kLanes && haveAvx2Fma()) {
        planeGrad8(q, p, g, mu, k2, gradMean, invstd, wc, s.S);
        continue;
      }
      for (int64_t i = 0; i < s.S; ++i) {
        const float lhs = g[i] - gradMean;
        q[i] = (fused ? std::fma(-(p[i] - mu), k2, lhs) : lhs - (p[i] - mu) * k2) * invstd * wc;
      }
    }
  }
}
