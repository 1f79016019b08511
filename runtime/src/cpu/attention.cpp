// CPU kernels: scaled dot-product attention in tiles (flash attention), forward and backward.
//
// Forward: per (batch, query head, tile of queries), the scores of one tile of keys at a time
// (oneDNN's sgemm, single-threaded inside the parallel region), an online softmax (a running
// maximum and sum per row), and the values' product accumulated; the rows' log-sum-exp is
// kept for the backward. Backward (FlashAttention-2's): per (batch, query head), per tile of
// queries and of keys, the probabilities recomputed from the log-sum-exp, and dv += p^T do,
// ds = p * (do v^T - rowsum(do * out)), dq += ds k * scale, dk += ds^T q * scale; each thread
// takes one key/value head at a time (its query heads in order: the same sums on every run).
// Nothing of [L, S] is allocated: the per-thread scratch is a few tiles (outside the arena's
// count), and 16-bit gradients of the keys and values are summed in f32 first.
// bf16 and f16 tensors are widened tile by tile and computed in f32, rounding where PyTorch's
// 16-bit CPU flash kernel holds 16-bit values: the probabilities before their product with
// the values (exponentiated as it does, by ATen's fast exp: vexpShiftSumHalfSoftmax; the row
// sums stay f32), in the backward the probabilities and the score
// gradients before their products, and each gradient's running sum after every tile (its
// output buffer is 16-bit; a key/value head's one sum over its query heads in order, as
// PyTorch's GQA backward adds them).
#include "avx512_lanes.h"
#include "cpu_device.h"
#include "gemm_half.h"
#include "half_rows.h"
#include "vector_math.h"
#include "../kernels/checks.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

using namespace dsrt;
using checks::AttentionShape;

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

/// Query rows and keys per tile, as PyTorch's CPU flash attention picks them.
int64_t queryTile(int64_t L) { return L >= 768 ? 256 : L >= 192 ? 64 : 32; }
int64_t keyTile(int64_t S) { return S >= 512 ? 512 : S; }

/// `n` contiguous elements of `t` from element `at`, as f32: the tensor's own for f32, else
/// widened into `buf`.
const float *asF32(const dsrt_tensor *t, int64_t at, int64_t n, std::vector<float> &buf) {
  if (t->dtype == DSRT_F32)
    return (const float *)t->data + at;
  if ((int64_t)buf.size() < n)
    buf.resize(n);
  cpu::widenRow(t->dtype, buf.data(), (const uint16_t *)t->data + at, n);
  return buf.data();
}

/// Stores `n` f32 values at element `at` of `t` (rounded once for 16-bit tensors).
void store(dsrt_tensor *t, int64_t at, const float *x, int64_t n) {
  if (t->dtype == DSRT_F32)
    std::memcpy((float *)t->data + at, x, n * sizeof(float));
  else
    cpu::narrowRow(t->dtype, (uint16_t *)t->data + at, x, nullptr, n);
}

/// One tile of scaled scores [nq, nk] (row stride nk) for queries i0.. and keys j0..: the
/// causal limit, the boolean mask (dropped keys at -inf) or the added one.
void maskTile(const AttentionShape &s, const dsrt_tensor *mask, int32_t causal, int64_t b,
              int64_t h, int64_t i0, int64_t nq, int64_t j0, int64_t nk, float *sc) {
  if (causal) {
    // Keys past i (DSRT_CAUSAL), or from i on (DSRT_CAUSAL_STRICT), are dropped.
    const int64_t from = causal == DSRT_CAUSAL_STRICT ? 0 : 1;
    for (int64_t r = 0; r < nq; ++r)
      for (int64_t c = std::max<int64_t>(0, i0 + r - j0 + from); c < nk; ++c)
        sc[r * nk + c] = kNegInf;
    return;
  }
  if (!mask)
    return;
  const int64_t base = b * s.mb + h * s.mh + j0 * s.ms;
  for (int64_t r = 0; r < nq; ++r) {
    float *row = sc + r * nk;
    const int64_t at = base + (i0 + r) * s.ml;
    if (s.maskKind == 1) {
      const uint8_t *m = (const uint8_t *)mask->data + at;
      for (int64_t c = 0; c < nk; ++c)
        row[c] = m[c * s.ms] ? row[c] : kNegInf;
    } else if (mask->dtype == DSRT_F32) {
      const float *m = (const float *)mask->data + at;
      for (int64_t c = 0; c < nk; ++c)
        row[c] += m[c * s.ms];
    } else {
      const uint16_t *m = (const uint16_t *)mask->data + at;
      for (int64_t c = 0; c < nk; ++c)
        row[c] += halfToFloat(mask->dtype, m[c * s.ms]);
    }
  }
}

