// CPU kernels of generation's paged key/value cache: writing new tokens' keys and values to
// their slots, and attention of new tokens against the cache (decoding one token a sequence,
// or a chunk of a prompt on top of its cached prefix).
//
// Attention takes one (sequence, key/value head, new token) per task, with that head's query
// heads together, so that each cached key and value row is read once for all of them (the
// decode step is bound by reading the cache); it walks the sequence's pages in order with an
// online softmax, one page's scores at a time (a page of one head is a contiguous [P, E]
// block: its products are vectorized per CPU). 16-bit pages are widened whole and the result
// is rounded once. The page table and lengths are read here, so their values are
// checked here, each error naming the sequence.
#include "cpu_device.h"
#include "half_rows.h"
#include "../kernels/checks.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

using namespace dsrt;
using checks::PagedShape;

namespace {

/// Rows row0..row0+n of `t` (each `width` elements, contiguous: a query row, or one page of
/// one head of a cache) as f32: the tensor's own for f32, else widened into buf.
const float *rowsF32(const dsrt_tensor *t, int64_t row0, int64_t n, int64_t width,
                     float *buf) {
  if (t->dtype == DSRT_F32)
    return (const float *)t->data + row0 * width;
  cpu::widenRow(t->dtype, buf, (const uint16_t *)t->data + row0 * width, n * width);
  return buf;
}

/// scores[g * P + j] = (q_g . k_j) * scale for the G query heads and the n keys of one page
/// (vectorized per CPU: target clones).
DSRT_CPU_CLONES void pageScores(float *scores, const float *q, const float *keys, int64_t G,
                                int64_t n, int64_t E, int64_t P, float scale) {
  for (int64_t j = 0; j < n; ++j)
    for (int64_t g = 0; g < G; ++g) {
      const float *qr = q + g * E, *kr = keys + j * E;
      float dot = 0.f;
#pragma omp simd reduction(+ : dot)
      for (int64_t e = 0; e < E; ++e)
        dot += qr[e] * kr[e];
      scores[g * P + j] = dot * scale;
    }
}

/// acc_g = acc_g * alpha_g + sum_j p[g * P + j] v_j over one page's n values.
DSRT_CPU_CLONES void pageValues(float *acc, const float *p, const float *alpha,
                                const float *values, int64_t G, int64_t n, int64_t Ev,
                                int64_t P) {
  for (int64_t g = 0; g < G; ++g) {
    float *a = acc + g * Ev;
#pragma omp simd
    for (int64_t c = 0; c < Ev; ++c)
      a[c] *= alpha[g];
    for (int64_t j = 0; j < n; ++j) {
      const float w = p[g * P + j], *vr = values + j * Ev;
#pragma omp simd
      for (int64_t c = 0; c < Ev; ++c)
        a[c] += w * vr[c];
    }
  }
}

/// Ends the job where a sequence's lengths or pages do not fit the cache.
void checkSequences(const PagedShape &s, const int64_t *pages, const int64_t *contextLens,
                    const int64_t *qLens) {
  const char *kn = "paged_attention";
  for (int64_t b = 0; b < s.B; ++b) {
    const int64_t cl = contextLens[b], ql = qLens[b];
    if (ql < 0 || ql > s.T)
      fail(kn, "sequence %lld has %lld new tokens, outside 0..%lld (the query's T)",
           (long long)b, (long long)ql, (long long)s.T);
    if (cl < ql || cl > s.maxPages * s.P)
      fail(kn,
           "sequence %lld has %lld positions in the cache, outside %lld (its new tokens)..%lld "
           "(%lld pages of %lld)",
           (long long)b, (long long)cl, (long long)ql, (long long)(s.maxPages * s.P),
           (long long)s.maxPages, (long long)s.P);
    for (int64_t j = 0; j < (cl + s.P - 1) / s.P; ++j) {
      const int64_t page = pages[b * s.maxPages + j];
      if (page < 0 || page >= s.N)
        fail(kn, "sequence %lld's page %lld is %lld, not one of the cache's %lld pages",
             (long long)b, (long long)j, (long long)page, (long long)s.N);
    }
  }
}

} // namespace

