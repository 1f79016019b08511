//===- vector_math.h - vectorized f32 elementwise functions of the CPU device ===//
//
// The transcendental unary ops and their gradients over whole arrays, at SIMD speed: GELU's
// exact form and its gradient in AVX-512 lanes written out (gelu_erf_avx512.cpp, f32 and
// bf16), exp, log, sine, cosine, sigmoid and, without AVX-512, GELU's exact form in loops of
// our own (element_functions.h, vectorized per ISA, picked at run time; in one pass on 16-bit
// values too), GELU's tanh-form gradient on glibc's vector math (gelu_grad.cpp), and
// oneDNN's JIT eltwise primitives for the rest (tanh, GELU's tanh form). PyTorch vectorizes
// every such function (Sleef); scalar libm calls cost 10-30 ns an element.
//
#ifndef DSRT_CPU_VECTOR_MATH_H
#define DSRT_CPU_VECTOR_MATH_H

#include "cpu_device.h"

#include <limits>

namespace dsrt::cpu {

/// dst = f(x) for unary op `op` (dsrt_unary_op), or, with `dy`, dst = dy * f'(x) for the
/// gradient op `op` (dsrt_binary_op: DSRT_GELU_*_GRAD), over `n` contiguous f32 elements.
/// Returns false, having done nothing, where it has no vector form of `op`.
bool vectorEltwise(dsrt_context *ctx, int32_t op, bool gradient, float *dst, const float *x,
                   const float *dy, int64_t n);

/// vectorEltwise on the calling thread, callable from every thread of a parallel region at
/// once (the 16-bit kernels run it on their chunks); false, having done nothing, where it has
/// no vector form of `op`.
bool vectorEltwiseHere(int32_t op, bool gradient, float *dst, const float *x, const float *dy,
                       int64_t n);
/// vectorEltwise on 16-bit values of `dtype` (DSRT_BF16, DSRT_F16), for the functions with a
/// vector form of our own (exp, log, sin, cos, GELU erf and its gradient): each value widened
/// to f32 in the vector loop, computed as the f32 kernel computes it and rounded once, in
/// parallel chunks; false, having done nothing, for the others (widen them in chunks).
bool vectorEltwiseHalf(int32_t op, bool gradient, int32_t dtype, uint16_t *dst,
                       const uint16_t *x, const uint16_t *dy, int64_t n);
/// GELU's exact form (without dy) or dy * its derivative (with dy) over `n` f32 or bf16 values
/// (`dtype`) in 16 AVX-512 lanes, in parallel chunks when `parallel` (dst may be x or dy);
/// false, having done nothing, on other CPUs and types.
bool vgeluErf(int32_t dtype, void *dst, const void *x, const void *dy, int64_t n, bool parallel);
/// z = x op y for op DSRT_ADD, DSRT_SUB, DSRT_MUL or DSRT_DIV over `n` bf16 values (z may be x
/// or y) in 16 AVX-512 lanes, each value widened to f32 and the result rounded once, in parallel
/// chunks; false, having done nothing, on other CPUs and ops.
bool vbinaryBf16(int32_t op, uint16_t *z, const uint16_t *x, const uint16_t *y, int64_t n);
/// dst = dy * GELU'(x) for op DSRT_GELU_ERF_GRAD or DSRT_GELU_TANH_GRAD over `n` f32 values (dst
/// may be x or dy), in 16 lanes (or 8 without oneDNN); false, having done nothing, where not.
bool vgeluGrad(int32_t op, float *dst, const float *x, const float *dy, int64_t n);

/// dst[i] = exp(x[i]) over `n` f32 values (dst may be x), vectorized, on the calling thread
/// (the kernels that exponentiate rows: cross-entropy, softmax).
void vexp(float *dst, const float *x, int64_t n);

/// Row sums in f32 lanes over blocks of kSumBlock elements (16 terms a lane under AVX-512, as
/// PyTorch's cascade sums), the blocks added in double: vectorized at f32 width, and as exact
/// as PyTorch's f32 kernels or better. Inlined into the caller (build that per ISA).
constexpr int64_t kSumBlock = 256;

/// The sum of f(i) for i in [0, n).
template <class F> inline double blockSum(int64_t n, F f) {
  double s = 0;
  for (int64_t b = 0; b < n; b += kSumBlock) {
    const int64_t e = b + kSumBlock < n ? b + kSumBlock : n;
    float part = 0;
#pragma omp simd reduction(+ : part)
    for (int64_t i = b; i < e; ++i)
      part += f(i);
    s += part;
  }
  return s;
}

/// The maximum of p[0, n) of floats, vectorized; `nan` says whether one was NaN.
template <class T> DSRT_CPU_CLONES T maxRange(const T *p, int64_t n, int &nan) {
  T m = -std::numeric_limits<T>::infinity();
  int isNan = 0;
#pragma omp simd reduction(max : m) reduction(| : isNan)
  for (int64_t i = 0; i < n; ++i) {
    m = p[i] > m ? p[i] : m;
    isNan |= p[i] != p[i] ? 1 : 0;
  }
  nan = isNan;
  return m;
}

/// dst[i] = exp(x[i] - shift) over `n` f32 values, vectorized, on the calling thread, and
/// their sum (in double): a softmax row's exponentials in one pass.
/// `flushLow`: exp(x - shift) below expf's normal range (-87.3, as a masked -inf) is 0, in
/// the vector loop (a softmax row's masked entries; otherwise libm's subnormals).
/// dst must not be x.
double vexpShiftSum(float *dst, const float *x, float shift, int64_t n, bool flushLow = false);

/// A softmax row that is stored in 16 bits next, as PyTorch's CPU flash attention computes it
/// for bf16 and f16 (fast_exp.cpp): dst[i] = exp(x[i] - shift) by ATen's fast exponential
/// (fn::fastExp16) over the whole vectors of ATen's build for this CPU (16 lanes with AVX-512,
/// else 8) and libm's expf over the rest; their f32 sum, added in ATen's order.
float vexpShiftSumHalfSoftmax(float *dst, const float *x, float shift, int64_t n);

/// z[i] = pow(x[i * xs], y[i * ys]) over `n` f32 values (strides 0 or 1), vectorized, on the
/// calling thread: torch.pow's values within 4 ulp.
void vpow(float *z, const float *x, int64_t xs, const float *y, int64_t ys, int64_t n);

} // namespace dsrt::cpu

#endif
