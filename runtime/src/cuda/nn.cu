//===- nn.cu - CUDA kernels: softmax, layer norm, embedding, cross-entropy, dropout ---===//
//
// One block per row for the row-wise ops, statistics in double as on the CPU; the per-element
// formulas are kernels/scalar_ops.h. Out-of-range indices are reported through the device's
// error word and end the job at the next host wait.
//
#include "../kernels/checks.h"
#include "../kernels/scalar_ops.h"
#include "cuda_device.h"
#include "half_bits.cuh"

#include <vector>

using namespace dsrt;
using namespace dsrt::cuda;

namespace {

using checks::DimSplit;

__device__ __forceinline__ int64_t indexAt(const void *p, bool i64, int64_t i) {
  return i64 ? static_cast<const int64_t *>(p)[i] : static_cast<const int32_t *>(p)[i];
}

/// Rows as blocks: at most 2^31 - 1 of them.
unsigned rowBlocks(const char *k, int64_t rows) {
  if (rows > 0x7fffffff)
    fail(k, "%lld rows exceed one launch", (long long)rows);
  return (unsigned)(rows > 0 ? rows : 1);
}

// --- softmax ------------------------------------------------------------------------------

// 16-bit rows (S a bit wrapper) compute in f32 (T) and round each result once.
template <class S>
__global__ void softmaxKernel(S *Y, const S *X, DimSplit s, int32_t log) {
  using T = Compute<S>;
  int64_t oi = blockIdx.x, o = oi / s.inner, i = oi % s.inner;
  const S *x = X + o * s.D * s.inner + i;
  S *y = Y + o * s.D * s.inner + i;
  int64_t st = s.inner;
  T mx = -INFINITY;
  for (int64_t d = threadIdx.x; d < s.D; d += blockDim.x)
    mx = MaxNan()(mx, T(load(x[d * st])));
  mx = blockReduce(mx, MaxNan(), T(-INFINITY));
  double sum = 0;
  for (int64_t d = threadIdx.x; d < s.D; d += blockDim.x)
    sum += (double)ops::m_exp(T(load(x[d * st]) - mx));
  sum = blockReduce(sum, Sum(), 0.0);
  if (log) {
    T lse = (T)ops::m_log(sum);
    for (int64_t d = threadIdx.x; d < s.D; d += blockDim.x)
      y[d * st] = store<S>(T(load(x[d * st]) - mx - lse));
  } else {
    T inv = (T)(1.0 / sum);
    for (int64_t d = threadIdx.x; d < s.D; d += blockDim.x)
      y[d * st] = store<S>(T(ops::m_exp(T(load(x[d * st]) - mx)) * inv));
  }
}

template <class S>
__global__ void softmaxGradKernel(S *DX, const S *Y, const S *G, DimSplit s, int32_t log) {
  using T = Compute<S>;
  int64_t oi = blockIdx.x, o = oi / s.inner, i = oi % s.inner;
  int64_t base = o * s.D * s.inner + i, st = s.inner;
  const S *y = Y + base, *g = G + base;
  S *d = DX + base;
  double sum = 0;
  for (int64_t j = threadIdx.x; j < s.D; j += blockDim.x) {
    T gj = load(g[j * st]), yj = load(y[j * st]);
    sum += log ? (double)gj : (double)gj * yj;
  }
  T sm = (T)blockReduce(sum, Sum(), 0.0);
  for (int64_t j = threadIdx.x; j < s.D; j += blockDim.x) {
    T gj = load(g[j * st]), yj = load(y[j * st]);
    d[j * st] = store<S>(T(log ? gj - ops::m_exp(yj) * sm : yj * (gj - sm)));
  }
}

// --- layer norm -----------------------------------------------------------------------------

/// Mean and 1/sqrt(biased var + eps) of a row (two passes in double), for every thread; a
/// 16-bit row's values widened.
template <class S>
__device__ void rowMoments(const S *x, int64_t n, double eps, double &mean, double &rstd) {
  double s = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    s += load(x[i]);
  s = blockReduce(s, Sum(), 0.0);
  mean = n ? s / n : 0;
  double v = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    double d = load(x[i]) - mean;
    v += d * d;
  }
  v = blockReduce(v, Sum(), 0.0);
  v = n ? v / n : 0;
  rstd = 1.0 / sqrt(v + eps);
}

