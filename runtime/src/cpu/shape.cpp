// CPU kernels: fill, copy, convert and the data-movement ops (transpose, broadcast, slices).
#include "../core/half.h"
#include "cpu_device.h"
#include "half_rows.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

using namespace dsrt;

void dsrt::cpu::fill(dsrt_context *, dsrt_tensor *out, double value) {
  DSRT_PROFILE("fill");
  if (isHalfType(out->dtype)) {
    uint16_t v = floatToHalf(out->dtype, static_cast<float>(value));
    uint16_t *p = static_cast<uint16_t *>(out->data);
    int64_t n = out->numel;
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i)
      p[i] = v;
    return;
  }
  auto run = [&](auto tag) {
    using T = decltype(tag);
    T v;
    if constexpr (std::is_same_v<T, uint8_t>)
      v = value != 0;
    else
      v = (T)value;
    T *p = (T *)out->data;
    const int64_t n = out->numel;
    constexpr int64_t kChunk = 1 << 16;
    const bool zero = value == 0.0 && !std::signbit(value); // all bits 0: memset's stores
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
    for (int64_t at = 0; at < n; at += kChunk) {
      const int64_t len = std::min(kChunk, n - at);
      if (zero)
        std::memset(p + at, 0, len * sizeof(T));
      else
        std::fill_n(p + at, len, v);
    }
  };
  dispatchAll("fill", out->dtype, run);
}

void dsrt::cpu::copy(dsrt_context *, dsrt_tensor *out, const dsrt_tensor *in) {
  DSRT_PROFILE("copy");
  if (out->numel != in->numel || out->dtype != in->dtype)
    fail("copy", "result %s %s and operand %s %s differ", shapeString(out).c_str(),
         dtypeName(out->dtype), shapeString(in).c_str(), dtypeName(in->dtype));
  if (out->data == in->data || !out->numel)
    return;
  const int64_t bytes = in->numel * (int64_t)dsrt_dtype_size(in->dtype);
  char *dst = (char *)out->data;
  const char *src = (const char *)in->data;
  if (bytes <= 4 * kParallelGrain || (src < dst + bytes && dst < src + bytes)) {
    std::memmove(dst, src, bytes); // small, or overlapping
    return;
  }
  constexpr int64_t kChunk = 1 << 18; // bytes: memcpy per chunk, the chunks over the threads
#pragma omp parallel for schedule(static)
  for (int64_t at = 0; at < bytes; at += kChunk)
    std::memcpy(dst + at, src + at, std::min(kChunk, bytes - at));
}

void dsrt::cpu::convert(dsrt_context *, dsrt_tensor *out, const dsrt_tensor *in) {
  DSRT_PROFILE("convert");
  if (out->numel != in->numel)
    fail("convert", "result %s and operand %s differ in size", shapeString(out).c_str(),
         shapeString(in).c_str());
  int64_t n = in->numel;
  if (in->dtype == DSRT_F32 && isHalfType(out->dtype))
    return cpu::narrowArray(out->dtype, (uint16_t *)out->data, (const float *)in->data, n);
  if (isHalfType(in->dtype) && out->dtype == DSRT_F32)
    return cpu::widenArray(in->dtype, (float *)out->data, (const uint16_t *)in->data, n);
  if (isHalfType(in->dtype) || isHalfType(out->dtype)) {
    // Through f32: bf16 and f16 widen exactly; narrowing rounds to nearest even once.
    auto read = [&](auto tag, int64_t i) -> float {
      using I = decltype(tag);
      return static_cast<float>(static_cast<const I *>(in->data)[i]);
    };
    auto write = [&](auto tag, int64_t i, float v) {
      using O = decltype(tag);
      if constexpr (std::is_same_v<O, uint8_t>)
        static_cast<O *>(out->data)[i] = v != 0.0f;
      else
        static_cast<O *>(out->data)[i] = static_cast<O>(v);
    };
    if (isHalfType(in->dtype) && isHalfType(out->dtype)) {
      const uint16_t *x = static_cast<const uint16_t *>(in->data);
      uint16_t *y = static_cast<uint16_t *>(out->data);
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
      for (int64_t i = 0; i < n; ++i)
        y[i] = floatToHalf(out->dtype, halfToFloat(in->dtype, x[i]));
    } else if (isHalfType(in->dtype)) {
      const uint16_t *x = static_cast<const uint16_t *>(in->data);
      dispatchAll("convert", out->dtype, [&](auto otag) {
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
        for (int64_t i = 0; i < n; ++i)
          write(otag, i, halfToFloat(in->dtype, x[i]));
      });
    } else {
      uint16_t *y = static_cast<uint16_t *>(out->data);
      dispatchAll("convert", in->dtype, [&](auto itag) {
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
        for (int64_t i = 0; i < n; ++i)
          y[i] = floatToHalf(out->dtype, read(itag, i));
      });
    }
    return;
  }
  dispatchAll("convert", in->dtype, [&](auto itag) {
    using I = decltype(itag);
    dispatchAll("convert", out->dtype, [&](auto otag) {
      using O = decltype(otag);
      const I *x = (const I *)in->data;
      O *y = (O *)out->data;
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
      for (int64_t i = 0; i < n; ++i) {
        if constexpr (std::is_same_v<O, uint8_t>)
          y[i] = x[i] != I(0);
        else
          y[i] = (O)x[i];
      }
    });
  });
}

namespace {
void runCopy(const CopyLayout &c, dsrt_tensor *out, const dsrt_tensor *in) {
  size_t es = dsrt_dtype_size(out->dtype);
  stridedCopy(c.rank, c.dims, es, (const char *)in->data + c.srcOffset * es, c.src,
              (char *)out->data + c.dstOffset * es, c.dst);
}
} // namespace

void dsrt::cpu::transpose(dsrt_context *, dsrt_tensor *out, const dsrt_tensor *in,
                          const int64_t *perm) {
  DSRT_PROFILE("transpose");
  runCopy(transposeLayout(out, in, perm), out, in);
}

void dsrt::cpu::broadcast(dsrt_context *, dsrt_tensor *out, const dsrt_tensor *in) {
  DSRT_PROFILE("broadcast");
  runCopy(broadcastLayout(out, in), out, in);
}

void dsrt::cpu::slice(dsrt_context *, dsrt_tensor *out, const dsrt_tensor *in, int64_t dim,
                      int64_t start, int64_t step) {
  DSRT_PROFILE("slice");
  runCopy(sliceLayout(out, in, dim, start, step), out, in);
}

void dsrt::cpu::insert_slice(dsrt_context *, dsrt_tensor *out, const dsrt_tensor *in,
                             int64_t dim, int64_t start, int64_t step) {
  DSRT_PROFILE("insert_slice");
  runCopy(insertSliceLayout(out, in, dim, start, step), out, in);
}
