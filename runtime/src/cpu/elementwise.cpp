// CPU kernels: unary, binary (broadcasting), comparisons and select.
#include "cpu_device.h"
#include "elementwise_half.h"
#include "elementwise_loops.h"
#include "../core/half.h"
#include "vector_math.h"
#include "../kernels/checks.h"
#include "../kernels/scalar_ops.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

using namespace dsrt;
using namespace dsrt::cpu;

namespace {

// The arithmetic is shared with the CUDA backend (kernels/scalar_ops.h); the checks that end
// the job stay here.
template <class T> inline T unaryOp(int32_t op, T x) { return ops::unary(op, x); }

template <class T> inline T binaryOp(int32_t op, T a, T b) {
  if constexpr (!std::is_floating_point_v<T>)
    if (op == DSRT_DIV && b == 0)
      fail("binary", "integer division by zero");
  return ops::binary(op, a, b);
}

template <class T> inline bool cmpOp(int32_t pred, T a, T b) { return ops::cmp(pred, a, b); }

/// z[i] = c[i * cs] ? x[i * xs] : y[i * ys]: the contiguous / broadcast-scalar cases (an
/// attention mask's where(mask, scores, -inf), its gradient's where(mask, dy, 0)) vectorized.
template <class T>
DSRT_CPU_CLONES void whereRange(T *z, const uint8_t *c, int64_t cs, const T *x, int64_t xs,
                                const T *y, int64_t ys, int64_t n) {
  // Both sides loaded before the select: a load under the condition is control flow that
  // GCC does not vectorize for 16-bit elements (bf16 masks ran 6x slower than f32 ones).
  if (cs == 1 && xs == 1 && ys == 0) {
    const T v = y[0];
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const T u = x[i];
      z[i] = c[i] ? u : v;
    }
  } else if (cs == 1 && xs == 0 && ys == 1) {
    const T u = x[0];
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const T v = y[i];
      z[i] = c[i] ? u : v;
    }
  } else if (cs == 1 && xs == 1 && ys == 1) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const T u = x[i], v = y[i];
      z[i] = c[i] ? u : v;
    }
  } else {
    for (int64_t i = 0; i < n; ++i)
      z[i] = c[i * cs] ? x[i * xs] : y[i * ys];
  }
}

/// PyTorch's pow of a tensor by a scalar exponent, where it does not call powf (pow_out's
/// copy for 1, PowKernel.cpp's products and reciprocals; its 0.5 is not std::sqrt's): x * x
/// for an RMSNorm's square, bit for bit PyTorch's and without powf's cost. False for others.
bool powByScalar(float *z, const float *x, float e, int64_t n) {
  auto each = [&](auto f) {
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i)
      z[i] = f(x[i]);
  };
  if (e == 1.f)
    each([](float u) { return u; });
  else if (e == 2.f)
    each([](float u) { return u * u; });
  else if (e == 3.f)
    each([](float u) { return u * u * u; });
  else if (e == -0.5f)
    each([](float u) { return 1.f / std::sqrt(u); });
  else if (e == -1.f)
    each([](float u) { return 1.f / u; });
  else if (e == -2.f)
    each([](float u) { return 1.f / (u * u); });
  else
    return false;
  return true;
}

/// torch.pow on f32 through the vector powf, in parallel chunks of contiguous rows.
void powBroadcast(dsrt_tensor *out, const dsrt_tensor *a, const dsrt_tensor *b) {
  const float *x = (const float *)a->data, *y = (const float *)b->data;
  float *z = (float *)out->data;
  const int64_t n = out->numel;
  if (b->numel == 1 && a->numel == n && powByScalar(z, x, y[0], n))
    return;
  if (sameShapes(out, a, b)) {
#pragma omp parallel for schedule(static) if (n > kParallelGrain / 8)
    for (int64_t at = 0; at < n; at += kChunk)
      cpu::vpow(z + at, x + at, 1, y + at, 1, std::min(kChunk, n - at));
    return;
  }
  const dsrt_tensor *ins[2] = {a, b};
  Broadcast bc("binary", out, ins, 2);
  bc.forEachRow(n, [&](int64_t o, const int64_t *off, const int64_t *is, int64_t len) {
    cpu::vpow(z + o, x + off[0], is[0], y + off[1], is[1], len);
  });
}

} // namespace

void dsrt::cpu::unary(dsrt_context *ctx, int32_t op, dsrt_tensor *out,
                           const dsrt_tensor *in) {
  DSRT_PROFILE("unary", op);
  checks::unary(out, in, op);
  if (isHalfType(in->dtype))
    return unaryHalf(op, out, in);
  if (in->dtype == DSRT_F32 &&
      cpu::vectorEltwise(ctx, op, false, (float *)out->data, (const float *)in->data, nullptr,
                         in->numel))
    return;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T *x = (const T *)in->data;
    T *y = (T *)out->data;
    int64_t n = in->numel;
    if constexpr (std::is_floating_point_v<T>) {
      // One loop per op, so that the simple ones vectorize.
      auto loop = [&](auto f) { parallelMap(y, x, n, f); };
      switch (op) {
      case DSRT_NEG:
        return loop([](T v) { return unaryOp<T>(DSRT_NEG, v); });
      case DSRT_SQRT:
        return loop([](T v) { return unaryOp<T>(DSRT_SQRT, v); });
      case DSRT_RSQRT:
        return loop([](T v) { return unaryOp<T>(DSRT_RSQRT, v); });
      case DSRT_RELU:
        return loop([](T v) { return unaryOp<T>(DSRT_RELU, v); });
      default:
        return loop([op](T v) { return unaryOp<T>(op, v); });
      }
    } else {
      if (op == DSRT_NEG) {
        for (int64_t i = 0; i < n; ++i)
          y[i] = T(-x[i]);
      } else { // DSRT_RELU (checks::unary)
        for (int64_t i = 0; i < n; ++i)
          y[i] = x[i] < 0 ? T(0) : x[i];
      }
    }
  };
  dispatchAll("unary", in->dtype, run);
}

