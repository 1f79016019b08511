// CPU kernels: softmax, embedding, cross-entropy and dropout.
#include "../core/internal.h"
#include "dnnl_state.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

using namespace dsrt;

namespace {

struct DimSplit {
  int64_t outer, D, inner;
};

DimSplit splitAt(const char *k, const dsrt_tensor *t, int64_t dim) {
  if (dim < 0)
    dim += t->rank;
  if (t->rank == 0 && (dim == 0 || dim == -1))
    return {1, 1, 1};
  if (dim < 0 || dim >= t->rank)
    fail(k, "dim %lld out of range for %s", (long long)dim, shapeString(t).c_str());
  DimSplit s{1, t->dims[dim], 1};
  for (int i = 0; i < dim; ++i)
    s.outer *= t->dims[i];
  for (int i = dim + 1; i < t->rank; ++i)
    s.inner *= t->dims[i];
  return s;
}

int64_t indexAt(const dsrt_tensor *t, int64_t i) {
  return t->dtype == DSRT_I64 ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
}

void checkIndexDtype(const char *k, const dsrt_tensor *t) {
  if (t->dtype != DSRT_I64 && t->dtype != DSRT_I32)
    fail(k, "indices are %s, expected i64 or i32", dtypeName(t->dtype));
}

} // namespace

/// Softmax or log-softmax over the last dim of an [outer, D] f32 view through oneDNN (vectorized
/// exp; the scalar loop below is the general path).
static void softmaxLastDimDnnl(dsrt_context *ctx, float *y, const float *x, int64_t outer,
                               int64_t D, bool log) {
  using dnnl::memory;
  DnnlState &st = dnnlState(ctx);
  memory::desc md({outer, D}, memory::data_type::f32, memory::format_tag::ab);
  std::string key = std::string(log ? "logsoftmax/" : "softmax/") + std::to_string(outer) + "x" +
                    std::to_string(D);
  auto &slot = ctx->primitives[key];
  if (!slot) {
    if (log) {
      dnnl::logsoftmax_forward::primitive_desc pd(
          dnnl::logsoftmax_forward::desc(dnnl::prop_kind::forward_training, md, 1), st.engine);
      slot = std::make_shared<dnnl::primitive>(dnnl::logsoftmax_forward(pd));
    } else {
      dnnl::softmax_forward::primitive_desc pd(
          dnnl::softmax_forward::desc(dnnl::prop_kind::forward_training, md, 1), st.engine);
      slot = std::make_shared<dnnl::primitive>(dnnl::softmax_forward(pd));
    }
  }
  memory src(md, st.engine, const_cast<float *>(x)), dst(md, st.engine, y);
  static_cast<dnnl::primitive *>(slot.get())
      ->execute(st.stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
  st.stream.wait();
}

extern "C" void dsrt_softmax(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *in,
                             int64_t dim, int32_t log) {
  DSRT_PROFILE("softmax");
  const char *k = "softmax";
  checkSameShape(k, out, in);
  checkDtype(k, out, in->dtype, "result");
  DimSplit s = splitAt(k, in, dim);
  // Softmax only: oneDNN's log-softmax is off by ~4e-6 absolute near 0 (the kernel test).
  if (!log && in->dtype == DSRT_F32 && s.inner == 1 && in->numel >= kParallelGrain) {
    softmaxLastDimDnnl(ctx, (float *)out->data, (const float *)in->data, s.outer, s.D, log);
    return;
  }
  dispatchFloat(k, in->dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *X = (const T *)in->data;
    T *Y = (T *)out->data;
#pragma omp parallel for schedule(static) if (in->numel > kParallelGrain)
    for (int64_t oi = 0; oi < s.outer * s.inner; ++oi) {
      int64_t o = oi / s.inner, i = oi % s.inner;
      const T *x = X + o * s.D * s.inner + i;
      T *y = Y + o * s.D * s.inner + i;
      int64_t st = s.inner;
      T mx = -std::numeric_limits<T>::infinity();
      for (int64_t d = 0; d < s.D; ++d)
        mx = (x[d * st] > mx || std::isnan(x[d * st])) ? x[d * st] : mx;
      double sum = 0;
      if (log) {
        for (int64_t d = 0; d < s.D; ++d)
          sum += std::exp(x[d * st] - mx);
        T lse = (T)std::log(sum);
        for (int64_t d = 0; d < s.D; ++d)
          y[d * st] = x[d * st] - mx - lse;
      } else {
        for (int64_t d = 0; d < s.D; ++d) {
          T e = std::exp(x[d * st] - mx);
          y[d * st] = e;
          sum += e;
        }
        T inv = (T)(1.0 / sum);
        for (int64_t d = 0; d < s.D; ++d)
          y[d * st] *= inv;
      }
    }
  });
}