DSRT_CPU_CLONES float rowMaxLoop(const float *x, int64_t n) {
  float m = kNegInf;
#pragma omp simd reduction(max : m)
  for (int64_t i = 0; i < n; ++i)
    m = x[i] > m ? x[i] : m;
  return m;
}

/// rowMaxLoop in four running maxima of 16 lanes: the loop's one chain of vmaxps (4 cycles
/// each) bounded it at about 7% of the forward's time. NaN is skipped as there (vmaxps returns
/// its second operand, the running maximum, when the first is NaN).
__attribute__((target("avx512f"))) float rowMaxAvx512(const float *x, int64_t n) {
  __m512 m0 = _mm512_set1_ps(kNegInf), m1 = m0, m2 = m0, m3 = m0;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    m0 = _mm512_max_ps(_mm512_loadu_ps(x + i), m0);
    m1 = _mm512_max_ps(_mm512_loadu_ps(x + i + 16), m1);
    m2 = _mm512_max_ps(_mm512_loadu_ps(x + i + 32), m2);
    m3 = _mm512_max_ps(_mm512_loadu_ps(x + i + 48), m3);
  }
  for (; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
    m0 = _mm512_mask_max_ps(m0, k, _mm512_maskz_loadu_ps(k, x + i), m0);
  }
  return _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m0, m1), _mm512_max_ps(m2, m3)));
}

float rowMax(const float *x, int64_t n) {
  return cpu::avx512Bf16Lanes() ? rowMaxAvx512(x, n) : rowMaxLoop(x, n);
}

DSRT_CPU_CLONES void scaleRow(float *x, int64_t n, float a) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    x[i] *= a;
}

DSRT_CPU_CLONES float dotRow(const float *x, const float *y, int64_t n) {
  float sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i)
    sum += x[i] * y[i];
  return sum;
}

/// ds = p * (dp - d) over a row, in place in dp.
DSRT_CPU_CLONES void softmaxGradRow(float *dp, const float *p, int64_t n, float d) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    dp[i] = p[i] * (dp[i] - d);
}

/// x[i] rounded to the 16-bit `dtype` and back, over one row (nothing for f32).
void roundRow(int32_t dtype, float *x, int64_t n) {
  if (dtype == DSRT_F32)
    return;
  cpu::withHalf(dtype, [&](auto h) {
    using H = decltype(h);
    for (int64_t i = 0; i < n; ++i)
      x[i] = H::load(H::store(x[i]));
  });
}

} // namespace

