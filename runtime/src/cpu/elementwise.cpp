// CPU kernels: unary, binary (broadcasting), comparisons and select.
#include "cpu_device.h"
#ifdef DSRT_HAVE_DNNL
#include "dnnl_state.h"
#endif
#include "../kernels/checks.h"
#include "../kernels/scalar_ops.h"

#include <cmath>
#include <type_traits>

using namespace dsrt;

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

#ifdef DSRT_HAVE_DNNL
/// GELU (erf) forward, or its backward when `dy` is given, through oneDNN's vectorized
/// eltwise primitives: the scalar erf of libm is ~10 ns an element.
void geluErfDnnl(dsrt_context *ctx, float *dst, const float *x, const float *dy, int64_t n) {
  using dnnl::memory;
  DnnlState &st = dnnlState(ctx);
  memory::desc md({n}, memory::data_type::f32, memory::format_tag::a);
  std::string key = "gelu_erf/" + std::to_string(n) + (dy ? "/bwd" : "/fwd");
  auto &slot = cpuDevice(ctx).primitives[key];
  if (!slot) {
    dnnl::eltwise_forward::primitive_desc fpd(
        dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_training,
                                    dnnl::algorithm::eltwise_gelu_erf, md, 0.f, 0.f),
        st.engine);
    if (dy) {
      dnnl::eltwise_backward::primitive_desc bpd(
          dnnl::eltwise_backward::desc(dnnl::algorithm::eltwise_gelu_erf, md, md, 0.f, 0.f),
          st.engine, fpd);
      slot = std::make_shared<dnnl::primitive>(dnnl::eltwise_backward(bpd));
    } else {
      slot = std::make_shared<dnnl::primitive>(dnnl::eltwise_forward(fpd));
    }
  }
  memory src(md, st.engine, const_cast<float *>(x));
  memory out(md, st.engine, dst);
  auto *prim = static_cast<dnnl::primitive *>(slot.get());
  if (dy) {
    memory diff(md, st.engine, const_cast<float *>(dy));
    prim->execute(st.stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, diff},
                              {DNNL_ARG_DIFF_SRC, out}});
  } else {
    prim->execute(st.stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, out}});
  }
  st.stream.wait();
}
#endif

} // namespace

void dsrt::cpu::unary(dsrt_context *ctx, int32_t op, dsrt_tensor *out,
                           const dsrt_tensor *in) {
  DSRT_PROFILE("unary", op);
  checks::unary(out, in, op);
#ifdef DSRT_HAVE_DNNL
  if (op == DSRT_GELU_ERF && in->dtype == DSRT_F32 && in->numel >= kParallelGrain) {
    geluErfDnnl(ctx, (float *)out->data, (const float *)in->data, nullptr, in->numel);
    return;
  }
#endif
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T *x = (const T *)in->data;
    T *y = (T *)out->data;
    int64_t n = in->numel;
    if constexpr (std::is_floating_point_v<T>) {
#pragma omp parallel for schedule(static) if (n > kParallelGrain / 4)
      for (int64_t i = 0; i < n; ++i)
        y[i] = unaryOp<T>(op, x[i]);
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
#ifdef DSRT_HAVE_DNNL
  if (op == DSRT_GELU_ERF_GRAD && out->dtype == DSRT_F32 && a->numel == out->numel &&
      b->numel == out->numel && out->numel >= kParallelGrain) {
    geluErfDnnl(ctx, (float *)out->data, (const float *)a->data, (const float *)b->data,
                out->numel);
    return;
  }
#endif
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T *x = (const T *)a->data;
    const T *y = (const T *)b->data;
    T *z = (T *)out->data;
    auto store = [](T v) -> T {
      if constexpr (std::is_same_v<T, uint8_t>)
        return v != 0;
      else
        return v;
    };
    int64_t n = out->numel;
    // Fast paths: equal shapes, or one side a scalar.
    if (a->numel == n && b->numel == n && a->rank == out->rank && b->rank == out->rank) {
      bool same = true;
      for (int i = 0; i < out->rank; ++i)
        same = same && a->dims[i] == out->dims[i] && b->dims[i] == out->dims[i];
      if (same) {
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
        for (int64_t i = 0; i < n; ++i)
          z[i] = store(binaryOp<T>(op, x[i], y[i]));
        return;
      }
    }
    const dsrt_tensor *ins[2] = {a, b};
    Broadcast bc("binary", out, ins, 2);
    bc.forEachRow(n, [&](int64_t o, const int64_t *off, const int64_t *is, int64_t len) {
      const T *xa = x + off[0];
      const T *yb = y + off[1];
      T *zo = z + o;
      if (is[0] == 1 && is[1] == 1) {
        for (int64_t j = 0; j < len; ++j)
          zo[j] = store(binaryOp<T>(op, xa[j], yb[j]));
      } else if (is[0] == 1 && is[1] == 0) {
        T yv = yb[0];
        for (int64_t j = 0; j < len; ++j)
          zo[j] = store(binaryOp<T>(op, xa[j], yv));
      } else if (is[0] == 0 && is[1] == 1) {
        T xv = xa[0];
        for (int64_t j = 0; j < len; ++j)
          zo[j] = store(binaryOp<T>(op, xv, yb[j]));
      } else {
        for (int64_t j = 0; j < len; ++j)
          zo[j] = store(binaryOp<T>(op, xa[j * is[0]], yb[j * is[1]]));
      }
    });
  };
  dispatchAll("binary", out->dtype, run);
}

void dsrt::cpu::cmp(dsrt_context *, int32_t pred, dsrt_tensor *out, const dsrt_tensor *a,
                         const dsrt_tensor *b) {
  DSRT_PROFILE("cmp");
  checks::cmp(out, a, b, pred);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T *x = (const T *)a->data;
    const T *y = (const T *)b->data;
    uint8_t *z = (uint8_t *)out->data;
    const dsrt_tensor *ins[2] = {a, b};
    Broadcast bc("cmp", out, ins, 2);
    bc.forEachRow(out->numel, [&](int64_t o, const int64_t *off, const int64_t *is, int64_t len) {
      for (int64_t j = 0; j < len; ++j)
        z[o + j] = cmpOp<T>(pred, x[off[0] + j * is[0]], y[off[1] + j * is[1]]);
    });
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
      for (int64_t j = 0; j < len; ++j)
        z[o + j] = c[off[0] + j * is[0]] ? x[off[1] + j * is[1]] : y[off[2] + j * is[2]];
    });
  };
  dispatchAll("where", out->dtype, run);
}
