//===- matmul.cpp - CUDA kernels: batched matmul and linear layers on cuBLAS ---------===//
//
// Row-major products through column-major cuBLAS: C = op(A) op(B) is C^T = op(B)^T op(A)^T,
// so the operands are passed swapped. fp32 computes in fp32 (CUBLAS_COMPUTE_32F: no TF32,
// PyTorch's default for matmul); the batch shapes come from the core's matmulShape, shared
// with the CPU.
//
#include "../kernels/checks.h"
#include "cuda_device.h"

#include <algorithm>
#include <deque>
#include <vector>

using namespace dsrt;
using namespace dsrt::cuda;

namespace {

/// Row-major C[M,N] = op(A) op(B), `batch` times with element strides between the batches.
void gemm(dsrt_context *ctx, const char *kernel, bool ta, bool tb, int64_t M, int64_t N,
          int64_t K, const float *A, int64_t lda, int64_t strideA, const float *B, int64_t ldb,
          int64_t strideB, float *C, int64_t ldc, int64_t strideC, int64_t batch,
          float alpha = 1.f) {
  if (M == 0 || N == 0 || batch == 0)
    return;
  if (K == 0) {
    ctx->device->zero(C, (size_t)(batch * M * N) * sizeof(float));
    return;
  }
  if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX || batch > INT32_MAX)
    fail(kernel, "a product of %lld x %lld x %lld (batch %lld) exceeds cuBLAS's int sizes",
         (long long)M, (long long)N, (long long)K, (long long)batch);
  const float zero = 0.f;
  checkBlas(cublasGemmStridedBatchedEx(device(ctx).blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                       ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)N, (int)M, (int)K,
                                       &alpha, B, CUDA_R_32F, (int)ldb, strideB, A, CUDA_R_32F,
                                       (int)lda, strideA, &zero, C, CUDA_R_32F, (int)ldc, strideC,
                                       (int)batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            kernel);
}

/// Whether the operand's batch offsets are `stride` * bi for every batch bi (or all 0).
bool uniformStride(const MatmulShape &s, bool lhs, int64_t &stride) {
  int64_t oa, ob;
  s.offsets(s.batch > 1 ? 1 : 0, oa, ob);
  stride = lhs ? oa : ob;
  for (int64_t bi = 0; bi < s.batch; ++bi) {
    s.offsets(bi, oa, ob);
    if ((lhs ? oa : ob) != stride * bi)
      return false;
  }
  return true;
}

/// A 16-bit GEMM widened to f32 (the same numbers as the f32 product of the converted
/// operands, rounded once): each 16-bit tensor gets an f32 copy in stream-ordered memory
/// outside the arena, `run` computes on the copies, and the outputs are converted back.
/// cuBLAS's bf16/f16 GEMMs (f32 accumulation, tensor cores) are the faster way, not yet taken.
class Widened {
public:
  explicit Widened(dsrt_context *ctx) : ctx(ctx) {}
  ~Widened() {
    for (void *p : blocks)
      check(cudaFreeAsync(p, stream(ctx)), "cudaFreeAsync");
  }
  /// An f32 copy of `t` (null for null), filled from `t` when `in`.
  dsrt_tensor *f32(const dsrt_tensor *t, bool in) {
    if (!t)
      return nullptr;
    void *p = nullptr;
    check(cudaMallocAsync(&p, (size_t)std::max<int64_t>(t->numel, 1) * sizeof(float),
                          stream(ctx)),
          "cudaMallocAsync");
    blocks.push_back(p);
    copies.push_back(*t);
    dsrt_tensor &c = copies.back();
    c.data = p;
    c.dtype = DSRT_F32;
    c.storage = nullptr;
    if (in)
      convert(ctx, &c, t);
    return &c;
  }
  /// Converts the f32 copy `c` back into `t`.
  void back(dsrt_tensor *t, const dsrt_tensor *c) {
    if (t)
      convert(ctx, t, c);
  }

private:
  dsrt_context *ctx;
  std::vector<void *> blocks;
  std::deque<dsrt_tensor> copies; // stable addresses
};

} // namespace

