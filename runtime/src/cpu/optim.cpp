//===- optim.cpp - fused optimizer updates -----------------------------------===//
#include "cpu_device.h"
#include "../kernels/checks.h"
#include "../kernels/scalar_ops.h"

#include <algorithm>
#include <cmath>

using namespace dsrt;

namespace {
/// Elements [0, n) of the update, vectorized (the outputs are the inputs or disjoint from
/// them) and built for AVX-512, AVX2 and the baseline, picked at run time.
DSRT_CPU_CLONES void
adamwRange(const ops::AdamWScalars &s, const float *pi, const float *gi, const float *mi,
           const float *vi, float *po, float *mo, float *vo, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    ops::adamw(s, pi[i], gi[i], mi[i], vi[i], po[i], mo[i], vo[i]);
}
} // namespace

void dsrt::cpu::adamw_update(dsrt_context *, dsrt_tensor *pOut, dsrt_tensor *mOut,
                                  dsrt_tensor *vOut, const dsrt_tensor *p, const dsrt_tensor *g,
                                  const dsrt_tensor *m, const dsrt_tensor *v,
                                  const dsrt_tensor *stepSize, const dsrt_tensor *bc2Sqrt,
                                  const dsrt_tensor *decay, const dsrt_tensor *beta1T,
                                  double beta2, double eps) {
  DSRT_PROFILE("adamw_update");
  checks::adamw(pOut, mOut, vOut, p, g, m, v, stepSize, bc2Sqrt, decay, beta1T);
  const double beta1 = *(const double *)beta1T->data;
  // Scalars and operation order as torch.optim.AdamW (kernels/scalar_ops.h, shared with CUDA).
  const ops::AdamWScalars s =
      ops::adamwScalars(*(const float *)stepSize->data, *(const float *)bc2Sqrt->data,
                        *(const float *)decay->data, beta1, beta2, eps);
  const float *pi = (const float *)p->data, *gi = (const float *)g->data;
  const float *mi = (const float *)m->data, *vi = (const float *)v->data;
  float *po = (float *)pOut->data, *mo = (float *)mOut->data, *vo = (float *)vOut->data;
  const int64_t n = p->numel;
  const int64_t chunk = 1 << 14;
#pragma omp parallel for schedule(static) if (n > 4 * chunk)
  for (int64_t at = 0; at < n; at += chunk)
    adamwRange(s, pi + at, gi + at, mi + at, vi + at, po + at, mo + at, vo + at,
               std::min(chunk, n - at));
}
