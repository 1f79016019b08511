// CPU kernels of routed experts: the router's top-k, and each row through its expert's linear
// map as products over that expert's rows: runs of consecutive rows (expert parallelism
// receives them sorted by expert) in place, the other rows gathered, multiplied, scattered.
#include "cpu_device.h"
#include "gemm_half.h"
#include "half_rows.h"
#include "../kernels/checks.h"
#include "../kernels/scalar_ops.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

using namespace dsrt;

namespace {

int64_t idAt(const dsrt_tensor *ids, int64_t i) {
  return ids->dtype == DSRT_I64 ? static_cast<const int64_t *>(ids->data)[i]
                                : static_cast<const int32_t *>(ids->data)[i];
}

/// The rows of each expert in row order: rows[start[e] .. start[e + 1]) (a counting sort).
/// Rows routed outside [0, E) are in no group.
struct Groups {
  std::vector<int64_t> start, rows;
};
Groups groupRows(const dsrt_tensor *ids, int64_t N, int64_t E) {
  Groups g;
  g.start.assign(E + 1, 0);
  for (int64_t n = 0; n < N; ++n) {
    int64_t e = idAt(ids, n);
    if (e >= 0 && e < E)
      ++g.start[e + 1];
  }
  std::partial_sum(g.start.begin(), g.start.end(), g.start.begin());
  g.rows.resize(g.start[E]);
  std::vector<int64_t> next(g.start.begin(), g.start.end() - 1);
  for (int64_t n = 0; n < N; ++n) {
    int64_t e = idAt(ids, n);
    if (e >= 0 && e < E)
      g.rows[next[e]++] = n;
  }
  return g;
}

/// rows of `src` [*, width] listed in `rows` into `dst` [rows.size(), width].
void gatherRows(float *dst, const float *src, const int64_t *rows, int64_t m, int64_t width) {
  for (int64_t i = 0; i < m; ++i)
    std::memcpy(dst + i * width, src + rows[i] * width, width * sizeof(float));
}

/// Runs of at least this many consecutive rows of one expert are multiplied where they lie
/// (expert parallelism's received rows come sorted by expert); shorter ones are gathered.
constexpr int64_t kRunInPlace = 16;

/// Calls `run(first, m)` for each maximal run of consecutive row numbers in `rows` of at least
/// kRunInPlace rows, and returns the rest of `rows`, in order, in `scattered`.
template <class Run>
void splitRuns(const int64_t *rows, int64_t m, std::vector<int64_t> &scattered, Run run) {
  scattered.clear();
  for (int64_t i = 0; i < m;) {
    int64_t j = i + 1;
    while (j < m && rows[j] == rows[j - 1] + 1)
      ++j;
    if (j - i >= kRunInPlace)
      run(rows[i], j - i);
    else
      scattered.insert(scattered.end(), rows + i, rows + j);
    i = j;
  }
}

} // namespace

namespace {
template <class T>
void topKRows(const T *x, T *v, int64_t *ix, const checks::TopKShape &s, bool smallest) {
#pragma omp parallel if (s.rows * s.n > (1 << 16))
  {
    std::vector<int64_t> order(s.n);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < s.rows; ++r) {
      const T *row = x + r * s.n;
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + s.k, order.end(), [&](int64_t a, int64_t b) {
        return ops::topKBefore(row[a], a, row[b], b, smallest);
      });
      for (int64_t j = 0; j < s.k; ++j) {
        v[r * s.k + j] = row[order[j]];
        ix[r * s.k + j] = order[j];
      }
    }
  }
}
} // namespace

void dsrt::cpu::top_k(dsrt_context *, dsrt_tensor *values, dsrt_tensor *indices,
                      const dsrt_tensor *in, int32_t smallest) {
  DSRT_PROFILE("top_k");
  const checks::TopKShape s = checks::topK(values, indices, in);
  int64_t *ix = static_cast<int64_t *>(indices->data);
  if (in->dtype == DSRT_I64)
    topKRows(static_cast<const int64_t *>(in->data), static_cast<int64_t *>(values->data), ix, s,
             smallest);
  else
    topKRows(static_cast<const float *>(in->data), static_cast<float *>(values->data), ix, s,
             smallest);
}

namespace {
template <class Id>
void dropPastCapacity(Id *out, const Id *ids, const checks::CapacityShape &s, int64_t experts,
                      int64_t capacity) {
  std::vector<int64_t> taken(experts, 0);
  for (int64_t j = 0; j < s.choices; ++j)
    for (int64_t t = 0; t < s.tokens; ++t) {
      const int64_t n = t * s.choices + j;
      const Id e = ids[n];
      out[n] = e >= 0 && e < experts && taken[e]++ >= capacity ? Id(-1) : e;
    }
}
} // namespace

