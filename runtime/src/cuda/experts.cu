//===- experts.cu - CUDA kernels of routed experts: top-k, per-expert linear maps ---===//
//
// Plain kernels that give the CPU's numbers (f32 sums in the inputs' order): one thread per
// row for the top-k, per output element for the products. Grouped products on cuBLAS are
// still to come; these are what the conformance suite checks the CPU's against.
//
#include "../kernels/checks.h"
#include "../kernels/scalar_ops.h"
#include "cuda_device.h"

using namespace dsrt;
using namespace dsrt::cuda;

namespace {

__device__ __forceinline__ int64_t idAt(const void *p, bool i64, int64_t i) {
  return i64 ? static_cast<const int64_t *>(p)[i] : static_cast<const int32_t *>(p)[i];
}

/// One thread per row: k passes, each taking the best element after the previous pick.
template <class T>
__global__ void topKKernel(T *V, int64_t *I, const T *X, int64_t rows, int64_t n, int64_t k,
                           bool smallest) {
  DSRT_GRID_STRIDE(r, rows) {
    const T *x = X + r * n;
    T pv = 0;
    int64_t pi = -1;
    for (int64_t j = 0; j < k; ++j) {
      int64_t best = -1;
      for (int64_t c = 0; c < n; ++c) {
        if (pi >= 0 && !ops::topKBefore(pv, pi, x[c], c, smallest))
          continue; // taken by an earlier pass
        if (best < 0 || ops::topKBefore(x[c], c, x[best], best, smallest))
          best = c;
      }
      V[r * k + j] = x[best];
      I[r * k + j] = best;
      pv = x[best];
      pi = best;
    }
  }
}

__global__ void expertLinearKernel(float *Y, const float *X, const float *W, const void *ids,
                                   bool i64, int64_t N, int64_t E, int64_t in, int64_t out,
                                   int32_t transposed) {
  DSRT_GRID_STRIDE(t, N * out) {
    int64_t n = t / out, o = t % out, e = idAt(ids, i64, n);
    float acc = 0.f;
    if (e >= 0 && e < E) {
      const float *w = W + e * in * out;
      for (int64_t i = 0; i < in; ++i)
        acc += X[n * in + i] * (transposed ? w[i * out + o] : w[o * in + i]);
    }
    Y[t] = acc;
  }
}

__global__ void expertLinearGradWeightKernel(float *DW, const float *X, const float *G,
                                             const void *ids, bool i64, int64_t N, int64_t E,
                                             int64_t in, int64_t out, int32_t transposed) {
  DSRT_GRID_STRIDE(t, E * in * out) {
    int64_t e = t / (in * out), r = t % (in * out);
    int64_t o = transposed ? r % out : r / in, i = transposed ? r / out : r % in;
    float acc = 0.f;
    for (int64_t n = 0; n < N; ++n)
      if (idAt(ids, i64, n) == e)
        acc += G[n * out + o] * X[n * in + i];
    DW[t] = acc;
  }
}

/// One thread per expert: it walks the rows choice by choice and writes its own rows, the kept
/// ones with its id and the rest -1; rows no expert takes are copied by the first thread.
template <class Id>
__global__ void capacityKernel(Id *out, const Id *ids, int64_t tokens, int64_t choices,
                               int64_t experts, int64_t capacity) {
  const int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (e >= experts)
    return;
  int64_t taken = 0;
  for (int64_t j = 0; j < choices; ++j)
    for (int64_t t = 0; t < tokens; ++t) {
      const int64_t n = t * choices + j;
      const Id id = ids[n];
      if (id == e)
        out[n] = taken++ < capacity ? id : Id(-1);
      else if (e == 0 && (id < 0 || id >= experts))
        out[n] = id;
    }
}

} // namespace

void dsrt::cuda::expert_capacity(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *ids,
                                 int64_t experts, int64_t choices, int64_t capacity) {
  const char *k = "expert_capacity";
  const checks::CapacityShape s = checks::expertCapacity(out, ids, experts, choices, capacity);
  if (!s.rows)
    return;
  if (ids->dtype == DSRT_I64)
    capacityKernel<int64_t><<<blocksFor(experts), kThreads, 0, stream(ctx)>>>(
        (int64_t *)out->data, (const int64_t *)ids->data, s.tokens, s.choices, experts,
        capacity);
  else
    capacityKernel<int32_t><<<blocksFor(experts), kThreads, 0, stream(ctx)>>>(
        (int32_t *)out->data, (const int32_t *)ids->data, s.tokens, s.choices, experts,
        capacity);
  launched(k);
}

void dsrt::cuda::top_k(dsrt_context *ctx, dsrt_tensor *values, dsrt_tensor *indices,
                       const dsrt_tensor *in, int32_t smallest) {
  const char *k = "top_k";
  const checks::TopKShape s = checks::topK(values, indices, in);
  if (!values->numel)
    return;
  if (in->dtype == DSRT_I64)
    topKKernel<int64_t><<<blocksFor(s.rows), kThreads, 0, stream(ctx)>>>(
        (int64_t *)values->data, (int64_t *)indices->data, (const int64_t *)in->data, s.rows, s.n,
        s.k, smallest != 0);
  else
    topKKernel<float><<<blocksFor(s.rows), kThreads, 0, stream(ctx)>>>(
        (float *)values->data, (int64_t *)indices->data, (const float *)in->data, s.rows, s.n,
        s.k, smallest != 0);
  launched(k);
}

void dsrt::cuda::expert_linear(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *x,
                               const dsrt_tensor *w, const dsrt_tensor *ids, int32_t flags) {
  const char *k = "expert_linear";
  const int32_t transposed = flags & DSRT_EXPERT_TRANSPOSED ? 1 : 0; // unrouted rows: zeros
  const checks::ExpertShape s = checks::expertLinear(k, out, x, w, ids, transposed);
  if (!out->numel)
    return;
  expertLinearKernel<<<blocksFor(s.N * s.out), kThreads, 0, stream(ctx)>>>(
      (float *)out->data, (const float *)x->data, (const float *)w->data, ids->data,
      ids->dtype == DSRT_I64, s.N, s.E, s.in, s.out, transposed);
  launched(k);
}

void dsrt::cuda::expert_linear_grad_weight(dsrt_context *ctx, dsrt_tensor *dw,
                                           const dsrt_tensor *x, const dsrt_tensor *dy,
                                           const dsrt_tensor *ids, int32_t transposed) {
  const char *k = "expert_linear_grad_weight";
  const checks::ExpertShape s = checks::expertLinear(k, dy, x, dw, ids, transposed);
  if (!dw->numel)
    return;
  expertLinearGradWeightKernel<<<blocksFor(s.E * s.in * s.out), kThreads, 0, stream(ctx)>>>(
      (float *)dw->data, (const float *)x->data, (const float *)dy->data, ids->data,
      ids->dtype == DSRT_I64, s.N, s.E, s.in, s.out, transposed);
  launched(k);
}
