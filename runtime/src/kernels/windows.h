//===- windows.h - pooling and convolution windows, shared by every device ------===//
//
// ATen's window rules for max/avg/adaptive pooling, as __host__ __device__ functions: the CPU
// and CUDA kernels call these, so both pick the same elements and divisors.
//
#ifndef DSRT_KERNELS_WINDOWS_H
#define DSRT_KERNELS_WINDOWS_H

#include "scalar_ops.h"

namespace dsrt::ops {

/// planes x [H, W] in, planes x [OH, OW] out.
struct PoolShape {
  int64_t planes, H, W, OH, OW;
};

/// Index (into the plane) of the first maximum of the window of output (oh, ow), as ATen's
/// max_pool2d: NaN wins, ties keep the first.
DSRT_HD int64_t maxIndex(const float *x, const PoolShape &s, int64_t oh, int64_t ow, int64_t kh,
                         int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh,
                         int64_t dw, float &val) {
  int64_t hs = oh * sh - ph, ws = ow * sw - pw;
  int64_t he = hs + (kh - 1) * dh + 1, we = ws + (kw - 1) * dw + 1;
  he = he < s.H ? he : s.H;
  we = we < s.W ? we : s.W;
  while (hs < 0)
    hs += dh;
  while (ws < 0)
    ws += dw;
  int64_t best = hs * s.W + ws;
  float mx = -INFINITY;
  for (int64_t h = hs; h < he; h += dh)
    for (int64_t w = ws; w < we; w += dw) {
      float v = x[h * s.W + w];
      if (v > mx || m_isnan(v)) {
        mx = v;
        best = h * s.W + w;
      }
    }
  val = mx;
  return best;
}

/// ATen's avg_pool2d window [hs, he) x [ws, we) and divisor for output (oh, ow).
DSRT_HD void avgWindow(const PoolShape &s, int64_t oh, int64_t ow, int64_t kh, int64_t kw,
                       int64_t sh, int64_t sw, int64_t ph, int64_t pw, bool includePad,
                       int64_t &hs, int64_t &he, int64_t &ws, int64_t &we, int64_t &div) {
  hs = oh * sh - ph;
  ws = ow * sw - pw;
  he = hs + kh < s.H + ph ? hs + kh : s.H + ph;
  we = ws + kw < s.W + pw ? ws + kw : s.W + pw;
  int64_t poolSize = (he - hs) * (we - ws);
  hs = hs > 0 ? hs : 0;
  ws = ws > 0 ? ws : 0;
  he = he < s.H ? he : s.H;
  we = we < s.W ? we : s.W;
  div = includePad ? poolSize : (he - hs) * (we - ws);
}

/// adaptive_avg_pool2d's window [begin, end) of output i of `out` over `in` elements.
DSRT_HD void adaptiveWindow(int64_t i, int64_t in, int64_t out, int64_t &begin, int64_t &end) {
  begin = i * in / out;
  end = ((i + 1) * in + out - 1) / out;
}

/// Adaptive average pooling's gradient of plane `p`: each output's gradient, divided by its
/// window's size, added to the window's inputs of `d` (the plane, zeroed by the caller).
DSRT_HD void adaptivePoolGradPlane(float *d, const float *G, const PoolShape &s, int64_t p) {
  for (int64_t oh = 0; oh < s.OH; ++oh) {
    int64_t hs, he;
    adaptiveWindow(oh, s.H, s.OH, hs, he);
    for (int64_t ow = 0; ow < s.OW; ++ow) {
      int64_t ws, we;
      adaptiveWindow(ow, s.W, s.OW, ws, we);
      float g = G[(p * s.OH + oh) * s.OW + ow] / (float)((he - hs) * (we - ws));
      for (int64_t h = hs; h < he; ++h)
        for (int64_t w = ws; w < we; ++w)
          d[h * s.W + w] += g;
    }
  }
}

/// A 2-D convolution: x [N, C, H, W], w [O, C/groups, KH, KW], y [N, O, OH, OW].
struct ConvShape {
  int64_t N, C, H, W, O, KH, KW, OH, OW;
  int64_t sh, sw, ph, pw, dh, dw, groups;
};

// Direct convolution, one result element each (the CUDA kernels, and the CPU's loops when it
// is built without oneDNN): sums in float in (channel, kh, kw) order.

/// y[i] for flat output index i (without the bias).
DSRT_HD float convAt(const float *X, const float *Wt, const ConvShape &c, int64_t i) {
  int64_t cg = c.C / c.groups, og = c.O / c.groups;
  int64_t ow = i % c.OW, oh = (i / c.OW) % c.OH, o = (i / (c.OW * c.OH)) % c.O,
          n = i / (c.OW * c.OH * c.O);
  int64_t g = o / og;
  float acc = 0.f;
  for (int64_t ci = 0; ci < cg; ++ci) {
    int64_t ch = g * cg + ci;
    for (int64_t kh = 0; kh < c.KH; ++kh) {
      int64_t h = oh * c.sh - c.ph + kh * c.dh;
      if (h < 0 || h >= c.H)
        continue;
      for (int64_t kw = 0; kw < c.KW; ++kw) {
        int64_t w = ow * c.sw - c.pw + kw * c.dw;
        if (w < 0 || w >= c.W)
          continue;
        acc += X[((n * c.C + ch) * c.H + h) * c.W + w] * Wt[((o * cg + ci) * c.KH + kh) * c.KW + kw];
      }
    }
  }
  return acc;
}

/// dx[i] for flat input index i.
DSRT_HD float convGradInputAt(const float *DY, const float *Wt, const ConvShape &c, int64_t i) {
  int64_t cg = c.C / c.groups, og = c.O / c.groups;
  int64_t w = i % c.W, h = (i / c.W) % c.H, ch = (i / (c.W * c.H)) % c.C,
          n = i / (c.W * c.H * c.C);
  int64_t g = ch / cg, ci = ch % cg;
  float acc = 0.f;
  for (int64_t oi = 0; oi < og; ++oi) {
    int64_t o = g * og + oi;
    for (int64_t kh = 0; kh < c.KH; ++kh) {
      int64_t th = h + c.ph - kh * c.dh;
      if (th < 0 || th % c.sh)
        continue;
      int64_t oh = th / c.sh;
      if (oh >= c.OH)
        continue;
      for (int64_t kw = 0; kw < c.KW; ++kw) {
        int64_t tw = w + c.pw - kw * c.dw;
        if (tw < 0 || tw % c.sw)
          continue;
        int64_t ow = tw / c.sw;
        if (ow >= c.OW)
          continue;
        acc += DY[((n * c.O + o) * c.OH + oh) * c.OW + ow] * Wt[((o * cg + ci) * c.KH + kh) * c.KW + kw];
      }
    }
  }
  return acc;
}

/// dw[i] for flat weight index i.
DSRT_HD float convGradWeightAt(const float *X, const float *DY, const ConvShape &c, int64_t i) {
  int64_t cg = c.C / c.groups, og = c.O / c.groups;
  int64_t kw = i % c.KW, kh = (i / c.KW) % c.KH, ci = (i / (c.KW * c.KH)) % cg,
          o = i / (c.KW * c.KH * cg);
  int64_t ch = (o / og) * cg + ci;
  float acc = 0.f;
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t oh = 0; oh < c.OH; ++oh) {
      int64_t h = oh * c.sh - c.ph + kh * c.dh;
      if (h < 0 || h >= c.H)
        continue;
      for (int64_t ow = 0; ow < c.OW; ++ow) {
        int64_t w = ow * c.sw - c.pw + kw * c.dw;
        if (w < 0 || w >= c.W)
          continue;
        acc += X[((n * c.C + ch) * c.H + h) * c.W + w] * DY[((n * c.O + o) * c.OH + oh) * c.OW + ow];
      }
    }
  return acc;
}

/// The checked shapes of a pooling (x and y f32, rank 3 or 4) and of a convolution (f32; x
/// rank 4, or 3 without the batch): host functions (core/layout.cpp) that end the job naming
/// the kernel on a mismatch.
PoolShape poolShape(const char *k, const dsrt_tensor *x, const dsrt_tensor *y);
ConvShape convShape(const char *k, const dsrt_tensor *x, const dsrt_tensor *w,
                    const dsrt_tensor *y, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
                    int64_t dh, int64_t dw, int64_t g);

} // namespace dsrt::ops

#endif // DSRT_KERNELS_WINDOWS_H