/// A row of layer norm; 16-bit (S, with its weight and bias) computed in f32, rounded once.
template <class S>
__global__ void layerNormKernel(S *Y, const S *X, const S *w, const S *b, int64_t N, double eps,
                                double *stats) {
  const S *xr = X + blockIdx.x * N;
  S *yr = Y + blockIdx.x * N;
  double mean, rstd;
  rowMoments(xr, N, eps, mean, rstd);
  if (stats && threadIdx.x == 0) {
    stats[2 * blockIdx.x] = mean;
    stats[2 * blockIdx.x + 1] = rstd;
  }
  float m = (float)mean, s = (float)rstd;
  for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
    float wi = w ? (float)load(w[i]) : 0.f, bi = b ? (float)load(b[i]) : 0.f;
    yr[i] = store<S>(ops::layerNormOut((float)load(xr[i]), m, s, w ? &wi : nullptr,
                                       b ? &bi : nullptr));
  }
}

/// A row of layer norm's backward: its statistics (kept for the weight's gradient) and dx; a
/// 16-bit row (S, with its weight) computed in f32 and double, dx rounded once.
template <class S>
__global__ void layerNormDxKernel(S *DX, const S *X, const S *DY, const S *w, int64_t N,
                                  double eps, double *stats) {
  const S *xr = X + blockIdx.x * N, *dyr = DY + blockIdx.x * N;
  double mean, rstd;
  rowMoments(xr, N, eps, mean, rstd);
  if (threadIdx.x == 0) {
    stats[2 * blockIdx.x] = mean;
    stats[2 * blockIdx.x + 1] = rstd;
  }
  if (!DX)
    return;
  double sumG = 0, sumGX = 0;
  for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
    double xhat = ((double)load(xr[i]) - mean) * rstd;
    double g = (double)load(dyr[i]) * (w ? (double)load(w[i]) : 1.0);
    sumG += g;
    sumGX += g * xhat;
  }
  sumG = blockReduce(sumG, Sum(), 0.0);
  sumGX = blockReduce(sumGX, Sum(), 0.0);
  double invN = 1.0 / N;
  S *dxr = DX + blockIdx.x * N;
  for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
    double xhat = ((double)load(xr[i]) - mean) * rstd;
    double g = (double)load(dyr[i]) * (w ? (double)load(w[i]) : 1.0);
    dxr[i] = store<S>((float)ops::layerNormGrad(rstd, g, xhat, invN, sumG, sumGX));
  }
}

/// dweight and dbias, first pass: chunk blockIdx.y of the rows, one thread per column, double
/// sums into part[chunk][2][N] (coalesced across columns).
template <class S>
__global__ void layerNormDwPartKernel(double *part, const S *X, const S *DY, int64_t rows,
                                      int64_t N, int64_t chunkRows, const double *stats) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= N)
    return;
  const int64_t r0 = (int64_t)blockIdx.y * chunkRows, r1 = min(rows, r0 + chunkRows);
  double sw = 0, sb = 0;
  for (int64_t r = r0; r < r1; ++r) {
    double dy = load(DY[r * N + i]);
    double xhat = ((double)load(X[r * N + i]) - stats[2 * r]) * stats[2 * r + 1];
    sw += dy * xhat;
    sb += dy;
  }
  part[(2 * (int64_t)blockIdx.y) * N + i] = sw;
  part[(2 * (int64_t)blockIdx.y + 1) * N + i] = sb;
}

/// Second pass: the chunks' sums in order per column, rounded once.
template <class S>
__global__ void layerNormDwSumKernel(S *dW, S *dB, const double *part, int64_t chunks,
                                     int64_t N) {
  DSRT_GRID_STRIDE(i, N) {
    double sw = 0, sb = 0;
    for (int64_t c = 0; c < chunks; ++c) {
      sw += part[(2 * c) * N + i];
      sb += part[(2 * c + 1) * N + i];
    }
    if (dW)
      dW[i] = store<S>((float)sw);
    if (dB)
      dB[i] = store<S>((float)sb);
  }
}

