//===- norm.cu - CUDA kernels: batch norm, training and inference ----------------------===//
//
// One block per channel, one thread per (sample) row of it: each row is summed in float in
// order and the rows in double, PyTorch's CPU arithmetic, which the CPU backend follows too.
//
#include "../kernels/checks.h"
#include "cuda_device.h"

using namespace dsrt;
using namespace dsrt::cuda;
using checks::BNShape;

namespace {

__global__ void batchNormKernel(float *Y, float *M, float *V, const float *X, const float *w,
                                const float *b, BNShape s, double eps) {
  int64_t c = blockIdx.x, count = s.N * s.S;
  double sum = 0;
  for (int64_t n = threadIdx.x; n < s.N; n += blockDim.x) {
    const float *p = X + (n * s.C + c) * s.S;
    float row = 0;
    for (int64_t i = 0; i < s.S; ++i)
      row += p[i];
    sum += row;
  }
  sum = blockReduce(sum, Sum(), 0.0);
  float mu = count ? (float)(sum / count) : 0.f;
  double sq = 0;
  for (int64_t n = threadIdx.x; n < s.N; n += blockDim.x) {
    const float *p = X + (n * s.C + c) * s.S;
    float row = 0;
    for (int64_t i = 0; i < s.S; ++i) {
      float d = p[i] - mu;
      row += d * d;
    }
    sq += row;
  }
  sq = blockReduce(sq, Sum(), 0.0);
  double v = count ? sq / count : 0;
  if (threadIdx.x == 0) {
    if (M)
      M[c] = mu;
    if (V)
      V[c] = (float)v;
  }
  float invstd = (float)(1.0 / sqrt(v + eps));
  float alpha = invstd * (w ? w[c] : 1.f);
  float beta = (b ? b[c] : 0.f) - mu * alpha;
  for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
    int64_t n = j / s.S, i = j % s.S;
    Y[(n * s.C + c) * s.S + i] = X[(n * s.C + c) * s.S + i] * alpha + beta;
  }
}

__global__ void batchNormGradKernel(float *DX, float *dW, float *dB, const float *X,
                                    const float *w, const float *M, const float *V,
                                    const float *DY, BNShape s, double eps) {
  int64_t c = blockIdx.x, count = s.N * s.S;
  float mu = M[c], invstd = (float)(1.0 / sqrt((double)V[c] + eps));
  // Float sums per row, as PyTorch's batch_norm_cpu_backward_contiguous_impl; the rows are
  // combined in float too (in a different order than the CPU's).
  float sum = 0, dotp = 0;
  for (int64_t n = threadIdx.x; n < s.N; n += blockDim.x) {
    const float *p = X + (n * s.C + c) * s.S, *g = DY + (n * s.C + c) * s.S;
    float rowSum = 0, rowDot = 0;
    for (int64_t i = 0; i < s.S; ++i) {
      rowSum += g[i];
      rowDot += (p[i] - mu) * g[i];
    }
    sum += rowSum;
    dotp += rowDot;
  }
  sum = blockReduce(sum, Sum(), 0.f);
  dotp = blockReduce(dotp, Sum(), 0.f);
  if (threadIdx.x == 0) {
    if (dW)
      dW[c] = dotp * invstd;
    if (dB)
      dB[c] = sum;
  }
  if (!DX)
    return;
  float wc = w ? w[c] : 1.f;
  float k2 = count ? dotp * invstd * invstd / (float)count : 0.f;
  float gradMean = count ? sum / (float)count : 0.f;
  for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
    int64_t at = ((j / s.S) * s.C + c) * s.S + j % s.S;
    float dxc = (X[at] - mu) * k2;
    DX[at] = (DY[at] - gradMean - dxc) * invstd * wc;
  }
}

__global__ void batchNormInferenceKernel(float *Y, const float *X, const float *w,
                                         const float *b, const float *M, const float *V,
                                         BNShape s, double eps) {
  DSRT_GRID_STRIDE(i, s.N * s.C * s.S) {
    int64_t c = (i / s.S) % s.C;
    double rstd = 1.0 / sqrt((double)V[c] + eps);
    float scale = (float)(rstd * (w ? w[c] : 1.f));
    float shift = (float)((b ? b[c] : 0.f) - M[c] * rstd * (w ? w[c] : 1.f));
    Y[i] = X[i] * scale + shift;
  }
}

} // namespace

void dsrt::cuda::batch_norm(dsrt_context *ctx, dsrt_tensor *out, dsrt_tensor *mean,
                            dsrt_tensor *var, const dsrt_tensor *x, const dsrt_tensor *weight,
                            const dsrt_tensor *bias, double eps) {
  const char *k = "batch_norm";
  const checks::BNOperands o = checks::batchNormOperands(k, x, out, nullptr, weight, bias, mean,
                                                         var, nullptr, nullptr, false);
  const checks::BNShape s = o.s;
  const float *w = o.w, *b = o.b;
  float *M = o.mean, *V = o.var;
  if (!s.C)
    return;
  batchNormKernel<<<(unsigned)s.C, kThreads, 0, stream(ctx)>>>(
      (float *)out->data, M, V, (const float *)x->data, w, b, s, eps);
  launched(k);
}

void dsrt::cuda::batch_norm_grad(dsrt_context *ctx, dsrt_tensor *dx, dsrt_tensor *dweight,
                                 dsrt_tensor *dbias, const dsrt_tensor *x,
                                 const dsrt_tensor *weight, const dsrt_tensor *mean,
                                 const dsrt_tensor *var, const dsrt_tensor *dy, double eps) {
  const char *k = "batch_norm_grad";
  const checks::BNOperands o = checks::batchNormOperands(k, x, dx, dy, weight, nullptr, mean,
                                                         var, dweight, dbias, true);
  const checks::BNShape s = o.s;
  const float *w = o.w, *M = o.mean, *V = o.var;
  float *dW = o.dW, *dB = o.dB;
  if (!s.C)
    return;
  batchNormGradKernel<<<(unsigned)s.C, kThreads, 0, stream(ctx)>>>(
      dx ? (float *)dx->data : nullptr, dW, dB, (const float *)x->data, w, M, V,
      (const float *)dy->data, s, eps);
  launched(k);
}

void dsrt::cuda::batch_norm_inference(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *x,
                                      const dsrt_tensor *weight, const dsrt_tensor *bias,
                                      const dsrt_tensor *mean, const dsrt_tensor *var,
                                      double eps) {
  const char *k = "batch_norm_inference";
  const checks::BNOperands o = checks::batchNormOperands(k, x, out, nullptr, weight, bias, mean,
                                                         var, nullptr, nullptr, true);
  const checks::BNShape s = o.s;
  const float *w = o.w, *b = o.b, *M = o.mean, *V = o.var;
  if (!x->numel)
    return;
  batchNormInferenceKernel<<<blocksFor(x->numel), kThreads, 0, stream(ctx)>>>(
      (float *)out->data, (const float *)x->data, w, b, M, V, s, eps);
  launched(k);
}
