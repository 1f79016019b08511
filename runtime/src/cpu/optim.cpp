//===- optim.cpp - fused optimizer updates -----------------------------------===//
#include "../core/internal.h"

#include <cmath>
#include <initializer_list>

using namespace dsrt;

extern "C" void dsrt_adamw_update(dsrt_context *, dsrt_tensor *pOut, dsrt_tensor *mOut,
                                  dsrt_tensor *vOut, const dsrt_tensor *p, const dsrt_tensor *g,
                                  const dsrt_tensor *m, const dsrt_tensor *v,
                                  const dsrt_tensor *stepSize, const dsrt_tensor *bc2Sqrt,
                                  const dsrt_tensor *decay, const dsrt_tensor *beta1T,
                                  double beta2, double eps) {
  DSRT_PROFILE("adamw_update");
  for (const dsrt_tensor *t : std::initializer_list<const dsrt_tensor *>{
           pOut, mOut, vOut, p, g, m, v, stepSize, bc2Sqrt, decay})
    checkDtype("adamw_update", t, DSRT_F32, "operand");
  checkDtype("adamw_update", beta1T, DSRT_F64, "beta1");
  const double beta1 = *(const double *)beta1T->data;
  for (const dsrt_tensor *t : std::initializer_list<const dsrt_tensor *>{pOut, mOut, vOut, g, m, v})
    if (t->numel != p->numel)
      fail("adamw_update", "operands differ in size: %s vs %s", shapeString(t).c_str(),
           shapeString(p).c_str());
  // Scalars and operation order as torch.optim.AdamW (single-tensor path): each Python-double
  // scalar is rounded to float once; addcmul is (value * a) * b, addcdiv (value * a) / b.
  const float step = *(const float *)stepSize->data;
  const float bc2 = *(const float *)bc2Sqrt->data;
  const float dec = *(const float *)decay->data;
  const float b1 = (float)beta1, omb1 = (float)(1.0 - beta1);
  const float b2 = (float)beta2, omb2 = (float)(1.0 - beta2);
  const float e = (float)eps, negStep = -step;
  const float *pi = (const float *)p->data, *gi = (const float *)g->data;
  const float *mi = (const float *)m->data, *vi = (const float *)v->data;
  float *po = (float *)pOut->data, *mo = (float *)mOut->data, *vo = (float *)vOut->data;
  const int64_t n = p->numel;
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) {
    float gv = gi[i];
    float pv = pi[i] * dec;
    float mv = mi[i] * b1 + gv * omb1;
    float vv = vi[i] * b2 + (omb2 * gv) * gv;
    float denom = std::sqrt(vv) / bc2 + e;
    po[i] = pv + (negStep * mv) / denom;
    mo[i] = mv;
    vo[i] = vv;
  }
}