// --- embedding ------------------------------------------------------------------------------

template <class T>
__global__ void embeddingKernel(T *out, const T *W, const void *idx, bool i64, int64_t n,
                                int64_t V, int64_t D, int64_t *errors) {
  DSRT_GRID_STRIDE(e, n * D) {
    int64_t i = e / D, c = e % D;
    int64_t ix = indexAt(idx, i64, i);
    if (ix < 0 || ix >= V) {
      report(errors, kIndexOutOfRange, ix);
      continue;
    }
    out[e] = W[ix * D + c];
  }
}

/// One thread per column, over the indices in order: the CPU's sums, without atomics.
/// One thread per column, the rows added in index order; 16-bit rows in 16 bits, each
/// addition rounded (as the CPU's and PyTorch's CPU embedding backward).
template <class T>
__global__ void embeddingGradKernel(T *DW, const T *G, const void *idx, bool i64, int64_t n,
                                    int64_t V, int64_t D, int64_t padding) {
  DSRT_GRID_STRIDE(c, D) {
    for (int64_t i = 0; i < n; ++i) {
      int64_t ix = indexAt(idx, i64, i);
      if ((ix == padding && padding >= 0) || ix < 0 || ix >= V)
        continue;
      if constexpr (isHalfBits<T>())
        DW[ix * D + c] = fromFloat<T>(toFloat(DW[ix * D + c]) + toFloat(G[i * D + c]));
      else
        DW[ix * D + c] += G[i * D + c];
    }
  }
}

__global__ void checkIndicesKernel(const void *idx, bool i64, int64_t n, int64_t V,
                                   int64_t *errors) {
  DSRT_GRID_STRIDE(i, n) {
    int64_t ix = indexAt(idx, i64, i);
    if (ix < 0 || ix >= V)
      report(errors, kIndexOutOfRange, ix);
  }
}

// --- cross-entropy --------------------------------------------------------------------------

/// Log-sum-exp of a row in double (max NaN-aware, as the CPU's), for every thread.
__device__ double rowLogSumExp(const float *x, int64_t C) {
  float mx = -INFINITY;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
    mx = MaxNan()(mx, x[c]);
  mx = blockReduce(mx, MaxNan(), -INFINITY);
  if (isinf(mx))
    return mx;
  double s = 0;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
    s += exp((double)x[c] - mx);
  s = blockReduce(s, Sum(), 0.0);
  return mx + log(s);
}

/// Per row: the loss (ignored rows 0) into rowLoss and 1/0 into rowCount.
__global__ void crossEntropyRowsKernel(double *rowLoss, double *rowCount, const float *X,
                                       const void *tgt, bool i64, int64_t C, int64_t ignore,
                                       double ls, int64_t *errors) {
  int64_t n = blockIdx.x;
  int64_t t = indexAt(tgt, i64, n);
  if (t != ignore && (t < 0 || t >= C)) {
    if (threadIdx.x == 0) {
      report(errors, kTargetOutOfRange, t);
      rowLoss[n] = rowCount[n] = 0;
    }
    return;
  }
  if (t == ignore) {
    if (threadIdx.x == 0)
      rowLoss[n] = rowCount[n] = 0;
    return;
  }
  const float *x = X + n * C;
  double lse = rowLogSumExp(x, C);
  double sumX = 0;
  if (ls > 0) {
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
      sumX += x[c];
    sumX = blockReduce(sumX, Sum(), 0.0);
  }
  if (threadIdx.x == 0) {
    rowLoss[n] = ops::crossEntropyLoss(lse, x[t], sumX, C, ls);
    rowCount[n] = 1;
  }
}

