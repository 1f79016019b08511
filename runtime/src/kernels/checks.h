//===- checks.h - the kernels' argument checks, shared by every device ---------===//
//
// Each kernel checks its operands on the host before it runs, the same way on every device:
// these functions end the job (dsrt::fail) naming the kernel and the mismatch, and return the
// sizes the kernel loops over. The device files keep only their loops.
//
#ifndef DSRT_KERNELS_CHECKS_H
#define DSRT_KERNELS_CHECKS_H

#include "dsrt/dsrt.h"

#include <cstdint>

namespace dsrt::checks {

/// A tensor as [outer, D, inner] around dimension `dim` (negative counts from the end).
struct DimSplit {
  int64_t outer, D, inner;
};
DimSplit splitAt(const char *k, const dsrt_tensor *t, int64_t dim);

/// Indices are i64 or i32.
void indexDtype(const char *k, const dsrt_tensor *t);
/// An operand of `dtype` with n elements.
void sized(const char *k, const dsrt_tensor *t, int32_t dtype, int64_t n, const char *what);
/// An optional f32 operand of n elements: its data, or null when absent.
const float *optF32(const char *k, const dsrt_tensor *t, int64_t n, const char *what);

void unary(const dsrt_tensor *out, const dsrt_tensor *in, int32_t op);
void binary(const dsrt_tensor *out, const dsrt_tensor *a, const dsrt_tensor *b, int32_t op);
void cmp(const dsrt_tensor *out, const dsrt_tensor *a, const dsrt_tensor *b, int32_t pred);
void where(const dsrt_tensor *out, const dsrt_tensor *cond, const dsrt_tensor *a,
           const dsrt_tensor *b);

DimSplit softmax(const dsrt_tensor *out, const dsrt_tensor *in, int64_t dim);
DimSplit softmaxGrad(const dsrt_tensor *dx, const dsrt_tensor *y, const dsrt_tensor *dy,
                     int64_t dim);

/// A running sum: same shape and dtype (not i1).
DimSplit cumsum(const dsrt_tensor *out, const dsrt_tensor *in, int64_t dim);

/// Attention's sizes: q [B, Hq, L, E], k [B, Hk, S, E], v [B, Hk, S, Ev], and the mask's
/// element strides over [B, Hq, L, S] (0 where it broadcasts; kind 0 none, 1 bool, 2 added).
struct AttentionShape {
  int64_t B, Hq, Hk, L, S, E, Ev;
  int32_t dtype, maskKind;
  int64_t mb, mh, ml, ms;
};
AttentionShape attention(const dsrt_tensor *out, const dsrt_tensor *lse, const dsrt_tensor *q,
                         const dsrt_tensor *k, const dsrt_tensor *v, const dsrt_tensor *mask,
                         int32_t causal);
AttentionShape attentionGrad(const dsrt_tensor *dq, const dsrt_tensor *dk, const dsrt_tensor *dv,
                             const dsrt_tensor *q, const dsrt_tensor *k, const dsrt_tensor *v,
                             const dsrt_tensor *mask, const dsrt_tensor *out,
                             const dsrt_tensor *lse, const dsrt_tensor *dout, int32_t causal);

/// dsrt_sample's operands: the rows B and the vocabulary V of the logits [B, V] (the
/// parameters' values are the device's to check).
struct SampleShape {
  int64_t B, V;
};
SampleShape sample(const dsrt_tensor *tokens, const dsrt_tensor *logits,
                   const dsrt_tensor *temperature, const dsrt_tensor *topK,
                   const dsrt_tensor *topP, const dsrt_tensor *seeds, const dsrt_tensor *steps);

/// The paged key/value cache's sizes: N pages of P positions, Hk heads of widths E (keys) and
/// Ev (values); with B sequences of up to T new tokens (Hq query heads for attention).
struct PagedShape {
  int64_t B, Hq, Hk, T, E, Ev, N, P, maxPages;
  int32_t dtype;
};
/// dsrt_cache_write's operands (the slots' values are the device's to check).
PagedShape cacheWrite(const dsrt_tensor *kCache, const dsrt_tensor *vCache, const dsrt_tensor *k,
                      const dsrt_tensor *v, const dsrt_tensor *slots);
/// dsrt_paged_attention's operands (the pages' and lengths' values are the device's to check).
PagedShape pagedAttention(const dsrt_tensor *out, const dsrt_tensor *q,
                          const dsrt_tensor *kCache, const dsrt_tensor *vCache,
                          const dsrt_tensor *pages, const dsrt_tensor *contextLens,
                          const dsrt_tensor *qLens);

/// The rows of a layer norm over `norm` trailing elements.
int64_t layerNorm(const dsrt_tensor *out, const dsrt_tensor *x, int64_t norm);
int64_t layerNormGrad(const dsrt_tensor *dx, const dsrt_tensor *x, const dsrt_tensor *dy,
                      int64_t norm);

/// Batch norm over dim 1: batch, channels, spatial.
struct BNShape {
  int64_t N, C, S;
};
BNShape batchNorm(const char *k, const dsrt_tensor *x);
/// Batch norm's operands beside x (the shape's), each of C f32 values: weight and bias
/// optional (null when absent); mean and var required by the gradient and the inference form,
/// outputs of the training form (optional there); dweight and dbias optional outputs.
struct BNOperands {
  BNShape s;
  const float *w, *b;
  float *mean, *var, *dW, *dB;
};
/// For batch_norm (out, mean and var outputs), batch_norm_grad (dx optional, dy required,
/// mean and var required) and batch_norm_inference (out, mean and var required): `k` names it.
BNOperands batchNormOperands(const char *k, const dsrt_tensor *x, const dsrt_tensor *outOrDx,
                             const dsrt_tensor *dy, const dsrt_tensor *weight,
                             const dsrt_tensor *bias, const dsrt_tensor *mean,
                             const dsrt_tensor *var, const dsrt_tensor *dweight,
                             const dsrt_tensor *dbias, bool statsRequired);

/// The element type of a GEMM's operands (f32, bf16 or f16; every operand and result has it).
int32_t gemmDtype(const char *kernel, const dsrt_tensor *t);
/// out[M, O] = x[M, K] w[O, K]^T (+ bias[O]).
struct LinearShape {
  int64_t M, O, K;
};
LinearShape linear(const dsrt_tensor *out, const dsrt_tensor *x, const dsrt_tensor *w,
                   const dsrt_tensor *bias);
LinearShape linearGrad(const dsrt_tensor *dw, const dsrt_tensor *db, const dsrt_tensor *x,
                       const dsrt_tensor *dy);

/// weight [V, D] rows gathered by n indices.
struct EmbeddingShape {
  int64_t V, D, n;
};
EmbeddingShape embedding(const dsrt_tensor *out, const dsrt_tensor *weight,
                         const dsrt_tensor *indices);
EmbeddingShape embeddingGrad(const dsrt_tensor *dweight, const dsrt_tensor *dy,
                             const dsrt_tensor *indices);

/// Rows [rows, n] of a top-k selection of k.
struct TopKShape {
  int64_t rows, n, k;
};
TopKShape topK(const dsrt_tensor *values, const dsrt_tensor *indices, const dsrt_tensor *in);

/// The rows, tokens and choices of a capacity drop (dsrt_expert_capacity), checked.
struct CapacityShape {
  int64_t rows, tokens, choices;
};
CapacityShape expertCapacity(const dsrt_tensor *out, const dsrt_tensor *ids, int64_t experts,
                             int64_t choices, int64_t capacity);

/// N rows of `in` features through E experts' [out, in] maps.
struct ExpertShape {
  int64_t N, E, in, out;
};
/// `y` is the result (forward) or dy (weight gradient); `w` the weight or dw.
ExpertShape expertLinear(const char *k, const dsrt_tensor *y, const dsrt_tensor *x,
                         const dsrt_tensor *w, const dsrt_tensor *ids, int32_t transposed);

/// A SwiGLU's R rows of F gate-and-up pairs: x [..., 2F] (with row ids, [R, 2F]) and `y` (the
/// result or dy) [..., F], f32, `dx` (the gradient's, or null) of x's shape.
struct SwigluShape {
  int64_t R, F;
};
SwigluShape swiglu(const char *k, const dsrt_tensor *x, const dsrt_tensor *y,
                   const dsrt_tensor *dx, const dsrt_tensor *rows);

/// logits [N, C] (or [C]) and N targets; `result` is the loss (or dy for the gradient).
struct CEShape {
  int64_t N, C;
};
CEShape crossEntropy(const char *k, const dsrt_tensor *logits, const dsrt_tensor *target,
                     const dsrt_tensor *result, int32_t reduction);

void adamw(const dsrt_tensor *pOut, const dsrt_tensor *mOut, const dsrt_tensor *vOut,
           const dsrt_tensor *p, const dsrt_tensor *g, const dsrt_tensor *m, const dsrt_tensor *v,
           const dsrt_tensor *stepSize, const dsrt_tensor *bc2Sqrt, const dsrt_tensor *decay,
           const dsrt_tensor *beta1);

/// A reduction's input dims coalesced into alternating kept and reduced groups (size, element
/// stride), size-1 dims dropped.
struct ReducePlan {
  int nKept = 0, nRed = 0;
  int64_t keptSize[DSRT_MAX_RANK] = {}, keptStride[DSRT_MAX_RANK] = {};
  int64_t redSize[DSRT_MAX_RANK] = {}, redStride[DSRT_MAX_RANK] = {};
  bool lastReduced = false; ///< the innermost group is reduced
  int64_t nOut = 1, nReduced = 1;
};
ReducePlan reduce(int32_t kind, const dsrt_tensor *out, const dsrt_tensor *in, uint64_t mask);

} // namespace dsrt::checks

#endif // DSRT_KERNELS_CHECKS_H
