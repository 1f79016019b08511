// CPU kernels: pooling, hand-written to follow ATen's window rules exactly (kernels/windows.h).
#include "cpu_device.h"
#include "../kernels/windows.h"

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace dsrt;

using ops::PoolShape;
using ops::poolShape;

namespace {
/// The maxima of n windows of one output row, KH x KW (known at compile time) from input row
/// hs, stride sw, whole (inside the plane): vectorized over the outputs, branch-free (random
/// data mispredicts a branch every other element), as ops::maxIndex: NaN wins, ties keep the
/// first. mx gets the values, best their plane indices.
template <int KH, int KW, int SW>
DSRT_CPU_CLONES void maxRowWhole(const float *x, int64_t W, int64_t hs, int64_t sw, int64_t n,
                                 float *mx, int32_t *best) {
  if constexpr (SW > 0) // a stride known at compile time: shuffles, not gathers
    sw = SW;
  const float *rows[KH];
  for (int h = 0; h < KH; ++h)
    rows[h] = x + (hs + h) * W;
  const int32_t base = (int32_t)(hs * W), w32 = (int32_t)W;
#pragma omp simd
  for (int64_t ow = 0; ow < n; ++ow) {
    const int64_t ws = ow * sw;
    const int32_t b0 = base + (int32_t)ws;
    float m = -INFINITY;
    int32_t b = b0;
    for (int h = 0; h < KH; ++h)
      for (int w = 0; w < KW; ++w) {
        const float v = rows[h][ws + w];
        const bool take = (v > m) | (v != v);
        b = take ? b0 + h * w32 + w : b;
        m = take ? v : m;
      }
    mx[ow] = m;
    best[ow] = b;
  }
}

/// max_pool2d's gradient over the n whole windows of one output row when 2x2 windows tile
/// the input (stride 2, no padding or dilation): each input element of a window gets dy where
/// it is the window's first maximum and 0 elsewhere, written at once, with no zeroing pass and
/// no scatter. x0, x1 (d0, d1) are the window's two input rows. Without NaN in the windows;
/// returns whether there was one (the caller then redoes the row: NaN wins, as in ATen).
DSRT_CPU_CLONES int maxGradRowTiled2x2(const float *__restrict x0, const float *__restrict x1,
                                       int64_t n, const float *__restrict g,
                                       float *__restrict d0, float *__restrict d1) {
  int nan = 0;
#pragma omp simd reduction(| : nan)
  for (int64_t ow = 0; ow < n; ++ow) {
    const float v0 = x0[2 * ow], v1 = x0[2 * ow + 1], v2 = x1[2 * ow], v3 = x1[2 * ow + 1];
    float m = v0, b = 0.f; // b as float: GCC vectorizes float selects, not int ones
    b = v1 > m ? 1.f : b;
    m = v1 > m ? v1 : m;
    b = v2 > m ? 2.f : b;
    m = v2 > m ? v2 : m;
    b = v3 > m ? 3.f : b;
    nan |= (v0 != v0) | (v1 != v1) | (v2 != v2) | (v3 != v3);
    const float gv = g[ow];
    d0[2 * ow] = b == 0.f ? gv : 0.f;
    d0[2 * ow + 1] = b == 1.f ? gv : 0.f;
    d1[2 * ow] = b == 2.f ? gv : 0.f;
    d1[2 * ow + 1] = b == 3.f ? gv : 0.f;
  }
  return nan;
}

/// The sum of a window's rows [hs, he) x [ws, we) of a plane W wide, vectorized along the rows
/// (reassociated, in f32 lanes; whole rows as one contiguous run).
DSRT_CPU_CLONES float windowSum(const float *xp, int64_t W, int64_t hs, int64_t he, int64_t ws,
                                int64_t we) {
  if (ws == 0 && we == W) { // whole rows: one run from row hs
    xp += hs * W;
    we = (he - hs) * W;
    hs = 0, he = 1;
  }
  float sum = 0;
  for (int64_t h = hs; h < he; ++h) {
    const float *r = xp + h * W;
    float row = 0;
#pragma omp simd reduction(+ : row)
    for (int64_t w = ws; w < we; ++w)
      row += r[w];
    sum += row;
  }
  return sum;
}

/// max_pool2d over one plane where every window starts inside it (no padding, no dilation):
/// calls at(i, o, v) with the plane index i of output o's maximum v. False where the windows
/// are not plain (the caller takes ops::maxIndex's general loop).
template <class At>
bool maxPlane(const float *x, const PoolShape &s, int64_t kh, int64_t kw, int64_t sh,
              int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw, At at) {
  if (ph || pw || (dh != 1 && kh > 1) || (dw != 1 && kw > 1) || s.H * s.W > INT32_MAX)
    return false;
  void (*whole)(const float *, int64_t, int64_t, int64_t, int64_t, float *, int32_t *) =
      kh == 2 && kw == 2   ? (sw == 2 ? maxRowWhole<2, 2, 2> : maxRowWhole<2, 2, 0>)
      : kh == 3 && kw == 3 ? (sw == 2 ? maxRowWhole<3, 3, 2> : maxRowWhole<3, 3, 0>)
                           : nullptr;
  float mx[256];
  int32_t best[256];
  for (int64_t oh = 0; oh < s.OH; ++oh) {
    const int64_t hs = oh * sh, he = std::min(hs + kh, s.H);
    int64_t ow = 0;
    if (whole && he - hs == kh) { // the whole windows of this row, 256 at a time
      const int64_t n = std::min(s.OW, (s.W - kw) / sw + 1);
      for (int64_t o0 = 0; o0 < n; o0 += 256) {
        const int64_t len = std::min<int64_t>(256, n - o0);
        whole(x + o0 * sw, s.W, hs, sw, len, mx, best);
        for (int64_t j = 0; j < len; ++j)
          at(best[j] + o0 * sw, oh * s.OW + o0 + j, mx[j]);
      }
      ow = n;
    }
    for (; ow < s.OW; ++ow) { // clipped windows (ceil_mode), other sizes: ATen's scalar rule
      float m;
      const int64_t b = ops::maxIndex(x, s, oh, ow, kh, kw, sh, sw, 0, 0, 1, 1, m);
      at(b, oh * s.OW + ow, m);
    }
  }
  return true;
}
} // namespace