/// The rows' losses and counts summed in row order (one thread: the CPU's order when it runs
/// one thread), then reduced as asked.
__global__ void crossEntropyTotalKernel(float *Y, const double *rowLoss, const double *rowCount,
                                        int64_t N, int32_t reduction) {
  if (threadIdx.x != 0 || blockIdx.x != 0)
    return;
  double total = 0, count = 0;
  for (int64_t n = 0; n < N; ++n) {
    total += rowLoss[n];
    count += rowCount[n];
  }
  if (reduction == DSRT_REDUCTION_SUM)
    Y[0] = (float)total;
  else
    Y[0] = (float)(total / count);
}

__global__ void rowsToFloatKernel(float *Y, const double *rowLoss, int64_t N) {
  DSRT_GRID_STRIDE(n, N) Y[n] = (float)rowLoss[n];
}

__global__ void crossEntropyGradKernel(float *DX, const float *X, const void *tgt, bool i64,
                                       const float *G, int64_t C, int64_t ignore, double ls,
                                       int32_t reduction, const double *rowCount, int64_t N,
                                       int64_t *errors) {
  int64_t n = blockIdx.x;
  int64_t t = indexAt(tgt, i64, n);
  float *d = DX + n * C;
  if (t == ignore || t < 0 || t >= C) {
    if (t != ignore && threadIdx.x == 0)
      report(errors, kTargetOutOfRange, t);
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
      d[c] = 0;
    return;
  }
  double scale = 1.0;
  if (reduction == DSRT_REDUCTION_MEAN) {
    double count = 0;
    for (int64_t r = threadIdx.x; r < N; r += blockDim.x)
      count += rowCount[r];
    scale = 1.0 / blockReduce(count, Sum(), 0.0);
  }
  double g = (reduction == DSRT_REDUCTION_NONE ? G[n] : G[0]) * scale;
  const float *x = X + n * C;
  double lse = rowLogSumExp(x, C);
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
    d[c] = (float)(g * ops::crossEntropyGrad(x[c], lse, c == t, C, ls));
}

__global__ void targetCountKernel(double *rowCount, const void *tgt, bool i64, int64_t N,
                                  int64_t ignore) {
  DSRT_GRID_STRIDE(n, N) rowCount[n] = indexAt(tgt, i64, n) != ignore ? 1.0 : 0.0;
}

using checks::CEShape;

} // namespace

void dsrt::cuda::softmax(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *in, int64_t dim,
                         int32_t log) {
  const char *k = "softmax";
  DimSplit s = checks::softmax(out, in, dim);
  if (!in->numel)
    return;
  dispatchFloatOrHalf(k, in->dtype, [&](auto tag) {
    using T = decltype(tag);
    softmaxKernel<T><<<rowBlocks(k, s.outer * s.inner), kThreads, 0, stream(ctx)>>>(
        (T *)out->data, (const T *)in->data, s, log);
  });
  launched(k);
}

void dsrt::cuda::softmax_grad(dsrt_context *ctx, dsrt_tensor *dx, const dsrt_tensor *y,
                              const dsrt_tensor *dy, int64_t dim, int32_t log) {
  const char *k = "softmax_grad";
  DimSplit s = checks::softmaxGrad(dx, y, dy, dim);
  if (!y->numel)
    return;
  dispatchFloatOrHalf(k, y->dtype, [&](auto tag) {
    using T = decltype(tag);
    softmaxGradKernel<T><<<rowBlocks(k, s.outer * s.inner), kThreads, 0, stream(ctx)>>>(
        (T *)dx->data, (const T *)y->data, (const T *)dy->data, s, log);
  });
  launched(k);
}

void dsrt::cuda::layer_norm(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *x,
                            const dsrt_tensor *weight, const dsrt_tensor *bias, int64_t norm_numel,
                            double eps) {
  const char *k = "layer_norm";
  checks::layerNorm(out, x, norm_numel);
  int64_t rows = x->numel / norm_numel;
  auto run = [&](auto tag) {
    using S = decltype(tag);
    for (auto [t, what] : {std::pair{weight, "weight"}, {bias, "bias"}})
      if (t)
        checks::sized(k, t, x->dtype, norm_numel, what);
    if (!rows)
      return;
    layerNormKernel<S><<<rowBlocks(k, rows), kThreads, 0, stream(ctx)>>>(
        (S *)out->data, (const S *)x->data, weight ? (const S *)weight->data : nullptr,
        bias ? (const S *)bias->data : nullptr, norm_numel, eps, nullptr);
    launched(k);
  };
  dispatchFloatOrHalf(k, x->dtype, run);
}

