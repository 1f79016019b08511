//===- attention.cu - CUDA kernels: scaled dot-product attention, forward and backward ===//
//
// The reference form of ds.attention on the GPU: one thread per query row, an online softmax
// over the keys (no [L, S] tensor), the row's log-sum-exp kept; the backward recomputes each
// probability from it and adds the keys' and values' gradients atomically into f32 sums.
// Correct at any size, not fast: cuDNN's fused SDPA (cudnn_attention.h) runs the cases it
// takes, these kernels the rest (f32, bool masks, a ring's strictly causal blocks). Widths up
// to kMaxWidth.
//
#include "../kernels/checks.h"
#include "cuda_device.h"
#include "cudnn_attention.h"
#include "half_bits.cuh"

#include <cmath>
#include <cstdlib>
#include <string>

using namespace dsrt;
using namespace dsrt::cuda;

namespace {

constexpr int64_t kMaxWidth = 256;

/// The scaled score of (row, key) after the mask, or -inf where the key is dropped.
template <class S>
__device__ float scoreOf(const S *q, const S *key, const void *mask,
                         const checks::AttentionShape &s,
                         int64_t b, int64_t h, int64_t i, int64_t j, float scale, int maskDtype) {
  float dot = 0.f;
  for (int64_t e = 0; e < s.E; ++e)
    dot += (float)load(q[e]) * (float)load(key[e]);
  float sc = dot * scale;
  if (s.maskKind == 0)
    return sc;
  const int64_t at = b * s.mb + h * s.mh + i * s.ml + j * s.ms;
  if (s.maskKind == 1)
    return ((const uint8_t *)mask)[at] ? sc : -INFINITY;
  if (maskDtype == DSRT_F32)
    return sc + ((const float *)mask)[at];
  return sc + (float)load(((const S *)mask)[at]);
}

/// Query row `row` of [B, Hq, L]: its position, head, batch and first key/value row.
struct Row {
  int64_t i, h, b, kv0;
};
__device__ Row rowOf(const checks::AttentionShape &s, int64_t row) {
  const int64_t i = row % s.L, h = (row / s.L) % s.Hq, b = row / (s.L * s.Hq);
  return {i, h, b, (b * s.Hk + h / (s.Hq / s.Hk)) * s.S};
}

/// The end of query i's keys under a causal kind: j <= i, or j < i (DSRT_CAUSAL_STRICT).
__device__ int64_t causalEnd(int64_t i, int64_t S, int causal) {
  const int64_t end = causal == DSRT_CAUSAL_STRICT ? i : i + 1;
  return end < S ? end : S;
}

template <class S>
__global__ void attentionForward(S *out, float *lse, const S *Q, const S *K, const S *V,
                                 const void *mask, checks::AttentionShape s, float scale,
                                 int causal, int maskDtype) {
  for (int64_t row = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; row < s.B * s.Hq * s.L;
       row += (int64_t)gridDim.x * blockDim.x) {
    const Row r = rowOf(s, row);
    const int64_t i = r.i, h = r.h, b = r.b, kv0 = r.kv0;
    const S *q = Q + row * s.E;
    float m = -INFINITY, l = 0.f, acc[kMaxWidth];
    for (int64_t c = 0; c < s.Ev; ++c)
      acc[c] = 0.f;
    const int64_t jEnd = causal ? causalEnd(i, s.S, causal) : s.S;
    for (int64_t j = 0; j < jEnd; ++j) {
      const float sc = scoreOf(q, K + (kv0 + j) * s.E, mask, s, b, h, i, j, scale, maskDtype);
      if (sc == -INFINITY)
        continue;
      const float mnew = fmaxf(m, sc), alpha = m == -INFINITY ? 0.f : expf(m - mnew);
      const float p = expf(sc - mnew);
      l = l * alpha + p;
      const S *vj = V + (kv0 + j) * s.Ev;
      for (int64_t c = 0; c < s.Ev; ++c)
        acc[c] = acc[c] * alpha + p * (float)load(vj[c]);
      m = mnew;
    }
    for (int64_t c = 0; c < s.Ev; ++c)
      out[row * s.Ev + c] = store<S>(l > 0.f ? acc[c] / l : 0.f);
    lse[row] = l > 0.f ? m + logf(l) : -INFINITY;
  }
}

template <class S>
__global__ void attentionBackward(S *dq, float *dk, float *dv, const S *Q, const S *K,
                                  const S *V, const void *mask, const S *out, const float *lse,
                                  const S *dout, checks::AttentionShape s, float scale,
                                  int causal, int maskDtype) {
  for (int64_t row = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; row < s.B * s.Hq * s.L;
       row += (int64_t)gridDim.x * blockDim.x) {
    const Row r = rowOf(s, row);
    const int64_t i = r.i, h = r.h, b = r.b, kv0 = r.kv0;
    const S *q = Q + row * s.E, *o = out + row * s.Ev, *g = dout + row * s.Ev;
    float dqRow[kMaxWidth], D = 0.f;
    for (int64_t c = 0; c < s.E; ++c)
      dqRow[c] = 0.f;
    for (int64_t c = 0; c < s.Ev; ++c)
      D += (float)load(g[c]) * (float)load(o[c]);
    const float lr = lse[row];
    const int64_t jEnd = lr == -INFINITY ? 0 : causal ? causalEnd(i, s.S, causal) : s.S;
    for (int64_t j = 0; j < jEnd; ++j) {
      const S *kj = K + (kv0 + j) * s.E, *vj = V + (kv0 + j) * s.Ev;
      const float sc = scoreOf(q, kj, mask, s, b, h, i, j, scale, maskDtype);
      if (sc == -INFINITY)
        continue;
      const float p = expf(sc - lr);
      float dp = 0.f;
      for (int64_t c = 0; c < s.Ev; ++c) {
        dp += (float)load(g[c]) * (float)load(vj[c]);
        atomicAdd(dv + (kv0 + j) * s.Ev + c, p * (float)load(g[c]));
      }
      const float ds = p * (dp - D) * scale;
      for (int64_t c = 0; c < s.E; ++c) {
        dqRow[c] += ds * (float)load(kj[c]);
        atomicAdd(dk + (kv0 + j) * s.E + c, ds * (float)load(q[c]));
      }
    }
    for (int64_t c = 0; c < s.E; ++c)
      dq[row * s.E + c] = store<S>(dqRow[c]);
  }
}

template <class S> __global__ void narrow(S *y, const float *x, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    y[i] = store<S>(x[i]);
}

void checkWidths(const char *k, const checks::AttentionShape &s) {
  if (s.E > kMaxWidth || s.Ev > kMaxWidth)
    fail(k, "head widths %lld and %lld exceed the CUDA kernel's %lld", (long long)s.E,
         (long long)s.Ev, (long long)kMaxWidth);
}

/// Whether cuDNN ran the case (`call`), as DSRT_CUDA_ATTENTION chooses: `cudnn` (a case cuDNN
/// refuses ends the job), `ds` (never), unset (where cuDNN takes it).
template <class Call> bool ranOnCudnn(const char *kn, Call &&call) {
  const char *choice = std::getenv("DSRT_CUDA_ATTENTION");
  const std::string c = choice ? choice : "";
  if (!c.empty() && c != "cudnn" && c != "ds")
    fail(kn, "DSRT_CUDA_ATTENTION=%s is not a choice: set it to cudnn (cuDNN's fused attention) "
             "or ds (ds's kernels), or unset it to use cuDNN where it takes the case",
         choice);
  if (c == "ds")
    return false;
  std::string why;
  if (call(why))
    return true;
  if (c == "cudnn")
    fail(kn, "cuDNN's fused attention does not take this case: %s (DSRT_CUDA_ATTENTION=cudnn; "
             "unset it to run ds's kernel where cuDNN does not)",
         why.c_str());
  return false;
}

} // namespace