void dsrt::cpu::max_pool2d(dsrt_context *, dsrt_tensor *out, const dsrt_tensor *x, int64_t kh,
                                int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
                                int64_t dh, int64_t dw) {
  DSRT_PROFILE("max_pool2d");
  PoolShape s = poolShape("max_pool2d", x, out);
  const float *X = (const float *)x->data;
  float *Y = (float *)out->data;
#pragma omp parallel for schedule(static) if (x->numel > kParallelGrain)
  for (int64_t p = 0; p < s.planes; ++p) {
    float *y = Y + p * s.OH * s.OW;
    if (maxPlane(X + p * s.H * s.W, s, kh, kw, sh, sw, ph, pw, dh, dw,
                 [y](int64_t, int64_t o, float v) { y[o] = v; }))
      continue;
    for (int64_t oh = 0; oh < s.OH; ++oh)
      for (int64_t ow = 0; ow < s.OW; ++ow) {
        float v;
        ops::maxIndex(X + p * s.H * s.W, s, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, v);
        y[oh * s.OW + ow] = v;
      }
  }
}

void dsrt::cpu::max_pool2d_grad(dsrt_context *, dsrt_tensor *dx, const dsrt_tensor *x,
                                     const dsrt_tensor *dy, int64_t kh, int64_t kw, int64_t sh,
                                     int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw) {
  DSRT_PROFILE("max_pool2d_grad");
  const char *k = "max_pool2d_grad";
  PoolShape s = poolShape(k, x, dy);
  checkSameShape(k, dx, x);
  const float *X = (const float *)x->data, *G = (const float *)dy->data;
  float *DX = (float *)dx->data;
#pragma omp parallel for schedule(static) if (x->numel > kParallelGrain)
  for (int64_t p = 0; p < s.planes; ++p) {
    float *d = DX + p * s.H * s.W;
    const float *g = G + p * s.OH * s.OW;
    bool nan = false;
    if (kh == 2 && kw == 2 && sh == 2 && sw == 2 && !ph && !pw && s.OH == s.H / 2 &&
        s.OW == s.W / 2) { // 2x2 windows that tile the plane (an odd last row / column aside)
      for (int64_t oh = 0; oh < s.OH && !nan; ++oh) {
        const float *x0 = X + p * s.H * s.W + 2 * oh * s.W;
        nan = maxGradRowTiled2x2(x0, x0 + s.W, s.OW, g + oh * s.OW, d + 2 * oh * s.W,
                                 d + (2 * oh + 1) * s.W);
        if (s.W % 2) {
          d[2 * oh * s.W + s.W - 1] = 0.f;
          d[(2 * oh + 1) * s.W + s.W - 1] = 0.f;
        }
      }
      if (s.H % 2)
        std::memset(d + (s.H - 1) * s.W, 0, s.W * sizeof(float));
      if (!nan)
        continue;
    }
    std::memset(d, 0, s.H * s.W * sizeof(float));
    if (maxPlane(X + p * s.H * s.W, s, kh, kw, sh, sw, ph, pw, dh, dw,
                 [d, g](int64_t i, int64_t o, float) { d[i] += g[o]; }))
      continue;
    for (int64_t oh = 0; oh < s.OH; ++oh)
      for (int64_t ow = 0; ow < s.OW; ++ow) {
        float v;
        int64_t i = ops::maxIndex(X + p * s.H * s.W, s, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, v);
        d[i] += G[(p * s.OH + oh) * s.OW + ow];
      }
  }
}

