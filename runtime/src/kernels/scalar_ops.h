//===- scalar_ops.h - the element arithmetic every device shares --------------===//
//
// One source for the arithmetic of the elementwise kernels and the fused optimizer update:
// the CPU backend calls these functions from its loops and the CUDA backend from its kernels
// (they are __host__ __device__ under nvcc), so both compute the same formulas in the same
// order. The CPU kernel tests (runtime/test/KernelsTest.cpp, against LibTorch) exercise them
// in every CI run.
//
// Unknown op codes are checked on the host before a kernel runs (validUnary, validBinary,
// validCmp); here they fall through to a NaN or 0.
//
#ifndef DSRT_KERNELS_SCALAR_OPS_H
#define DSRT_KERNELS_SCALAR_OPS_H

#include "dsrt/dsrt.h"

#include <cmath>
#include <cstdint>
#include <type_traits>

#ifdef __CUDACC__
#define DSRT_HD __host__ __device__ __forceinline__
#else
#define DSRT_HD inline
#endif

namespace dsrt::ops {

// The math functions by name, for float and double, on the host and on the device.
#ifdef __CUDA_ARCH__
DSRT_HD float m_exp(float x) { return expf(x); }
DSRT_HD double m_exp(double x) { return exp(x); }
DSRT_HD float m_log(float x) { return logf(x); }
DSRT_HD double m_log(double x) { return log(x); }
DSRT_HD float m_sqrt(float x) { return sqrtf(x); }
DSRT_HD double m_sqrt(double x) { return sqrt(x); }
DSRT_HD float m_tanh(float x) { return tanhf(x); }
DSRT_HD double m_tanh(double x) { return tanh(x); }
DSRT_HD float m_erf(float x) { return erff(x); }
DSRT_HD double m_erf(double x) { return erf(x); }
DSRT_HD float m_cos(float x) { return cosf(x); }
DSRT_HD double m_cos(double x) { return cos(x); }
DSRT_HD float m_sin(float x) { return sinf(x); }
DSRT_HD double m_sin(double x) { return sin(x); }
DSRT_HD float m_pow(float x, float y) { return powf(x, y); }
DSRT_HD double m_pow(double x, double y) { return pow(x, y); }
DSRT_HD bool m_isnan(float x) { return isnan(x); }
DSRT_HD bool m_isnan(double x) { return isnan(x); }
#else
template <class T> inline T m_exp(T x) { return std::exp(x); }
template <class T> inline T m_log(T x) { return std::log(x); }
template <class T> inline T m_sqrt(T x) { return std::sqrt(x); }
template <class T> inline T m_tanh(T x) { return std::tanh(x); }
template <class T> inline T m_erf(T x) { return std::erf(x); }
template <class T> inline T m_cos(T x) { return std::cos(x); }
template <class T> inline T m_sin(T x) { return std::sin(x); }
template <class T> inline T m_pow(T x, T y) { return std::pow(x, y); }
template <class T> inline bool m_isnan(T x) { return std::isnan(x); }
#endif

inline bool validUnary(int32_t op) { return op >= DSRT_NEG && op <= DSRT_SIN; }
inline bool validBinary(int32_t op, bool floating) {
  return op >= DSRT_ADD && op <= (floating ? DSRT_GELU_TANH_GRAD : DSRT_MIN);
}
inline bool validCmp(int32_t pred) { return pred >= DSRT_EQ && pred <= DSRT_GE; }

// Constants of ATen's GELU (aten/src/ATen/native/cpu/Activation.cpp).
// The same double expressions as there, so that the rounded constants agree bit for bit.
constexpr double kSqrt2 = 1.41421356237309504880;    // M_SQRT2
constexpr double kSqrt1_2 = 0.70710678118654752440;  // M_SQRT1_2
constexpr double k2_SqrtPi = 1.12837916709551257390; // M_2_SQRTPI
constexpr double kGeluTanhBeta = kSqrt2 * k2_SqrtPi * 0.5;
constexpr double kGeluErfBeta = k2_SqrtPi * kSqrt1_2 * 0.5;
constexpr double kGeluTanhKappa = 0.044715;

/// A floating-point unary op (DSRT_NEG ... DSRT_SIN), ATen's CPU formulas.
template <class T> DSRT_HD T unary(int32_t op, T x) {
  switch (op) {
  case DSRT_NEG:
    return -x;
  case DSRT_EXP:
    return m_exp(x);
  case DSRT_LOG:
    return m_log(x);
  case DSRT_SQRT:
    return m_sqrt(x);
  case DSRT_RSQRT:
    return T(1) / m_sqrt(x);
  case DSRT_TANH:
    return m_tanh(x);
  case DSRT_SIGMOID:
    return T(1) / (T(1) + m_exp(-x));
  case DSRT_RELU:
    return x < T(0) ? T(0) : x;
  case DSRT_GELU_ERF:
    return x * T(0.5) * (T(1) + m_erf(x * T(kSqrt1_2)));
  case DSRT_GELU_TANH: {
    const T kBeta = T(kGeluTanhBeta);
    const T kKappa = T(kGeluTanhKappa);
    T inner = kBeta * (x + kKappa * x * x * x);
    return T(0.5) * x * (T(1) + m_tanh(inner));
  }
  case DSRT_COS:
    return m_cos(x);
  case DSRT_SIN:
    return m_sin(x);
  default:
    return x - x + T(NAN);
  }
}

/// torch.pow on integers: negative exponents give 0 except for bases 1 and -1.
template <class T> DSRT_HD T intPow(T base, T exp) {
  if constexpr (std::is_signed_v<T>) {
    if (exp < 0) {
      if (base == 1)
        return 1;
      if (base == -1)
        return (exp % 2) ? -1 : 1;
      return 0;
    }
  }
  T result = 1;
  while (exp) {
    if (exp & 1)
      result *= base;
    exp /= 2;
    base *= base;
  }
  return result;
}

/// A binary op on floating-point values (every DSRT_* binary op, the GELU gradients with
/// `a` = x and `b` = dy).
template <class T> DSRT_HD T binaryFloat(int32_t op, T a, T b) {
  switch (op) {
  case DSRT_ADD:
    return a + b;
  case DSRT_SUB:
    return a - b;
  case DSRT_MUL:
    return a * b;
  case DSRT_DIV:
    return a / b;
  case DSRT_POW:
    if (b == T(2))
      return a * a; // ATen's pow_tensor_scalar special case
    return m_pow(a, b);
  case DSRT_MAX:
    return (m_isnan(a) || m_isnan(b)) ? a + b : (a > b ? a : b);
  case DSRT_MIN:
    return (m_isnan(a) || m_isnan(b)) ? a + b : (a < b ? a : b);
  case DSRT_GELU_ERF_GRAD: {
    const T kBeta = T(kGeluErfBeta);
    T cdf = T(0.5) * (T(1) + m_erf(a * T(kSqrt1_2)));
    T pdf = kBeta * m_exp(a * a * T(-0.5));
    return b * (cdf + a * pdf);
  }
  case DSRT_GELU_TANH_GRAD: {
    const T kBeta = T(kGeluTanhBeta);
    const T kKappa = T(kGeluTanhKappa);
    T xSq = a * a;
    T xCube = xSq * a;
    T inner = kBeta * (a + kKappa * xCube);
    T t = m_tanh(inner);
    T left = T(0.5) * a;
    T right = T(1) + t;
    T leftDerivative = T(0.5) * right;
    T tanhDerivative = T(1) - t * t;
    T innerDerivative = kBeta * (T(1) + T(3) * kKappa * xSq);
    T rightDerivative = left * tanhDerivative * innerDerivative;
    return b * (leftDerivative + rightDerivative);
  }
  default:
    return a - a + T(NAN);
  }
}

/// A binary op on integers (add ... min). Division by zero is checked by the caller (the CPU
/// fails naming it; here it gives 0).
template <class T> DSRT_HD T binaryInt(int32_t op, T a, T b) {
  switch (op) {
  case DSRT_ADD:
    return T(a + b);
  case DSRT_SUB:
    return T(a - b);
  case DSRT_MUL:
    return T(a * b);
  case DSRT_DIV:
    return b == 0 ? T(0) : T(a / b);
  case DSRT_POW:
    return intPow(a, b);
  case DSRT_MAX:
    return a > b ? a : b;
  case DSRT_MIN:
    return a < b ? a : b;
  default:
    return T(0);
  }
}

template <class T> DSRT_HD T binary(int32_t op, T a, T b) {
  if constexpr (std::is_floating_point_v<T>)
    return binaryFloat(op, a, b);
  else
    return binaryInt(op, a, b);
}

template <class T> DSRT_HD bool cmp(int32_t pred, T a, T b) {
  switch (pred) {
  case DSRT_EQ:
    return a == b;
  case DSRT_NE:
    return a != b;
  case DSRT_LT:
    return a < b;
  case DSRT_LE:
    return a <= b;
  case DSRT_GT:
    return a > b;
  case DSRT_GE:
    return a >= b;
  default:
    return false;
  }
}

/// The scalars of one AdamW step, as torch.optim.AdamW (single-tensor path) rounds them: each
/// Python-double scalar rounded to float once.
struct AdamWScalars {
  float step, bc2, dec, b1, omb1, b2, omb2, eps, negStep;
};
DSRT_HD AdamWScalars adamwScalars(float stepSize, float bc2Sqrt, float decay, double beta1,
                                 double beta2, double eps) {
  return {stepSize,
          bc2Sqrt,
          decay,
          (float)beta1,
          (float)(1.0 - beta1),
          (float)beta2,
          (float)(1.0 - beta2),
          (float)eps,
          -stepSize};
}

/// One element of the AdamW update; addcmul is (value * a) * b, addcdiv (value * a) / b.
DSRT_HD void adamw(const AdamWScalars &s, float p, float g, float m, float v, float &pOut,
                   float &mOut, float &vOut) {
  float pv = p * s.dec;
  float mv = m * s.b1 + g * s.omb1;
  float vv = v * s.b2 + (s.omb2 * g) * g;
  float denom = m_sqrt(vv) / s.bc2 + s.eps;
  pOut = pv + (s.negStep * mv) / denom;
  mOut = mv;
  vOut = vv;
}

/// Cross-entropy of one row (torch 1.13's formula): (1 - ls) * nll + ls / C * (-sum_c logp_c),
/// from the row's log-sum-exp, its target logit and the sum of its logits.
DSRT_HD double crossEntropyLoss(double lse, double xTarget, double sumX, int64_t C, double ls) {
  double loss = (1.0 - ls) * (lse - xTarget);
  if (ls > 0)
    loss += ls / C * (C * lse - sumX);
  return loss;
}

/// d loss / d logit for one logit (before the upstream gradient's scale).
DSRT_HD double crossEntropyGrad(double x, double lse, bool isTarget, int64_t C, double ls) {
  double p = m_exp(x - lse);
  return p - ls / C - (isTarget ? 1.0 - ls : 0.0);
}

/// Layer norm's dx for one element from the row's statistics and sums of g = dy * w.
/// Layer norm's output element: (x - mean) * rstd, times the weight and plus the bias where
/// given (w, b point at the element's; null: none).
DSRT_HD float layerNormOut(float x, float mean, float rstd, const float *w, const float *b) {
  float v = (x - mean) * rstd;
  if (w)
    v *= *w;
  if (b)
    v += *b;
  return v;
}

template <class T>
DSRT_HD T layerNormGrad(T rstd, T g, T xhat, T invN, T sumG, T sumGX) {
  return rstd * (g - invN * sumG - xhat * invN * sumGX);
}

/// A reduction's result from its accumulator over `nRed` elements: the mean divides, `any`
/// (an i1 result) is whether the sum is non-zero, the others are the accumulator.
template <class O, class Acc> DSRT_HD O finishReduction(Acc acc, int32_t kind, int64_t nRed) {
  if (kind == DSRT_MEAN)
    return O(acc / Acc(nRed));
  if constexpr (std::is_same_v<O, uint8_t>)
    return acc != 0;
  else
    return O(acc);
}

/// top_k's order: whether (a, ia) comes before (b, ib): the larger first (`smallest`: the
/// smaller), NaN the largest, as torch.topk has it; equal values keep the lower index first (a
/// stable sort).
template <class T> DSRT_HD bool topKBefore(T a, int64_t ia, T b, int64_t ib, bool smallest) {
  bool na = a != a, nb = b != b; // NaN (never for integers)
  if (na || nb) {
    if (na && nb)
      return ia < ib;
    return smallest ? nb : na;
  }
  if (a == b)
    return ia < ib;
  return smallest ? a < b : a > b;
}

} // namespace dsrt::ops

#endif // DSRT_KERNELS_SCALAR_OPS_H
