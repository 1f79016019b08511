// CPU kernels: layer norm and batch norm, forward and backward.
#include "cpu_device.h"
#include "half_rows.h"
#include "vector_math.h"
#include "../kernels/checks.h"
#include "../kernels/scalar_ops.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

using namespace dsrt;
using dsrt::cpu::narrowRow;
using dsrt::cpu::widenRow;

namespace {

// The row sums: cpu::blockSum (f32 lanes, blocks in double).
using cpu::blockSum;
constexpr int64_t kBlock = cpu::kSumBlock;

/// Mean and 1/sqrt(biased var + eps) of n floats (two passes).
inline void moments(const float *x, int64_t n, double eps, double &mean, double &rstd) {
  mean = n ? blockSum(n, [x](int64_t i) { return x[i]; }) / n : 0;
  const float m = (float)mean;
  double v = blockSum(n, [x, m](int64_t i) {
    float d = x[i] - m;
    return d * d;
  });
  v = n ? v / n : 0;
  rstd = 1.0 / std::sqrt(v + eps);
}

/// One row of an affine layer norm: the row's sums are its cost.
DSRT_CPU_CLONES void layerNormRow(const float *xr, const float *w, const float *b, int64_t N,
                                  double eps, float *yr) {
  double mean, rstd;
  moments(xr, N, eps, mean, rstd);
  float m = (float)mean, s = (float)rstd;
#pragma omp simd
  for (int64_t i = 0; i < N; ++i)
    yr[i] = (xr[i] - m) * s * w[i] + b[i];
}

/// One row of layer norm's backward: dx (may be null) and the row's dweight / dbias terms
/// added into pw / pb (may be null). `w` is the weight or ones. Three passes over the row: the
/// mean; the variance with the two sums of the gradient; the results.
DSRT_CPU_CLONES void layerNormGradRow(const float *xr, const float *dyr, const float *w,
                                      int64_t N, double eps, float *dxr, float *pw, float *pb) {
  const double mean = N ? blockSum(N, [xr](int64_t i) { return xr[i]; }) / N : 0;
  const float m = (float)mean;
  double var = 0, sg = 0, sgd = 0; // sum (x - m)^2, sum g, sum g (x - m); g = dy w
  for (int64_t b = 0; b < N; b += kBlock) {
    const int64_t e = std::min(N, b + kBlock);
    float pv = 0, pg = 0, pgd = 0;
#pragma omp simd reduction(+ : pv, pg, pgd)
    for (int64_t i = b; i < e; ++i) {
      const float d = xr[i] - m, g = dyr[i] * w[i];
      pv += d * d;
      pg += g;
      pgd += g * d;
    }
    var += pv, sg += pg, sgd += pgd;
  }
  const double rstd = 1.0 / std::sqrt((N ? var / N : 0) + eps);
  const float rs = (float)rstd, sumG = (float)sg, sumGX = (float)(sgd * rstd);
  const float invN = 1.0f / N;
  if (pw && pb && dxr) { // the usual case, one pass
#pragma omp simd
    for (int64_t i = 0; i < N; ++i) {
      const float xhat = (xr[i] - m) * rs;
      pw[i] += dyr[i] * xhat;
      pb[i] += dyr[i];
      dxr[i] = ops::layerNormGrad<float>(rs, dyr[i] * w[i], xhat, invN, sumG, sumGX);
    }
    return;
  }
  if (pw) {
#pragma omp simd
    for (int64_t i = 0; i < N; ++i)
      pw[i] += dyr[i] * ((xr[i] - m) * rs);
  }
  if (pb) {
#pragma omp simd
    for (int64_t i = 0; i < N; ++i)
      pb[i] += dyr[i];
  }
  if (dxr) {
#pragma omp simd
    for (int64_t i = 0; i < N; ++i)
      dxr[i] = ops::layerNormGrad<float>(rs, dyr[i] * w[i], (xr[i] - m) * rs, invN, sumG, sumGX);
  }
}

// The rows of the 16-bit layer norm backward, in f32 (the AVX clones contract products into
// FMAs, as the compiler may have ATen's: dweight and dbias held bit for bit either way).

/// acc += dy (a x + b).
DSRT_CPU_CLONES void halfLayerNormGammaRow(float *__restrict acc, const float *__restrict dy,
                                           const float *__restrict x, float a, float b,
                                           int64_t n) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j)
    acc[j] = acc[j] + dy[j] * (a * x[j] + b);
}

