//===- half_bits.cuh - 16-bit storage in the CUDA kernels ---------------===//
//
// bf16 and f16 tensors as raw bits, widened to f32 where a kernel computes and rounded to
// nearest even where it stores (CUDA's intrinsics round as the CPU's floatToHalf does), so
// that the 16-bit kernels compute as the CPU's and as PyTorch's: in f32, rounded once.
//
#ifndef DSRT_CUDA_HALF_BITS_CUH
#define DSRT_CUDA_HALF_BITS_CUH

#include "cuda_device.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

namespace dsrt::cuda {

struct Bf16Bits {
  uint16_t bits;
};
struct F16Bits {
  uint16_t bits;
};

__device__ __forceinline__ float toFloat(Bf16Bits v) {
  return __bfloat162float(__ushort_as_bfloat16(v.bits));
}
__device__ __forceinline__ float toFloat(F16Bits v) { return __half2float(__ushort_as_half(v.bits)); }
template <class T> __device__ __forceinline__ T fromFloat(float v);
template <> __device__ __forceinline__ Bf16Bits fromFloat<Bf16Bits>(float v) {
  return {__bfloat16_as_ushort(__float2bfloat16_rn(v))};
}
template <> __device__ __forceinline__ F16Bits fromFloat<F16Bits>(float v) {
  return {__half_as_ushort(__float2half_rn(v))};
}

/// Calls f with a value of the device type of `dtype`: the C++ types of dispatchAll, and the
/// 16-bit types as bit wrappers.
template <class F> void dispatchWithHalf(const char *kernel, int32_t dtype, F &&f) {
  if (dtype == DSRT_BF16)
    return f(Bf16Bits());
  if (dtype == DSRT_F16)
    return f(F16Bits());
  dispatchAll(kernel, dtype, f);
}

/// dispatchFloat's types and the 16-bit bit wrappers.
template <class F> void dispatchFloatOrHalf(const char *kernel, int32_t dtype, F &&f) {
  if (dtype == DSRT_BF16)
    return f(Bf16Bits());
  if (dtype == DSRT_F16)
    return f(F16Bits());
  dispatchFloat(kernel, dtype, f);
}

template <class T> constexpr bool isHalfBits() {
  return std::is_same_v<T, Bf16Bits> || std::is_same_v<T, F16Bits>;
}

/// The type a kernel computes in for storage type T: f32 for the 16-bit types, else T.
template <class T> struct ComputeOf {
  using type = T;
};
template <> struct ComputeOf<Bf16Bits> {
  using type = float;
};
template <> struct ComputeOf<F16Bits> {
  using type = float;
};
template <class T> using Compute = typename ComputeOf<T>::type;

/// A value of any element type, as float for the 16-bit ones and as itself otherwise.
template <class T> __device__ __forceinline__ auto load(T v) {
  if constexpr (isHalfBits<T>())
    return toFloat(v);
  else
    return v;
}
template <class O, class V> __device__ __forceinline__ O store(V v) {
  if constexpr (isHalfBits<O>())
    return fromFloat<O>(static_cast<float>(v));
  else if constexpr (std::is_same_v<O, uint8_t>)
    return O(v != V(0));
  else
    return static_cast<O>(v);
}

} // namespace dsrt::cuda

#endif // DSRT_CUDA_HALF_BITS_CUH