extern "C" void dsrt_softmax_grad(dsrt_context *, dsrt_tensor *dx, const dsrt_tensor *y,
                                  const dsrt_tensor *dy, int64_t dim, int32_t log) {
  DSRT_PROFILE("softmax_grad");
  const char *k = "softmax_grad";
  checkSameShape(k, dx, y);
  checkSameShape(k, dy, y);
  checkDtype(k, dx, y->dtype, "dx");
  checkDtype(k, dy, y->dtype, "dy");
  DimSplit s = splitAt(k, y, dim);
  dispatchFloat(k, y->dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *Y = (const T *)y->data, *G = (const T *)dy->data;
    T *DX = (T *)dx->data;
#pragma omp parallel for schedule(static) if (y->numel > kParallelGrain)
    for (int64_t oi = 0; oi < s.outer * s.inner; ++oi) {
      int64_t o = oi / s.inner, i = oi % s.inner, base = o * s.D * s.inner + i, st = s.inner;
      const T *yy = Y + base, *g = G + base;
      T *d = DX + base;
      double sum = 0;
      if (log) {
        for (int64_t j = 0; j < s.D; ++j)
          sum += g[j * st];
        T sm = (T)sum;
        for (int64_t j = 0; j < s.D; ++j)
          d[j * st] = g[j * st] - std::exp(yy[j * st]) * sm;
      } else {
        for (int64_t j = 0; j < s.D; ++j)
          sum += (double)g[j * st] * yy[j * st];
        T sm = (T)sum;
        for (int64_t j = 0; j < s.D; ++j)
          d[j * st] = yy[j * st] * (g[j * st] - sm);
      }
    }
  });
}

extern "C" void dsrt_embedding(dsrt_context *, dsrt_tensor *out, const dsrt_tensor *weight,
                               const dsrt_tensor *indices) {
  DSRT_PROFILE("embedding");
  const char *k = "embedding";
  checkIndexDtype(k, indices);
  checkDtype(k, out, weight->dtype, "result");
  if (weight->rank != 2 || out->numel != indices->numel * weight->dims[1])
    fail(k, "weight %s, indices %s do not give %s", shapeString(weight).c_str(),
         shapeString(indices).c_str(), shapeString(out).c_str());
  int64_t V = weight->dims[0], D = weight->dims[1];
  size_t row = D * dsrt_dtype_size(weight->dtype);
  int64_t n = indices->numel;
#pragma omp parallel for schedule(static) if (out->numel > kParallelGrain)
  for (int64_t i = 0; i < n; ++i) {
    int64_t ix = indexAt(indices, i);
    if (ix < 0 || ix >= V)
      fail(k, "index %lld out of range for %lld rows", (long long)ix, (long long)V);
    std::memcpy((char *)out->data + i * row, (const char *)weight->data + ix * row, row);
  }
}