void dsrt::cuda::attention(dsrt_context *ctx, dsrt_tensor *out, dsrt_tensor *lse,
                           const dsrt_tensor *q, const dsrt_tensor *k, const dsrt_tensor *v,
                           const dsrt_tensor *mask, double scale, int32_t causal) {
  const char *kn = "attention";
  const checks::AttentionShape s = checks::attention(out, lse, q, k, v, mask, causal);
  if (!out->numel)
    return;
  if (ranOnCudnn(kn, [&](std::string &why) {
        return cudnnAttention(ctx, s, out, lse, q, k, v, mask, scale, causal, why);
      }))
    return;
  checkWidths(kn, s);
  dispatchFloatOrHalf(kn, q->dtype, [&](auto tag) {
    using S = decltype(tag);
    attentionForward<S><<<blocksFor(s.B * s.Hq * s.L), kThreads, 0, stream(ctx)>>>(
        (S *)out->data, (float *)lse->data, (const S *)q->data, (const S *)k->data,
        (const S *)v->data, mask ? mask->data : nullptr, s, (float)scale, causal,
        mask ? mask->dtype : -1);
  });
  launched(kn);
}

void dsrt::cuda::attention_grad(dsrt_context *ctx, dsrt_tensor *dq, dsrt_tensor *dk,
                                dsrt_tensor *dv, const dsrt_tensor *q, const dsrt_tensor *k,
                                const dsrt_tensor *v, const dsrt_tensor *mask,
                                const dsrt_tensor *out, const dsrt_tensor *lse,
                                const dsrt_tensor *dout, double scale, int32_t causal) {
  const char *kn = "attention_grad";
  const checks::AttentionShape s =
      checks::attentionGrad(dq, dk, dv, q, k, v, mask, out, lse, dout, causal);
  if (!dq->numel && !dk->numel)
    return;
  if (ranOnCudnn(kn, [&](std::string &why) {
        return cudnnAttentionGrad(ctx, s, dq, dk, dv, q, k, v, mask, out, lse, dout, scale,
                                  causal, why);
      }))
    return;
  checkWidths(kn, s);
  float *sums = (float *)device(ctx).scratch((dk->numel + dv->numel) * sizeof(float));
  float *dkSum = sums, *dvSum = sums + dk->numel;
  check(cudaMemsetAsync(sums, 0, (dk->numel + dv->numel) * sizeof(float), stream(ctx)),
        "cudaMemsetAsync");
  dispatchFloatOrHalf(kn, q->dtype, [&](auto tag) {
    using S = decltype(tag);
    attentionBackward<S><<<blocksFor(s.B * s.Hq * s.L), kThreads, 0, stream(ctx)>>>(
        (S *)dq->data, dkSum, dvSum, (const S *)q->data, (const S *)k->data,
        (const S *)v->data, mask ? mask->data : nullptr, (const S *)out->data,
        (const float *)lse->data, (const S *)dout->data, s, (float)scale, causal,
        mask ? mask->dtype : -1);
    narrow<S><<<blocksFor(dk->numel), kThreads, 0, stream(ctx)>>>((S *)dk->data, dkSum,
                                                                   dk->numel);
    narrow<S><<<blocksFor(dv->numel), kThreads, 0, stream(ctx)>>>((S *)dv->data, dvSum,
                                                                   dv->numel);
  });
  launched(kn);
}
