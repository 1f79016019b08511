//===- conv_pool.cu - CUDA kernels: 2-D convolution and pooling ------------------------===//
//
// Direct convolution (one thread per output, input-gradient and weight-gradient element, each
// kernels/windows.h's formula) and pooling with the CPU's window rules (kernels/windows.h).
// Gradients that scatter (pooling) run one thread per plane, in the CPU's order, no atomics.
//
#include "../kernels/checks.h"
#include "../kernels/windows.h"
#include "cuda_device.h"

using namespace dsrt;
using namespace dsrt::cuda;
using ops::ConvShape;
using ops::PoolShape;

namespace {

__global__ void convKernel(float *Y, const float *X, const float *Wt, const float *bias,
                           ConvShape c) {
  DSRT_GRID_STRIDE(i, c.N * c.O * c.OH * c.OW)
  Y[i] = ops::convAt(X, Wt, c, i) + (bias ? bias[(i / (c.OW * c.OH)) % c.O] : 0.f);
}

__global__ void convGradInputKernel(float *DX, const float *DY, const float *Wt, ConvShape c) {
  DSRT_GRID_STRIDE(i, c.N * c.C * c.H * c.W) DX[i] = ops::convGradInputAt(DY, Wt, c, i);
}

__global__ void convGradWeightKernel(float *DW, const float *X, const float *DY, ConvShape c) {
  DSRT_GRID_STRIDE(i, c.O * (c.C / c.groups) * c.KH * c.KW)
  DW[i] = ops::convGradWeightAt(X, DY, c, i);
}

__global__ void convGradBiasKernel(float *DB, const float *DY, ConvShape c) {
  int64_t o = blockIdx.x, plane = c.OH * c.OW;
  double acc = 0;
  for (int64_t i = threadIdx.x; i < c.N * plane; i += blockDim.x)
    acc += DY[((i / plane) * c.O + o) * plane + i % plane];
  acc = blockReduce(acc, Sum(), 0.0);
  if (threadIdx.x == 0)
    DB[o] = (float)acc;
}

__global__ void maxPoolKernel(float *Y, const float *X, PoolShape s, int64_t kh, int64_t kw,
                              int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh,
                              int64_t dw) {
  DSRT_GRID_STRIDE(i, s.planes * s.OH * s.OW) {
    int64_t ow = i % s.OW, oh = (i / s.OW) % s.OH, p = i / (s.OW * s.OH);
    float v;
    ops::maxIndex(X + p * s.H * s.W, s, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, v);
    Y[i] = v;
  }
}

__global__ void maxPoolGradKernel(float *DX, const float *X, const float *G, PoolShape s,
                                  int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph,
                                  int64_t pw, int64_t dh, int64_t dw) {
  DSRT_GRID_STRIDE(p, s.planes) {
    float *d = DX + p * s.H * s.W;
    for (int64_t j = 0; j < s.H * s.W; ++j)
      d[j] = 0.f;
    for (int64_t oh = 0; oh < s.OH; ++oh)
      for (int64_t ow = 0; ow < s.OW; ++ow) {
        float v;
        int64_t j = ops::maxIndex(X + p * s.H * s.W, s, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, v);
        d[j] += G[(p * s.OH + oh) * s.OW + ow];
      }
  }
}

__global__ void avgPoolKernel(float *Y, const float *X, PoolShape s, int64_t kh, int64_t kw,
                              int64_t sh, int64_t sw, int64_t ph, int64_t pw, bool includePad) {
  DSRT_GRID_STRIDE(i, s.planes * s.OH * s.OW) {
    int64_t ow = i % s.OW, oh = (i / s.OW) % s.OH, p = i / (s.OW * s.OH);
    int64_t hs, he, ws, we, div;
    ops::avgWindow(s, oh, ow, kh, kw, sh, sw, ph, pw, includePad, hs, he, ws, we, div);
    const float *xp = X + p * s.H * s.W;
    float sum = 0;
    for (int64_t h = hs; h < he; ++h)
      for (int64_t w = ws; w < we; ++w)
        sum += xp[h * s.W + w];
    Y[i] = div ? sum / (float)div : 0.f;
  }
}

__global__ void avgPoolGradKernel(float *DX, const float *G, PoolShape s, int64_t kh, int64_t kw,
                                  int64_t sh, int64_t sw, int64_t ph, int64_t pw,
                                  bool includePad) {
  DSRT_GRID_STRIDE(p, s.planes) {
    float *d = DX + p * s.H * s.W;
    for (int64_t j = 0; j < s.H * s.W; ++j)
      d[j] = 0.f;
    for (int64_t oh = 0; oh < s.OH; ++oh)
      for (int64_t ow = 0; ow < s.OW; ++ow) {
        int64_t hs, he, ws, we, div;
        ops::avgWindow(s, oh, ow, kh, kw, sh, sw, ph, pw, includePad, hs, he, ws, we, div);
        if (!div)
          continue;
        float g = G[(p * s.OH + oh) * s.OW + ow] / (float)div;
        for (int64_t h = hs; h < he; ++h)
          for (int64_t w = ws; w < we; ++w)
            d[h * s.W + w] += g;
      }
  }
}

__global__ void adaptivePoolKernel(float *Y, const float *X, PoolShape s) {
  DSRT_GRID_STRIDE(i, s.planes * s.OH * s.OW) {
    int64_t ow = i % s.OW, oh = (i / s.OW) % s.OH, p = i / (s.OW * s.OH);
    int64_t hs, he, ws, we;
    ops::adaptiveWindow(oh, s.H, s.OH, hs, he);
    ops::adaptiveWindow(ow, s.W, s.OW, ws, we);
    const float *xp = X + p * s.H * s.W;
    float sum = 0;
    for (int64_t h = hs; h < he; ++h)
      for (int64_t w = ws; w < we; ++w)
        sum += xp[h * s.W + w];
    Y[i] = sum / (float)((he - hs) * (we - ws));
  }
}

__global__ void adaptivePoolGradKernel(float *DX, const float *G, PoolShape s) {
  DSRT_GRID_STRIDE(p, s.planes) {
    float *d = DX + p * s.H * s.W;
    for (int64_t j = 0; j < s.H * s.W; ++j)
      d[j] = 0.f;
    ops::adaptivePoolGradPlane(d, G, s, p);
  }
}

} // namespace