void dsrt::cuda::layer_norm_grad(dsrt_context *ctx, dsrt_tensor *dx, dsrt_tensor *dweight,
                                 dsrt_tensor *dbias, const dsrt_tensor *x,
                                 const dsrt_tensor *weight, const dsrt_tensor *dy,
                                 int64_t norm_numel, double eps) {
  const char *k = "layer_norm_grad";
  checks::layerNormGrad(dx, x, dy, norm_numel);
  int64_t N = norm_numel, rows = x->numel / N;
  auto run = [&](auto tag) {
    using S = decltype(tag);
    // 16 bits: the weight and its gradients of the input's type (f32: the same checks).
    for (auto [t, what] : {std::pair{weight, "weight"}, {dweight, "dweight"}, {dbias, "dbias"}})
      if (t)
        checks::sized(k, t, x->dtype, N, what);
    S *dW = dweight ? (S *)dweight->data : nullptr, *dB = dbias ? (S *)dbias->data : nullptr;
    if (!rows) {
      for (S *p : {dW, dB})
        if (p)
          ctx->device->zero(p, N * sizeof(S));
      return;
    }
    // Row chunks of at least 32 rows, about 256 of them: enough blocks to fill the GPU.
    const int64_t chunkRows = std::max<int64_t>(32, (rows + 255) / 256);
    const int64_t chunks = (rows + chunkRows - 1) / chunkRows;
    auto *stats = (double *)device(ctx).scratch((2 * rows + 2 * chunks * N) * sizeof(double));
    double *part = stats + 2 * rows;
    layerNormDxKernel<S><<<rowBlocks(k, rows), kThreads, 0, stream(ctx)>>>(
        dx ? (S *)dx->data : nullptr, (const S *)x->data, (const S *)dy->data,
        weight ? (const S *)weight->data : nullptr, N, eps, stats);
    launched(k);
    if (dW || dB) {
      dim3 grid((unsigned)((N + kThreads - 1) / kThreads), (unsigned)chunks);
      layerNormDwPartKernel<S><<<grid, kThreads, 0, stream(ctx)>>>(
          part, (const S *)x->data, (const S *)dy->data, rows, N, chunkRows, stats);
      launched(k);
      layerNormDwSumKernel<S><<<blocksFor(N), kThreads, 0, stream(ctx)>>>(dW, dB, part, chunks, N);
      launched(k);
    }
  };
  dispatchFloatOrHalf(k, x->dtype, run);
}

void dsrt::cuda::embedding(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *weight,
                           const dsrt_tensor *indices) {
  const char *k = "embedding";
  const checks::EmbeddingShape e = checks::embedding(out, weight, indices);
  const int64_t V = e.V, D = e.D, n = e.n;
  if (!out->numel)
    return;
  size_t es = dsrt_dtype_size(weight->dtype);
  auto go = [&](auto tag) {
    using T = decltype(tag);
    embeddingKernel<T><<<blocksFor(n * D), kThreads, 0, stream(ctx)>>>(
        (T *)out->data, (const T *)weight->data, indices->data, indices->dtype == DSRT_I64, n, V,
        D, device(ctx).errors);
  };
  if (es == 1) // bool and 8-bit tables: gathers of data (a mask's rows)
    go(uint8_t());
  else if (es == 2)
    go(uint16_t());
  else if (es == 4)
    go(uint32_t());
  else if (es == 8)
    go(uint64_t());
  else
    fail(k, "unsupported dtype %s", dtypeName(weight->dtype));
  launched(k);
}