void dsrt::cpu::cache_write(dsrt_context *, dsrt_tensor *kCache, dsrt_tensor *vCache,
                            const dsrt_tensor *k, const dsrt_tensor *v,
                            const dsrt_tensor *slots) {
  const PagedShape s = checks::cacheWrite(kCache, vCache, k, v, slots);
  const int64_t *slot = (const int64_t *)slots->data;
  for (int64_t i = 0; i < s.B * s.T; ++i)
    if (slot[i] >= s.N * s.P)
      fail("cache_write", "token %lld of sequence %lld goes to slot %lld, past the cache's %lld",
           (long long)(i % s.T), (long long)(i / s.T), (long long)slot[i],
           (long long)(s.N * s.P));
  const size_t es = dsrt_dtype_size(s.dtype);
  char *kc = (char *)kCache->data, *vc = (char *)vCache->data;
  const char *kx = (const char *)k->data, *vx = (const char *)v->data;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.Hk; ++h)
      for (int64_t t = 0; t < s.T; ++t) {
        const int64_t at = slot[b * s.T + t];
        if (at < 0)
          continue;
        const int64_t page = at / s.P, off = at % s.P;
        const int64_t dst = (page * s.Hk + h) * s.P + off, src = (b * s.Hk + h) * s.T + t;
        std::memcpy(kc + dst * s.E * es, kx + src * s.E * es, s.E * es);
        std::memcpy(vc + dst * s.Ev * es, vx + src * s.Ev * es, s.Ev * es);
      }
}

void dsrt::cpu::paged_attention(dsrt_context *, dsrt_tensor *out, const dsrt_tensor *q,
                                const dsrt_tensor *kCache, const dsrt_tensor *vCache,
                                const dsrt_tensor *pages, const dsrt_tensor *contextLens,
                                const dsrt_tensor *qLens, double scale) {
  const PagedShape s =
      checks::pagedAttention(out, q, kCache, vCache, pages, contextLens, qLens);
  const int64_t *pg = (const int64_t *)pages->data, *cls = (const int64_t *)contextLens->data,
                *qls = (const int64_t *)qLens->data;
  checkSequences(s, pg, cls, qls);
  const int64_t G = s.Hq / s.Hk, E = s.E, Ev = s.Ev, P = s.P;
  const float sc = (float)scale;
#pragma omp parallel
  {
    std::vector<float> qf(G * E), kBuf(E), kPage(P * E), vPage(P * Ev), acc(G * Ev),
        scores(G * P), alpha(G), m(G), l(G), row(Ev);
#pragma omp for collapse(3) schedule(dynamic)
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t kh = 0; kh < s.Hk; ++kh)
        for (int64_t t = 0; t < s.T; ++t) {
          const int64_t ql = qls[b], cl = cls[b];
          const int64_t qRow0 = (b * s.Hq + kh * G) * s.T + t; // head kh*G's row; heads T apart
          std::fill(acc.begin(), acc.end(), 0.f);
          std::fill(m.begin(), m.end(), -std::numeric_limits<float>::infinity());
          std::fill(l.begin(), l.end(), 0.f);
          const int64_t keys = t < ql ? cl - ql + t + 1 : 0; // positions 0..its own
          for (int64_t g = 0; g < G && keys; ++g)
            std::memcpy(&qf[g * E], rowsF32(q, qRow0 + g * s.T, 1, E, kBuf.data()),
                        E * sizeof(float));
          for (int64_t j0 = 0; j0 < keys; j0 += P) {
            const int64_t n = std::min(P, keys - j0);
            const int64_t base = (pg[b * s.maxPages + j0 / P] * s.Hk + kh) * P;
            pageScores(scores.data(), qf.data(), rowsF32(kCache, base, n, E, kPage.data()), G, n,
                       E, P, sc);
            for (int64_t g = 0; g < G; ++g) {
              float mx = m[g];
              for (int64_t j = 0; j < n; ++j)
                mx = std::max(mx, scores[g * P + j]);
              alpha[g] = std::exp(m[g] - mx); // 0 on the first page (m = -inf)
              float sum = 0.f;
              for (int64_t j = 0; j < n; ++j) {
                const float p = std::exp(scores[g * P + j] - mx);
                scores[g * P + j] = p;
                sum += p;
              }
              l[g] = l[g] * alpha[g] + sum;
              m[g] = mx;
            }
            pageValues(acc.data(), scores.data(), alpha.data(),
                       rowsF32(vCache, base, n, Ev, vPage.data()), G, n, Ev, P);
          }
          for (int64_t g = 0; g < G; ++g) {
            const float inv = l[g] > 0.f ? 1.f / l[g] : 0.f;
            for (int64_t c = 0; c < Ev; ++c)
              row[c] = acc[g * Ev + c] * inv;
            const int64_t at = (qRow0 + g * s.T) * Ev;
            if (out->dtype == DSRT_F32)
              std::memcpy((float *)out->data + at, row.data(), Ev * sizeof(float));
            else
              cpu::narrowRow(out->dtype, (uint16_t *)out->data + at, row.data(), nullptr, Ev);
          }
        }
  }
}
