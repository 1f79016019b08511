//===- optim.cu - CUDA kernel: the fused AdamW update ------------------------------===//
//
// kernels/scalar_ops.h's element update, the CPU's own; the scalars are read on the device
// (no host round trip per step).
//
#include "../kernels/checks.h"
#include "../kernels/scalar_ops.h"
#include "cuda_device.h"

using namespace dsrt;
using namespace dsrt::cuda;

namespace {
__global__ void adamwKernel(float *po, float *mo, float *vo, const float *p, const float *g,
                            const float *m, const float *v, const float *stepSize,
                            const float *bc2Sqrt, const float *decay, const double *beta1,
                            double beta2, double eps, int64_t n) {
  const ops::AdamWScalars s =
      ops::adamwScalars(*stepSize, *bc2Sqrt, *decay, *beta1, beta2, eps);
  DSRT_GRID_STRIDE(i, n) ops::adamw(s, p[i], g[i], m[i], v[i], po[i], mo[i], vo[i]);
}
} // namespace

void dsrt::cuda::adamw_update(dsrt_context *ctx, dsrt_tensor *pOut, dsrt_tensor *mOut,
                              dsrt_tensor *vOut, const dsrt_tensor *p, const dsrt_tensor *g,
                              const dsrt_tensor *m, const dsrt_tensor *v,
                              const dsrt_tensor *stepSize, const dsrt_tensor *bc2Sqrt,
                              const dsrt_tensor *decay, const dsrt_tensor *beta1T, double beta2,
                              double eps) {
  const char *k = "adamw_update";
  checks::adamw(pOut, mOut, vOut, p, g, m, v, stepSize, bc2Sqrt, decay, beta1T);
  if (!p->numel)
    return;
  adamwKernel<<<blocksFor(p->numel), kThreads, 0, stream(ctx)>>>(
      (float *)pOut->data, (float *)mOut->data, (float *)vOut->data, (const float *)p->data,
      (const float *)g->data, (const float *)m->data, (const float *)v->data,
      (const float *)stepSize->data, (const float *)bc2Sqrt->data, (const float *)decay->data,
      (const double *)beta1T->data, beta2, eps, p->numel);
  launched(k);
}
