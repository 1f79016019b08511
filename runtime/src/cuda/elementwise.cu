//===- elementwise.cu - CUDA kernels: fill, copies, conversions, elementwise ops ---===//
//
// One thread per output element (grid-stride loops). The arithmetic is kernels/scalar_ops.h,
// the CPU backend's own; the data-movement ops are the core's CopyLayout, one strided copy.
//
#include "../core/half.h"
#include "../kernels/checks.h"
#include "../kernels/scalar_ops.h"
#include "cuda_device.h"
#include "half_bits.cuh"

#include <type_traits>

using namespace dsrt;
using namespace dsrt::cuda;

namespace {

template <class T> __global__ void fillKernel(T *out, T v, int64_t n) {
  DSRT_GRID_STRIDE(i, n) out[i] = v;
}

template <class I, class O> __global__ void convertKernel(O *out, const I *in, int64_t n) {
  DSRT_GRID_STRIDE(i, n) {
    if constexpr (isHalfBits<I>() || isHalfBits<O>())
      out[i] = store<O>(static_cast<float>(load(in[i]))); // through f32, as on the CPU
    else
      out[i] = store<O>(in[i]);
  }
}

// 16-bit operands compute in f32 and round each result once, as the CPU's kernels do.
template <class T> __global__ void unaryKernel(T *out, const T *in, int64_t n, int32_t op) {
  DSRT_GRID_STRIDE(i, n) {
    if constexpr (isHalfBits<T>())
      out[i] = store<T>(ops::unary(op, load(in[i])));
    else if constexpr (std::is_floating_point_v<T>)
      out[i] = ops::unary(op, in[i]);
    else if constexpr (std::is_signed_v<T>)
      out[i] = op == DSRT_NEG ? T(-in[i]) : (in[i] < 0 ? T(0) : in[i]);
    else // i1 as uint8_t: relu is the identity, negation as the CPU's T(-x)
      out[i] = op == DSRT_NEG ? T(-in[i]) : in[i];
  }
}

template <class T>
__global__ void binaryKernel(T *out, const T *a, const T *b, Strided s, int64_t n, int32_t op) {
  DSRT_GRID_STRIDE(i, n) {
    int64_t off[2];
    offsetsOf<2>(s, i, off);
    if constexpr (isHalfBits<T>()) {
      out[i] = store<T>(ops::binary(op, load(a[off[0]]), load(b[off[1]])));
    } else {
      T v = ops::binary(op, a[off[0]], b[off[1]]);
      if constexpr (std::is_same_v<T, uint8_t>)
        v = v != 0;
      out[i] = v;
    }
  }
}

template <class T>
__global__ void cmpKernel(uint8_t *out, const T *a, const T *b, Strided s, int64_t n,
                          int32_t pred) {
  DSRT_GRID_STRIDE(i, n) {
    int64_t off[2];
    offsetsOf<2>(s, i, off);
    out[i] = ops::cmp(pred, load(a[off[0]]), load(b[off[1]]));
  }
}

template <class T>
__global__ void whereKernel(T *out, const uint8_t *c, const T *a, const T *b, Strided s,
                            int64_t n) {
  DSRT_GRID_STRIDE(i, n) {
    int64_t off[3];
    offsetsOf<3>(s, i, off);
    out[i] = c[off[0]] ? a[off[1]] : b[off[2]];
  }
}

struct CopyArgs {
  int rank;
  int64_t dims[DSRT_MAX_RANK], src[DSRT_MAX_RANK], dst[DSRT_MAX_RANK];
};

template <class T>
__global__ void stridedCopyKernel(T *out, const T *in, CopyArgs c, int64_t n) {
  DSRT_GRID_STRIDE(i, n) {
    int64_t rem = i, so = 0, dof = 0;
    for (int d = c.rank - 1; d >= 0; --d) {
      int64_t k = rem % c.dims[d];
      rem /= c.dims[d];
      so += k * c.src[d];
      dof += k * c.dst[d];
    }
    out[dof] = in[so];
  }
}

void runCopy(dsrt_context *ctx, const char *kernel, const CopyLayout &c, dsrt_tensor *out,
             const dsrt_tensor *in) {
  int64_t n = 1;
  CopyArgs a;
  a.rank = c.rank;
  for (int d = 0; d < c.rank; ++d) {
    n *= c.dims[d];
    a.dims[d] = c.dims[d];
    a.src[d] = c.src[d];
    a.dst[d] = c.dst[d];
  }
  if (n == 0)
    return;
  size_t es = dsrt_dtype_size(out->dtype);
  const char *src = (const char *)in->data + c.srcOffset * es;
  char *dst = (char *)out->data + c.dstOffset * es;
  auto go = [&](auto tag) {
    using T = decltype(tag);
    stridedCopyKernel<T><<<blocksFor(n), kThreads, 0, stream(ctx)>>>((T *)dst, (const T *)src, a, n);
  };
  switch (es) {
  case 1:
    go(uint8_t());
    break;
  case 2:
    go(uint16_t());
    break;
  case 4:
    go(uint32_t());
    break;
  case 8:
    go(uint64_t());
    break;
  default:
    fail(kernel, "element size %zu", es);
  }
  launched(kernel);
}

} // namespace

