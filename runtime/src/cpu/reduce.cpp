// CPU kernels: sum / mean / amax over a set of dimensions, and running sums (cumsum).
#include "cpu_device.h"
#include "avx512_lanes.h"
#include "vector_math.h"
#include "../kernels/checks.h"
#include "../kernels/scalar_ops.h"
#include "../core/half.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

using namespace dsrt;

namespace {

struct Group {
  int64_t size, stride;
};

inline int64_t offsetOf(const std::vector<Group> &g, int64_t idx) {
  int64_t off = 0;
  for (int d = (int)g.size() - 1; d >= 0; --d) {
    off += (idx % g[d].size) * g[d].stride;
    idx /= g[d].size;
  }
  return off;
}

/// Columns per task of a reduction over outer dims (a contiguous run of each row).
constexpr int64_t kColumnChunk = 1024;

// The inner loops, built per ISA (functions of their pointers, outside the OpenMP regions).
template <class T, class Acc> DSRT_CPU_CLONES void addColumns(Acc *a, const T *p, int64_t len) {
#pragma omp simd
  for (int64_t i = 0; i < len; ++i)
    a[i] += Acc(p[i]);
}
/// a[i] += (p0[i] + p1[i]) + (p2[i] + p3[i]): four rows a pass over the partial sums, which
/// otherwise cost a load and a store per element read (f32 column sums run at L3's speed).
DSRT_CPU_CLONES void addColumns4(float *a, const float *p0, const float *p1, const float *p2,
                                 const float *p3, int64_t len) {
#pragma omp simd
  for (int64_t i = 0; i < len; ++i)
    a[i] += (p0[i] + p1[i]) + (p2[i] + p3[i]);
}
/// The sum of f32 p[0, n) in AVX-512: blocks of kSumBlock values in four zmm accumulators
/// (independent chains; GCC's `omp simd` reduction keeps one, and ends each block with 16
/// serial adds of its lanes through the stack: [2048, 2048] row sums ran at 1.5-1.6x
/// PyTorch's time), summed as a tree, the blocks added in double as cpu::blockSum.
__attribute__((target("avx512f"))) double sumRowAvx512(const float *p, int64_t n) {
  double s = 0;
  for (int64_t b = 0; b < n; b += cpu::kSumBlock) {
    const int64_t e = std::min(n, b + cpu::kSumBlock);
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = b;
    for (; i + 64 <= e; i += 64) {
      a0 = _mm512_add_ps(a0, _mm512_loadu_ps(p + i));
      a1 = _mm512_add_ps(a1, _mm512_loadu_ps(p + i + 16));
      a2 = _mm512_add_ps(a2, _mm512_loadu_ps(p + i + 32));
      a3 = _mm512_add_ps(a3, _mm512_loadu_ps(p + i + 48));
    }
    for (; i + 16 <= e; i += 16)
      a0 = _mm512_add_ps(a0, _mm512_loadu_ps(p + i));
    if (i < e) // the tail, masked
      a1 = _mm512_add_ps(a1, _mm512_maskz_loadu_ps((__mmask16)((1u << (e - i)) - 1), p + i));
    s += _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
  }
  return s;
}

/// The sum of p[0, n) in Acc, vectorized (so reassociated; f32 as cpu::blockSum, or
/// sumRowAvx512 where the CPU has AVX-512).
template <class T, class Acc> DSRT_CPU_CLONES Acc sumRange(const T *p, int64_t n) {
  Acc s = 0;
  if constexpr (std::is_same_v<T, float>) {
    if (cpu::avx512Bf16Lanes())
      return Acc(sumRowAvx512(p, n));
    return Acc(cpu::blockSum(n, [p](int64_t i) { return p[i]; }));
  }
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i)
    s += Acc(p[i]);
  return s;
}
template <class T, class O>
void reduceTyped(int32_t kind, O *out, const T *in, const dsrt_tensor *x,
                 const checks::ReducePlan &plan) {
  const bool isMax = kind == DSRT_AMAX;
  // amax keeps the element type; sums accumulate in double / int64.
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
  const Acc init = isMax ? (std::is_floating_point_v<T> ? -std::numeric_limits<Acc>::infinity()
                                                        : std::numeric_limits<Acc>::lowest())
                         : Acc(0);
  auto combine = [isMax](Acc a, Acc b) -> Acc {
    if (!isMax)
      return a + b;
    if constexpr (std::is_floating_point_v<Acc>)
      if (std::isnan(a) || std::isnan(b))
        return a + b;
    return a > b ? a : b;
  };

  // The input dims as alternating kept / reduced groups (checks::reduce).
  std::vector<Group> kept, red;
  for (int i = 0; i < plan.nKept; ++i)
    kept.push_back({plan.keptSize[i], plan.keptStride[i]});
  for (int i = 0; i < plan.nRed; ++i)
    red.push_back({plan.redSize[i], plan.redStride[i]});
  const bool lastReduced = plan.lastReduced;
  const int64_t nOut = plan.nOut, nRed = plan.nReduced;
  if (x->numel == 0) {
    for (int64_t o = 0; o < nOut; ++o)
      out[o] = kind == DSRT_MEAN ? O(NAN) : O(init);
    return;
  }
  auto finish = [&](Acc acc) { return ops::finishReduction<O>(acc, kind, nRed); };
  const int threads = omp_get_max_threads();

  if (red.empty() || !lastReduced) {
    // The innermost group is kept: accumulate contiguous rows of I outputs.
    int64_t I = kept.empty() ? 1 : kept.back().size;
    std::vector<Group> keptOuter(kept.begin(), kept.end() - (kept.empty() ? 0 : 1));
    int64_t nOuter = nOut / I;
    int64_t chunk = kColumnChunk;
    if (nOuter * ((I + chunk - 1) / chunk) < threads)
      chunk = std::max<int64_t>(16, ((I + threads - 1) / threads + 15) / 16 * 16);
    int64_t chunks = (I + chunk - 1) / chunk;
#pragma omp parallel for schedule(static) if (x->numel > kParallelGrain)
    for (int64_t kc = 0; kc < nOuter * chunks; ++kc) {
      int64_t ko = kc / chunks, c0 = (kc % chunks) * chunk;
      int64_t len = std::min(chunk, I - c0);
      Acc a[kColumnChunk];
      for (int64_t i = 0; i < len; ++i)
        a[i] = init;
      const T *base = in + offsetOf(keptOuter, ko) + c0;
      if constexpr (std::is_same_v<T, float>)
        if (!isMax) {
          // f32 column sums over blocks of rows, the blocks added in double (as cpu::blockSum).
          float part[kColumnChunk];
          for (int64_t r0 = 0; r0 < nRed; r0 += cpu::kSumBlock) {
            std::fill(part, part + len, 0.f);
            const int64_t r1 = std::min(nRed, r0 + cpu::kSumBlock);
            int64_t r = r0;
            for (; r + 4 <= r1; r += 4)
              addColumns4(part, base + offsetOf(red, r), base + offsetOf(red, r + 1),
                          base + offsetOf(red, r + 2), base + offsetOf(red, r + 3), len);
            for (; r < r1; ++r)
              addColumns<float, float>(part, base + offsetOf(red, r), len);
            addColumns<float, Acc>(a, part, len);
          }
          O *o = out + ko * I + c0;
          for (int64_t i = 0; i < len; ++i)
            o[i] = finish(a[i]);
          continue;
        }
      for (int64_t r = 0; r < nRed; ++r) {
        const T *p = base + offsetOf(red, r);
        if (isMax)
          for (int64_t i = 0; i < len; ++i)
            a[i] = combine(a[i], Acc(p[i]));
        else
          addColumns<T, Acc>(a, p, len);
      }
      O *o = out + ko * I + c0;
      for (int64_t i = 0; i < len; ++i)
        o[i] = finish(a[i]);
    }
    return;
  }

  // The innermost group is reduced: each output sums rows of L contiguous elements.
  int64_t L = red.back().size;
  std::vector<Group> redOuter(red.begin(), red.end() - 1);
  auto rangeAcc = [&](const T *base, int64_t begin, int64_t end) -> Acc {
    Acc acc = init;
    int64_t ro = begin / L, j = begin % L;
    while (begin < end) {
      const T *p = base + offsetOf(redOuter, ro);
      int64_t stop = std::min(L, j + (end - begin));
      begin += stop - j;
      if (isMax) {
        if constexpr (std::is_floating_point_v<T>) { // vectorized; NaN wins as in PyTorch
          int nan = 0;
          T m = cpu::maxRange(p + j, stop - j, nan);
          acc = combine(acc, nan ? Acc(NAN) : Acc(m));
        } else {
          for (int64_t jj = j; jj < stop; ++jj)
            acc = combine(acc, Acc(p[jj]));
        }
      } else {
        acc += sumRange<T, Acc>(p + j, stop - j);
      }
      j = 0;
      ++ro;
    }
    return acc;
  };
  if (nOut >= threads || x->numel <= kParallelGrain) {
#pragma omp parallel for schedule(static) if (x->numel > kParallelGrain)
    for (int64_t o = 0; o < nOut; ++o)
      out[o] = finish(rangeAcc(in + offsetOf(kept, o), 0, nRed));
    return;
  }
  // Few outputs: split each reduction over the threads, combining partials in order.
  for (int64_t o = 0; o < nOut; ++o) {
    const T *base = in + offsetOf(kept, o);
    std::vector<Acc> part(threads, init);
#pragma omp parallel num_threads(threads)
    {
      int t = omp_get_thread_num(), nt = omp_get_num_threads();
      int64_t b = nRed * t / nt, e = nRed * (t + 1) / nt;
      part[t] = rangeAcc(base, b, e);
    }
    Acc acc = init;
    for (Acc p : part)
      acc = combine(acc, p);
    out[o] = finish(acc);
  }
}

} // namespace