void dsrt::cpu::attention(dsrt_context *, dsrt_tensor *out, dsrt_tensor *lse,
                          const dsrt_tensor *q, const dsrt_tensor *k, const dsrt_tensor *v,
                          const dsrt_tensor *mask, double scale, int32_t causal) {
  DSRT_PROFILE("attention");
  const AttentionShape s = checks::attention(out, lse, q, k, v, mask, causal);
  const int64_t bq = queryTile(s.L), bk = keyTile(s.S), tiles = (s.L + bq - 1) / bq;
  const int64_t group = s.Hq / s.Hk, E = s.E, Ev = s.Ev;
  const float sc = (float)scale;
  float *lseOut = (float *)lse->data;
#pragma omp parallel
  {
    std::vector<float> qb, kb, vb, scores(bq * bk), probs(bq * bk), acc(bq * Ev), m(bq), l(bq);
#pragma omp for collapse(3) schedule(dynamic)
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t h = 0; h < s.Hq; ++h)
        for (int64_t t = 0; t < tiles; ++t) {
          const int64_t i0 = t * bq, nq = std::min(bq, s.L - i0), hk = h / group;
          const int64_t row0 = (b * s.Hq + h) * s.L + i0;
          const float *Q = asF32(q, row0 * E, nq * E, qb);
          std::fill(m.begin(), m.end(), kNegInf);
          std::fill(l.begin(), l.end(), 0.f);
          std::fill(acc.begin(), acc.begin() + nq * Ev, 0.f);
          const int64_t jEnd = causal ? std::min(s.S, i0 + nq) : s.S;
          for (int64_t j0 = 0; j0 < jEnd; j0 += bk) {
            const int64_t nk = std::min(bk, jEnd - j0), key0 = (b * s.Hk + hk) * s.S + j0;
            const float *K = asF32(k, key0 * E, nk * E, kb);
            const float *V = asF32(v, key0 * Ev, nk * Ev, vb);
            float *S = scores.data();
            cpu::sgemm("attention", false, true, nq, nk, E, Q, E, K, E, 0.f, S, nk, sc);
            maskTile(s, mask, causal, b, h, i0, nq, j0, nk, S);
            float *P = probs.data();
            for (int64_t r = 0; r < nq; ++r) {
              const float *row = S + r * nk;
              const float mnew = std::max(m[r], rowMax(row, nk));
              if (mnew == kNegInf) { // no key so far: nothing to add
                std::fill(P + r * nk, P + (r + 1) * nk, 0.f);
                continue;
              }
              const float alpha = m[r] == kNegInf ? 0.f : std::exp(m[r] - mnew);
              const float sum =
                  s.dtype == DSRT_F32
                      ? (float)cpu::vexpShiftSum(P + r * nk, row, mnew, nk, true)
                      : cpu::vexpShiftSumHalfSoftmax(P + r * nk, row, mnew, nk);
              roundRow(s.dtype, P + r * nk, nk);
              l[r] = std::fma(alpha, l[r], sum); // ATen's sum + alpha l, contracted
              if (alpha != 1.f)
                scaleRow(acc.data() + r * Ev, Ev, alpha);
              m[r] = mnew;
            }
            cpu::sgemm("attention", false, false, nq, Ev, nk, P, nk, V, Ev, 1.f, acc.data(), Ev);
          }
          for (int64_t r = 0; r < nq; ++r) {
            float *row = acc.data() + r * Ev;
            if (l[r] == 0.f) {
              std::fill(row, row + Ev, 0.f);
              lseOut[row0 + r] = kNegInf;
            } else {
              scaleRow(row, Ev, 1.f / l[r]);
              lseOut[row0 + r] = m[r] + std::log(l[r]);
            }
          }
          store(out, row0 * Ev, acc.data(), nq * Ev);
        }
  }
}

