//===- swiglu.cu - CUDA kernels: SwiGLU on a gate-and-up tensor and its gradient ---===//
//
// One thread per gate-and-up pair (grid-stride), the sigmoid as kernels/scalar_ops.h computes
// it; a row whose id is negative gets zeros and is not read, as on the CPU (zeros too where the
// flags would let them be: a defined result costs a store here).
//
#include "../kernels/checks.h"
#include "../kernels/scalar_ops.h"
#include "cuda_device.h"

using namespace dsrt;
using namespace dsrt::cuda;

namespace {

__device__ __forceinline__ bool skipped(const void *rows, bool i64, int64_t r) {
  if (!rows)
    return false;
  return i64 ? static_cast<const int64_t *>(rows)[r] < 0
             : static_cast<const int32_t *>(rows)[r] < 0;
}

__global__ void swigluKernel(float *Y, const float *X, const void *rows, bool i64, int64_t R,
                             int64_t F) {
  DSRT_GRID_STRIDE(t, R * F) {
    const int64_t r = t / F, j = t % F;
    if (skipped(rows, i64, r)) {
      Y[t] = 0.f;
      continue;
    }
    const float g = X[r * 2 * F + j], u = X[r * 2 * F + F + j];
    const float s = ops::unary(DSRT_SIGMOID, g);
    Y[t] = g * s * u;
  }
}

__global__ void swigluGradKernel(float *D, const float *X, const float *G, const void *rows,
                                 bool i64, int64_t R, int64_t F) {
  DSRT_GRID_STRIDE(t, R * F) {
    const int64_t r = t / F, j = t % F, at = r * 2 * F + j;
    if (skipped(rows, i64, r)) {
      D[at] = 0.f;
      D[at + F] = 0.f;
      continue;
    }
    const float g = X[at], u = X[at + F], dy = G[t];
    const float s = ops::unary(DSRT_SIGMOID, g);
    D[at + F] = dy * (g * s);
    D[at] = dy * u * (s * (1.f + g * (1.f - s)));
  }
}

} // namespace

void dsrt::cuda::swiglu(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *x,
                        const dsrt_tensor *rows, int32_t) {
  const char *k = "swiglu";
  const checks::SwigluShape s = checks::swiglu(k, x, out, nullptr, rows);
  if (!out->numel)
    return;
  swigluKernel<<<blocksFor(s.R * s.F), kThreads, 0, stream(ctx)>>>(
      (float *)out->data, (const float *)x->data, rows ? rows->data : nullptr,
      rows && rows->dtype == DSRT_I64, s.R, s.F);
  launched(k);
}

void dsrt::cuda::swiglu_grad(dsrt_context *ctx, dsrt_tensor *dx, const dsrt_tensor *x,
                             const dsrt_tensor *dy, const dsrt_tensor *rows, int32_t) {
  const char *k = "swiglu_grad";
  const checks::SwigluShape s = checks::swiglu(k, x, dy, dx, rows);
  if (!dx->numel)
    return;
  swigluGradKernel<<<blocksFor(s.R * s.F), kThreads, 0, stream(ctx)>>>(
      (float *)dx->data, (const float *)x->data, (const float *)dy->data,
      rows ? rows->data : nullptr, rows && rows->dtype == DSRT_I64, s.R, s.F);
  launched(k);
}