extern "C" void dsrt_embedding_grad(dsrt_context *, dsrt_tensor *dweight, const dsrt_tensor *dy,
                                    const dsrt_tensor *indices, int64_t padding_idx) {
  DSRT_PROFILE("embedding_grad");
  const char *k = "embedding_grad";
  checkIndexDtype(k, indices);
  checkDtype(k, dweight, DSRT_F32, "dweight");
  checkDtype(k, dy, DSRT_F32, "dy");
  if (dweight->rank != 2 || dy->numel != indices->numel * dweight->dims[1])
    fail(k, "dweight %s, indices %s, dy %s disagree", shapeString(dweight).c_str(),
         shapeString(indices).c_str(), shapeString(dy).c_str());
  int64_t V = dweight->dims[0], D = dweight->dims[1], n = indices->numel;
  float *DW = (float *)dweight->data;
  const float *G = (const float *)dy->data;
  std::memset(DW, 0, dweight->numel * sizeof(float));
  for (int64_t i = 0; i < n; ++i) {
    int64_t ix = indexAt(indices, i);
    if (ix < 0 || ix >= V)
      fail(k, "index %lld out of range for %lld rows", (long long)ix, (long long)V);
  }
  // Threads own column blocks, so the scatter-add needs no atomics and keeps index order.
  const int64_t block = 64;
  int64_t blocks = (D + block - 1) / block;
#pragma omp parallel for schedule(static) if (dy->numel > kParallelGrain && blocks > 1)
  for (int64_t bl = 0; bl < blocks; ++bl) {
    int64_t c0 = bl * block, c1 = std::min(D, c0 + block);
    for (int64_t i = 0; i < n; ++i) {
      int64_t ix = indexAt(indices, i);
      if (ix == padding_idx && padding_idx >= 0)
        continue;
      float *dst = DW + ix * D;
      const float *src = G + i * D;
      for (int64_t c = c0; c < c1; ++c)
        dst[c] += src[c];
    }
  }
}

namespace {

struct CEShape {
  int64_t N, C;
};

CEShape ceShape(const char *k, const dsrt_tensor *logits, const dsrt_tensor *target) {
  checkDtype(k, logits, DSRT_F32, "logits");
  checkIndexDtype(k, target);
  CEShape s;
  if (logits->rank == 2)
    s = {logits->dims[0], logits->dims[1]};
  else if (logits->rank == 1)
    s = {1, logits->dims[0]};
  else
    fail(k, "logits %s must be [N, C] or [C]", shapeString(logits).c_str());
  if (target->numel != s.N)
    fail(k, "target %s for logits %s", shapeString(target).c_str(), shapeString(logits).c_str());
  return s;
}

/// Log-sum-exp of a row in double.
double logSumExp(const float *x, int64_t C) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t c = 0; c < C; ++c)
    mx = (x[c] > mx || std::isnan(x[c])) ? x[c] : mx;
  if (std::isinf(mx))
    return mx;
  double s = 0;
  for (int64_t c = 0; c < C; ++c)
    s += std::exp((double)x[c] - mx);
  return mx + std::log(s);
}

int64_t targetAt(const char *k, const dsrt_tensor *target, int64_t n, int64_t C, int64_t ignore) {
  int64_t t = indexAt(target, n);
  if (t != ignore && (t < 0 || t >= C))
    fail(k, "target %lld out of range for %lld classes", (long long)t, (long long)C);
  return t;
}

} // namespace

extern "C" void dsrt_cross_entropy(dsrt_context *, dsrt_tensor *out, const dsrt_tensor *logits,
                                   const dsrt_tensor *target, int64_t ignore_index,
                                   int32_t reduction, double label_smoothing) {
  DSRT_PROFILE("cross_entropy");
  const char *k = "cross_entropy";
  CEShape s = ceShape(k, logits, target);
  checkDtype(k, out, DSRT_F32, "result");
  if (reduction == DSRT_REDUCTION_NONE ? out->numel != s.N : out->numel != 1)
    fail(k, "result %s for reduction %d of %lld rows", shapeString(out).c_str(), reduction,
         (long long)s.N);
  const float *X = (const float *)logits->data;
  float *Y = (float *)out->data;
  const double ls = label_smoothing;
  double total = 0;
  int64_t count = 0;
  // torch 1.13: (1 - ls) * nll + ls / C * (-sum_c logp_c), ignored rows contributing 0.
#pragma omp parallel for schedule(static) reduction(+ : total, count) if (logits->numel > kParallelGrain)
  for (int64_t n = 0; n < s.N; ++n) {
    int64_t t = targetAt(k, target, n, s.C, ignore_index);
    double loss = 0;
    if (t != ignore_index) {
      const float *x = X + n * s.C;
      double lse = logSumExp(x, s.C);
      loss = (1.0 - ls) * (lse - x[t]);
      if (ls > 0) {
        double sumX = 0;
        for (int64_t c = 0; c < s.C; ++c)
          sumX += x[c];
        loss += ls / s.C * (s.C * lse - sumX);
      }
      ++count;
    }
    if (reduction == DSRT_REDUCTION_NONE)
      Y[n] = (float)loss;
    total += loss;
  }
  if (reduction == DSRT_REDUCTION_SUM)
    Y[0] = (float)total;
  else if (reduction == DSRT_REDUCTION_MEAN)
    Y[0] = (float)(total / (double)count);
  else if (reduction != DSRT_REDUCTION_NONE)
    fail(k, "unknown reduction %d", reduction);
}

