//===- paged_attention.cu - CUDA kernels of generation's paged key/value cache -===//
//
// The reference forms of dsrt_cache_write and dsrt_paged_attention on the GPU: one thread per
// element written, and one thread per (sequence, query head, new token) with an online softmax
// over the sequence's cached positions (widths up to kMaxWidth). Page tables and lengths live
// on the device, so a bad one is reported through the device's error word and ends the job
// when the host next waits (CudaDevice::checkErrors).
//
#include "../kernels/checks.h"
#include "cuda_device.h"
#include "half_bits.cuh"

#include <cmath>

using namespace dsrt;
using namespace dsrt::cuda;
using checks::PagedShape;

namespace {

constexpr int64_t kMaxWidth = 256;

template <class S>
__global__ void cacheWriteKernel(S *kc, S *vc, const S *k, const S *v, const int64_t *slots,
                                 PagedShape s, int64_t *errors) {
  const int64_t W = s.E + s.Ev; // a token's key then value elements, per head
  DSRT_GRID_STRIDE(i, s.B * s.Hk * s.T * W) {
    const int64_t c = i % W, t = (i / W) % s.T, h = (i / (W * s.T)) % s.Hk,
                  b = i / (W * s.T * s.Hk);
    const int64_t at = slots[b * s.T + t];
    if (at < 0)
      continue;
    if (at >= s.N * s.P) {
      report(errors, kSlotOutOfRange, at);
      continue;
    }
    const int64_t row = ((at / s.P) * s.Hk + h) * s.P + at % s.P, src = (b * s.Hk + h) * s.T + t;
    if (c < s.E)
      kc[row * s.E + c] = k[src * s.E + c];
    else
      vc[row * s.Ev + c - s.E] = v[src * s.Ev + c - s.E];
  }
}

template <class S>
__global__ void pagedAttentionKernel(S *out, const S *Q, const S *kc, const S *vc,
                                     const int64_t *pages, const int64_t *contextLens,
                                     const int64_t *qLens, PagedShape s, float scale,
                                     int64_t *errors) {
  DSRT_GRID_STRIDE(row, s.B * s.Hq * s.T) {
    const int64_t t = row % s.T, h = (row / s.T) % s.Hq, b = row / (s.T * s.Hq);
    const int64_t kh = h % s.Hk, ql = qLens[b], cl = contextLens[b];
    float acc[kMaxWidth];
    for (int64_t c = 0; c < s.Ev; ++c)
      acc[c] = 0.f;
    float m = -INFINITY, l = 0.f;
    if (ql < 0 || ql > s.T || cl < ql || cl > s.maxPages * s.P) {
      report(errors, kLengthOutOfRange, b);
    } else if (t < ql) {
      const S *q = Q + row * s.E;
      for (int64_t j = 0; j <= cl - ql + t; ++j) {
        const int64_t page = pages[b * s.maxPages + j / s.P];
        if (page < 0 || page >= s.N) {
          report(errors, kPageOutOfRange, page);
          break;
        }
        const int64_t r = (page * s.Hk + kh) * s.P + j % s.P;
        float dot = 0.f;
        for (int64_t e = 0; e < s.E; ++e)
          dot += (float)load(q[e]) * (float)load(kc[r * s.E + e]);
        const float sc = dot * scale, mnew = fmaxf(m, sc);
        const float alpha = m == -INFINITY ? 0.f : expf(m - mnew), p = expf(sc - mnew);
        l = l * alpha + p;
        for (int64_t c = 0; c < s.Ev; ++c)
          acc[c] = acc[c] * alpha + p * (float)load(vc[r * s.Ev + c]);
        m = mnew;
      }
    }
    for (int64_t c = 0; c < s.Ev; ++c)
      out[row * s.Ev + c] = store<S>(l > 0.f ? acc[c] / l : 0.f);
  }
}

} // namespace

void dsrt::cuda::cache_write(dsrt_context *ctx, dsrt_tensor *kCache, dsrt_tensor *vCache,
                             const dsrt_tensor *k, const dsrt_tensor *v,
                             const dsrt_tensor *slots) {
  const char *kn = "cache_write";
  const PagedShape s = checks::cacheWrite(kCache, vCache, k, v, slots);
  if (!k->numel)
    return;
  dispatchFloatOrHalf(kn, s.dtype, [&](auto tag) {
    using S = decltype(tag);
    cacheWriteKernel<S><<<blocksFor(s.B * s.Hk * s.T * (s.E + s.Ev)), kThreads, 0,
                          stream(ctx)>>>((S *)kCache->data, (S *)vCache->data,
                                         (const S *)k->data, (const S *)v->data,
                                         (const int64_t *)slots->data, s, device(ctx).errors);
  });
  launched(kn);
}

void dsrt::cuda::paged_attention(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *q,
                                 const dsrt_tensor *kCache, const dsrt_tensor *vCache,
                                 const dsrt_tensor *pages, const dsrt_tensor *contextLens,
                                 const dsrt_tensor *qLens, double scale) {
  const char *kn = "paged_attention";
  const PagedShape s =
      checks::pagedAttention(out, q, kCache, vCache, pages, contextLens, qLens);
  if (s.Ev > kMaxWidth)
    fail(kn, "value width %lld exceeds the CUDA kernel's %lld", (long long)s.Ev,
         (long long)kMaxWidth);
  if (!out->numel)
    return;
  dispatchFloatOrHalf(kn, s.dtype, [&](auto tag) {
    using S = decltype(tag);
    pagedAttentionKernel<S><<<blocksFor(s.B * s.Hq * s.T), kThreads, 0, stream(ctx)>>>(
        (S *)out->data, (const S *)q->data, (const S *)kCache->data, (const S *)vCache->data,
        (const int64_t *)pages->data, (const int64_t *)contextLens->data,
        (const int64_t *)qLens->data, s, (float)scale, device(ctx).errors);
  });
  launched(kn);
}
