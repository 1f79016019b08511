// CPU kernels: batched matmul and linear layers on oneDNN's sgemm; their 16-bit forms in
// gemm_half.cpp.
#include "cpu_device.h"
#include "gemm_half.h"
#include "../kernels/checks.h"

#include <omp.h>
#ifdef DSRT_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>

using namespace dsrt;

namespace {

/// Runs the enclosed oneDNN call on one thread: waking a sleeping (passive-wait) thread costs
/// more than a small product (a 4x16-token GPT step ran 6x slower on 2 threads without it).
struct SingleThreadIf {
  explicit SingleThreadIf(bool on) : on(on && !omp_in_parallel()) {
    if (this->on) {
      saved = omp_get_max_threads();
      omp_set_num_threads(1);
    }
  }
  ~SingleThreadIf() {
    if (on)
      omp_set_num_threads(saved);
  }
  bool on;
  int saved = 1;
};
constexpr int64_t kSmallGemm = int64_t(1) << 20; // multiply-adds

/// Whether to thread a product with one operand transposed by blocks of rows (one
/// single-threaded sgemm each) instead of by oneDNN. oneDNN 2.6's own threading of those
/// falls short when K is at least N: a linear layer whose input is wider than its output
/// (GPT's c_proj, M2048 N512 K2048; in bench/train_gpt.py's step at 2 threads, `ds-run
/// --trace` gave its 6 calls 170 ms against 124 ms for the c_fc forward of the same FLOPs; row
/// blocks: 128 ms), and weight gradients over more tokens than inputs (that step's GEMM time
/// 1240 -> 1215 ms, two runs each). In isolation (dsrt-kernel-bench's
/// linear_down) both run at the row blocks' rate.
bool splitRows(bool ta, bool tb, int64_t M, int64_t N, int64_t K, int threads) {
  return threads > 1 && ta != tb && K >= N && M >= 64 * threads &&
         M * N * K >= kSmallGemm * threads;
}


#ifdef DSRT_HAVE_DNNL
/// Whether C = A^T B runs on oneDNN's f32 matmul primitive (its brgemm kernels) instead of
/// sgemm: a weight gradient's product over the tokens, when the result has at least as many
/// rows as columns. oneDNN 2.6's sgemm falls short there: on an Intel Xeon (one core,
/// M2048 N512 K2048, GPT's c_fc and c_attn weight gradients) 105 against 129 GFLOP/s, at
/// two threads 178 (sgemm over row blocks) against 249; for M512 N2048 sgemm is ahead (150
/// against 134), for the other layouts level or ahead.
bool brgemmTN(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float beta, float alpha) {
  return ta && !tb && N <= M && beta == 0.f && alpha == 1.f && M * N * K >= kSmallGemm;
}

/// C[M,N] = A[K,M]^T B[K,N] on a matmul primitive, made once per shape and kept for the
/// process (executing one is thread-safe; each thread has its own stream).
void matmulTN(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B,
              int64_t ldb, float *C, int64_t ldc) {
  using dnnl::memory;
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  static std::mutex mu;
  static std::unordered_map<std::string, std::shared_ptr<dnnl::matmul>> cache;
  const std::string key = std::to_string(M) + "x" + std::to_string(N) + "x" +
                          std::to_string(K) + "/" + std::to_string(lda) + "," +
                          std::to_string(ldb) + "," + std::to_string(ldc);
  const memory::desc a({M, K}, memory::data_type::f32, memory::dims{1, lda});
  const memory::desc b({K, N}, memory::data_type::f32, memory::dims{ldb, 1});
  const memory::desc c({M, N}, memory::data_type::f32, memory::dims{ldc, 1});
  std::shared_ptr<dnnl::matmul> prim;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto &slot = cache[key];
    if (!slot)
      slot = std::make_shared<dnnl::matmul>(
          dnnl::matmul::primitive_desc(engine, a, b, c));
    prim = slot;
  }
  thread_local dnnl::stream stream(engine);
  prim->execute(stream, {{DNNL_ARG_SRC, memory(a, engine, const_cast<float *>(A))},
                         {DNNL_ARG_WEIGHTS, memory(b, engine, const_cast<float *>(B))},
                         {DNNL_ARG_DST, memory(c, engine, C)}});
  stream.wait();
}
#endif

/// c += bias over one row of a linear layer's result.
DSRT_CPU_CLONES void addBiasRow(float *__restrict c, const float *__restrict bias, int64_t n) {
#pragma omp simd
  for (int64_t o = 0; o < n; ++o)
    c[o] += bias[o];
}

} // namespace

