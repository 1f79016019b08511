// CPU kernels: pooling, hand-written to follow ATen's window rules exactly (kernels/windows.h).
#include "cpu_device.h"
#include "../kernels/windows.h"

#include <cstring>

using namespace dsrt;

using ops::PoolShape;
using ops::poolShape;

void dsrt::cpu::max_pool2d(dsrt_context *, dsrt_tensor *out, const dsrt_tensor *x, int64_t kh,
                                int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
                                int64_t dh, int64_t dw) {
  DSRT_PROFILE("max_pool2d");
  PoolShape s = poolShape("max_pool2d", x, out);
  const float *X = (const float *)x->data;
  float *Y = (float *)out->data;
#pragma omp parallel for schedule(static) if (x->numel > kParallelGrain)
  for (int64_t p = 0; p < s.planes; ++p)
    for (int64_t oh = 0; oh < s.OH; ++oh)
      for (int64_t ow = 0; ow < s.OW; ++ow) {
        float v;
        ops::maxIndex(X + p * s.H * s.W, s, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, v);
        Y[(p * s.OH + oh) * s.OW + ow] = v;
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
    std::memset(d, 0, s.H * s.W * sizeof(float));
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
        const float *xp = X + p * s.H * s.W;
        float sum = 0;
        for (int64_t h = hs; h < he; ++h)
          for (int64_t w = ws; w < we; ++w)
            sum += xp[h * s.W + w];
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
    std::memset(d, 0, s.H * s.W * sizeof(float));
    for (int64_t oh = 0; oh < s.OH; ++oh) {
      int64_t hs, he;
      ops::adaptiveWindow(oh, s.H, s.OH, hs, he);
      for (int64_t ow = 0; ow < s.OW; ++ow) {
        int64_t ws, we;
        ops::adaptiveWindow(ow, s.W, s.OW, ws, we);
        float g = G[(p * s.OH + oh) * s.OW + ow] / (float)((he - hs) * (we - ws));
        for (int64_t h = hs; h < he; ++h)
          for (int64_t w = ws; w < we; ++w)
            d[h * s.W + w] += g;
      }
    }
  }
}