/// sum dy w x and sum dy w: f32 over blocks, the blocks in double.
DSRT_CPU_CLONES void halfLayerNormSums(const float *__restrict dy, const float *__restrict w,
                                       const float *__restrict x, int64_t n, double &ds,
                                       double &db) {
  ds = db = 0;
  for (int64_t at = 0; at < n; at += kBlock) {
    const int64_t e = std::min(n, at + kBlock);
    float ps = 0, pb = 0;
#pragma omp simd reduction(+ : ps, pb)
    for (int64_t j = at; j < e; ++j) {
      const float gw = dy[j] * w[j];
      ps += gw * x[j];
      pb += gw;
    }
    ds += ps, db += pb;
  }
}

/// dx = a dy w + b x + c.
DSRT_CPU_CLONES void halfLayerNormDxRow(float *__restrict dx, const float *__restrict dy,
                                        const float *__restrict w, const float *__restrict x,
                                        float a, float b, float c, int64_t n) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j)
    dx[j] = a * dy[j] * w[j] + b * x[j] + c;
}

/// 16-bit layer norm backward in PyTorch's CPU arithmetic (ATen's layer_norm_backward_frame for
/// bf16 and fp16): the row's mean and 1/std rounded to the 16-bit type, as its forward saves
/// them; dx = a dy w + b x + c in f32 from the row's sums, rounded once; dweight and dbias summed
/// row by row into 16-bit buffers, one per block of rows (at::parallel_for's blocks over T
/// threads), whose sums in f32 are rounded once. Summing the rows in f32 instead put the
/// 16-bit GPT's norm gradients 1% from PyTorch's.
void layerNormGradHalf(int32_t half, const dsrt_tensor *x, const dsrt_tensor *weight,
                       const dsrt_tensor *dy, dsrt_tensor *dx, dsrt_tensor *dweight,
                       dsrt_tensor *dbias, int64_t N, double eps) {
  const char *k = "layer_norm_grad";
  const int64_t rows = x->numel / N;
  std::vector<float> w(static_cast<size_t>(N), 1.f);
  if (weight) {
    checks::sized(k, weight, half, N, "weight");
    widenRow(half, w.data(), (const uint16_t *)weight->data, N);
  }
  for (auto [t, what] : {std::pair{dweight, "dweight"}, {dbias, "dbias"}})
    if (t)
      checks::sized(k, t, half, N, what);
  const int T = omp_get_max_threads();
  const int64_t used = std::max<int64_t>(1, std::min<int64_t>(T, rows));
  const int64_t chunk = std::max<int64_t>(1, (rows + used - 1) / used);
  const int64_t blocks = (rows + chunk - 1) / chunk;
  // The 16-bit buffers of every block (zero bits are +0 in both types).
  std::vector<uint16_t> gbuf(dweight ? (size_t)(blocks * N) : 0, 0),
      bbuf(dbias ? (size_t)(blocks * N) : 0, 0);
  const uint16_t *X = (const uint16_t *)x->data, *DY = (const uint16_t *)dy->data;
  uint16_t *DX = dx ? (uint16_t *)dx->data : nullptr;
  const float scale = 1.0f / (float)N;
#pragma omp parallel for schedule(static, 1) if (rows > 1 && x->numel > kParallelGrain)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    float *xr = cpu::threadRow(0, N), *g = cpu::threadRow(1, N), *acc = cpu::threadRow(2, N);
    uint16_t *gb = dweight ? gbuf.data() + blk * N : nullptr;
    uint16_t *bb = dbias ? bbuf.data() + blk * N : nullptr;
    for (int64_t r = blk * chunk; r < std::min(rows, (blk + 1) * chunk); ++r) {
      widenRow(half, xr, X + r * N, N);
      widenRow(half, g, DY + r * N, N);
      double mean, rstd;
      moments(xr, N, eps, mean, rstd);
      const float mu = halfToFloat(half, floatToHalf(half, (float)mean));
      const float a = halfToFloat(half, floatToHalf(half, (float)rstd));
      // The 16-bit buffers, each widened, added to and rounded back.
      if (gb) {
        widenRow(half, acc, gb, N);
        halfLayerNormGammaRow(acc, g, xr, a, -a * mu, N);
        narrowRow(half, gb, acc, nullptr, N);
      }
      if (bb) {
        widenRow(half, acc, bb, N);
#pragma omp simd
        for (int64_t j = 0; j < N; ++j)
          acc[j] = acc[j] + g[j];
        narrowRow(half, bb, acc, nullptr, N);
      }
      if (!DX)
        continue;
      double ds, db;
      halfLayerNormSums(g, w.data(), xr, N, ds, db);
      const float dsf = (float)ds, dbf = (float)db;
      const float b = (dbf * mu - dsf) * a * a * a * scale;
      const float c = -b * mu - dbf * a * scale;
      halfLayerNormDxRow(acc, g, w.data(), xr, a, b, c, N);
      narrowRow(half, DX + r * N, acc, nullptr, N);
    }
  }
  for (auto [t, buf] : {std::pair{dweight, &gbuf}, {dbias, &bbuf}}) {
    if (!t)
      continue;
    uint16_t *dst = (uint16_t *)t->data;
    for (int64_t j = 0; j < N; ++j) {
      float sum = 0.f;
      for (int64_t blk = 0; blk < blocks; ++blk)
        sum += halfToFloat(half, (*buf)[blk * N + j]);
      dst[j] = floatToHalf(half, sum);
    }
  }
}

} // namespace