void dsrt::cpu::binary(dsrt_context *ctx, int32_t op, dsrt_tensor *out,
                            const dsrt_tensor *a, const dsrt_tensor *b) {
  DSRT_PROFILE("binary", op);
  checks::binary(out, a, b, op);
  if (isHalfType(out->dtype))
    return binaryHalf(op, out, a, b);
  if ((op == DSRT_GELU_ERF_GRAD || op == DSRT_GELU_TANH_GRAD) && out->dtype == DSRT_F32 &&
      a->numel == out->numel && b->numel == out->numel &&
      cpu::vectorEltwise(ctx, op, true, (float *)out->data, (const float *)a->data,
                         (const float *)b->data, out->numel))
    return;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    auto store = [](T v) -> T {
      if constexpr (std::is_same_v<T, uint8_t>)
        return v != 0;
      else
        return v;
    };
    // The loops, for one element function f: each op gets its own, so that they vectorize.
    auto loops = [&](auto f) {
      zipBroadcast<T, T>("binary", out, a, b, [f, store](T u, T v) { return store(f(u, v)); });
    };
    if constexpr (std::is_floating_point_v<T>) {
      switch (op) {
      case DSRT_ADD:
        return loops([](T u, T v) { return binaryOp<T>(DSRT_ADD, u, v); });
      case DSRT_SUB:
        return loops([](T u, T v) { return binaryOp<T>(DSRT_SUB, u, v); });
      case DSRT_MUL:
        return loops([](T u, T v) { return binaryOp<T>(DSRT_MUL, u, v); });
      case DSRT_DIV:
        return loops([](T u, T v) { return binaryOp<T>(DSRT_DIV, u, v); });
      case DSRT_MAX:
        return loops([](T u, T v) { return binaryOp<T>(DSRT_MAX, u, v); });
      case DSRT_MIN:
        return loops([](T u, T v) { return binaryOp<T>(DSRT_MIN, u, v); });
      case DSRT_POW:
        if constexpr (std::is_same_v<T, float>)
          return powBroadcast(out, a, b);
        break;
      default:
        break;
      }
    }
    loops([op](T u, T v) { return binaryOp<T>(op, u, v); });
  };
  dispatchAll("binary", out->dtype, run);
}

void dsrt::cpu::cmp(dsrt_context *, int32_t pred, dsrt_tensor *out, const dsrt_tensor *a,
                         const dsrt_tensor *b) {
  DSRT_PROFILE("cmp");
  checks::cmp(out, a, b, pred);
  if (isHalfType(a->dtype))
    return cmpHalf(pred, out, a, b);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    // One loop per predicate, so that each vectorizes.
    auto loops = [&](auto f) { zipBroadcast<uint8_t, T>("cmp", out, a, b, f); };
    switch (pred) {
    case DSRT_EQ:
      return loops([](T u, T v) -> uint8_t { return cmpOp<T>(DSRT_EQ, u, v); });
    case DSRT_NE:
      return loops([](T u, T v) -> uint8_t { return cmpOp<T>(DSRT_NE, u, v); });
    case DSRT_LT:
      return loops([](T u, T v) -> uint8_t { return cmpOp<T>(DSRT_LT, u, v); });
    case DSRT_LE:
      return loops([](T u, T v) -> uint8_t { return cmpOp<T>(DSRT_LE, u, v); });
    case DSRT_GT:
      return loops([](T u, T v) -> uint8_t { return cmpOp<T>(DSRT_GT, u, v); });
    default:
      return loops([](T u, T v) -> uint8_t { return cmpOp<T>(DSRT_GE, u, v); });
    }
  };
  dispatchAll("cmp", a->dtype, run);
}

void dsrt::cpu::where(dsrt_context *, dsrt_tensor *out, const dsrt_tensor *cond,
                           const dsrt_tensor *a, const dsrt_tensor *b) {
  DSRT_PROFILE("where");
  checks::where(out, cond, a, b);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const uint8_t *c = (const uint8_t *)cond->data;
    const T *x = (const T *)a->data;
    const T *y = (const T *)b->data;
    T *z = (T *)out->data;
    const dsrt_tensor *ins[3] = {cond, a, b};
    Broadcast bc("where", out, ins, 3);
    bc.forEachRow(out->numel, [&](int64_t o, const int64_t *off, const int64_t *is, int64_t len) {
      whereRange(z + o, c + off[0], is[0], x + off[1], is[1], y + off[2], is[2], len);
    });
  };
  if (isHalfType(out->dtype)) // a selection: the 16-bit values as they are
    return run(uint16_t());
  dispatchAll("where", out->dtype, run);
}