void dsrt::cpu::attention_grad(dsrt_context *, dsrt_tensor *dq, dsrt_tensor *dk, dsrt_tensor *dv,
                               const dsrt_tensor *q, const dsrt_tensor *k, const dsrt_tensor *v,
                               const dsrt_tensor *mask, const dsrt_tensor *out,
                               const dsrt_tensor *lse, const dsrt_tensor *dout, double scale,
                               int32_t causal) {
  DSRT_PROFILE("attention_grad");
  const AttentionShape s =
      checks::attentionGrad(dq, dk, dv, q, k, v, mask, out, lse, dout, causal);
  const int64_t bq = queryTile(s.L), bk = keyTile(s.S), tiles = (s.L + bq - 1) / bq;
  const int64_t group = s.Hq / s.Hk, E = s.E, Ev = s.Ev, S = s.S;
  const float sc = (float)scale;
  const float *lseIn = (const float *)lse->data;
  // The key/value heads' gradients: dk/dv themselves for f32, else f32 sums rounded at the end.
  std::vector<float> dkSum, dvSum;
  float *DK = (float *)dk->data, *DV = (float *)dv->data;
  if (s.dtype != DSRT_F32) {
    dkSum.assign(dk->numel, 0.f);
    dvSum.assign(dv->numel, 0.f);
    DK = dkSum.data();
    DV = dvSum.data();
  } else {
    std::memset(DK, 0, dk->numel * sizeof(float));
    std::memset(DV, 0, dv->numel * sizeof(float));
  }
#pragma omp parallel
  {
    std::vector<float> qb, kb, vb, ob, gb, Sc(bq * bk), P(bq * bk), dP(bq * bk), dQ(bq * E),
        D(bq);
    // One key/value head per thread at a time, its query heads in order: the sums are the
    // same on every run (a loss recomputed bit for bit).
#pragma omp for collapse(2) schedule(dynamic)
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t hk = 0; hk < s.Hk; ++hk) {
        const int64_t kv0 = (b * s.Hk + hk) * S;
        float *dKh = DK + kv0 * E, *dVh = DV + kv0 * Ev;
        for (int64_t h = hk * group; h < (hk + 1) * group; ++h)
          for (int64_t t = 0; t < tiles; ++t) {
            const int64_t i0 = t * bq, nq = std::min(bq, s.L - i0);
            const int64_t row0 = (b * s.Hq + h) * s.L + i0;
            const float *Q = asF32(q, row0 * E, nq * E, qb);
            const float *O = asF32(out, row0 * Ev, nq * Ev, ob);
            const float *G = asF32(dout, row0 * Ev, nq * Ev, gb);
            for (int64_t r = 0; r < nq; ++r)
              D[r] = dotRow(G + r * Ev, O + r * Ev, Ev);
            std::fill(dQ.begin(), dQ.begin() + nq * E, 0.f);
            const int64_t jEnd = causal ? std::min(S, i0 + nq) : S;
            for (int64_t j0 = 0; j0 < jEnd; j0 += bk) {
              const int64_t nk = std::min(bk, jEnd - j0);
              const float *K = asF32(k, (kv0 + j0) * E, nk * E, kb);
              const float *V = asF32(v, (kv0 + j0) * Ev, nk * Ev, vb);
              float *sco = Sc.data(), *p = P.data(), *dp = dP.data();
              cpu::sgemm("attention_grad", false, true, nq, nk, E, Q, E, K, E, 0.f, sco, nk, sc);
              maskTile(s, mask, causal, b, h, i0, nq, j0, nk, sco);
              for (int64_t r = 0; r < nq; ++r) {
                const float lr = lseIn[row0 + r];
                if (lr == kNegInf)
                  std::fill(p + r * nk, p + (r + 1) * nk, 0.f);
                else
                  cpu::vexpShiftSum(p + r * nk, sco + r * nk, lr, nk, true);
              }
              // dp = do v^T; ds = p (dp - D); dv += p^T do; dq += ds k; dk += ds^T q (p and
              // ds rounded first for 16-bit tensors, each sum after its tile).
              cpu::sgemm("attention_grad", false, true, nq, nk, Ev, G, Ev, V, Ev, 0.f, dp, nk);
              for (int64_t r = 0; r < nq; ++r)
                softmaxGradRow(dp + r * nk, p + r * nk, nk, D[r]);
              roundRow(s.dtype, p, nq * nk);
              roundRow(s.dtype, dp, nq * nk);
              cpu::sgemm("attention_grad", true, false, nk, Ev, nq, p, nk, G, Ev, 1.f,
                         dVh + j0 * Ev, Ev);
              cpu::sgemm("attention_grad", false, false, nq, E, nk, dp, nk, K, E, 1.f,
                         dQ.data(), E, sc);
              cpu::sgemm("attention_grad", true, false, nk, E, nq, dp, nk, Q, E, 1.f,
                         dKh + j0 * E, E, sc);
              roundRow(s.dtype, dVh + j0 * Ev, nk * Ev);
              roundRow(s.dtype, dQ.data(), nq * E);
              roundRow(s.dtype, dKh + j0 * E, nk * E);
            }
            store(dq, row0 * E, dQ.data(), nq * E);
          }
      }
  }
  if (s.dtype != DSRT_F32) {
    cpu::narrowArray(s.dtype, (uint16_t *)dk->data, DK, dk->numel);
    cpu::narrowArray(s.dtype, (uint16_t *)dv->data, DV, dv->numel);
  }
}