void dsrt::cpu::reduce(dsrt_context *, int32_t kind, dsrt_tensor *out, const dsrt_tensor *in,
                            uint64_t dim_mask) {
  DSRT_PROFILE("reduce", kind);
  const checks::ReducePlan plan = checks::reduce(kind, out, in, dim_mask);
  dispatchAll("reduce", in->dtype, [&](auto itag) {
    using T = decltype(itag);
    dispatchAll("reduce", out->dtype, [&](auto otag) {
      using O = decltype(otag);
      reduceTyped<T, O>(kind, (O *)out->data, (const T *)in->data, in, plan);
    });
  });
}

// --- cumsum -------------------------------------------------------------------------------

void dsrt::cpu::cumsum(dsrt_context *, dsrt_tensor *out, const dsrt_tensor *in, int64_t dim,
                       int32_t reverse) {
  DSRT_PROFILE("cumsum");
  checks::DimSplit s = checks::cumsum(out, in, dim);
  const int64_t lines = s.outer * s.inner, D = s.D, st = s.inner;
  // One line (outer, inner) at a time, its running sum in double (as ATen's CPU cumsum) or in
  // the integer type; 16-bit floats round each sum once.
  auto scan = [&](auto load, auto store) {
#pragma omp parallel for schedule(static) if (in->numel > kParallelGrain)
    for (int64_t l = 0; l < lines; ++l) {
      int64_t base = (l / s.inner) * D * st + l % s.inner;
      auto acc = decltype(load(int64_t{0})){};
      for (int64_t j = 0; j < D; ++j) {
        int64_t at = base + (reverse ? D - 1 - j : j) * st;
        acc += load(at);
        store(at, acc);
      }
    }
  };
  if (isHalfType(in->dtype)) {
    const uint16_t *x = (const uint16_t *)in->data;
    uint16_t *y = (uint16_t *)out->data;
    int32_t dt = in->dtype;
    scan([&](int64_t i) { return (double)halfToFloat(dt, x[i]); },
         [&](int64_t i, double v) { y[i] = floatToHalf(dt, (float)v); });
    return;
  }
  dispatchAll("cumsum", in->dtype, [&](auto tag) {
    using T = decltype(tag);
    using A = std::conditional_t<std::is_floating_point_v<T>, double, T>;
    const T *x = (const T *)in->data;
    T *y = (T *)out->data;
    scan([&](int64_t i) { return (A)x[i]; }, [&](int64_t i, A v) { y[i] = (T)v; });
  });
}