void dsrt::cpu::layer_norm(dsrt_context *, dsrt_tensor *out, const dsrt_tensor *x,
                                const dsrt_tensor *weight, const dsrt_tensor *bias,
                                int64_t norm_numel, double eps) {
  DSRT_PROFILE("layer_norm");
  const char *k = "layer_norm";
  checks::layerNorm(out, x, norm_numel);
  const int64_t N = norm_numel, rows = x->numel / N;
  // 16 bits (weight and bias of the input's type): each row widened into a buffer of the
  // thread's, normalized in f32, rounded once; the weight and bias widened once.
  const int32_t half = isHalfType(x->dtype) ? x->dtype : 0;
  std::vector<float> wide[2];
  auto param = [&](const dsrt_tensor *t, int i, const char *what) -> const float * {
    if (!half)
      return checks::optF32(k, t, N, what);
    if (!t)
      return nullptr;
    checks::sized(k, t, half, N, what);
    wide[i].resize(static_cast<size_t>(N));
    widenRow(half, wide[i].data(), (const uint16_t *)t->data, N);
    return wide[i].data();
  };
  const float *w = param(weight, 0, "weight");
  const float *b = param(bias, 1, "bias");
#pragma omp parallel for schedule(static) if (x->numel > kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr;
    float *yr;
    if (half) {
      float *in = cpu::threadRow(0, N);
      widenRow(half, in, (const uint16_t *)x->data + r * N, N);
      xr = in;
      yr = cpu::threadRow(1, N);
    } else {
      xr = (const float *)x->data + r * N;
      yr = (float *)out->data + r * N;
    }
    if (w && b) {
      layerNormRow(xr, w, b, N, eps, yr);
    } else {
      double mean, rstd;
      moments(xr, N, eps, mean, rstd);
      float m = (float)mean, s = (float)rstd;
      for (int64_t i = 0; i < N; ++i)
        yr[i] = ops::layerNormOut(xr[i], m, s, w ? w + i : nullptr, b ? b + i : nullptr);
    }
    if (half)
      narrowRow(half, (uint16_t *)out->data + r * N, yr, nullptr, N);
  }
}