void dsrt::cpu::expert_capacity(dsrt_context *, dsrt_tensor *out, const dsrt_tensor *ids,
                                int64_t experts, int64_t choices, int64_t capacity) {
  DSRT_PROFILE("expert_capacity");
  const checks::CapacityShape s =
      checks::expertCapacity(out, ids, experts, choices, capacity);
  if (ids->dtype == DSRT_I64)
    dropPastCapacity(static_cast<int64_t *>(out->data), static_cast<const int64_t *>(ids->data),
                     s, experts, capacity);
  else
    dropPastCapacity(static_cast<int32_t *>(out->data), static_cast<const int32_t *>(ids->data),
                     s, experts, capacity);
}

void dsrt::cpu::expert_linear(dsrt_context *, dsrt_tensor *out, const dsrt_tensor *x,
                              const dsrt_tensor *w, const dsrt_tensor *ids, int32_t flags) {
  DSRT_PROFILE("expert_linear");
  const char *k = "expert_linear";
  const bool transposed = flags & DSRT_EXPERT_TRANSPOSED;
  const checks::ExpertShape s = checks::expertLinear(k, out, x, w, ids, transposed);
  const float *X = static_cast<const float *>(x->data), *W = static_cast<const float *>(w->data);
  float *Y = static_cast<float *>(out->data);
  // Rows routed nowhere give zeros; with the flag, those of negative id are left as they are.
  const bool keepNegative = flags & DSRT_EXPERT_UNROUTED_UNDEFINED;
  for (int64_t n = 0; n < s.N; ++n)
    if (int64_t e = idAt(ids, n); e >= s.E || (e < 0 && !keepNegative))
      std::memset(Y + n * s.out, 0, s.out * sizeof(float));
  const Groups g = groupRows(ids, s.N, s.E);
  std::vector<int64_t> rest;
  for (int64_t e = 0; e < s.E; ++e) {
    const float *We = W + e * s.in * s.out;
    // [m, in] by the expert's [out, in]^T (or its [in, out]) into [m, out] at ldc `out`.
    auto product = [&](const float *xs, float *ys, int64_t m) {
      cpu::sgemm(k, false, !transposed, m, s.out, s.in, xs, s.in, We,
                 transposed ? s.out : s.in, 0.f, ys, s.out);
    };
    splitRuns(g.rows.data() + g.start[e], g.start[e + 1] - g.start[e], rest,
              [&](int64_t r, int64_t m) { product(X + r * s.in, Y + r * s.out, m); });
    const int64_t m = static_cast<int64_t>(rest.size());
    if (m == 0)
      continue;
    float *xs = cpu::threadRow(0, m * s.in), *ys = cpu::threadRow(1, m * s.out);
    gatherRows(xs, X, rest.data(), m, s.in);
    product(xs, ys, m);
    for (int64_t i = 0; i < m; ++i)
      std::memcpy(Y + rest[i] * s.out, ys + i * s.out, s.out * sizeof(float));
  }
}

void dsrt::cpu::expert_linear_grad_weight(dsrt_context *, dsrt_tensor *dw, const dsrt_tensor *x,
                                          const dsrt_tensor *dy, const dsrt_tensor *ids,
                                          int32_t transposed) {
  DSRT_PROFILE("expert_linear_grad_weight");
  const char *k = "expert_linear_grad_weight";
  const checks::ExpertShape s = checks::expertLinear(k, dy, x, dw, ids, transposed);
  const float *X = static_cast<const float *>(x->data), *G = static_cast<const float *>(dy->data);
  float *DW = static_cast<float *>(dw->data);
  const Groups g = groupRows(ids, s.N, s.E);
  std::vector<int64_t> rest;
  for (int64_t e = 0; e < s.E; ++e) {
    float *D = DW + e * s.in * s.out;
    float beta = 0.f; // the first product writes D, the next ones add to it
    // D += the product over m rows of x [*, in] and dy [*, out], at leading dimensions in, out.
    auto product = [&](const float *xs, const float *gs, int64_t m) {
      if (transposed) // [in, out] = x^T dy
        cpu::sgemm(k, true, false, s.in, s.out, m, xs, s.in, gs, s.out, beta, D, s.out);
      else // [out, in] = dy^T x
        cpu::sgemm(k, true, false, s.out, s.in, m, gs, s.out, xs, s.in, beta, D, s.in);
      beta = 1.f;
    };
    splitRuns(g.rows.data() + g.start[e], g.start[e + 1] - g.start[e], rest,
              [&](int64_t r, int64_t m) { product(X + r * s.in, G + r * s.out, m); });
    const int64_t m = static_cast<int64_t>(rest.size());
    if (m > 0) {
      float *xs = cpu::threadRow(0, m * s.in), *gs = cpu::threadRow(1, m * s.out);
      gatherRows(xs, X, rest.data(), m, s.in);
      gatherRows(gs, G, rest.data(), m, s.out);
      product(xs, gs, m);
    }
    if (beta == 0.f) // no rows: a zero gradient
      std::memset(D, 0, s.in * s.out * sizeof(float));
  }
}
