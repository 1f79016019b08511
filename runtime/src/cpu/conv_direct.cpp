// CPU kernels: 2-D convolution as direct loops, for a runtime built without oneDNN (the GPU
// machine's standalone build, where the CPU is the conformance suite's reference). One
// result element each, kernels/windows.h's formulas (the CUDA kernels' own).
#include "../kernels/checks.h"
#include "../kernels/windows.h"
#include "cpu_device.h"

using namespace dsrt;

void dsrt::cpu::conv2d(dsrt_context *, dsrt_tensor *out, const dsrt_tensor *x,
                       const dsrt_tensor *w, const dsrt_tensor *bias, int64_t stride_h,
                       int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t dil_h,
                       int64_t dil_w, int64_t groups) {
  DSRT_PROFILE("conv2d");
  const char *k = "conv2d";
  const ops::ConvShape c =
      ops::convShape(k, x, w, out, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups);
  const float *b = checks::optF32(k, bias, c.O, "bias");
  const float *X = (const float *)x->data, *W = (const float *)w->data;
  float *Y = (float *)out->data;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < out->numel; ++i)
    Y[i] = ops::convAt(X, W, c, i) + (b ? b[(i / (c.OW * c.OH)) % c.O] : 0.f);
}

void dsrt::cpu::conv2d_grad_input(dsrt_context *, dsrt_tensor *dx, const dsrt_tensor *dy,
                                  const dsrt_tensor *w, int64_t stride_h, int64_t stride_w,
                                  int64_t pad_h, int64_t pad_w, int64_t dil_h, int64_t dil_w,
                                  int64_t groups) {
  DSRT_PROFILE("conv2d_grad_input");
  const ops::ConvShape c = ops::convShape("conv2d_grad_input", dx, w, dy, stride_h, stride_w,
                                          pad_h, pad_w, dil_h, dil_w, groups);
  const float *G = (const float *)dy->data, *W = (const float *)w->data;
  float *DX = (float *)dx->data;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < dx->numel; ++i)
    DX[i] = ops::convGradInputAt(G, W, c, i);
}

void dsrt::cpu::conv2d_grad_weight(dsrt_context *ctx, dsrt_tensor *dw, dsrt_tensor *dbias,
                                   const dsrt_tensor *x, const dsrt_tensor *dy, int64_t stride_h,
                                   int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t dil_h,
                                   int64_t dil_w, int64_t groups) {
  DSRT_PROFILE("conv2d_grad_weight");
  const char *k = "conv2d_grad_weight";
  const ops::ConvShape c =
      ops::convShape(k, x, dw, dy, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups);
  checks::optF32(k, dbias, c.O, "dbias");
  const float *X = (const float *)x->data, *G = (const float *)dy->data;
  float *DW = (float *)dw->data;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < dw->numel; ++i)
    DW[i] = ops::convGradWeightAt(X, G, c, i);
  if (dbias) // the sum of dy over all but the channel dim: [N, O, OH, OW] or [O, OH, OW]
    dsrt_reduce(ctx, DSRT_SUM, dbias, dy, dy->rank == 4 ? 0xd : 0x6);
}