void dsrt::cpu::layer_norm_grad(dsrt_context *, dsrt_tensor *dx, dsrt_tensor *dweight,
                                     dsrt_tensor *dbias, const dsrt_tensor *x,
                                     const dsrt_tensor *weight, const dsrt_tensor *dy,
                                     int64_t norm_numel, double eps) {
  DSRT_PROFILE("layer_norm_grad");
  const char *k = "layer_norm_grad";
  checks::layerNormGrad(dx, x, dy, norm_numel);
  if (isHalfType(x->dtype))
    return layerNormGradHalf(x->dtype, x, weight, dy, dx, dweight, dbias, norm_numel, eps);
  const float *w = checks::optF32(k, weight, norm_numel, "weight");
  float *dW = (float *)checks::optF32(k, dweight, norm_numel, "dweight");
  float *dB = (float *)checks::optF32(k, dbias, norm_numel, "dbias");
  int64_t N = norm_numel, rows = x->numel / N;
  const float *X = (const float *)x->data, *DY = (const float *)dy->data;
  float *DX = dx ? (float *)dx->data : nullptr;
  int threads = omp_get_max_threads();
  bool par = x->numel > kParallelGrain;
  int nt = par ? threads : 1;
  // Per-thread partial sums for dweight / dbias, combined in thread order: f32 over blocks of
  // kGradRowBlock rows (as PyTorch's f32 buffers), the blocks added in double.
  constexpr int64_t kGradRowBlock = 32;
  std::vector<double> partW(dW ? (size_t)nt * N : 0, 0.0), partB(dB ? (size_t)nt * N : 0, 0.0);
  std::vector<float> ones(w ? 0 : (size_t)N, 1.f);
#pragma omp parallel num_threads(nt)
  {
    int t = omp_get_thread_num();
    double *pw = dW ? partW.data() + (size_t)t * N : nullptr;
    double *pb = dB ? partB.data() + (size_t)t * N : nullptr;
    std::vector<float> fw(dW ? N : 0, 0.f), fb(dB ? N : 0, 0.f);
    int64_t inBlock = 0;
    auto flush = [&] {
      for (int64_t i = 0; i < (dW ? N : 0); ++i)
        pw[i] += fw[i], fw[i] = 0.f;
      for (int64_t i = 0; i < (dB ? N : 0); ++i)
        pb[i] += fb[i], fb[i] = 0.f;
      inBlock = 0;
    };
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const float *xr = X + r * N, *dyr = DY + r * N;
      layerNormGradRow(xr, dyr, w ? w : ones.data(), N, eps, DX ? DX + r * N : nullptr,
                       dW ? fw.data() : nullptr, dB ? fb.data() : nullptr);
      if (++inBlock == kGradRowBlock)
        flush();
    }
    flush();
  }
  for (int64_t i = 0; i < N; ++i) {
    double sw = 0, sb = 0;
    for (int t = 0; t < nt; ++t) {
      if (dW)
        sw += partW[(size_t)t * N + i];
      if (dB)
        sb += partB[(size_t)t * N + i];
    }
    if (dW)
      dW[i] = (float)sw;
    if (dB)
      dB[i] = (float)sb;
  }
}

void dsrt::cpu::batch_norm_inference(dsrt_context *, dsrt_tensor *out, const dsrt_tensor *x,
                                          const dsrt_tensor *weight, const dsrt_tensor *bias,
                                          const dsrt_tensor *mean, const dsrt_tensor *var,
                                          double eps) {
  DSRT_PROFILE("batch_norm_inference");
  const char *k = "batch_norm_inference";
  const checks::BNOperands o = checks::batchNormOperands(k, x, out, nullptr, weight, bias, mean,
                                                         var, nullptr, nullptr, true);
  const checks::BNShape s = o.s;
  const float *w = o.w, *b = o.b, *M = o.mean, *V = o.var;
  const float *X = (const float *)x->data;
  float *Y = (float *)out->data;
#pragma omp parallel for schedule(static) if (x->numel > kParallelGrain)
  for (int64_t nc = 0; nc < s.N * s.C; ++nc) {
    int64_t c = nc % s.C;
    double rstd = 1.0 / std::sqrt((double)V[c] + eps);
    float scale = (float)(rstd * (w ? w[c] : 1.f));
    float shift = (float)((b ? b[c] : 0.f) - M[c] * rstd * (w ? w[c] : 1.f));
    const float *p = X + nc * s.S;
    float *q = Y + nc * s.S;
    for (int64_t i = 0; i < s.S; ++i)
      q[i] = p[i] * scale + shift;
  }
}
