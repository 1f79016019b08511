//===- tiled_loss.cpp - the LM head and its loss in tiles of rows (any device) ---===//
//
// dsrt_linear_cross_entropy and its gradient: the linear, cross-entropy and product kernels
// run on views of one tile of rows at a time, so only that tile's logits (and, backward,
// their gradient) exist; the workspace is the compiler's, planned like any other tensor.
//
#include "internal.h"

#include <algorithm>
#include <initializer_list>

using namespace dsrt;

namespace {
/// A view of `dims` elements of `t` from element `at`, on the stack (no handle, no reference).
dsrt_tensor viewOf(const dsrt_tensor *t, int64_t at, std::initializer_list<int64_t> dims) {
  dsrt_tensor v = *t;
  v.data = static_cast<char *>(t->data) + at * (int64_t)dsrt_dtype_size(t->dtype);
  v.rank = (int32_t)dims.size();
  v.numel = 1;
  int i = 0;
  for (int64_t d : dims) {
    v.dims[i++] = d;
    v.numel *= d;
  }
  return v;
}

struct Sizes {
  int64_t N, D, V, rows;
};

Sizes check(const char *k, const dsrt_tensor *x, const dsrt_tensor *w, const dsrt_tensor *bias,
            const dsrt_tensor *target, int64_t tiles, const dsrt_tensor *ws) {
  if (x->rank != 2 || w->rank != 2 || x->dims[1] != w->dims[1])
    fail(k, "input %s and weight %s are not [N, D] and [V, D]", shapeString(x).c_str(),
         shapeString(w).c_str());
  checkDtype(k, x, DSRT_F32, "input");
  checkDtype(k, w, DSRT_F32, "weight");
  if (bias && (bias->numel != w->dims[0] || bias->dtype != DSRT_F32))
    fail(k, "bias %s is not f32 [%lld]", shapeString(bias).c_str(), (long long)w->dims[0]);
  if (target->numel != x->dims[0])
    fail(k, "target %s is not [%lld]", shapeString(target).c_str(), (long long)x->dims[0]);
  if (tiles < 1)
    fail(k, "tiles must be >= 1, got %lld", (long long)tiles);
  Sizes s{x->dims[0], x->dims[1], w->dims[0], (x->dims[0] + tiles - 1) / tiles};
  checkDtype(k, ws, DSRT_F32, "workspace");
  return s;
}
} // namespace

extern "C" void dsrt_linear_cross_entropy(dsrt_context *ctx, dsrt_tensor *loss, dsrt_tensor *ws,
                                          const dsrt_tensor *x, const dsrt_tensor *w,
                                          const dsrt_tensor *bias, const dsrt_tensor *target,
                                          int64_t tiles, int64_t ignore_index,
                                          double label_smoothing) {
  const char *k = "linear_cross_entropy";
  Sizes s = check(k, x, w, bias, target, tiles, ws);
  if (ws->numel != s.rows * s.V + 1)
    fail(k, "workspace %s is not [%lld]", shapeString(ws).c_str(),
         (long long)(s.rows * s.V + 1));
  dsrt_tensor part = viewOf(ws, s.rows * s.V, {});
  for (int64_t t0 = 0; t0 < s.N; t0 += s.rows) {
    const int64_t n = std::min(s.rows, s.N - t0);
    dsrt_tensor xt = viewOf(x, t0 * s.D, {n, s.D}), tt = viewOf(target, t0, {n}),
                lt = viewOf(ws, 0, {n, s.V});
    dsrt_linear(ctx, &lt, &xt, w, bias);
    dsrt_cross_entropy(ctx, t0 == 0 ? loss : &part, &lt, &tt, ignore_index, DSRT_REDUCTION_SUM,
                       label_smoothing);
    if (t0 > 0)
      dsrt_binary(ctx, DSRT_ADD, loss, loss, &part);
  }
  if (s.N == 0)
    dsrt_fill(ctx, loss, 0.0);
}

extern "C" void dsrt_linear_cross_entropy_grad(
    dsrt_context *ctx, dsrt_tensor *dx, dsrt_tensor *dw, dsrt_tensor *db, dsrt_tensor *ws,
    const dsrt_tensor *x, const dsrt_tensor *w, const dsrt_tensor *bias,
    const dsrt_tensor *target, const dsrt_tensor *dy, int64_t tiles, int64_t ignore_index,
    double label_smoothing) {
  const char *k = "linear_cross_entropy_grad";
  Sizes s = check(k, x, w, bias, target, tiles, ws);
  const int64_t tile = s.rows * s.V;
  if (ws->numel != 2 * tile + s.V * s.D + s.V)
    fail(k, "workspace %s is not [%lld]", shapeString(ws).c_str(),
         (long long)(2 * tile + s.V * s.D + s.V));
  dsrt_tensor dwPart = viewOf(ws, 2 * tile, {s.V, s.D}),
              dbPart = viewOf(ws, 2 * tile + s.V * s.D, {s.V});
  if (!bias || s.N == 0)
    dsrt_fill(ctx, db, 0.0);
  if (s.N == 0)
    dsrt_fill(ctx, dw, 0.0);
  for (int64_t t0 = 0; t0 < s.N; t0 += s.rows) {
    const int64_t n = std::min(s.rows, s.N - t0);
    dsrt_tensor xt = viewOf(x, t0 * s.D, {n, s.D}), tt = viewOf(target, t0, {n}),
                lt = viewOf(ws, 0, {n, s.V}), gt = viewOf(ws, tile, {n, s.V}),
                dxt = viewOf(dx, t0 * s.D, {n, s.D});
    dsrt_linear(ctx, &lt, &xt, w, bias);
    dsrt_cross_entropy_grad(ctx, &gt, &lt, &tt, dy, ignore_index, DSRT_REDUCTION_SUM,
                            label_smoothing);
    dsrt_matmul(ctx, &dxt, &gt, w, 0, 0);
    // The first tile's weight (and bias) gradient in place, the others added to it.
    const bool first = t0 == 0;
    dsrt_linear_grad_weight(ctx, first ? dw : &dwPart, bias ? (first ? db : &dbPart) : nullptr,
                            &xt, &gt);
    if (!first) {
      dsrt_binary(ctx, DSRT_ADD, dw, dw, &dwPart);
      if (bias)
        dsrt_binary(ctx, DSRT_ADD, db, db, &dbPart);
    }
  }
}
