// CPU kernels of SwiGLU on a gate-and-up tensor and its gradient: one pass over each row,
// vectorized per ISA (the sigmoid on element_functions.h's exponential, clamped to its range:
// beyond it the sigmoid is within 1e-38 of 0 or 1), rows in parallel; a row whose id is
// negative (padding of an expert-parallel rank's receive buffer) is zeroed (or, where the
// compiler says no reader looks, left alone), not read.
#include "cpu_device.h"
#include "element_functions.h"
#include "../kernels/checks.h"

#include <cstring>

using namespace dsrt;

namespace {

DSRT_CPU_CLONES void swigluRow(float *y, const float *x, int64_t F) {
  const float *u = x + F;
#pragma omp simd
  for (int64_t j = 0; j < F; ++j) {
    const float g = x[j], s = 1.f / (1.f + cpu::fn::exp(-g));
    y[j] = g * s * u[j];
  }
}

DSRT_CPU_CLONES void swigluGradRow(float *dx, const float *x, const float *dy, int64_t F) {
  const float *u = x + F;
  float *du = dx + F;
#pragma omp simd
  for (int64_t j = 0; j < F; ++j) {
    const float g = x[j], s = 1.f / (1.f + cpu::fn::exp(-g));
    du[j] = dy[j] * (g * s);
    dx[j] = dy[j] * u[j] * (s * (1.f + g * (1.f - s)));
  }
}

bool skipped(const dsrt_tensor *rows, int64_t r) {
  if (!rows)
    return false;
  return rows->dtype == DSRT_I64 ? static_cast<const int64_t *>(rows->data)[r] < 0
                                 : static_cast<const int32_t *>(rows->data)[r] < 0;
}

/// `row(r)` for each row not skipped, zeros of `width` floats at `out` for the others (left as
/// they are with DSRT_EXPERT_UNROUTED_UNDEFINED in `flags`).
template <class Row>
void eachRow(float *out, int64_t width, int64_t R, const dsrt_tensor *rows, int32_t flags,
             Row row) {
  const bool zero = !(flags & DSRT_EXPERT_UNROUTED_UNDEFINED);
#pragma omp parallel for schedule(static) if (R * width > (1 << 16))
  for (int64_t r = 0; r < R; ++r) {
    if (!skipped(rows, r))
      row(r);
    else if (zero)
      std::memset(out + r * width, 0, width * sizeof(float));
  }
}

} // namespace

void dsrt::cpu::swiglu(dsrt_context *, dsrt_tensor *out, const dsrt_tensor *x,
                       const dsrt_tensor *rows, int32_t flags) {
  DSRT_PROFILE("swiglu");
  const checks::SwigluShape s = checks::swiglu("swiglu", x, out, nullptr, rows);
  const float *X = static_cast<const float *>(x->data);
  float *Y = static_cast<float *>(out->data);
  eachRow(Y, s.F, s.R, rows, flags, [&](int64_t r) { swigluRow(Y + r * s.F, X + r * 2 * s.F, s.F); });
}

void dsrt::cpu::swiglu_grad(dsrt_context *, dsrt_tensor *dx, const dsrt_tensor *x,
                            const dsrt_tensor *dy, const dsrt_tensor *rows, int32_t flags) {
  DSRT_PROFILE("swiglu_grad");
  const checks::SwigluShape s = checks::swiglu("swiglu_grad", x, dy, dx, rows);
  const float *X = static_cast<const float *>(x->data), *G = static_cast<const float *>(dy->data);
  float *D = static_cast<float *>(dx->data);
  eachRow(D, 2 * s.F, s.R, rows, flags, [&](int64_t r) {
    swigluGradRow(D + r * 2 * s.F, X + r * 2 * s.F, G + r * s.F, s.F);
  });
}
