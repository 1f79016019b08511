//===- matmul.cpp - CUDA kernels: batched matmul and linear layers on cuBLAS ---------===//
//
// Row-major products through column-major cuBLAS: C = op(A) op(B) is C^T = op(B)^T op(A)^T,
// so the operands are passed swapped. fp32 computes in fp32 (CUBLAS_COMPUTE_32F: no TF32,
// PyTorch's default for matmul); bf16 and f16 operands go to cuBLAS as they are, accumulated
// in f32 on the tensor cores and rounded once (PyTorch's 16-bit GEMMs; a linear layer's bias
// is the accumulator's start, beta 1, as in PyTorch's addmm). The batch shapes come from the
// core's matmulShape, shared with the CPU.
//
#include "../kernels/checks.h"
#include "cuda_device.h"

#include <algorithm>
#include <type_traits>
#include <vector>

using namespace dsrt;
using namespace dsrt::cuda;

namespace {

/// An operand's element type for cuBLAS: f32, bf16 or f16 (all three of one call alike).
struct Gemm {
  dsrt_context *ctx;
  const char *kernel;
  int32_t dtype;
  cudaDataType type() const {
    return dtype == DSRT_BF16 ? CUDA_R_16BF : dtype == DSRT_F16 ? CUDA_R_16F : CUDA_R_32F;
  }
  size_t size() const { return dsrt_dtype_size(dtype); }
  /// Element `i` of a buffer of this type.
  template <class P> P *at(P *base, int64_t i) const {
    using Byte = std::conditional_t<std::is_const_v<P>, const char, char>;
    return reinterpret_cast<P *>(reinterpret_cast<Byte *>(base) + i * (int64_t)size());
  }

  /// Row-major C[M,N] = alpha op(A) op(B) + beta C, `batch` times with element strides
  /// between the batches.
  void operator()(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda,
                  int64_t strideA, const void *B, int64_t ldb, int64_t strideB, void *C,
                  int64_t ldc, int64_t strideC, int64_t batch, float alpha = 1.f,
                  float beta = 0.f) const {
    if (M == 0 || N == 0 || batch == 0)
      return;
    if (K == 0) {
      if (beta == 0.f)
        ctx->device->zero(C, (size_t)(batch * M * N) * size());
      return;
    }
    if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX || batch > INT32_MAX)
      fail(kernel, "a product of %lld x %lld x %lld (batch %lld) exceeds cuBLAS's int sizes",
           (long long)M, (long long)N, (long long)K, (long long)batch);
    checkBlas(cublasGemmStridedBatchedEx(device(ctx).blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                         ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)N, (int)M, (int)K,
                                         &alpha, B, type(), (int)ldb, strideB, A, type(),
                                         (int)lda, strideA, &beta, C, type(), (int)ldc, strideC,
                                         (int)batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              kernel);
  }
};

/// The one element type of a product's operands and result: f32, bf16 or f16.
int32_t productType(const char *kernel, std::initializer_list<const dsrt_tensor *> ts) {
  const int32_t dt = (*ts.begin())->dtype;
  if (dt != DSRT_F32 && dt != DSRT_BF16 && dt != DSRT_F16)
    fail(kernel, "operands are %s: expected f32, bf16 or f16", dtypeName(dt));
  for (const dsrt_tensor *t : ts)
    if (t && t->dtype != dt)
      fail(kernel, "operands of %s and %s: expected one type", dtypeName(dt),
           dtypeName(t->dtype));
  return dt;
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

} // namespace

void dsrt::cuda::matmul(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *a,
                        const dsrt_tensor *b, int32_t trans_a, int32_t trans_b) {
  const char *k = "matmul";
  const Gemm gemm{ctx, k, productType(k, {a, b, out})};
  const MatmulShape s = matmulShape(out, a, b, trans_a, trans_b);
  const void *A = a->data, *B = b->data;
  void *C = out->data;
  if (s.batch == 0)
    return;
  if (s.bShared && s.aContig && !trans_a) { // one rhs for every batch: fold the batch into M
    gemm(false, trans_b, s.batch * s.M, s.N, s.K, A, s.lda, 0, B, s.ldb, 0, C, s.N, 0, 1);
    return;
  }
  int64_t strideA, strideB;
  if (uniformStride(s, true, strideA) && uniformStride(s, false, strideB)) {
    gemm(trans_a, trans_b, s.M, s.N, s.K, A, s.lda, strideA, B, s.ldb, strideB, C, s.N,
         s.M * s.N, s.batch);
    return;
  }
  for (int64_t bi = 0; bi < s.batch; ++bi) { // general broadcasting: one product per batch
    int64_t oa, ob;
    s.offsets(bi, oa, ob);
    gemm(trans_a, trans_b, s.M, s.N, s.K, gemm.at(A, oa), s.lda, 0, gemm.at(B, ob), s.ldb, 0,
         gemm.at(C, bi * s.M * s.N), s.N, 0, 1);
  }
}

