//===- elementwise_half.cpp - elementwise kernels on 16-bit tensors --------===//
//
// The simple functions (arithmetic, comparisons, neg, relu, sqrt) convert inside the f32
// kernel's own vector loops, as do the transcendental ones with a vector form of our own
// (vector_math.h: exp, log, sin, cos, GELU erf); the others (oneDNN's, pow) run on chunks
// widened into a buffer per thread that stays in cache, then rounded.
//
#include "elementwise_half.h"
#include "elementwise_loops.h"
#include "half_rows.h"
#include "vector_math.h"
#include "../kernels/scalar_ops.h"

using namespace dsrt;
using namespace dsrt::cpu;

namespace {

// Chunks of 32K values (128 KB of f32 each, in L2): smaller ones cost more in per-call overhead
// of the vector functions (4K: 1.4x the time of 16K for GELU's gradient on one core).
constexpr int64_t kHalfChunk = 1 << 15;

/// y = f(x) chunk by chunk in f32: `x` widened into a buffer of the thread's, `f(buf, len)`
/// computes in place, the result rounded into `y`.
template <class F>
void widenedChunks(int32_t dtype, uint16_t *y, const uint16_t *x, const uint16_t *x2,
                   int64_t n, F f) {
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
  for (int64_t at = 0; at < n; at += kHalfChunk) {
    float *a = threadRow(0, kHalfChunk), *b = threadRow(1, kHalfChunk);
    const int64_t len = std::min(kHalfChunk, n - at);
    widenRow(dtype, a, x + at, len);
    if (x2)
      widenRow(dtype, b, x2 + at, len);
    f(a, b, len);
    narrowRow(dtype, y + at, a, nullptr, len);
  }
}

bool simpleUnary(int32_t op) {
  return op == DSRT_NEG || op == DSRT_RELU || op == DSRT_SQRT || op == DSRT_RSQRT;
}

} // namespace

void dsrt::cpu::unaryHalf(int32_t op, dsrt_tensor *out, const dsrt_tensor *in) {
  const uint16_t *x = (const uint16_t *)in->data;
  uint16_t *y = (uint16_t *)out->data;
  const int64_t n = in->numel;
  const int32_t dtype = in->dtype;
  if (simpleUnary(op))
    return withHalf(dtype, [&](auto h) {
      using H = decltype(h);
      auto loop = [&](auto f) {
        parallelMap(y, x, n, [f](uint16_t v) { return H::store(f(H::load(v))); });
      };
      switch (op) {
      case DSRT_NEG:
        return loop([](float v) { return ops::unary(DSRT_NEG, v); });
      case DSRT_RELU:
        return loop([](float v) { return ops::unary(DSRT_RELU, v); });
      case DSRT_SQRT:
        return loop([](float v) { return ops::unary(DSRT_SQRT, v); });
      default:
        return loop([](float v) { return ops::unary(DSRT_RSQRT, v); });
      }
    });
  if (vectorEltwiseHalf(op, false, dtype, y, x, nullptr, n))
    return;
  widenedChunks(dtype, y, x, nullptr, n, [op](float *a, float *, int64_t len) {
    if (!vectorEltwiseHere(op, false, a, a, nullptr, len))
      for (int64_t i = 0; i < len; ++i)
        a[i] = ops::unary(op, a[i]);
  });
}

void dsrt::cpu::binaryHalf(int32_t op, dsrt_tensor *out, const dsrt_tensor *a,
                           const dsrt_tensor *b) {
  const int32_t dtype = out->dtype;
  const bool gelu = op == DSRT_GELU_ERF_GRAD || op == DSRT_GELU_TANH_GRAD;
  if (gelu && sameShapes(out, a, b) &&
      vectorEltwiseHalf(op, true, dtype, (uint16_t *)out->data, (const uint16_t *)a->data,
                        (const uint16_t *)b->data, out->numel))
    return;
  if (dtype == DSRT_BF16 && sameShapes(out, a, b) &&
      vbinaryBf16(op, (uint16_t *)out->data, (const uint16_t *)a->data,
                  (const uint16_t *)b->data, out->numel))
    return;
  if ((gelu || op == DSRT_POW) && sameShapes(out, a, b))
    return widenedChunks(dtype, (uint16_t *)out->data, (const uint16_t *)a->data,
                         (const uint16_t *)b->data, out->numel,
                         [op, gelu](float *u, float *v, int64_t len) {
                           if (op == DSRT_POW)
                             vpow(u, u, 1, v, 1, len);
                           else if (!vectorEltwiseHere(op, gelu, u, u, v, len))
                             for (int64_t i = 0; i < len; ++i)
                               u[i] = ops::binary(op, u[i], v[i]);
                         });
  withHalf(dtype, [&](auto h) {
    using H = decltype(h);
    // One loop per op, so that each vectorizes.
    auto loops = [&](auto f) {
      zipBroadcast<uint16_t, uint16_t>("binary", out, a, b, [f](uint16_t u, uint16_t v) {
        return H::store(f(H::load(u), H::load(v)));
      });
    };
    switch (op) {
    case DSRT_ADD:
      return loops([](float u, float v) { return ops::binary(DSRT_ADD, u, v); });
    case DSRT_SUB:
      return loops([](float u, float v) { return ops::binary(DSRT_SUB, u, v); });
    case DSRT_MUL:
      return loops([](float u, float v) { return ops::binary(DSRT_MUL, u, v); });
    case DSRT_DIV:
      return loops([](float u, float v) { return ops::binary(DSRT_DIV, u, v); });
    case DSRT_MAX:
      return loops([](float u, float v) { return ops::binary(DSRT_MAX, u, v); });
    case DSRT_MIN:
      return loops([](float u, float v) { return ops::binary(DSRT_MIN, u, v); });
    default:
      return loops([op](float u, float v) { return ops::binary(op, u, v); });
    }
  });
}

void dsrt::cpu::cmpHalf(int32_t pred, dsrt_tensor *out, const dsrt_tensor *a,
                        const dsrt_tensor *b) {
  withHalf(a->dtype, [&](auto h) {
    using H = decltype(h);
    zipBroadcast<uint8_t, uint16_t>("cmp", out, a, b, [pred](uint16_t u, uint16_t v) -> uint8_t {
      return ops::cmp(pred, H::load(u), H::load(v));
    });
  });
}
