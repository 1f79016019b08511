// CPU kernels: batched matmul and linear layers on oneDNN's sgemm.
#include "../core/internal.h"

#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <cstring>

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

/// Row-major C[M,N] = op(A) op(B) (+ beta C).
void gemm(const char *kernel, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A,
          int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
  if (M == 0 || N == 0)
    return;
  if (K == 0) {
    if (beta == 0.f)
      for (int64_t i = 0; i < M; ++i)
        std::memset(C + i * ldc, 0, N * sizeof(float));
    return;
  }
  SingleThreadIf small(M * N * K < kSmallGemm);
  dnnl_status_t st =
      dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, 1.f, A, lda, B, ldb, beta, C, ldc);
  if (st != dnnl_success)
    fail(kernel, "dnnl_sgemm failed (status %d) for M=%lld N=%lld K=%lld", (int)st, (long long)M,
         (long long)N, (long long)K);
}

} // namespace

extern "C" void dsrt_matmul(dsrt_context *, dsrt_tensor *out, const dsrt_tensor *a,
                            const dsrt_tensor *b, int32_t trans_a, int32_t trans_b) {
  DSRT_PROFILE("matmul");
  const char *k = "matmul";
  checkDtype(k, a, DSRT_F32, "lhs");
  checkDtype(k, b, DSRT_F32, "rhs");
  checkDtype(k, out, DSRT_F32, "result");
  if (a->rank < 1 || b->rank < 1)
    fail(k, "operands must have rank >= 1");
  // Vectors act as a row (lhs) or a column (rhs) whose unit dim is absent from the result.
  bool aVec = a->rank == 1, bVec = b->rank == 1;
  if ((aVec && trans_a) || (bVec && trans_b))
    fail(k, "cannot transpose a vector operand");
  int64_t M = aVec ? 1 : (trans_a ? a->dims[a->rank - 1] : a->dims[a->rank - 2]);
  int64_t K = aVec ? a->dims[0] : (trans_a ? a->dims[a->rank - 2] : a->dims[a->rank - 1]);
  int64_t Kb = bVec ? b->dims[0] : (trans_b ? b->dims[b->rank - 1] : b->dims[b->rank - 2]);
  int64_t N = bVec ? 1 : (trans_b ? b->dims[b->rank - 2] : b->dims[b->rank - 1]);
  int aBatch = aVec ? 0 : a->rank - 2, bBatch = bVec ? 0 : b->rank - 2;
  int outBatch = out->rank - (aVec ? 0 : 1) - (bVec ? 0 : 1);
  bool ok = K == Kb && outBatch >= 0 && outBatch >= aBatch && outBatch >= bBatch;
  if (ok && !aVec)
    ok = out->dims[outBatch] == M;
  if (ok && !bVec)
    ok = out->dims[out->rank - 1] == N;
  if (!ok)
    fail(k, "shapes %s%s x %s%s do not give %s", shapeString(a).c_str(), trans_a ? "^T" : "",
         shapeString(b).c_str(), trans_b ? "^T" : "", shapeString(out).c_str());
  // Batch strides with 0 on broadcast dims.
  int64_t batch = 1, sa[DSRT_MAX_RANK], sb[DSRT_MAX_RANK];
  int64_t strideA = M * K, strideB = K * N;
  bool bShared = true, aContig = true;
  for (int d = outBatch - 1, ea = aBatch - 1, eb = bBatch - 1; d >= 0; --d, --ea, --eb) {
    int64_t od = out->dims[d];
    int64_t ad = ea >= 0 ? a->dims[ea] : 1, bd = eb >= 0 ? b->dims[eb] : 1;
    if ((ad != od && ad != 1) || (bd != od && bd != 1))
      fail(k, "batch dims of %s and %s do not broadcast to %s", shapeString(a).c_str(),
           shapeString(b).c_str(), shapeString(out).c_str());
    sa[d] = ad == od && od != 1 ? strideA : 0;
    sb[d] = bd == od && bd != 1 ? strideB : 0;
    if (ad != od)
      aContig = false;
    if (sb[d] != 0)
      bShared = false;
    strideA *= ad;
    strideB *= bd;
    batch *= od;
  }
  const float *A = (const float *)a->data, *B = (const float *)b->data;
  float *C = (float *)out->data;
  int64_t lda = trans_a ? M : K, ldb = trans_b ? K : N;
  if (batch == 0)
    return;
  // One rhs for every batch and a plain lhs: fold the batch into M.
  if (bShared && aContig && !trans_a) {
    gemm(k, false, trans_b, batch * M, N, K, A, lda, B, ldb, 0.f, C, N);
    return;
  }
  auto offsets = [&](int64_t bi, int64_t &oa, int64_t &ob) {
    oa = ob = 0;
    for (int d = outBatch - 1; d >= 0; --d) {
      int64_t i = bi % out->dims[d];
      bi /= out->dims[d];
      oa += i * sa[d];
      ob += i * sb[d];
    }
  };
  // Many small products: one per thread (sgemm runs single-threaded inside a parallel region).
  if (batch >= omp_get_max_threads() && M * N * K < (int64_t)1 << 24 &&
      batch * M * N * K >= kSmallGemm) {
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

extern "C" void dsrt_linear(dsrt_context *, dsrt_tensor *out, const dsrt_tensor *x,
                            const dsrt_tensor *w, const dsrt_tensor *bias) {
  DSRT_PROFILE("linear");
  const char *k = "linear";
  checkDtype(k, x, DSRT_F32, "input");
  checkDtype(k, w, DSRT_F32, "weight");
  checkDtype(k, out, DSRT_F32, "result");
  if (w->rank != 2 || x->rank < 1 || out->rank != x->rank)
    fail(k, "bad shapes x %s, w %s, out %s", shapeString(x).c_str(), shapeString(w).c_str(),
         shapeString(out).c_str());
  int64_t O = w->dims[0], K = w->dims[1];
  if (x->dims[x->rank - 1] != K || out->dims[out->rank - 1] != O)
    fail(k, "x %s and w %s do not give %s", shapeString(x).c_str(), shapeString(w).c_str(),
         shapeString(out).c_str());
  int64_t M = K ? x->numel / K : out->numel / (O ? O : 1);
  float *C = (float *)out->data;
  gemm(k, false, true, M, O, K, (const float *)x->data, K, (const float *)w->data, K, 0.f, C, O);
  if (bias) {
    checkDtype(k, bias, DSRT_F32, "bias");
    if (bias->numel != O)
      fail(k, "bias %s for %lld outputs", shapeString(bias).c_str(), (long long)O);
    const float *bv = (const float *)bias->data;
#pragma omp parallel for schedule(static) if (M * O > kParallelGrain)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t o = 0; o < O; ++o)
        C[i * O + o] += bv[o];
  }
}

extern "C" void dsrt_linear_grad_weight(dsrt_context *ctx, dsrt_tensor *dw, dsrt_tensor *db,
                                        const dsrt_tensor *x, const dsrt_tensor *dy) {
  DSRT_PROFILE("linear_grad_weight");
  const char *k = "linear_grad_weight";
  checkDtype(k, x, DSRT_F32, "input");
  checkDtype(k, dy, DSRT_F32, "dy");
  checkDtype(k, dw, DSRT_F32, "dw");
  if (dw->rank != 2 || x->rank < 1 || dy->rank < 1)
    fail(k, "bad ranks");
  int64_t O = dw->dims[0], K = dw->dims[1];
  if (x->dims[x->rank - 1] != K || dy->dims[dy->rank - 1] != O ||
      (K && O && x->numel / K != dy->numel / O))
    fail(k, "x %s and dy %s do not give dw %s", shapeString(x).c_str(), shapeString(dy).c_str(),
         shapeString(dw).c_str());
  int64_t M = K ? x->numel / K : (O ? dy->numel / O : 0);
  gemm(k, true, false, O, K, M, (const float *)dy->data, O, (const float *)x->data, K, 0.f,
       (float *)dw->data, K);
  if (db) {
    checkDtype(k, db, DSRT_F32, "db");
    if (db->numel != O)
      fail(k, "db %s for %lld outputs", shapeString(db).c_str(), (long long)O);
    dsrt_tensor dy2 = *dy;
    dy2.rank = 2;
    dy2.dims[0] = M;
    dy2.dims[1] = O;
    dsrt_reduce(ctx, DSRT_SUM, db, &dy2, 1);
  }
}