void dsrt::cuda::fill(dsrt_context *ctx, dsrt_tensor *out, double value) {
  if (!out->numel)
    return;
  dispatchWithHalf("fill", out->dtype, [&](auto tag) {
    using T = decltype(tag);
    T v;
    if constexpr (isHalfBits<T>())
      v = T{floatToHalf(out->dtype, static_cast<float>(value))};
    else if constexpr (std::is_same_v<T, uint8_t>)
      v = value != 0;
    else
      v = (T)value;
    fillKernel<T><<<blocksFor(out->numel), kThreads, 0, stream(ctx)>>>((T *)out->data, v, out->numel);
  });
  launched("fill");
}

void dsrt::cuda::copy(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *in) {
  if (out->numel != in->numel || out->dtype != in->dtype)
    fail("copy", "result %s %s and operand %s %s differ", shapeString(out).c_str(),
         dtypeName(out->dtype), shapeString(in).c_str(), dtypeName(in->dtype));
  ctx->device->copy(out->data, in->data, in->numel * dsrt_dtype_size(in->dtype));
}

void dsrt::cuda::convert(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *in) {
  if (out->numel != in->numel)
    fail("convert", "result %s and operand %s differ in size", shapeString(out).c_str(),
         shapeString(in).c_str());
  if (!in->numel)
    return;
  dispatchWithHalf("convert", in->dtype, [&](auto itag) {
    using I = decltype(itag);
    dispatchWithHalf("convert", out->dtype, [&](auto otag) {
      using O = decltype(otag);
      convertKernel<I, O><<<blocksFor(in->numel), kThreads, 0, stream(ctx)>>>(
          (O *)out->data, (const I *)in->data, in->numel);
    });
  });
  launched("convert");
}

void dsrt::cuda::unary(dsrt_context *ctx, int32_t op, dsrt_tensor *out, const dsrt_tensor *in) {
  checks::unary(out, in, op);
  if (!in->numel)
    return;
  dispatchWithHalf("unary", in->dtype, [&](auto tag) {
    using T = decltype(tag);
    unaryKernel<T><<<blocksFor(in->numel), kThreads, 0, stream(ctx)>>>((T *)out->data,
                                                                        (const T *)in->data,
                                                                        in->numel, op);
  });
  launched("unary");
}

void dsrt::cuda::binary(dsrt_context *ctx, int32_t op, dsrt_tensor *out, const dsrt_tensor *a,
                        const dsrt_tensor *b) {
  checks::binary(out, a, b, op);
  const dsrt_tensor *ins[2] = {a, b};
  Strided s = strided("binary", out, ins, 2);
  if (!out->numel)
    return;
  dispatchWithHalf("binary", out->dtype, [&](auto tag) {
    using T = decltype(tag);
    binaryKernel<T><<<blocksFor(out->numel), kThreads, 0, stream(ctx)>>>(
        (T *)out->data, (const T *)a->data, (const T *)b->data, s, out->numel, op);
  });
  launched("binary");
}

void dsrt::cuda::cmp(dsrt_context *ctx, int32_t pred, dsrt_tensor *out, const dsrt_tensor *a,
                     const dsrt_tensor *b) {
  checks::cmp(out, a, b, pred);
  const dsrt_tensor *ins[2] = {a, b};
  Strided s = strided("cmp", out, ins, 2);
  if (!out->numel)
    return;
  dispatchWithHalf("cmp", a->dtype, [&](auto tag) {
    using T = decltype(tag);
    cmpKernel<T><<<blocksFor(out->numel), kThreads, 0, stream(ctx)>>>(
        (uint8_t *)out->data, (const T *)a->data, (const T *)b->data, s, out->numel, pred);
  });
  launched("cmp");
}

void dsrt::cuda::where(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *cond,
                       const dsrt_tensor *a, const dsrt_tensor *b) {
  checks::where(out, cond, a, b);
  const dsrt_tensor *ins[3] = {cond, a, b};
  Strided s = strided("where", out, ins, 3);
  if (!out->numel)
    return;
  dispatchWithHalf("where", out->dtype, [&](auto tag) {
    using T = decltype(tag);
    whereKernel<T><<<blocksFor(out->numel), kThreads, 0, stream(ctx)>>>(
        (T *)out->data, (const uint8_t *)cond->data, (const T *)a->data, (const T *)b->data, s,
        out->numel);
  });
  launched("where");
}

void dsrt::cuda::transpose(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *in,
                           const int64_t *perm) {
  runCopy(ctx, "transpose", transposeLayout(out, in, perm), out, in);
}
void dsrt::cuda::broadcast(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *in) {
  runCopy(ctx, "broadcast", broadcastLayout(out, in), out, in);
}
void dsrt::cuda::slice(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *in, int64_t dim,
                       int64_t start, int64_t step) {
  runCopy(ctx, "slice", sliceLayout(out, in, dim, start, step), out, in);
}
void dsrt::cuda::insert_slice(dsrt_context *ctx, dsrt_tensor *out, const dsrt_tensor *in,
                              int64_t dim, int64_t start, int64_t step) {
  runCopy(ctx, "insert_slice", insertSliceLayout(out, in, dim, start, step), out, in);
}