void dsrt::cuda::conv2d(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *x,
                        const dsrt_tensor *w, const dsrt_tensor *bias, int64_t stride_h,
                        int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t dil_h,
                        int64_t dil_w, int64_t groups) {
  const char *k = "conv2d";
  ConvShape c = ops::convShape(k, x, w, out, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups);
  checks::optF32(k, bias, c.O, "bias");
  if (!out->numel)
    return;
  convKernel<<<blocksFor(out->numel), kThreads, 0, stream(ctx)>>>(
      (float *)out->data, (const float *)x->data, (const float *)w->data,
      bias ? (const float *)bias->data : nullptr, c);
  launched(k);
}

void dsrt::cuda::conv2d_grad_input(dsrt_context *ctx, dsrt_tensor *dx, const dsrt_tensor *dy,
                                   const dsrt_tensor *w, int64_t stride_h, int64_t stride_w,
                                   int64_t pad_h, int64_t pad_w, int64_t dil_h, int64_t dil_w,
                                   int64_t groups) {
  const char *k = "conv2d_grad_input";
  ConvShape c = ops::convShape(k, dx, w, dy, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups);
  if (!dx->numel)
    return;
  convGradInputKernel<<<blocksFor(dx->numel), kThreads, 0, stream(ctx)>>>(
      (float *)dx->data, (const float *)dy->data, (const float *)w->data, c);
  launched(k);
}