using ops::avgWindow;

void dsrt::cpu::avg_pool2d(dsrt_context *, dsrt_tensor *out, const dsrt_tensor *x, int64_t kh,
                                int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
                                int32_t count_include_pad) {
  DSRT_PROFILE("avg_pool2d");
  PoolShape s = poolShape("avg_pool2d", x, out);
  const float *X = (const float *)x->data;
  float *Y = (float *)out->data;
#pragma omp parallel for schedule(static) if (x->numel > kParallelGrain)
  for (int64_t p = 0; p < s.planes; ++p)
    for (int64_t oh = 0; oh < s.OH; ++oh)
      for (int64_t ow = 0; ow < s.OW; ++ow) {
        int64_t hs, he, ws, we, div;
        avgWindow(s, oh, ow, kh, kw, sh, sw, ph, pw, count_include_pad, hs, he, ws, we, div);
        const float *xp = X + p * s.H * s.W;
        float sum = 0;
        for (int64_t h = hs; h < he; ++h)
          for (int64_t w = ws; w < we; ++w)
            sum += xp[h * s.W + w];
        Y[(p * s.OH + oh) * s.OW + ow] = div ? sum / (float)div : 0.f;
      }
}

void dsrt::cpu::avg_pool2d_grad(dsrt_context *, dsrt_tensor *dx, const dsrt_tensor *dy,
                                     int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph,
                                     int64_t pw, int32_t count_include_pad) {
  DSRT_PROFILE("avg_pool2d_grad");
  PoolShape s = poolShape("avg_pool2d_grad", dx, dy);
  const float *G = (const float *)dy->data;
  float *DX = (float *)dx->data;
#pragma omp parallel for schedule(static) if (dx->numel > kParallelGrain)
  for (int64_t p = 0; p < s.planes; ++p) {
    float *d = DX + p * s.H * s.W;
    std::memset(d, 0, s.H * s.W * sizeof(float));
    for (int64_t oh = 0; oh < s.OH; ++oh)
      for (int64_t ow = 0; ow < s.OW; ++ow) {
        int64_t hs, he, ws, we, div;
        avgWindow(s, oh, ow, kh, kw, sh, sw, ph, pw, count_include_pad, hs, he, ws, we, div);
        if (!div)
          continue;
        float g = G[(p * s.OH + oh) * s.OW + ow] / (float)div;
        for (int64_t h = hs; h < he; ++h)
          for (int64_t w = ws; w < we; ++w)
            d[h * s.W + w] += g;
      }
  }
}

void dsrt::cpu::adaptive_avg_pool2d(dsrt_context *, dsrt_tensor *out, const dsrt_tensor *x) {
  DSRT_PROFILE("adaptive_avg_pool2d");
  PoolShape s = poolShape("adaptive_avg_pool2d", x, out);
  const float *X = (const float *)x->data;
  float *Y = (float *)out->data;
#pragma omp parallel for schedule(static) if (x->numel > kParallelGrain)
  for (int64_t p = 0; p < s.planes; ++p)
    for (int64_t oh = 0; oh < s.OH; ++oh) {
      int64_t hs, he;
      ops::adaptiveWindow(oh, s.H, s.OH, hs, he);
      for (int64_t ow = 0; ow < s.OW; ++ow) {
        int64_t ws, we;
        ops::adaptiveWindow(ow, s.W, s.OW, ws, we);
        const float sum = windowSum(X + p * s.H * s.W, s.W, hs, he, ws, we);
        Y[(p * s.OH + oh) * s.OW + ow] = sum / (float)((he - hs) * (we - ws));
      }
    }
}

void dsrt::cpu::adaptive_avg_pool2d_grad(dsrt_context *, dsrt_tensor *dx,
                                              const dsrt_tensor *dy) {
  DSRT_PROFILE("adaptive_avg_pool2d_grad");
  PoolShape s = poolShape("adaptive_avg_pool2d_grad", dx, dy);
  const float *G = (const float *)dy->data;
  float *DX = (float *)dx->data;
#pragma omp parallel for schedule(static) if (dx->numel > kParallelGrain)
  for (int64_t p = 0; p < s.planes; ++p) {
    float *d = DX + p * s.H * s.W;
    if (s.OH == 1 && s.OW == 1) { // global pooling: the plane is one window
      std::fill(d, d + s.H * s.W, G[p] / (float)(s.H * s.W));
      continue;
    }
    std::memset(d, 0, s.H * s.W * sizeof(float));
    ops::adaptivePoolGradPlane(d, G, s, p);
  }
}