void dsrt::cuda::matmul(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *a,
                        const dsrt_tensor *b, int32_t trans_a, int32_t trans_b) {
  const char *k = "matmul";
  if (a->dtype != DSRT_F32 && a->dtype == b->dtype && a->dtype == out->dtype &&
      (a->dtype == DSRT_BF16 || a->dtype == DSRT_F16)) {
    Widened w(ctx);
    dsrt_tensor *o = w.f32(out, false);
    matmul(ctx, o, w.f32(a, true), w.f32(b, true), trans_a, trans_b);
    w.back(out, o);
    return;
  }
  checkDtype(k, a, DSRT_F32, "lhs");
  checkDtype(k, b, DSRT_F32, "rhs");
  checkDtype(k, out, DSRT_F32, "result");
  const MatmulShape s = matmulShape(out, a, b, trans_a, trans_b);
  const float *A = (const float *)a->data, *B = (const float *)b->data;
  float *C = (float *)out->data;
  if (s.batch == 0)
    return;
  if (s.bShared && s.aContig && !trans_a) { // one rhs for every batch: fold the batch into M
    gemm(ctx, k, false, trans_b, s.batch * s.M, s.N, s.K, A, s.lda, 0, B, s.ldb, 0, C, s.N, 0, 1);
    return;
  }
  int64_t strideA, strideB;
  if (uniformStride(s, true, strideA) && uniformStride(s, false, strideB)) {
    gemm(ctx, k, trans_a, trans_b, s.M, s.N, s.K, A, s.lda, strideA, B, s.ldb, strideB, C, s.N,
         s.M * s.N, s.batch);
    return;
  }
  for (int64_t bi = 0; bi < s.batch; ++bi) { // general broadcasting: one product per batch
    int64_t oa, ob;
    s.offsets(bi, oa, ob);
    gemm(ctx, k, trans_a, trans_b, s.M, s.N, s.K, A + oa, s.lda, 0, B + ob, s.ldb, 0,
         C + bi * s.M * s.N, s.N, 0, 1);
  }
}

void dsrt::cuda::matmul_view(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *a,
                             const dsrt_tensor *b, const int64_t *views, double alpha) {
  const char *k = "matmul_view";
  const MatmulViews v = matmulViews(out, a, b, views);
  const float *A = (const float *)(v.swapped ? b : a)->data;
  const float *B = (const float *)(v.swapped ? a : b)->data;
  float *C = (float *)out->data;
  if (v.b0 * v.b1 * v.M * v.N == 0)
    return;
  if (v.K == 0) { // zero the result's views, row by row
    for (int64_t i0 = 0; i0 < v.b0; ++i0)
      for (int64_t i1 = 0; i1 < v.b1; ++i1)
        for (int64_t r = 0; r < v.M; ++r)
          ctx->device->zero(C + v.c.at(i0, i1) + r * v.c.ld, (size_t)v.N * sizeof(float));
    return;
  }
  // Batch dim 1 as cuBLAS's strided batch, dim 0 as calls.
  for (int64_t i0 = 0; i0 < v.b0; ++i0)
    gemm(ctx, k, v.a.trans, v.b.trans, v.M, v.N, v.K, A + v.a.at(i0, 0), v.a.ld, v.a.s1,
         B + v.b.at(i0, 0), v.b.ld, v.b.s1, C + v.c.at(i0, 0), v.c.ld, v.c.s1, v.b1,
         (float)alpha);
}

void dsrt::cuda::linear(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *x,
                        const dsrt_tensor *w, const dsrt_tensor *bias) {
  const char *k = "linear";
  const checks::LinearShape ls = checks::linear(out, x, w, bias);
  const int64_t M = ls.M, O = ls.O, K = ls.K;
  if (x->dtype != DSRT_F32) {
    Widened wd(ctx);
    dsrt_tensor *o = wd.f32(out, false);
    linear(ctx, o, wd.f32(x, true), wd.f32(w, true), wd.f32(bias, true));
    wd.back(out, o);
    return;
  }
  gemm(ctx, k, false, true, M, O, K, (const float *)x->data, K, 0, (const float *)w->data, K, 0,
       (float *)out->data, O, 0, 1);
  if (bias) {
    dsrt_tensor b1 = *bias;
    b1.rank = 1;
    b1.dims[0] = O;
    binary(ctx, DSRT_ADD, out, out, &b1);
  }
}

void dsrt::cuda::linear_grad_weight(dsrt_context *ctx, dsrt_tensor *dw, dsrt_tensor *db,
                                    const dsrt_tensor *x, const dsrt_tensor *dy) {
  const char *k = "linear_grad_weight";
  const checks::LinearShape ls = checks::linearGrad(dw, db, x, dy);
  const int64_t M = ls.M, O = ls.O, K = ls.K;
  if (x->dtype != DSRT_F32) {
    Widened wd(ctx);
    dsrt_tensor *dw32 = wd.f32(dw, false), *db32 = wd.f32(db, false);
    linear_grad_weight(ctx, dw32, db32, wd.f32(x, true), wd.f32(dy, true));
    wd.back(dw, dw32);
    wd.back(db, db32);
    return;
  }
  if (M == 0)
    ctx->device->zero(dw->data, (size_t)dw->numel * sizeof(float));
  gemm(ctx, k, true, false, O, K, M, (const float *)dy->data, O, 0, (const float *)x->data, K, 0,
       (float *)dw->data, K, 0, 1);
  if (db) {
    dsrt_tensor dy2 = *dy;
    dy2.rank = 2;
    dy2.dims[0] = M;
    dy2.dims[1] = O;
    reduce(ctx, DSRT_SUM, db, &dy2, 1);
  }
}