void dsrt::cuda::conv2d_grad_weight(dsrt_context *ctx, dsrt_tensor *dw, dsrt_tensor *dbias,
                                    const dsrt_tensor *x, const dsrt_tensor *dy, int64_t stride_h,
                                    int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t dil_h,
                                    int64_t dil_w, int64_t groups) {
  const char *k = "conv2d_grad_weight";
  ConvShape c = ops::convShape(k, x, dw, dy, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups);
  if (dw->numel) {
    convGradWeightKernel<<<blocksFor(dw->numel), kThreads, 0, stream(ctx)>>>(
        (float *)dw->data, (const float *)x->data, (const float *)dy->data, c);
    launched(k);
  }
  if (dbias) {
    checks::optF32(k, dbias, c.O, "dbias");
    if (c.O) {
      convGradBiasKernel<<<(unsigned)c.O, kThreads, 0, stream(ctx)>>>((float *)dbias->data,
                                                                      (const float *)dy->data, c);
      launched(k);
    }
  }
}

void dsrt::cuda::max_pool2d(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *x, int64_t kh,
                            int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh,
                            int64_t dw) {
  PoolShape s = ops::poolShape("max_pool2d", x, out);
  if (!out->numel)
    return;
  maxPoolKernel<<<blocksFor(out->numel), kThreads, 0, stream(ctx)>>>(
      (float *)out->data, (const float *)x->data, s, kh, kw, sh, sw, ph, pw, dh, dw);
  launched("max_pool2d");
}

void dsrt::cuda::max_pool2d_grad(dsrt_context *ctx, dsrt_tensor *dx, const dsrt_tensor *x,
                                 const dsrt_tensor *dy, int64_t kh, int64_t kw, int64_t sh,
                                 int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw) {
  const char *k = "max_pool2d_grad";
  PoolShape s = ops::poolShape(k, x, dy);
  checkSameShape(k, dx, x);
  if (!s.planes)
    return;
  maxPoolGradKernel<<<blocksFor(s.planes), kThreads, 0, stream(ctx)>>>(
      (float *)dx->data, (const float *)x->data, (const float *)dy->data, s, kh, kw, sh, sw, ph,
      pw, dh, dw);
  launched(k);
}

void dsrt::cuda::avg_pool2d(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *x, int64_t kh,
                            int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
                            int32_t count_include_pad) {
  PoolShape s = ops::poolShape("avg_pool2d", x, out);
  if (!out->numel)
    return;
  avgPoolKernel<<<blocksFor(out->numel), kThreads, 0, stream(ctx)>>>(
      (float *)out->data, (const float *)x->data, s, kh, kw, sh, sw, ph, pw, count_include_pad);
  launched("avg_pool2d");
}

void dsrt::cuda::avg_pool2d_grad(dsrt_context *ctx, dsrt_tensor *dx, const dsrt_tensor *dy,
                                 int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph,
                                 int64_t pw, int32_t count_include_pad) {
  PoolShape s = ops::poolShape("avg_pool2d_grad", dx, dy);
  if (!s.planes)
    return;
  avgPoolGradKernel<<<blocksFor(s.planes), kThreads, 0, stream(ctx)>>>(
      (float *)dx->data, (const float *)dy->data, s, kh, kw, sh, sw, ph, pw, count_include_pad);
  launched("avg_pool2d_grad");
}

void dsrt::cuda::adaptive_avg_pool2d(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *x) {
  PoolShape s = ops::poolShape("adaptive_avg_pool2d", x, out);
  if (!out->numel)
    return;
  adaptivePoolKernel<<<blocksFor(out->numel), kThreads, 0, stream(ctx)>>>(
      (float *)out->data, (const float *)x->data, s);
  launched("adaptive_avg_pool2d");
}

void dsrt::cuda::adaptive_avg_pool2d_grad(dsrt_context *ctx, dsrt_tensor *dx,
                                          const dsrt_tensor *dy) {
  PoolShape s = ops::poolShape("adaptive_avg_pool2d_grad", dx, dy);
  if (!s.planes)
    return;
  adaptivePoolGradKernel<<<blocksFor(s.planes), kThreads, 0, stream(ctx)>>>(
      (float *)dx->data, (const float *)dy->data, s);
  launched("adaptive_avg_pool2d_grad");
}
