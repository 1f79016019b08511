//===- checks.cpp - the kernels' argument checks (kernels/checks.h) -----------===//
#include "../kernels/checks.h"
#include "../kernels/scalar_ops.h"
#include "half.h"
#include "internal.h"

#include <cstring>
#include <initializer_list>

namespace dsrt::checks {

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

void indexDtype(const char *k, const dsrt_tensor *t) {
  if (t->dtype != DSRT_I64 && t->dtype != DSRT_I32)
    fail(k, "indices are %s, expected i64 or i32", dtypeName(t->dtype));
}

void sized(const char *k, const dsrt_tensor *t, int32_t dtype, int64_t n, const char *what) {
  checkDtype(k, t, dtype, what);
  if (t->numel != n)
    fail(k, "%s has %lld elements, expected %lld", what, (long long)t->numel, (long long)n);
}

const float *optF32(const char *k, const dsrt_tensor *t, int64_t n, const char *what) {
  if (!t)
    return nullptr;
  sized(k, t, DSRT_F32, n, what);
  return (const float *)t->data;
}

void unary(const dsrt_tensor *out, const dsrt_tensor *in, int32_t op) {
  if (out->numel != in->numel)
    fail("unary", "result %s and operand %s differ in size", shapeString(out).c_str(),
         shapeString(in).c_str());
  checkDtype("unary", out, in->dtype, "result");
  if (!ops::validUnary(op))
    fail("unary", "unknown op %d", op);
  if (!isFloat(in->dtype) && !isHalfType(in->dtype) && op != DSRT_NEG && op != DSRT_RELU)
    fail("unary", "op %d needs a floating-point dtype", op);
}

void binary(const dsrt_tensor *out, const dsrt_tensor *a, const dsrt_tensor *b, int32_t op) {
  checkDtype("binary", a, out->dtype, "lhs");
  checkDtype("binary", b, out->dtype, "rhs");
  if (!ops::validBinary(op, true))
    fail("binary", "unknown op %d", op);
  if (!isFloat(out->dtype) && !isHalfType(out->dtype) && !ops::validBinary(op, false))
    fail("binary", "op %d needs a floating-point dtype", op);
}

void cmp(const dsrt_tensor *out, const dsrt_tensor *a, const dsrt_tensor *b, int32_t pred) {
  checkDtype("cmp", out, DSRT_I1, "result");
  checkDtype("cmp", b, a->dtype, "rhs");
  if (!ops::validCmp(pred))
    fail("cmp", "unknown predicate %d", pred);
}

void where(const dsrt_tensor *out, const dsrt_tensor *cond, const dsrt_tensor *a,
           const dsrt_tensor *b) {
  checkDtype("where", cond, DSRT_I1, "condition");
  checkDtype("where", a, out->dtype, "true operand");
  checkDtype("where", b, out->dtype, "false operand");
}

DimSplit softmax(const dsrt_tensor *out, const dsrt_tensor *in, int64_t dim) {
  checkSameShape("softmax", out, in);
  checkDtype("softmax", out, in->dtype, "result");
  return splitAt("softmax", in, dim);
}

DimSplit cumsum(const dsrt_tensor *out, const dsrt_tensor *in, int64_t dim) {
  checkSameShape("cumsum", out, in);
  checkDtype("cumsum", out, in->dtype, "result");
  if (in->dtype == DSRT_I1)
    fail("cumsum", "a bool operand (convert it to i64 first, as torch.cumsum does)");
  return splitAt("cumsum", in, dim);
}

AttentionShape attention(const dsrt_tensor *out, const dsrt_tensor *lse, const dsrt_tensor *q,
                         const dsrt_tensor *k, const dsrt_tensor *v, const dsrt_tensor *mask,
                         int32_t causal) {
  const char *kn = "attention";
  if (q->rank != 4 || k->rank != 4 || v->rank != 4)
    fail(kn, "query %s, key %s and value %s are not all of rank 4", shapeString(q).c_str(),
         shapeString(k).c_str(), shapeString(v).c_str());
  if (q->dtype != DSRT_F32 && !isHalfType(q->dtype))
    fail(kn, "needs an f32, bf16 or f16 query, got %s", dtypeName(q->dtype));
  checkDtype(kn, k, q->dtype, "key");
  checkDtype(kn, v, q->dtype, "value");
  checkDtype(kn, out, q->dtype, "result");
  checkDtype(kn, lse, DSRT_F32, "lse");
  AttentionShape s{q->dims[0], q->dims[1], k->dims[1], q->dims[2], k->dims[2], q->dims[3],
                   v->dims[3], q->dtype, 0, 0, 0, 0, 0};
  if (k->dims[0] != s.B || v->dims[0] != s.B || v->dims[1] != s.Hk || v->dims[2] != s.S ||
      k->dims[3] != s.E || s.Hk == 0 || s.Hq % s.Hk != 0)
    fail(kn, "query %s, key %s and value %s do not fit (batch, heads, length, width)",
         shapeString(q).c_str(), shapeString(k).c_str(), shapeString(v).c_str());
  if (out->rank != 4 || out->dims[0] != s.B || out->dims[1] != s.Hq || out->dims[2] != s.L ||
      out->dims[3] != s.Ev)
    fail(kn, "result %s is not [B, Hq, L, Ev]", shapeString(out).c_str());
  if (lse->numel != s.B * s.Hq * s.L)
    fail(kn, "lse %s is not [B, Hq, L]", shapeString(lse).c_str());
  if (causal != DSRT_CAUSAL_NONE && causal != DSRT_CAUSAL && causal != DSRT_CAUSAL_STRICT)
    fail(kn, "causal is %d, not DSRT_CAUSAL_NONE, DSRT_CAUSAL or DSRT_CAUSAL_STRICT", causal);
  if (mask) {
    if (causal)
      fail(kn, "has both a mask and causal");
    int64_t full[4] = {s.B, s.Hq, s.L, s.S}, st[4], at = 1;
    if (mask->rank != 4)
      fail(kn, "mask %s is not of rank 4", shapeString(mask).c_str());
    for (int d = 3; d >= 0; --d) {
      if (mask->dims[d] != 1 && mask->dims[d] != full[d])
        fail(kn, "mask %s does not broadcast to the scores [%lld, %lld, %lld, %lld]",
             shapeString(mask).c_str(), (long long)s.B, (long long)s.Hq, (long long)s.L,
             (long long)s.S);
      st[d] = mask->dims[d] == 1 ? 0 : at;
      at *= mask->dims[d];
    }
    if (mask->dtype == DSRT_I1)
      s.maskKind = 1;
    else if (mask->dtype == q->dtype)
      s.maskKind = 2;
    else
      fail(kn, "mask is %s, expected i1 or the query's %s", dtypeName(mask->dtype),
           dtypeName(q->dtype));
    s.mb = st[0], s.mh = st[1], s.ml = st[2], s.ms = st[3];
  }
  return s;
}

AttentionShape attentionGrad(const dsrt_tensor *dq, const dsrt_tensor *dk, const dsrt_tensor *dv,
                             const dsrt_tensor *q, const dsrt_tensor *k, const dsrt_tensor *v,
                             const dsrt_tensor *mask, const dsrt_tensor *out,
                             const dsrt_tensor *lse, const dsrt_tensor *dout, int32_t causal) {
  AttentionShape s = attention(out, lse, q, k, v, mask, causal);
  const char *kn = "attention_grad";
  auto same = [&](const dsrt_tensor *a, const dsrt_tensor *like, const char *what) {
    checkDtype(kn, a, like->dtype, what);
    if (a->numel != like->numel || a->rank != like->rank)
      fail(kn, "%s %s differs from %s", what, shapeString(a).c_str(), shapeString(like).c_str());
  };
  same(dout, out, "result_grad");
  same(dq, q, "dq");
  same(dk, k, "dk");
  same(dv, v, "dv");
  return s;
}

SampleShape sample(const dsrt_tensor *tokens, const dsrt_tensor *logits,
                   const dsrt_tensor *temperature, const dsrt_tensor *topK,
                   const dsrt_tensor *topP, const dsrt_tensor *seeds, const dsrt_tensor *steps) {
  const char *kn = "sample";
  if (logits->rank != 2 || (logits->dtype != DSRT_F32 && !isHalfType(logits->dtype)))
    fail(kn, "logits %s (%s) are not [B, V] of f32, bf16 or f16", shapeString(logits).c_str(),
         dtypeName(logits->dtype));
  SampleShape s{logits->dims[0], logits->dims[1]};
  if (s.V == 0)
    fail(kn, "logits %s have no vocabulary", shapeString(logits).c_str());
  sized(kn, tokens, DSRT_I64, s.B, "tokens");
  sized(kn, temperature, DSRT_F32, s.B, "temperature");
  sized(kn, topK, DSRT_I64, s.B, "top_k");
  sized(kn, topP, DSRT_F32, s.B, "top_p");
  sized(kn, seeds, DSRT_I64, s.B, "seeds");
  sized(kn, steps, DSRT_I64, s.B, "steps");
  return s;
}

namespace {
/// The caches [N, Hk, P, E] and [N, Hk, P, Ev] of one float dtype: their sizes.
PagedShape caches(const char *kn, const dsrt_tensor *kCache, const dsrt_tensor *vCache) {
  if (kCache->rank != 4 || vCache->rank != 4)
    fail(kn, "caches %s and %s are not [pages, heads, page size, width]",
         shapeString(kCache).c_str(), shapeString(vCache).c_str());
  if (kCache->dtype != DSRT_F32 && !isHalfType(kCache->dtype))
    fail(kn, "needs an f32, bf16 or f16 cache, got %s", dtypeName(kCache->dtype));
  checkDtype(kn, vCache, kCache->dtype, "value cache");
  PagedShape s{0, 0, kCache->dims[1], 0, kCache->dims[3], vCache->dims[3], kCache->dims[0],
               kCache->dims[2], 0, kCache->dtype};
  if (vCache->dims[0] != s.N || vCache->dims[1] != s.Hk || vCache->dims[2] != s.P ||
      s.P == 0 || s.Hk == 0)
    fail(kn, "key cache %s and value cache %s do not match (pages, heads, page size)",
         shapeString(kCache).c_str(), shapeString(vCache).c_str());
  return s;
}
} // namespace

PagedShape cacheWrite(const dsrt_tensor *kCache, const dsrt_tensor *vCache, const dsrt_tensor *k,
                      const dsrt_tensor *v, const dsrt_tensor *slots) {
  const char *kn = "cache_write";
  PagedShape s = caches(kn, kCache, vCache);
  checkDtype(kn, k, s.dtype, "keys");
  checkDtype(kn, v, s.dtype, "values");
  checkDtype(kn, slots, DSRT_I64, "slots");
  if (k->rank != 4 || v->rank != 4 || k->dims[1] != s.Hk || k->dims[3] != s.E ||
      v->dims[0] != k->dims[0] || v->dims[1] != s.Hk || v->dims[2] != k->dims[2] ||
      v->dims[3] != s.Ev)
    fail(kn, "keys %s and values %s are not [B, %lld, T, %lld] and [B, %lld, T, %lld]",
         shapeString(k).c_str(), shapeString(v).c_str(), (long long)s.Hk, (long long)s.E,
         (long long)s.Hk, (long long)s.Ev);
  s.B = k->dims[0];
  s.T = k->dims[2];
  if (slots->rank != 2 || slots->dims[0] != s.B || slots->dims[1] != s.T)
    fail(kn, "slots %s are not [B, T] = [%lld, %lld]", shapeString(slots).c_str(),
         (long long)s.B, (long long)s.T);
  return s;
}

PagedShape pagedAttention(const dsrt_tensor *out, const dsrt_tensor *q,
                          const dsrt_tensor *kCache, const dsrt_tensor *vCache,
                          const dsrt_tensor *pages, const dsrt_tensor *contextLens,
                          const dsrt_tensor *qLens) {
  const char *kn = "paged_attention";
  PagedShape s = caches(kn, kCache, vCache);
  checkDtype(kn, q, s.dtype, "query");
  checkDtype(kn, out, s.dtype, "result");
  if (q->rank != 4 || q->dims[3] != s.E || q->dims[1] % s.Hk != 0)
    fail(kn, "query %s is not [B, Hq, T, %lld] with a multiple of the cache's %lld heads",
         shapeString(q).c_str(), (long long)s.E, (long long)s.Hk);
  s.B = q->dims[0];
  s.Hq = q->dims[1];
  s.T = q->dims[2];
  if (out->rank != 4 || out->dims[0] != s.B || out->dims[1] != s.Hq || out->dims[2] != s.T ||
      out->dims[3] != s.Ev)
    fail(kn, "result %s is not [B, Hq, T, Ev] = [%lld, %lld, %lld, %lld]",
         shapeString(out).c_str(), (long long)s.B, (long long)s.Hq, (long long)s.T,
         (long long)s.Ev);
  checkDtype(kn, pages, DSRT_I64, "pages");
  if (pages->rank != 2 || pages->dims[0] != s.B)
    fail(kn, "pages %s are not [B, max pages] with B = %lld", shapeString(pages).c_str(),
         (long long)s.B);
  s.maxPages = pages->dims[1];
  sized(kn, contextLens, DSRT_I64, s.B, "context lengths");
  sized(kn, qLens, DSRT_I64, s.B, "query lengths");
  return s;
}

DimSplit softmaxGrad(const dsrt_tensor *dx, const dsrt_tensor *y, const dsrt_tensor *dy,
                     int64_t dim) {
  const char *k = "softmax_grad";
  checkSameShape(k, dx, y);
  checkSameShape(k, dy, y);
  checkDtype(k, dx, y->dtype, "dx");
  checkDtype(k, dy, y->dtype, "dy");
  return splitAt(k, y, dim);
}

int64_t layerNorm(const dsrt_tensor *out, const dsrt_tensor *x, int64_t norm) {
  const char *k = "layer_norm";
  if (!isHalfType(x->dtype)) // 16 bits: the weight and bias of its type too
    checkDtype(k, x, DSRT_F32, "input");
  checkDtype(k, out, x->dtype, "result");
  if (out->numel != x->numel || norm <= 0 || x->numel % norm)
    fail(k, "bad shapes x %s, out %s, norm_numel %lld", shapeString(x).c_str(),
         shapeString(out).c_str(), (long long)norm);
  return x->numel / norm;
}

int64_t layerNormGrad(const dsrt_tensor *dx, const dsrt_tensor *x, const dsrt_tensor *dy,
                      int64_t norm) {
  const char *k = "layer_norm_grad";
  if (!isHalfType(x->dtype)) // 16 bits: dy, dx, the weight and its gradients of its type too
    checkDtype(k, x, DSRT_F32, "input");
  checkDtype(k, dy, x->dtype, "dy");
  if (dy->numel != x->numel || norm <= 0 || x->numel % norm || (dx && dx->numel != x->numel))
    fail(k, "bad shapes x %s, dy %s, norm_numel %lld", shapeString(x).c_str(),
         shapeString(dy).c_str(), (long long)norm);
  if (dx)
    checkDtype(k, dx, x->dtype, "dx");
  return x->numel / norm;
}

BNShape batchNorm(const char *k, const dsrt_tensor *x) {
  checkDtype(k, x, DSRT_F32, "input");
  if (x->rank < 2)
    fail(k, "input %s needs rank >= 2", shapeString(x).c_str());
  BNShape s{x->dims[0], x->dims[1], 1};
  for (int d = 2; d < x->rank; ++d)
    s.S *= x->dims[d];
  return s;
}

BNOperands batchNormOperands(const char *k, const dsrt_tensor *x, const dsrt_tensor *outOrDx,
                             const dsrt_tensor *dy, const dsrt_tensor *weight,
                             const dsrt_tensor *bias, const dsrt_tensor *mean,
                             const dsrt_tensor *var, const dsrt_tensor *dweight,
                             const dsrt_tensor *dbias, bool statsRequired) {
  BNOperands o{batchNorm(k, x), nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
  if (dy)
    checkSameShape(k, dy, x);
  if (outOrDx)
    checkSameShape(k, outOrDx, x);
  const int64_t C = o.s.C;
  o.w = optF32(k, weight, C, "weight");
  o.b = optF32(k, bias, C, "bias");
  o.mean = (float *)optF32(k, mean, C, "mean");
  o.var = (float *)optF32(k, var, C, "var");
  if (statsRequired && (!o.mean || !o.var))
    fail(k, "mean and var are required");
  o.dW = (float *)optF32(k, dweight, C, "dweight");
  o.dB = (float *)optF32(k, dbias, C, "dbias");
  return o;
}

int32_t gemmDtype(const char *kernel, const dsrt_tensor *t) {
  if (t->dtype != DSRT_F32 && t->dtype != DSRT_BF16 && t->dtype != DSRT_F16)
    fail(kernel, "unsupported dtype %s (needs f32, bf16 or f16)", dtypeName(t->dtype));
  return t->dtype;
}

LinearShape linear(const dsrt_tensor *out, const dsrt_tensor *x, const dsrt_tensor *w,
                   const dsrt_tensor *bias) {
  const char *k = "linear";
  const int32_t dt = gemmDtype(k, x);
  checkDtype(k, x, dt, "input");
  checkDtype(k, w, dt, "weight");
  checkDtype(k, out, dt, "result");
  if (w->rank != 2 || x->rank < 1 || out->rank != x->rank)
    fail(k, "bad shapes x %s, w %s, out %s", shapeString(x).c_str(), shapeString(w).c_str(),
         shapeString(out).c_str());
  int64_t O = w->dims[0], K = w->dims[1];
  if (x->dims[x->rank - 1] != K || out->dims[out->rank - 1] != O)
    fail(k, "x %s and w %s do not give %s", shapeString(x).c_str(), shapeString(w).c_str(),
         shapeString(out).c_str());
  if (bias) {
    checkDtype(k, bias, dt, "bias");
    if (bias->numel != O)
      fail(k, "bias %s for %lld outputs", shapeString(bias).c_str(), (long long)O);
  }
  return {K ? x->numel / K : out->numel / (O ? O : 1), O, K};
}

LinearShape linearGrad(const dsrt_tensor *dw, const dsrt_tensor *db, const dsrt_tensor *x,
                       const dsrt_tensor *dy) {
  const char *k = "linear_grad_weight";
  const int32_t dt = gemmDtype(k, x);
  checkDtype(k, x, dt, "input");
  checkDtype(k, dy, dt, "dy");
  checkDtype(k, dw, dt, "dw");
  if (dw->rank != 2 || x->rank < 1 || dy->rank < 1)
    fail(k, "bad ranks");
  int64_t O = dw->dims[0], K = dw->dims[1];
  if (x->dims[x->rank - 1] != K || dy->dims[dy->rank - 1] != O ||
      (K && O && x->numel / K != dy->numel / O))
    fail(k, "x %s and dy %s do not give dw %s", shapeString(x).c_str(), shapeString(dy).c_str(),
         shapeString(dw).c_str());
  if (db) {
    checkDtype(k, db, dt, "db");
    if (db->numel != O)
      fail(k, "db %s for %lld outputs", shapeString(db).c_str(), (long long)O);
  }
  return {K ? x->numel / K : (O ? dy->numel / O : 0), O, K};
}

EmbeddingShape embedding(const dsrt_tensor *out, const dsrt_tensor *weight,
                         const dsrt_tensor *indices) {
  const char *k = "embedding";
  indexDtype(k, indices);
  checkDtype(k, out, weight->dtype, "result");
  if (weight->rank != 2 || out->numel != indices->numel * weight->dims[1])
    fail(k, "weight %s, indices %s do not give %s", shapeString(weight).c_str(),
         shapeString(indices).c_str(), shapeString(out).c_str());
  return {weight->dims[0], weight->dims[1], indices->numel};
}

EmbeddingShape embeddingGrad(const dsrt_tensor *dweight, const dsrt_tensor *dy,
                             const dsrt_tensor *indices) {
  const char *k = "embedding_grad";
  indexDtype(k, indices);
  if (dweight->dtype != DSRT_F32 && !isHalfType(dweight->dtype))
    fail(k, "dweight is %s, expected f32, bf16 or f16", dtypeName(dweight->dtype));
  checkDtype(k, dy, dweight->dtype, "dy");
  if (dweight->rank != 2 || dy->numel != indices->numel * dweight->dims[1])
    fail(k, "dweight %s, indices %s, dy %s disagree", shapeString(dweight).c_str(),
         shapeString(indices).c_str(), shapeString(dy).c_str());
  return {dweight->dims[0], dweight->dims[1], indices->numel};
}

TopKShape topK(const dsrt_tensor *values, const dsrt_tensor *indices, const dsrt_tensor *in) {
  const char *k = "top_k";
  if (in->dtype != DSRT_F32 && in->dtype != DSRT_I64)
    fail(k, "input is %s, expected f32 or i64", dtypeName(in->dtype));
  checkDtype(k, values, in->dtype, "values");
  checkDtype(k, indices, DSRT_I64, "indices");
  checkSameShape(k, values, indices);
  if (in->rank < 1 || values->rank != in->rank)
    fail(k, "values %s for input %s", shapeString(values).c_str(), shapeString(in).c_str());
  for (int d = 0; d + 1 < in->rank; ++d)
    if (values->dims[d] != in->dims[d])
      fail(k, "values %s for input %s", shapeString(values).c_str(), shapeString(in).c_str());
  const int64_t n = in->dims[in->rank - 1], kk = values->dims[in->rank - 1];
  if (kk > n)
    fail(k, "k = %lld of %lld elements", (long long)kk, (long long)n);
  return {n ? in->numel / n : 0, n, kk};
}

CapacityShape expertCapacity(const dsrt_tensor *out, const dsrt_tensor *ids, int64_t experts,
                             int64_t choices, int64_t capacity) {
  const char *k = "expert_capacity";
  indexDtype(k, ids);
  checkDtype(k, out, ids->dtype, "out");
  checkSameShape(k, out, ids);
  if (ids->rank != 1 || choices < 1 || ids->numel % choices != 0)
    fail(k, "ids %s are not [tokens x %lld choices]", shapeString(ids).c_str(),
         (long long)choices);
  if (experts < 1 || capacity < 0)
    fail(k, "%lld experts of capacity %lld", (long long)experts, (long long)capacity);
  return {ids->numel, ids->numel / choices, choices};
}

ExpertShape expertLinear(const char *k, const dsrt_tensor *y, const dsrt_tensor *x,
                         const dsrt_tensor *w, const dsrt_tensor *ids, int32_t transposed) {
  indexDtype(k, ids);
  checkDtype(k, x, DSRT_F32, "x");
  checkDtype(k, y, DSRT_F32, "rows");
  checkDtype(k, w, DSRT_F32, "weight");
  if (x->rank != 2 || y->rank != 2 || w->rank != 3 || ids->numel != x->dims[0] ||
      y->dims[0] != x->dims[0])
    fail(k, "x %s, rows %s, weight %s and ids %s disagree", shapeString(x).c_str(),
         shapeString(y).c_str(), shapeString(w).c_str(), shapeString(ids).c_str());
  const int64_t in = w->dims[transposed ? 1 : 2], out = w->dims[transposed ? 2 : 1];
  if (x->dims[1] != in || y->dims[1] != out)
    fail(k, "x %s and rows %s for weight %s%s", shapeString(x).c_str(), shapeString(y).c_str(),
         shapeString(w).c_str(), transposed ? " (transposed)" : "");
  return {x->dims[0], w->dims[0], in, out};
}

SwigluShape swiglu(const char *k, const dsrt_tensor *x, const dsrt_tensor *y,
                   const dsrt_tensor *dx, const dsrt_tensor *rows) {
  checkDtype(k, x, DSRT_F32, "x");
  checkDtype(k, y, DSRT_F32, dx ? "dy" : "out");
  if (dx) {
    checkDtype(k, dx, DSRT_F32, "dx");
    checkSameShape(k, dx, x);
  }
  bool halves = x->rank >= 1 && y->rank == x->rank && x->dims[x->rank - 1] % 2 == 0 &&
                y->dims[y->rank - 1] * 2 == x->dims[x->rank - 1];
  for (int d = 0; halves && d + 1 < x->rank; ++d)
    halves = y->dims[d] == x->dims[d];
  if (!halves)
    fail(k, "x %s is not the gate and up halves of %s %s", shapeString(x).c_str(),
         dx ? "dy" : "out", shapeString(y).c_str());
  const int64_t F = y->dims[y->rank - 1], R = F ? y->numel / F : 0;
  if (rows) {
    indexDtype(k, rows);
    if (x->rank != 2 || rows->numel != R)
      fail(k, "rows %s for x %s, expected [R] for x [R, 2F]", shapeString(rows).c_str(),
           shapeString(x).c_str());
  }
  return {R, F};
}

CEShape crossEntropy(const char *k, const dsrt_tensor *logits, const dsrt_tensor *target,
                     const dsrt_tensor *result, int32_t reduction) {
  checkDtype(k, logits, DSRT_F32, "logits");
  indexDtype(k, target);
  CEShape s;
  if (logits->rank == 2)
    s = {logits->dims[0], logits->dims[1]};
  else if (logits->rank == 1)
    s = {1, logits->dims[0]};
  else
    fail(k, "logits %s must be [N, C] or [C]", shapeString(logits).c_str());
  if (target->numel != s.N)
    fail(k, "target %s for logits %s", shapeString(target).c_str(), shapeString(logits).c_str());
  // The forward's result, or the gradient's dy.
  const char *what = std::strcmp(k, "cross_entropy") == 0 ? "result" : "dy";
  checkDtype(k, result, DSRT_F32, what);
  if (reduction == DSRT_REDUCTION_NONE ? result->numel != s.N : result->numel != 1)
    fail(k, "%s %s for reduction %d of %lld rows", what, shapeString(result).c_str(), reduction,
         (long long)s.N);
  if (reduction < DSRT_REDUCTION_NONE || reduction > DSRT_REDUCTION_SUM)
    fail(k, "unknown reduction %d", reduction);
  return s;
}

void adamw(const dsrt_tensor *pOut, const dsrt_tensor *mOut, const dsrt_tensor *vOut,
           const dsrt_tensor *p, const dsrt_tensor *g, const dsrt_tensor *m, const dsrt_tensor *v,
           const dsrt_tensor *stepSize, const dsrt_tensor *bc2Sqrt, const dsrt_tensor *decay,
           const dsrt_tensor *beta1) {
  const char *k = "adamw_update";
  for (const dsrt_tensor *t : std::initializer_list<const dsrt_tensor *>{
           pOut, mOut, vOut, p, g, m, v, stepSize, bc2Sqrt, decay})
    checkDtype(k, t, DSRT_F32, "operand");
  checkDtype(k, beta1, DSRT_F64, "beta1");
  for (const dsrt_tensor *t : std::initializer_list<const dsrt_tensor *>{pOut, mOut, vOut, g, m, v})
    if (t->numel != p->numel)
      fail(k, "operands differ in size: %s vs %s", shapeString(t).c_str(),
           shapeString(p).c_str());
}

ReducePlan reduce(int32_t kind, const dsrt_tensor *out, const dsrt_tensor *in, uint64_t mask) {
  const char *k = "reduce";
  if (kind < DSRT_SUM || kind > DSRT_AMAX)
    fail(k, "unknown kind %d", kind);
  int64_t nOut = 1;
  for (int d = 0; d < in->rank; ++d)
    if (!((mask >> d) & 1))
      nOut *= in->dims[d];
  if (in->rank < 64 && (mask >> in->rank))
    fail(k, "mask 0x%llx names dims beyond rank %d", (unsigned long long)mask, in->rank);
  if (out->numel != nOut)
    fail(k, "result %s does not match %s reduced by mask 0x%llx", shapeString(out).c_str(),
         shapeString(in).c_str(), (unsigned long long)mask);
  if (kind == DSRT_MEAN && (!isFloat(in->dtype) || !isFloat(out->dtype)))
    fail(k, "mean needs a floating-point dtype");
  if (kind == DSRT_AMAX && out->dtype != in->dtype)
    fail(k, "amax result is %s, operand %s", dtypeName(out->dtype), dtypeName(in->dtype));
  ReducePlan p;
  int64_t strides[DSRT_MAX_RANK];
  contiguousStrides(in->rank, in->dims, strides);
  bool haveLast = false;
  for (int d = 0; d < in->rank; ++d) {
    if (in->dims[d] == 1)
      continue;
    bool r = (mask >> d) & 1;
    int &n = r ? p.nRed : p.nKept;
    int64_t *size = r ? p.redSize : p.keptSize, *stride = r ? p.redStride : p.keptStride;
    if (haveLast && p.lastReduced == r) {
      size[n - 1] *= in->dims[d];
      stride[n - 1] = strides[d];
    } else {
      size[n] = in->dims[d];
      stride[n] = strides[d];
      ++n;
    }
    haveLast = true;
    p.lastReduced = r;
  }
  for (int i = 0; i < p.nKept; ++i)
    p.nOut *= p.keptSize[i];
  for (int i = 0; i < p.nRed; ++i)
    p.nReduced *= p.redSize[i];
  return p;
}

} // namespace dsrt::checks