void dsrt::cuda::matmul_view(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *a,
                             const dsrt_tensor *b, const int64_t *views, double alpha) {
  const char *k = "matmul_view";
  const MatmulViews v = matmulViews(out, a, b, views); // one type: f32, bf16 or f16
  const Gemm gemm{ctx, k, out->dtype};
  const void *A = (v.swapped ? b : a)->data, *B = (v.swapped ? a : b)->data;
  void *C = out->data;
  if (v.b0 * v.b1 * v.M * v.N == 0)
    return;
  if (v.K == 0) { // zero the result's views, row by row
    for (int64_t i0 = 0; i0 < v.b0; ++i0)
      for (int64_t i1 = 0; i1 < v.b1; ++i1)
        for (int64_t r = 0; r < v.M; ++r)
          ctx->device->zero(gemm.at(C, v.c.at(i0, i1) + r * v.c.ld),
                            (size_t)v.N * gemm.size());
    return;
  }
  // Batch dim 1 as cuBLAS's strided batch, dim 0 as calls; alpha scales the f32 sums before
  // the 16-bit rounding.
  for (int64_t i0 = 0; i0 < v.b0; ++i0)
    gemm(v.a.trans, v.b.trans, v.M, v.N, v.K, gemm.at(A, v.a.at(i0, 0)), v.a.ld, v.a.s1,
         gemm.at(B, v.b.at(i0, 0)), v.b.ld, v.b.s1, gemm.at(C, v.c.at(i0, 0)), v.c.ld, v.c.s1,
         v.b1, (float)alpha);
}

void dsrt::cuda::linear(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *x,
                        const dsrt_tensor *w, const dsrt_tensor *bias) {
  const char *k = "linear";
  const checks::LinearShape ls = checks::linear(out, x, w, bias);
  const int64_t M = ls.M, O = ls.O, K = ls.K;
  const Gemm gemm{ctx, k, productType(k, {x, w, out, bias})};
  float beta = 0.f;
  if (bias) { // every row starts as the bias: the product accumulates onto it, rounded once
    dsrt_tensor b1 = *bias;
    b1.rank = 1;
    b1.dims[0] = O;
    fill(ctx, out, 0.0);
    binary(ctx, DSRT_ADD, out, out, &b1);
    beta = 1.f;
  }
  gemm(false, true, M, O, K, x->data, K, 0, w->data, K, 0, out->data, O, 0, 1, 1.f, beta);
}

void dsrt::cuda::linear_grad_weight(dsrt_context *ctx, dsrt_tensor *dw, dsrt_tensor *db,
                                    const dsrt_tensor *x, const dsrt_tensor *dy) {
  const char *k = "linear_grad_weight";
  const checks::LinearShape ls = checks::linearGrad(dw, db, x, dy);
  const int64_t M = ls.M, O = ls.O, K = ls.K;
  const Gemm gemm{ctx, k, productType(k, {x, dy, dw, db})};
  gemm(true, false, O, K, M, dy->data, O, 0, x->data, K, 0, dw->data, K, 0, 1);
  if (!db)
    return;
  dsrt_tensor dy2 = *dy;
  dy2.rank = 2;
  dy2.dims[0] = M;
  dy2.dims[1] = O;
  if (dy->dtype == DSRT_F32)
    return reduce(ctx, DSRT_SUM, db, &dy2, 1);
  // 16 bits: the column sums in f32 over an f32 copy of dy, rounded once (the sum kernel is
  // f32's), in stream-ordered memory outside the arena.
  void *wide = nullptr;
  check(cudaMallocAsync(&wide, (size_t)(std::max<int64_t>(M, 1) * O + O) * sizeof(float),
                        stream(ctx)),
        "cudaMallocAsync");
  dsrt_tensor dy32 = dy2, db32 = *db;
  dy32.dtype = db32.dtype = DSRT_F32;
  dy32.storage = db32.storage = nullptr;
  dy32.data = wide;
  db32.data = static_cast<float *>(wide) + std::max<int64_t>(M, 1) * O;
  convert(ctx, &dy32, &dy2);
  reduce(ctx, DSRT_SUM, &db32, &dy32, 1);
  convert(ctx, db, &db32);
  check(cudaFreeAsync(wide, stream(ctx)), "cudaFreeAsync");
}
