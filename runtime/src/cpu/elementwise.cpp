// CPU kernels: unary, binary (broadcasting), comparisons and select.
#include "../core/internal.h"
#include "dnnl_state.h"

#include <cmath>
#include <type_traits>

using namespace dsrt;

namespace {

template <class T> T unaryOp(int32_t op, T x) {
  // Matches ATen's CPU formulas (gelu: aten/src/ATen/native/cpu/Activation.cpp).
  switch (op) {
  case DSRT_NEG:
    return -x;
  case DSRT_EXP:
    return std::exp(x);
  case DSRT_LOG:
    return std::log(x);
  case DSRT_SQRT:
    return std::sqrt(x);
  case DSRT_RSQRT:
    return T(1) / std::sqrt(x);
  case DSRT_TANH:
    return std::tanh(x);
  case DSRT_SIGMOID:
    return T(1) / (T(1) + std::exp(-x));
  case DSRT_RELU:
    return x < T(0) ? T(0) : x;
  case DSRT_GELU_ERF:
    return x * T(0.5) * (T(1) + std::erf(x * T(M_SQRT1_2)));
  case DSRT_GELU_TANH: {
    const T kBeta = T(M_SQRT2 * M_2_SQRTPI * 0.5);
    const T kKappa = T(0.044715);
    T inner = kBeta * (x + kKappa * x * x * x);
    return T(0.5) * x * (T(1) + std::tanh(inner));
  }
  case DSRT_COS:
    return std::cos(x);
  case DSRT_SIN:
    return std::sin(x);
  default:
    fail("unary", "unknown op %d", op);
  }
}

template <class T> T intPow(T base, T exp) {
  // torch.pow on integers: negative exponents give 0 except for bases 1 and -1.
  if (exp < 0) {
    if (base == 1)
      return 1;
    if (base == -1)
      return (exp % 2) ? -1 : 1;
    return 0;
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

template <class T> inline T binaryOp(int32_t op, T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
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
      return std::pow(a, b);
    case DSRT_MAX:
      return (std::isnan(a) || std::isnan(b)) ? a + b : (a > b ? a : b);
    case DSRT_MIN:
      return (std::isnan(a) || std::isnan(b)) ? a + b : (a < b ? a : b);
    case DSRT_GELU_ERF_GRAD: {
      const T kBeta = T(M_2_SQRTPI * M_SQRT1_2 * 0.5);
      T cdf = T(0.5) * (T(1) + std::erf(a * T(M_SQRT1_2)));
      T pdf = kBeta * std::exp(a * a * T(-0.5));
      return b * (cdf + a * pdf);
    }
    case DSRT_GELU_TANH_GRAD: {
      const T kBeta = T(M_SQRT2 * M_2_SQRTPI * 0.5);
      const T kKappa = T(0.044715);
      T xSq = a * a;
      T xCube = xSq * a;
      T inner = kBeta * (a + kKappa * xCube);
      T t = std::tanh(inner);
      T left = T(0.5) * a;
      T right = T(1) + t;
      T leftDerivative = T(0.5) * right;
      T tanhDerivative = T(1) - t * t;
      T innerDerivative = kBeta * (T(1) + T(3) * kKappa * xSq);
      T rightDerivative = left * tanhDerivative * innerDerivative;
      return b * (leftDerivative + rightDerivative);
    }
    default:
      fail("binary", "unknown op %d", op);
    }
  } else {
    switch (op) {
    case DSRT_ADD:
      return T(a + b);
    case DSRT_SUB:
      return T(a - b);
    case DSRT_MUL:
      return T(a * b);
    case DSRT_DIV:
      if (b == 0)
        fail("binary", "integer division by zero");
      return T(a / b);
    case DSRT_POW:
      return intPow(a, b);
    case DSRT_MAX:
      return a > b ? a : b;
    case DSRT_MIN:
      return a < b ? a : b;
    default:
      fail("binary", "op %d needs a floating-point dtype", op);
    }
  }
}

template <class T> inline bool cmpOp(int32_t pred, T a, T b) {
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
    fail("cmp", "unknown predicate %d", pred);
  }
}

/// GELU (erf) forward, or its backward when `dy` is given, through oneDNN's vectorized
/// eltwise primitives: the scalar erf of libm is ~10 ns an element.
void geluErfDnnl(dsrt_context *ctx, float *dst, const float *x, const float *dy, int64_t n) {
  using dnnl::memory;
  DnnlState &st = dnnlState(ctx);
  memory::desc md({n}, memory::data_type::f32, memory::format_tag::a);
  std::string key = "gelu_erf/" + std::to_string(n) + (dy ? "/bwd" : "/fwd");
  auto &slot = ctx->primitives[key];
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

} // namespace

extern "C" void dsrt_unary(dsrt_context *ctx, int32_t op, dsrt_tensor *out,
                           const dsrt_tensor *in) {
  DSRT_PROFILE("unary", op);
  if (out->numel != in->numel)
    fail("unary", "result %s and operand %s differ in size", shapeString(out).c_str(),
         shapeString(in).c_str());
  checkDtype("unary", out, in->dtype, "result");
  if (op < DSRT_NEG || op > DSRT_SIN)
    fail("unary", "unknown op %d", op);
  if (op == DSRT_GELU_ERF && in->dtype == DSRT_F32 && in->numel >= kParallelGrain) {
    geluErfDnnl(ctx, (float *)out->data, (const float *)in->data, nullptr, in->numel);
    return;
  }
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
      } else if (op == DSRT_RELU) {
        for (int64_t i = 0; i < n; ++i)
          y[i] = x[i] < 0 ? T(0) : x[i];
      } else {
        fail("unary", "op %d needs a floating-point dtype", op);
      }
    }
  };
  dispatchAll("unary", in->dtype, run);
}

extern "C" void dsrt_binary(dsrt_context *ctx, int32_t op, dsrt_tensor *out,
                            const dsrt_tensor *a, const dsrt_tensor *b) {
  DSRT_PROFILE("binary", op);
  checkDtype("binary", a, out->dtype, "lhs");
  checkDtype("binary", b, out->dtype, "rhs");
  if (op < DSRT_ADD || op > DSRT_GELU_TANH_GRAD)
    fail("binary", "unknown op %d", op);
  if (op == DSRT_GELU_ERF_GRAD && out->dtype == DSRT_F32 && a->numel == out->numel &&
      b->numel == out->numel && out->numel >= kParallelGrain) {
    geluErfDnnl(ctx, (float *)out->data, (const float *)a->data, (const float *)b->data,
                out->numel);
    return;
  }
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

extern "C" void dsrt_cmp(dsrt_context *, int32_t pred, dsrt_tensor *out, const dsrt_tensor *a,
                         const dsrt_tensor *b) {
  DSRT_PROFILE("cmp");
  checkDtype("cmp", out, DSRT_I1, "result");
  checkDtype("cmp", b, a->dtype, "rhs");
  if (pred < DSRT_EQ || pred > DSRT_GE)
    fail("cmp", "unknown predicate %d", pred);
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

extern "C" void dsrt_where(dsrt_context *, dsrt_tensor *out, const dsrt_tensor *cond,
                           const dsrt_tensor *a, const dsrt_tensor *b) {
  DSRT_PROFILE("where");
  checkDtype("where", cond, DSRT_I1, "condition");
  checkDtype("where", a, out->dtype, "true operand");
  checkDtype("where", b, out->dtype, "false operand");
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
