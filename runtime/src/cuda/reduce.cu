//===- reduce.cu - CUDA kernels: sum / mean / amax over dimensions, cumsum --------===//
//
// The input's dims are coalesced into kept and reduced groups (as on the CPU); each output
// accumulates its reduced elements in double (floats) or int64 (integers): one thread per
// output when few elements are reduced, else one block per output.
//
#include "../kernels/checks.h"
#include "../kernels/scalar_ops.h"
#include "cuda_device.h"
#include "half_bits.cuh"

#include <algorithm>
#include <type_traits>

using namespace dsrt;
using namespace dsrt::cuda;

namespace {

struct Groups {
  int n = 0;
  int64_t size[DSRT_MAX_RANK] = {}, stride[DSRT_MAX_RANK] = {};
};

__device__ __forceinline__ int64_t offsetOf(const Groups &g, int64_t idx) {
  int64_t off = 0;
  for (int d = g.n - 1; d >= 0; --d) {
    off += (idx % g.size[d]) * g.stride[d];
    idx /= g.size[d];
  }
  return off;
}

template <class Acc> struct Combine {
  bool isMax;
  __device__ Acc operator()(Acc a, Acc b) const {
    if (!isMax)
      return a + b;
    if constexpr (std::is_floating_point_v<Acc>)
      if (a != a || b != b)
        return a + b;
    return a > b ? a : b;
  }
};

template <class T, class O, class Acc>
__global__ void reducePerThread(O *out, const T *in, Groups kept, Groups red, int64_t nOut,
                                int64_t nRed, int32_t kind, Acc init) {
  Combine<Acc> op{kind == DSRT_AMAX};
  DSRT_GRID_STRIDE(o, nOut) {
    const T *base = in + offsetOf(kept, o);
    Acc acc = init;
    for (int64_t r = 0; r < nRed; ++r)
      acc = op(acc, Acc(base[offsetOf(red, r)]));
    out[o] = ops::finishReduction<O>(acc, kind, nRed);
  }
}

template <class T, class O, class Acc>
__global__ void reducePerBlock(O *out, const T *in, Groups kept, Groups red, int64_t nRed,
                               int32_t kind, Acc init) {
  Combine<Acc> op{kind == DSRT_AMAX};
  const T *base = in + offsetOf(kept, blockIdx.x);
  Acc acc = init;
  for (int64_t r = threadIdx.x; r < nRed; r += blockDim.x)
    acc = op(acc, Acc(base[offsetOf(red, r)]));
  acc = blockReduce(acc, op, init);
  if (threadIdx.x == 0)
    out[blockIdx.x] = ops::finishReduction<O>(acc, kind, nRed);
}

/// Sums over the rows of a row-major [rows, cols] (a bias gradient, a column mean): threads
/// across the columns (coalesced), chunk blockIdx.y of the rows each, double partial sums into
/// part[chunk][cols]; columnFinish adds the chunks in order.
template <class T>
__global__ void columnPartials(double *part, const T *in, int64_t rows, int64_t cols,
                               int64_t chunkRows) {
  const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols)
    return;
  const int64_t r0 = (int64_t)blockIdx.y * chunkRows, r1 = min(rows, r0 + chunkRows);
  double acc = 0;
  for (int64_t r = r0; r < r1; ++r)
    acc += (double)in[r * cols + c];
  part[(int64_t)blockIdx.y * cols + c] = acc;
}

template <class O>
__global__ void columnFinish(O *out, const double *part, int64_t chunks, int64_t cols,
                             int64_t rows, int32_t kind) {
  DSRT_GRID_STRIDE(c, cols) {
    double acc = 0;
    for (int64_t k = 0; k < chunks; ++k)
      acc += part[k * cols + c];
    out[c] = ops::finishReduction<O>(acc, kind, rows);
  }
}

template <class O> __global__ void fillEmpty(O *out, int64_t n, O v) {
  DSRT_GRID_STRIDE(i, n) out[i] = v;
}

} // namespace

