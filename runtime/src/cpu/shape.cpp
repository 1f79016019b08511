// CPU kernels: fill, copy, convert and the data-movement ops (transpose, broadcast, slices).
#include "../core/half.h"
#include "../core/internal.h"

#include <cstring>
#include <type_traits>

using namespace dsrt;

extern "C" void dsrt_fill(dsrt_context *, dsrt_tensor *out, double value) {
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
    int64_t n = out->numel;
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i)
      p[i] = v;
  };
  dispatchAll("fill", out->dtype, run);
}

extern "C" void dsrt_copy(dsrt_context *, dsrt_tensor *out, const dsrt_tensor *in) {
  DSRT_PROFILE("copy");
  if (out->numel != in->numel || out->dtype != in->dtype)
    fail("copy", "result %s %s and operand %s %s differ", shapeString(out).c_str(),
         dtypeName(out->dtype), shapeString(in).c_str(), dtypeName(in->dtype));
  if (out->data != in->data && out->numel)
    std::memmove(out->data, in->data, in->numel * dsrt_dtype_size(in->dtype));
}

extern "C" void dsrt_convert(dsrt_context *, dsrt_tensor *out, const dsrt_tensor *in) {
  DSRT_PROFILE("convert");
  if (out->numel != in->numel)
    fail("convert", "result %s and operand %s differ in size", shapeString(out).c_str(),
         shapeString(in).c_str());
  int64_t n = in->numel;
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

extern "C" void dsrt_transpose(dsrt_context *, dsrt_tensor *out, const dsrt_tensor *in,
                               const int64_t *perm) {
  DSRT_PROFILE("transpose");
  if (out->rank != in->rank || out->dtype != in->dtype)
    fail("transpose", "result %s does not match operand %s", shapeString(out).c_str(),
         shapeString(in).c_str());
  int64_t inStrides[DSRT_MAX_RANK], srcStrides[DSRT_MAX_RANK], dstStrides[DSRT_MAX_RANK];
  contiguousStrides(in->rank, in->dims, inStrides);
  contiguousStrides(out->rank, out->dims, dstStrides);
  unsigned seen = 0;
  for (int i = 0; i < out->rank; ++i) {
    int64_t p = perm[i];
    if (p < 0 || p >= in->rank || (seen & (1u << p)) || out->dims[i] != in->dims[p])
      fail("transpose", "bad permutation for %s -> %s", shapeString(in).c_str(),
           shapeString(out).c_str());
    seen |= 1u << p;
    srcStrides[i] = inStrides[p];
  }
  stridedCopy(out->rank, out->dims, dsrt_dtype_size(out->dtype), in->data, srcStrides, out->data,
              dstStrides);
}

extern "C" void dsrt_broadcast(dsrt_context *, dsrt_tensor *out, const dsrt_tensor *in) {
  DSRT_PROFILE("broadcast");
  checkDtype("broadcast", in, out->dtype, "operand");
  const dsrt_tensor *ins[1] = {in};
  Broadcast bc("broadcast", out, ins, 1);
  int64_t dst[DSRT_MAX_RANK];
  contiguousStrides(bc.nd, bc.dims, dst);
  stridedCopy(bc.nd, bc.dims, dsrt_dtype_size(out->dtype), in->data, bc.strides[0], out->data, dst);
}

/// Strides of `big` with `dim` stepped by `step`, and the offset of element `start`.
static int64_t sliceStrides(const char *kernel, const dsrt_tensor *big, const dsrt_tensor *small,
                            int64_t dim, int64_t start, int64_t step, int64_t *strides) {
  if (big->rank != small->rank || dim < 0 || dim >= big->rank || step <= 0 || start < 0 ||
      big->dtype != small->dtype)
    fail(kernel, "bad slice of %s to %s (dim %lld, start %lld, step %lld)",
         shapeString(big).c_str(), shapeString(small).c_str(), (long long)dim, (long long)start,
         (long long)step);
  for (int i = 0; i < big->rank; ++i)
    if (i != dim && big->dims[i] != small->dims[i])
      fail(kernel, "%s and %s differ outside dim %lld", shapeString(big).c_str(),
           shapeString(small).c_str(), (long long)dim);
  if (small->dims[dim] > 0 && start + step * (small->dims[dim] - 1) >= big->dims[dim])
    fail(kernel, "slice [%lld::%lld] x %lld out of bounds of %s", (long long)start, (long long)step,
         (long long)small->dims[dim], shapeString(big).c_str());
  contiguousStrides(big->rank, big->dims, strides);
  int64_t offset = start * strides[dim];
  strides[dim] *= step;
  return offset;
}

extern "C" void dsrt_slice(dsrt_context *, dsrt_tensor *out, const dsrt_tensor *in, int64_t dim,
                           int64_t start, int64_t step) {
  DSRT_PROFILE("slice");
  int64_t src[DSRT_MAX_RANK], dst[DSRT_MAX_RANK];
  int64_t offset = sliceStrides("slice", in, out, dim, start, step, src);
  contiguousStrides(out->rank, out->dims, dst);
  size_t es = dsrt_dtype_size(out->dtype);
  stridedCopy(out->rank, out->dims, es, (const char *)in->data + offset * es, src, out->data, dst);
}

extern "C" void dsrt_insert_slice(dsrt_context *, dsrt_tensor *out, const dsrt_tensor *in,
                                  int64_t dim, int64_t start, int64_t step) {
  DSRT_PROFILE("insert_slice");
  int64_t src[DSRT_MAX_RANK], dst[DSRT_MAX_RANK];
  int64_t offset = sliceStrides("insert_slice", out, in, dim, start, step, dst);
  contiguousStrides(in->rank, in->dims, src);
  size_t es = dsrt_dtype_size(out->dtype);
  stridedCopy(in->rank, in->dims, es, in->data, src, (char *)out->data + offset * es, dst);
}