extern "C" void dsrt_cross_entropy_grad(dsrt_context *, dsrt_tensor *dlogits,
                                        const dsrt_tensor *logits, const dsrt_tensor *target,
                                        const dsrt_tensor *dy, int64_t ignore_index,
                                        int32_t reduction, double label_smoothing) {
  DSRT_PROFILE("cross_entropy_grad");
  const char *k = "cross_entropy_grad";
  CEShape s = ceShape(k, logits, target);
  checkSameShape(k, dlogits, logits);
  checkDtype(k, dlogits, DSRT_F32, "dlogits");
  checkDtype(k, dy, DSRT_F32, "dy");
  if (reduction == DSRT_REDUCTION_NONE ? dy->numel != s.N : dy->numel != 1)
    fail(k, "dy %s for reduction %d of %lld rows", shapeString(dy).c_str(), reduction,
         (long long)s.N);
  if (reduction < DSRT_REDUCTION_NONE || reduction > DSRT_REDUCTION_SUM)
    fail(k, "unknown reduction %d", reduction);
  const float *X = (const float *)logits->data, *G = (const float *)dy->data;
  float *DX = (float *)dlogits->data;
  double scale = 1.0;
  if (reduction == DSRT_REDUCTION_MEAN) {
    int64_t count = 0;
    for (int64_t n = 0; n < s.N; ++n)
      count += targetAt(k, target, n, s.C, ignore_index) != ignore_index;
    scale = 1.0 / (double)count;
  }
  const double ls = label_smoothing;
#pragma omp parallel for schedule(static) if (logits->numel > kParallelGrain)
  for (int64_t n = 0; n < s.N; ++n) {
    int64_t t = targetAt(k, target, n, s.C, ignore_index);
    float *d = DX + n * s.C;
    if (t == ignore_index) {
      std::memset(d, 0, s.C * sizeof(float));
      continue;
    }
    double g = (reduction == DSRT_REDUCTION_NONE ? G[n] : G[0]) * scale;
    const float *x = X + n * s.C;
    double lse = logSumExp(x, s.C);
    for (int64_t c = 0; c < s.C; ++c) {
      double p = std::exp((double)x[c] - lse);
      double v = p - ls / s.C - (c == t ? 1.0 - ls : 0.0);
      d[c] = (float)(g * v);
    }
  }
}

extern "C" void dsrt_dropout_mask(dsrt_context *ctx, dsrt_tensor *out, double p) {
  DSRT_PROFILE("dropout_mask");
  const char *k = "dropout_mask";
  if (p < 0 || p > 1)
    fail(k, "probability %g out of [0, 1]", p);
  dispatchFloat(k, out->dtype, [&](auto tag) {
    using T = decltype(tag);
    T *y = (T *)out->data;
    T keep = p >= 1 ? T(0) : T(1.0 / (1.0 - p));
    for (int64_t i = 0; i < out->numel; ++i) {
      double u = (double)(ctx->rng() >> 11) * 0x1.0p-53;
      y[i] = u < p ? T(0) : keep;
    }
  });
}