void dsrt::cuda::embedding_grad(dsrt_context *ctx, dsrt_tensor *dweight, const dsrt_tensor *dy,
                                const dsrt_tensor *indices, int64_t padding_idx) {
  const char *k = "embedding_grad";
  const checks::EmbeddingShape e = checks::embeddingGrad(dweight, dy, indices);
  const int64_t V = e.V, D = e.D, n = e.n;
  ctx->device->zero(dweight->data, dweight->numel * dsrt_dtype_size(dweight->dtype));
  if (!n || !D)
    return;
  bool i64 = indices->dtype == DSRT_I64;
  checkIndicesKernel<<<blocksFor(n), kThreads, 0, stream(ctx)>>>(indices->data, i64, n, V,
                                                                  device(ctx).errors);
  dispatchFloatOrHalf(k, dweight->dtype, [&](auto tag) {
    using T = decltype(tag);
    embeddingGradKernel<T><<<blocksFor(D), kThreads, 0, stream(ctx)>>>(
        (T *)dweight->data, (const T *)dy->data, indices->data, i64, n, V, D, padding_idx);
  });
  launched(k);
}

void dsrt::cuda::cross_entropy(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *logits,
                               const dsrt_tensor *target, int64_t ignore_index, int32_t reduction,
                               double label_smoothing) {
  const char *k = "cross_entropy";
  CEShape s = checks::crossEntropy(k, logits, target, out, reduction);
  auto *rows = (double *)device(ctx).scratch(2 * std::max<int64_t>(s.N, 1) * sizeof(double));
  bool i64 = target->dtype == DSRT_I64;
  if (s.N)
    crossEntropyRowsKernel<<<rowBlocks(k, s.N), kThreads, 0, stream(ctx)>>>(
        rows, rows + s.N, (const float *)logits->data, target->data, i64, s.C, ignore_index,
        label_smoothing, device(ctx).errors);
  if (reduction == DSRT_REDUCTION_NONE) {
    if (s.N)
      rowsToFloatKernel<<<blocksFor(s.N), kThreads, 0, stream(ctx)>>>((float *)out->data, rows,
                                                                        s.N);
  } else {
    crossEntropyTotalKernel<<<1, 32, 0, stream(ctx)>>>((float *)out->data, rows, rows + s.N, s.N,
                                                       reduction);
  }
  launched(k);
}

void dsrt::cuda::cross_entropy_grad(dsrt_context *ctx, dsrt_tensor *dlogits,
                                    const dsrt_tensor *logits, const dsrt_tensor *target,
                                    const dsrt_tensor *dy, int64_t ignore_index,
                                    int32_t reduction, double label_smoothing) {
  const char *k = "cross_entropy_grad";
  CEShape s = checks::crossEntropy(k, logits, target, dy, reduction);
  checkSameShape(k, dlogits, logits);
  checkDtype(k, dlogits, DSRT_F32, "dlogits");
  if (!s.N)
    return;
  bool i64 = target->dtype == DSRT_I64;
  auto *count = (double *)device(ctx).scratch(s.N * sizeof(double));
  targetCountKernel<<<blocksFor(s.N), kThreads, 0, stream(ctx)>>>(count, target->data, i64, s.N,
                                                                  ignore_index);
  crossEntropyGradKernel<<<rowBlocks(k, s.N), kThreads, 0, stream(ctx)>>>(
      (float *)dlogits->data, (const float *)logits->data, target->data, i64,
      (const float *)dy->data, s.C, ignore_index, label_smoothing, reduction, count, s.N,
      device(ctx).errors);
  launched(k);
}

void dsrt::cuda::dropout_mask(dsrt_context *ctx, dsrt_tensor *out, double p) {
  const char *k = "dropout_mask";
  if (p < 0 || p > 1)
    fail(k, "probability %g out of [0, 1]", p);
  // The context's generator on the host, in the CPU's order: the same masks on every device
  // (and across a checkpoint's resume); then one copy to the device.
  dispatchFloat(k, out->dtype, [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> host(out->numel);
    T keep = p >= 1 ? T(0) : T(1.0 / (1.0 - p));
    for (int64_t i = 0; i < out->numel; ++i) {
      double u = (double)(ctx->rng() >> 11) * 0x1.0p-53;
      host[i] = u < p ? T(0) : keep;
    }
    ctx->device->fromHost(out->data, host.data(), host.size() * sizeof(T));
  });
}
