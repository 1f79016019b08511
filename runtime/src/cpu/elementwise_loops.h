//===- elementwise_loops.h - the CPU's elementwise loops, per ISA ----------===//
//
// Contiguous and broadcasting loops over an element function, shared by the f32 and 16-bit
// elementwise kernels (elementwise.cpp, elementwise_half.cpp).
//
#ifndef DSRT_CPU_ELEMENTWISE_LOOPS_H
#define DSRT_CPU_ELEMENTWISE_LOOPS_H

#include "cpu_device.h"

#include <algorithm>

namespace dsrt::cpu {

// Contiguous loops as functions of their pointers (not of an OpenMP region's captures, which
// the compiler reloads each iteration and will not vectorize), built per ISA, run in parallel
// by chunks.
constexpr int64_t kChunk = 1 << 14;
template <class T, class F> DSRT_CPU_CLONES void mapRange(T *y, const T *x, int64_t n, F f) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    y[i] = f(x[i]);
}
/// z[i] = f(x[i * xs], y[i * ys]) for strides xs, ys of 0 or 1 (a broadcast scalar side);
/// other strides take the generic loop.
template <class O, class T, class F>
DSRT_CPU_CLONES void zipRange(O *z, const T *x, int64_t xs, const T *y, int64_t ys, int64_t n,
                              F f) {
  if (xs == 1 && ys == 1) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i)
      z[i] = f(x[i], y[i]);
  } else if (xs == 1 && ys == 0) {
    const T v = y[0];
#pragma omp simd
    for (int64_t i = 0; i < n; ++i)
      z[i] = f(x[i], v);
  } else if (xs == 0 && ys == 1) {
    const T u = x[0];
#pragma omp simd
    for (int64_t i = 0; i < n; ++i)
      z[i] = f(u, y[i]);
  } else {
    for (int64_t i = 0; i < n; ++i)
      z[i] = f(x[i * xs], y[i * ys]);
  }
}
template <class T, class F> void parallelMap(T *y, const T *x, int64_t n, F f) {
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
  for (int64_t at = 0; at < n; at += kChunk)
    mapRange(y + at, x + at, std::min(kChunk, n - at), f);
}
template <class O, class T, class F>
void parallelZip(O *z, const T *x, const T *y, int64_t n, F f) {
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
  for (int64_t at = 0; at < n; at += kChunk)
    zipRange(z + at, x + at, 1, y + at, 1, std::min(kChunk, n - at), f);
}

/// True when a and b both have out's shape (no broadcast).
inline bool sameShapes(const dsrt_tensor *out, const dsrt_tensor *a, const dsrt_tensor *b) {
  if (a->numel != out->numel || b->numel != out->numel || a->rank != out->rank ||
      b->rank != out->rank)
    return false;
  for (int i = 0; i < out->rank; ++i)
    if (a->dims[i] != out->dims[i] || b->dims[i] != out->dims[i])
      return false;
  return true;
}

/// z = f(a, b) over out's shape, broadcasting a and b: the contiguous loops where it can.
template <class O, class T, class F>
void zipBroadcast(const char *kernel, dsrt_tensor *out, const dsrt_tensor *a,
                  const dsrt_tensor *b, F f) {
  const T *x = (const T *)a->data;
  const T *y = (const T *)b->data;
  O *z = (O *)out->data;
  if (sameShapes(out, a, b))
    return parallelZip(z, x, y, out->numel, f);
  const dsrt_tensor *ins[2] = {a, b};
  Broadcast bc(kernel, out, ins, 2);
  bc.forEachRow(out->numel, [&](int64_t o, const int64_t *off, const int64_t *is, int64_t len) {
    zipRange(z + o, x + off[0], is[0], y + off[1], is[1], len, f);
  });
}

} // namespace dsrt::cpu

#endif // DSRT_CPU_ELEMENTWISE_LOOPS_H