bool dsrt::cpu::productPerThread(int64_t batch, int64_t M, int64_t N, int64_t K) {
  return batch >= omp_get_max_threads() && M * N * K < (int64_t)1 << 24 &&
         batch * M * N * K >= kSmallGemm;
}

void dsrt::cpu::sgemm(const char *kernel, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                      const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                      float *C, int64_t ldc, float alpha) {
  if (M == 0 || N == 0)
    return;
  if (K == 0) {
    if (beta == 0.f)
      for (int64_t i = 0; i < M; ++i)
        std::memset(C + i * ldc, 0, N * sizeof(float));
    return;
  }
#ifdef DSRT_HAVE_DNNL
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  dnnl_status_t st = dnnl_success;
  if (brgemmTN(ta, tb, M, N, K, beta, alpha)) {
    try {
      matmulTN(M, N, K, A, lda, B, ldb, C, ldc);
    } catch (const dnnl::error &e) {
      fail(kernel, "oneDNN's f32 matmul failed (%s) for M=%lld N=%lld K=%lld", e.what(),
           (long long)M, (long long)N, (long long)K);
    }
    return;
  }
  if (splitRows(ta, tb, M, N, K, threads)) {
    // One block of rows per thread, each a single-threaded sgemm (inside the region).
#pragma omp parallel num_threads(threads)
    {
      const int t = omp_get_thread_num(), n = omp_get_num_threads();
      const int64_t m0 = M * t / n, m1 = M * (t + 1) / n;
      dnnl_status_t mine =
          dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m1 - m0, N, K, alpha,
                     ta ? A + m0 : A + m0 * lda, lda, B, ldb, beta, C + m0 * ldc, ldc);
      if (mine != dnnl_success) {
#pragma omp critical(dsrt_sgemm_status)
        st = mine;
      }
    }
  } else {
    SingleThreadIf small(M * N * K < kSmallGemm);
    st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C,
                    ldc);
  }
  if (st != dnnl_success)
    fail(kernel, "dnnl_sgemm failed (status %d) for M=%lld N=%lld K=%lld", (int)st, (long long)M,
         (long long)N, (long long)K);
#else
  // Without oneDNN (the GPU machine's reference build): plain loops, float sums in k order.
  (void)kernel;
#pragma omp parallel for schedule(static) if (M * N * K > kSmallGemm && !omp_in_parallel())
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float acc = 0.f;
      for (int64_t k = 0; k < K; ++k)
        acc += A[ta ? k * lda + i : i * lda + k] * B[tb ? j * ldb + k : k * ldb + j];
      C[i * ldc + j] = alpha * acc + (beta == 0.f ? 0.f : beta * C[i * ldc + j]);
    }
#endif
}

namespace {
using dsrt::cpu::sgemm;
void gemm(const char *kernel, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A,
          int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc,
          float alpha = 1.f) {
  sgemm(kernel, ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, alpha);
}
} // namespace

void dsrt::cpu::matmul(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *a,
                            const dsrt_tensor *b, int32_t trans_a, int32_t trans_b) {
  DSRT_PROFILE("matmul");
  const char *k = "matmul";
  const int32_t dt = checks::gemmDtype(k, a);
  checkDtype(k, a, dt, "lhs");
  checkDtype(k, b, dt, "rhs");
  checkDtype(k, out, dt, "result");
  const MatmulShape ms = matmulShape(out, a, b, trans_a, trans_b);
  if (dt != DSRT_F32)
    return matmulHalf(ctx, k, dt, ms, out, a, b, trans_a, trans_b);
  const int64_t M = ms.M, N = ms.N, K = ms.K, batch = ms.batch, lda = ms.lda, ldb = ms.ldb;
  const float *A = (const float *)a->data, *B = (const float *)b->data;
  float *C = (float *)out->data;
  if (batch == 0)
    return;
  const bool bShared = ms.bShared, aContig = ms.aContig;
  auto offsets = [&](int64_t bi, int64_t &oa, int64_t &ob) { ms.offsets(bi, oa, ob); };
  // One rhs for every batch and a plain lhs: fold the batch into M.
  if (bShared && aContig && !trans_a) {
    gemm(k, false, trans_b, batch * M, N, K, A, lda, B, ldb, 0.f, C, N);
    return;
  }
  if (productPerThread(batch, M, N, K)) {
#pragma omp parallel for schedule(static)
    for (int64_t bi = 0; bi < batch; ++bi) {
      int64_t oa, ob;
      offsets(bi, oa, ob);
      gemm(k, trans_a, trans_b, M, N, K, A + oa, lda, B + ob, ldb, 0.f, C + bi * M * N, N);
    }
    return;
  }
  for (int64_t bi = 0; bi < batch; ++bi) {
    int64_t oa, ob;
    offsets(bi, oa, ob);
    gemm(k, trans_a, trans_b, M, N, K, A + oa, lda, B + ob, ldb, 0.f, C + bi * M * N, N);
  }
}

