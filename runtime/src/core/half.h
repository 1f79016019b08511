// 16-bit floating-point storage (bf16, IEEE f16): conversions to and from f32, rounding to
// nearest even as PyTorch does (c10::BFloat16, c10::Half). Arithmetic on 16-bit values widens
// to f32; the compiler's ds-widen-16bit pass leaves only conversions, fills, copies and
// communication in 16 bits.
#ifndef DSRT_CORE_HALF_H
#define DSRT_CORE_HALF_H

#include "dsrt/dsrt.h"

#include <cstdint>
#include <cstring>

namespace dsrt {

inline bool isHalfType(int32_t dtype) { return dtype == DSRT_BF16 || dtype == DSRT_F16; }

inline float bf16ToFloat(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t floatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) // NaN: keep it quiet
    return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float f16ToFloat(uint16_t h) {
  _Float16 x;
  std::memcpy(&x, &h, 2);
  return static_cast<float>(x);
}
inline uint16_t floatToF16(float f) {
  _Float16 x = static_cast<_Float16>(f);
  uint16_t h;
  std::memcpy(&h, &x, 2);
  return h;
}
/// The 16-bit value of `dtype` (DSRT_BF16 or DSRT_F16) as f32, and back.
inline float halfToFloat(int32_t dtype, uint16_t v) {
  return dtype == DSRT_BF16 ? bf16ToFloat(v) : f16ToFloat(v);
}
inline uint16_t floatToHalf(int32_t dtype, float f) {
  return dtype == DSRT_BF16 ? floatToBf16(f) : floatToF16(f);
}
/// out[i] = in[i] + out[i] over `n` 16-bit values, summed in f32 and rounded once (the
/// reduction that the channels apply to bf16 and f16 gradients).
inline void halfAccumulate(int32_t dtype, uint16_t *out, const uint16_t *in, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = floatToHalf(dtype, halfToFloat(dtype, in[i]) + halfToFloat(dtype, out[i]));
}

} // namespace dsrt

#endif // DSRT_CORE_HALF_H