void dsrt::cuda::reduce(dsrt_context *ctx, int32_t kind, dsrt_tensor *out, const dsrt_tensor *in,
                        uint64_t dim_mask) {
  const char *k = "reduce";
  const checks::ReducePlan p = checks::reduce(kind, out, in, dim_mask);
  Groups kept, red;
  kept.n = p.nKept;
  red.n = p.nRed;
  for (int i = 0; i < DSRT_MAX_RANK; ++i) {
    kept.size[i] = p.keptSize[i];
    kept.stride[i] = p.keptStride[i];
    red.size[i] = p.redSize[i];
    red.stride[i] = p.redStride[i];
  }
  const int64_t nOut = p.nOut;
  const int64_t nRed = p.nReduced;
  if (!nOut)
    return;
  dispatchAll(k, in->dtype, [&](auto itag) {
    using T = decltype(itag);
    using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
    const Acc init = kind == DSRT_AMAX ? (std::is_floating_point_v<T> ? Acc(-INFINITY)
                                                                      : Acc(INT64_MIN))
                                       : Acc(0);
    dispatchAll(k, out->dtype, [&](auto otag) {
      using O = decltype(otag);
      if (in->numel == 0) {
        O v = O(init);
        if constexpr (std::is_floating_point_v<O>)
          v = kind == DSRT_MEAN ? O(NAN) : O(init);
        fillEmpty<O><<<blocksFor(nOut), kThreads, 0, stream(ctx)>>>((O *)out->data, nOut, v);
      } else if (std::is_floating_point_v<T> && kind != DSRT_AMAX && kept.n == 1 &&
                 kept.stride[0] == 1 && red.n == 1 && red.stride[0] == nOut && nOut >= 32 &&
                 nRed > 64) {
        // Columns of a row-major [nRed, nOut]: row chunks enough for about 128K threads.
        const int64_t chunks = std::max<int64_t>(
            1, std::min<int64_t>((nRed + 31) / 32, (131072 + nOut - 1) / nOut));
        const int64_t chunkRows = (nRed + chunks - 1) / chunks;
        auto *part = (double *)device(ctx).scratch((size_t)(chunks * nOut) * sizeof(double));
        dim3 grid((unsigned)((nOut + kThreads - 1) / kThreads), (unsigned)chunks);
        columnPartials<T><<<grid, kThreads, 0, stream(ctx)>>>(part, (const T *)in->data, nRed,
                                                              nOut, chunkRows);
        launched(k);
        columnFinish<O><<<blocksFor(nOut), kThreads, 0, stream(ctx)>>>((O *)out->data, part,
                                                                       chunks, nOut, nRed, kind);
      } else if (nRed <= 64 || nOut > 0x7fffffff) {
        reducePerThread<T, O, Acc><<<blocksFor(nOut), kThreads, 0, stream(ctx)>>>(
            (O *)out->data, (const T *)in->data, kept, red, nOut, nRed, kind, init);
      } else {
        reducePerBlock<T, O, Acc><<<(unsigned)nOut, kThreads, 0, stream(ctx)>>>(
            (O *)out->data, (const T *)in->data, kept, red, nRed, kind, init);
      }
    });
  });
  launched(k);
}

namespace {
/// One thread per line (outer, inner) of the scanned dimension, its running sum in double
/// (floats, as on the CPU) or int64.
template <class S>
__global__ void cumsumKernel(S *Y, const S *X, checks::DimSplit s, int32_t reverse) {
  using Acc = std::conditional_t<std::is_integral_v<S>, int64_t, double>;
  const int64_t lines = s.outer * s.inner;
  for (int64_t l = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; l < lines;
       l += (int64_t)gridDim.x * blockDim.x) {
    int64_t base = (l / s.inner) * s.D * s.inner + l % s.inner;
    Acc acc = 0;
    for (int64_t j = 0; j < s.D; ++j) {
      int64_t at = base + (reverse ? s.D - 1 - j : j) * s.inner;
      acc += (Acc)load(X[at]);
      Y[at] = store<S>(acc);
    }
  }
}
} // namespace

void dsrt::cuda::cumsum(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *in, int64_t dim,
                        int32_t reverse) {
  const char *k = "cumsum";
  checks::DimSplit s = checks::cumsum(out, in, dim);
  if (!in->numel)
    return;
  dispatchWithHalf(k, in->dtype, [&](auto tag) {
    using S = decltype(tag);
    cumsumKernel<S><<<blocksFor(s.outer * s.inner), kThreads, 0, stream(ctx)>>>(
        (S *)out->data, (const S *)in->data, s, reverse);
  });
  launched(k);
}