void dsrt::cpu::matmul_view(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *a,
                            const dsrt_tensor *b, const int64_t *views, double alpha) {
  DSRT_PROFILE("matmul_view");
  const char *k = "matmul_view";
  const MatmulViews v = matmulViews(out, a, b, views);
  if (out->dtype != DSRT_F32) { // 16 bits: one product call over both batch levels
    const char *A = (const char *)(v.swapped ? b : a)->data;
    const char *B = (const char *)(v.swapped ? a : b)->data;
    const int64_t size = 2; // bytes
    HalfGemm g{out->dtype, v.a.trans, v.b.trans, v.b1, v.M, v.N, v.K, v.a.ld, v.b.ld, v.c.ld,
               v.a.s1, v.b.s1, v.c.s1, A + v.a.offset * size, B + v.b.offset * size, nullptr,
               (char *)out->data + v.c.offset * size};
    g.alpha = (float)alpha;
    g.batch0 = v.b0, g.strideA0 = v.a.s0, g.strideB0 = v.b.s0, g.strideC0 = v.c.s0;
    return gemmHalf(ctx, k, g);
  }
  const float *A = (const float *)(v.swapped ? b : a)->data;
  const float *B = (const float *)(v.swapped ? a : b)->data;
  float *C = (float *)out->data;
  const int64_t batch = v.b0 * v.b1, M = v.M, N = v.N, K = v.K;
  auto one = [&](int64_t bi) {
    const int64_t i0 = bi / v.b1, i1 = bi % v.b1;
    gemm(k, v.a.trans, v.b.trans, M, N, K, A + v.a.at(i0, i1), v.a.ld, B + v.b.at(i0, i1),
         v.b.ld, 0.f, C + v.c.at(i0, i1), v.c.ld, (float)alpha);
  };
  if (batch == 0)
    return;
  if (productPerThread(batch, M, N, K)) {
#pragma omp parallel for schedule(static)
    for (int64_t bi = 0; bi < batch; ++bi)
      one(bi);
    return;
  }
  for (int64_t bi = 0; bi < batch; ++bi)
    one(bi);
}

void dsrt::cpu::linear(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *x,
                            const dsrt_tensor *w, const dsrt_tensor *bias) {
  DSRT_PROFILE("linear");
  const char *k = "linear";
  const checks::LinearShape ls = checks::linear(out, x, w, bias);
  const int64_t M = ls.M, O = ls.O, K = ls.K;
  if (x->dtype != DSRT_F32)
    return gemmHalf(ctx, k,
                    HalfGemm{x->dtype, false, true, 1, M, O, K, K, K, O, 0, 0, 0, x->data,
                             w->data, bias ? bias->data : nullptr, out->data});
  float *C = (float *)out->data;
  gemm(k, false, true, M, O, K, (const float *)x->data, K, (const float *)w->data, K, 0.f, C, O);
  if (bias) {
    const float *bv = (const float *)bias->data;
#pragma omp parallel for schedule(static) if (M * O > kParallelGrain)
    for (int64_t i = 0; i < M; ++i)
      addBiasRow(C + i * O, bv, O);
  }
}

void dsrt::cpu::linear_grad_weight(dsrt_context *ctx, dsrt_tensor *dw, dsrt_tensor *db,
                                        const dsrt_tensor *x, const dsrt_tensor *dy) {
  DSRT_PROFILE("linear_grad_weight");
  const char *k = "linear_grad_weight";
  const checks::LinearShape ls = checks::linearGrad(dw, db, x, dy);
  const int64_t M = ls.M, O = ls.O, K = ls.K;
  if (x->dtype != DSRT_F32) {
    gemmHalf(ctx, k, HalfGemm{x->dtype, true, false, 1, O, K, M, O, K, K, 0, 0, 0, dy->data,
                              x->data, nullptr, dw->data});
    if (db)
      sumRowsHalf(x->dtype, (const uint16_t *)dy->data, M, O, (uint16_t *)db->data);
    return;
  }
  gemm(k, true, false, O, K, M, (const float *)dy->data, O, (const float *)x->data, K, 0.f,
       (float *)dw->data, K);
  if (db) {
    dsrt_tensor dy2 = *dy;
    dy2.rank = 2;
    dy2.dims[0] = M;
    dy2.dims[1] = O;
    dsrt_reduce(ctx, DSRT_SUM, db, &dy2, 1);
  }
}
