//===- gemm_half.h - 16-bit GEMMs of the CPU device -----------------------===//
#ifndef DSRT_CPU_GEMM_HALF_H
#define DSRT_CPU_GEMM_HALF_H

#include "cpu_device.h"

#include <string>

namespace dsrt::cpu {

/// Row-major C[M,N] = alpha op(A) op(B) + beta C in f32 (oneDNN's sgemm; matmul.cpp).
void sgemm(const char *kernel, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A,
           int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc,
           float alpha = 1.f);

/// Whether a batch of products runs one product per thread (each sgemm single-threaded inside
/// the region): many small ones, as attention's heads (matmul.cpp).
bool productPerThread(int64_t batch, int64_t M, int64_t N, int64_t K);

/// A 16-bit product: `batch` times C[M,N] = op(A)[M,K] op(B)[K,N] (+ bias[N]), every operand
/// of `dtype` (bf16 or f16), row-major with leading dimensions lda/ldb/ldc and element strides
/// between the batches (0: the same matrix for every batch). Accumulated in f32, the bias
/// added in f32, rounded once, as PyTorch's bf16 CPU matmul and linear (oneDNN) do. `alpha`
/// scales the f32 sums before the rounding (a power of two: dsrt_matmul_view's, exact).
/// `batch0` > 1 leads the batch with an outer level of its own strides (dsrt_matmul_view's
/// [B, H] heads of strided views: one product call, not one per B).
struct HalfGemm {
  int32_t dtype;
  bool ta, tb;
  int64_t batch, M, N, K, lda, ldb, ldc, strideA, strideB, strideC;
  const void *A, *B, *bias;
  void *C;
  float alpha = 1.f;
  int64_t batch0 = 1, strideA0 = 0, strideB0 = 0, strideC0 = 0;
};
/// bf16 through oneDNN's matmul primitive on the CPU's bf16 units where they outrun its f32
/// FMAs (AMX; AVX512_BF16 on AMD); f16, and bf16 elsewhere (AVX2, where oneDNN has no bf16
/// kernel; Intel's AVX512_BF16 without AMX, whose dot products run at half the FMA rate), by
/// widening to f32 in scratch memory and oneDNN's sgemm (the same numbers up to the order of
/// the sums). Chosen once per process; DSRT_BF16_PRODUCTS=onednn or f32 overrides it.
void gemmHalf(dsrt_context *ctx, const char *kernel, const HalfGemm &g);

/// A 16-bit batched matmul (the matmul kernel's shapes, trans flags and broadcasting).
void matmulHalf(dsrt_context *ctx, const char *kernel, int32_t dtype, const MatmulShape &ms,
                dsrt_tensor *out, const dsrt_tensor *a, const dsrt_tensor *b, bool ta, bool tb);

/// out[o] = sum over the M rows of in[M, O], in f32, rounded once (a 16-bit bias gradient).
void sumRowsHalf(int32_t dtype, const uint16_t *in, int64_t M, int64_t O, uint16_t *out);

/// How bf16 products run on this CPU and why, for ds-report: "bf16 products on oneDNN's bf16
/// kernels (AMX): brg:avx512_core_amx" (oneDNN's implementation), or widened to f32.
std::string halfProductsReport();

} // namespace dsrt::cpu

#endif
