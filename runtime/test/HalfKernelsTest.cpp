// The elementwise, softmax, layer norm and embedding-gradient kernels on bf16 and f16 tensors
// against LibTorch's 16-bit CPU ops, which compute in f32 and round each result once:
// arithmetic, comparisons and selection bit for bit (broadcasting too), the transcendental
// functions and GELU's gradients within PyTorch's own 16-bit tolerance (the f32 vector math
// differs from PyTorch's in the last bits, and GELU's tails differ more in relative terms where
// PyTorch's formula cancels to zero); the embedding's gradient, summed in 16 bits in index
// order as PyTorch's, bit for bit. Large enough that the kernels run in parallel chunks, with
// a tail.
#include "dsrt/dsrt.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>
#include <string>
#include <vector>

namespace {

struct Case {
  int32_t dtype;
  at::ScalarType scalar;
};
const Case kCases[] = {{DSRT_BF16, torch::kBFloat16}, {DSRT_F16, torch::kHalf}};

dsrt_tensor *borrow(dsrt_context *ctx, int32_t dtype, const torch::Tensor &t) {
  std::vector<int64_t> dims(t.sizes().begin(), t.sizes().end());
  return dsrt_tensor_borrow(ctx, dtype, (int32_t)dims.size(), dims.data(), t.data_ptr());
}

/// How many elements of `got` differ from `want` (both of `scalar`): bit for bit where `exact`,
/// else beyond PyTorch's own tolerance for the 16-bit type (torch.testing's rtol 1.6e-2 for
/// bf16, 1e-3 for f16, atol 1e-5) or an infinity against anything else, NaN matching NaN; the
/// first is reported.
int64_t mismatches(const torch::Tensor &got, const torch::Tensor &want, bool exact,
                   const std::string &what) {
  torch::Tensor far;
  if (exact) {
    far = got.view(torch::kShort) != want.view(torch::kShort);
  } else {
    const double rtol = got.scalar_type() == torch::kBFloat16 ? 1.6e-2 : 1e-3, atol = 1e-5;
    torch::Tensor g = got.to(torch::kFloat), w = want.to(torch::kFloat);
    far = ((g - w).abs() > atol + rtol * w.abs()) | ((g.isinf() | w.isinf()) & (g != w));
  }
  far &= ~(got.isnan() & want.isnan());
  far = far.flatten();
  int64_t bad = far.sum().item<int64_t>();
  if (bad) {
    int64_t i = far.nonzero()[0][0].item<int64_t>();
    ADD_FAILURE() << what << ": " << bad << " of " << got.numel() << " elements differ, first at "
                  << i << ": " << got.flatten()[i].item<float>() << " against torch's "
                  << want.flatten()[i].item<float>();
  }
  return bad;
}

torch::Tensor values(at::ScalarType scalar, int64_t n, double scale, int seed) {
  torch::manual_seed(seed);
  return (torch::randn({n}) * scale).to(scalar);
}

TEST(HalfKernels, UnaryAsTorch) {
  dsrt_context *ctx = dsrt_context_create(0, 2, 1);
  const int64_t n = 3 * (1 << 14) + 77;
  for (const Case &c : kCases) {
    torch::Tensor x = values(c.scalar, n, 3.0, 1);
    torch::Tensor pos = x.abs() + 0.01;
    struct U {
      int32_t op;
      const char *name;
      torch::Tensor in, want;
      bool exact;
    } ops[] = {
        {DSRT_NEG, "neg", x, -x, true},
        {DSRT_RELU, "relu", x, torch::relu(x), true},
        {DSRT_SQRT, "sqrt", pos, torch::sqrt(pos), true},
        {DSRT_RSQRT, "rsqrt", pos, torch::rsqrt(pos), false},
        {DSRT_EXP, "exp", x, torch::exp(x), false},
        {DSRT_LOG, "log", pos, torch::log(pos), false},
        {DSRT_TANH, "tanh", x, torch::tanh(x), false},
        {DSRT_SIGMOID, "sigmoid", x, torch::sigmoid(x), false},
        {DSRT_GELU_ERF, "gelu", x, torch::gelu(x), false},
        {DSRT_GELU_TANH, "gelu tanh", x, torch::gelu(x, "tanh"), false},
        {DSRT_SIN, "sin", x, torch::sin(x), false},
        {DSRT_COS, "cos", x, torch::cos(x), false},
    };
    for (U &u : ops) {
      torch::Tensor got = torch::empty_like(u.in);
      dsrt_tensor *in = borrow(ctx, c.dtype, u.in), *out = borrow(ctx, c.dtype, got);
      dsrt_unary(ctx, u.op, out, in);
      mismatches(got, u.want, u.exact, std::string(u.name) + " " + c10::toString(c.scalar));
      dsrt_tensor_free(ctx, in);
      dsrt_tensor_free(ctx, out);
    }
  }
  dsrt_context_destroy(ctx);
}

// The functions that convert inside their vector loop (exp, log, sin, cos, GELU erf and its
// gradient) on the arguments their vector forms do not cover: those values go ATen's scalar
// way, the rest of their block the vector way, in place too (the scalar way must read the
// arguments, not the results).
TEST(HalfKernels, UnaryEdgesAsTorch) {
  dsrt_context *ctx = dsrt_context_create(0, 2, 1);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  const std::vector<float> edges = {0.f,   -0.f,  1.f,   -1.f, 20.f, -20.f, -13.5f, 8193.f,
                                    -9000.f, 1e5f, -3e6f, inf,  -inf, nan,   -90.f,  89.f};
  for (const Case &c : kCases) {
    torch::Tensor x = values(c.scalar, 5000, 3.0, 6);
    x.narrow(0, 1500, (int64_t)edges.size()).copy_(torch::tensor(edges));
    torch::Tensor dy = values(c.scalar, 5000, 1.0, 7);
    struct U {
      int32_t op;
      const char *name;
      torch::Tensor want;
    } ops[] = {
        {DSRT_EXP, "exp", torch::exp(x)},
        {DSRT_LOG, "log", torch::log(x)},
        {DSRT_SIN, "sin", torch::sin(x)},
        {DSRT_COS, "cos", torch::cos(x)},
        {DSRT_GELU_ERF, "gelu", torch::gelu(x)},
        {DSRT_GELU_ERF_GRAD, "gelu grad", torch::gelu_backward(dy, x, "none")},
    };
    for (U &u : ops) {
      for (bool inPlace : {false, true}) {
        torch::Tensor got = inPlace ? x.clone() : torch::empty_like(x);
        dsrt_tensor *in = borrow(ctx, c.dtype, inPlace ? got : x),
                    *out = borrow(ctx, c.dtype, got), *g = borrow(ctx, c.dtype, dy);
        if (u.op == DSRT_GELU_ERF_GRAD)
          dsrt_binary(ctx, u.op, out, in, g);
        else
          dsrt_unary(ctx, u.op, out, in);
        mismatches(got, u.want, false,
                   std::string(u.name) + " " + c10::toString(c.scalar) +
                       (inPlace ? " in place" : ""));
        for (dsrt_tensor *t : {in, out, g})
          dsrt_tensor_free(ctx, t);
      }
    }
  }
  dsrt_context_destroy(ctx);
}

TEST(HalfKernels, BinaryAsTorch) {
  dsrt_context *ctx = dsrt_context_create(0, 2, 1);
  const int64_t n = 3 * (1 << 14) + 77;
  for (const Case &c : kCases) {
    torch::Tensor a = values(c.scalar, n, 3.0, 2), b = values(c.scalar, n, 2.0, 3);
    torch::Tensor pos = a.abs() + 0.5, small = b * 0.5;
    // Broadcast shapes: a row against a column, and a one-element operand.
    torch::Tensor rows = values(c.scalar, 96 * 80, 1.0, 4).view({96, 1, 80});
    torch::Tensor cols = values(c.scalar, 7 * 80, 1.0, 5).view({1, 7, 80});
    torch::Tensor one = torch::full({}, 0.3f).to(c.scalar);
    auto gelu = [&](const torch::Tensor &x, const torch::Tensor &dy, const char *form) {
      return torch::gelu_backward(dy, x, form);
    };
    struct B {
      int32_t op;
      const char *name;
      torch::Tensor x, y, want;
      bool exact;
    } ops[] = {
        {DSRT_ADD, "add", a, b, a + b, true},
        {DSRT_SUB, "sub", a, b, a - b, true},
        {DSRT_MUL, "mul", a, b, a * b, true},
        {DSRT_DIV, "div", a, b, a / b, true},
        {DSRT_MAX, "max", a, b, torch::maximum(a, b), true},
        {DSRT_MIN, "min", a, b, torch::minimum(a, b), true},
        {DSRT_ADD, "add rows+cols", rows, cols, rows + cols, true},
        {DSRT_MUL, "mul by one element", a, one, a * one, true},
        {DSRT_POW, "pow", pos, small, torch::pow(pos, small), false},
        {DSRT_GELU_ERF_GRAD, "gelu grad", a, b, gelu(a, b, "none"), false},
        {DSRT_GELU_TANH_GRAD, "gelu tanh grad", a, b, gelu(a, b, "tanh"), false},
    };
    for (B &o : ops) {
      torch::Tensor got = torch::empty_like(o.want);
      dsrt_tensor *x = borrow(ctx, c.dtype, o.x), *y = borrow(ctx, c.dtype, o.y),
                  *out = borrow(ctx, c.dtype, got);
      dsrt_binary(ctx, o.op, out, x, y);
      mismatches(got, o.want, o.exact, std::string(o.name) + " " + c10::toString(c.scalar));
      for (dsrt_tensor *t : {x, y, out})
        dsrt_tensor_free(ctx, t);
    }
  }
  dsrt_context_destroy(ctx);
}

TEST(HalfKernels, CmpAndWhereAsTorch) {
  dsrt_context *ctx = dsrt_context_create(0, 2, 1);
  for (const Case &c : kCases) {
    // Ties that only the 16-bit values make: a and b round to many equal pairs.
    torch::Tensor a = values(c.scalar, 4096 * 5, 1.0, 6).view({5, 4096});
    torch::Tensor b = (a[0].to(torch::kFloat) + values(torch::kFloat, 4096, 0.002, 7))
                          .to(c.scalar)
                          .view({1, 4096});
    torch::Tensor lt = torch::empty({5, 4096}, torch::kBool);
    dsrt_tensor *x = borrow(ctx, c.dtype, a), *y = borrow(ctx, c.dtype, b);
    dsrt_tensor *m = borrow(ctx, DSRT_I1, lt);
    dsrt_cmp(ctx, DSRT_LE, m, x, y);
    EXPECT_TRUE(torch::equal(lt, a <= b)) << c10::toString(c.scalar);
    torch::Tensor sel = torch::empty_like(a);
    torch::Tensor fill = torch::full({}, -std::numeric_limits<float>::infinity()).to(c.scalar);
    dsrt_tensor *f = borrow(ctx, c.dtype, fill), *out = borrow(ctx, c.dtype, sel);
    dsrt_where(ctx, out, m, x, f);
    EXPECT_TRUE(torch::equal(sel, torch::where(lt, a, fill))) << c10::toString(c.scalar);
    for (dsrt_tensor *t : {x, y, m, f, out})
      dsrt_tensor_free(ctx, t);
  }
  dsrt_context_destroy(ctx);
}

TEST(HalfKernels, SoftmaxAsTorch) {
  dsrt_context *ctx = dsrt_context_create(0, 2, 1);
  for (const Case &c : kCases) {
    // Causal attention's rows: the upper triangle -inf; and one row all -inf (NaN, as torch).
    torch::Tensor x = values(c.scalar, 64 * 8 * 96, 4.0, 8).view({64, 8, 96});
    x = x.masked_fill(torch::ones({96, 96}, torch::kBool).triu(1).narrow(0, 0, 8), -INFINITY);
    x[3][2].fill_(-INFINITY);
    for (int64_t dim : {2, 0}) { // the last dim's rows, and an f32 copy for the others
      for (int32_t log : {0, 1}) {
        std::string what = std::string(log ? "log-softmax" : "softmax") + " dim " +
                           std::to_string(dim) + " " + c10::toString(c.scalar);
        // Log-softmax against PyTorch's f32 kernel, rounded: its 16-bit kernel rounds
        // max + log(sum) to 16 bits before subtracting (x = [7.375, 2.047] gives -0.0078
        // for the first, against -0.0048 in f32), which ds does not copy.
        torch::Tensor want = log ? torch::log_softmax(x.to(torch::kFloat), dim).to(c.scalar)
                                 : torch::softmax(x, dim);
        torch::Tensor got = torch::empty_like(x);
        dsrt_tensor *in = borrow(ctx, c.dtype, x), *out = borrow(ctx, c.dtype, got);
        dsrt_softmax(ctx, out, in, dim, log);
        mismatches(got, want, false, what);
        // The gradient, from torch's output and a random dy.
        torch::Tensor dy = values(c.scalar, x.numel(), 1.0, 9).view(x.sizes());
        torch::Tensor wantDx = log ? torch::_log_softmax_backward_data(dy, want, dim, c.scalar)
                                   : torch::_softmax_backward_data(dy, want, dim, c.scalar);
        torch::Tensor dx = torch::empty_like(x);
        dsrt_tensor *y = borrow(ctx, c.dtype, want), *g = borrow(ctx, c.dtype, dy),
                    *d = borrow(ctx, c.dtype, dx);
        dsrt_softmax_grad(ctx, d, y, g, dim, log);
        mismatches(dx, wantDx, false, what + " grad");
        for (dsrt_tensor *t : {in, out, y, g, d})
          dsrt_tensor_free(ctx, t);
      }
    }
    // Rows of 300: two sum blocks of the gradient (256 values each) and a tail of 12 beyond
    // the vector lanes.
    torch::Tensor x2 = values(c.scalar, 35 * 300, 3.0, 10).view({35, 300});
    torch::Tensor y2 = torch::softmax(x2, 1), dy2 = values(c.scalar, 35 * 300, 1.0, 11).view({35, 300});
    torch::Tensor got2 = torch::empty_like(x2), dx2 = torch::empty_like(x2);
    dsrt_tensor *in = borrow(ctx, c.dtype, x2), *out = borrow(ctx, c.dtype, got2),
                *y = borrow(ctx, c.dtype, y2), *g = borrow(ctx, c.dtype, dy2),
                *d = borrow(ctx, c.dtype, dx2);
    dsrt_softmax(ctx, out, in, 1, 0);
    mismatches(got2, y2, false, std::string("softmax rows of 300 ") + c10::toString(c.scalar));
    dsrt_softmax_grad(ctx, d, y, g, 1, 0);
    mismatches(dx2, torch::_softmax_backward_data(dy2, y2, 1, c.scalar), false,
               std::string("softmax grad rows of 300 ") + c10::toString(c.scalar));
    for (dsrt_tensor *t : {in, out, y, g, d})
      dsrt_tensor_free(ctx, t);
  }
  dsrt_context_destroy(ctx);
}

TEST(HalfKernels, LayerNormAsTorch) {
  dsrt_context *ctx = dsrt_context_create(0, 2, 1);
  const int64_t rows = 300, N = 192;
  for (const Case &c : kCases) {
    // Rows far from zero mean: the statistics must be taken in f32, not 16 bits.
    torch::Tensor x = (values(c.scalar, rows * N, 2.0, 10).to(torch::kFloat) + 30.0)
                          .to(c.scalar)
                          .view({rows, N});
    torch::Tensor w = values(c.scalar, N, 1.0, 11), b = values(c.scalar, N, 1.0, 12);
    for (bool affine : {true, false}) {
      torch::Tensor want = affine ? torch::layer_norm(x, {N}, w, b, 1e-5)
                                  : torch::layer_norm(x, {N}, {}, {}, 1e-5);
      torch::Tensor got = torch::empty_like(x);
      dsrt_tensor *in = borrow(ctx, c.dtype, x), *out = borrow(ctx, c.dtype, got);
      dsrt_tensor *wt = borrow(ctx, c.dtype, w), *bt = borrow(ctx, c.dtype, b);
      dsrt_layer_norm(ctx, out, in, affine ? wt : nullptr, affine ? bt : nullptr, N, 1e-5);
      mismatches(got, want, false,
                 std::string("layer norm ") + (affine ? "affine " : "") + c10::toString(c.scalar));
      for (dsrt_tensor *t : {in, out, wt, bt})
        dsrt_tensor_free(ctx, t);
    }
  }
  dsrt_context_destroy(ctx);
}

/// The 16-bit layer norm backward as PyTorch's CPU kernel: dx, and dweight and dbias summed
/// row by row into 16-bit buffers (one per block of rows of at::parallel_for, T threads), at 1
/// and 2 threads. Counted, not required bit for bit: the row statistics are ds's f32 ones
/// rounded to 16 bits (PyTorch's own f32 ones round the same way but at a boundary), and its
/// sums run in another order. Summing the rows in f32, as the f32 kernel does, put 80% of the
/// bf16 dweight and dbias elements off PyTorch's by a unit in the last place or more.
TEST(HalfKernels, LayerNormGradAsTorch) {
  const int saved = at::get_num_threads();
  const int64_t rows = 300, N = 192;
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    dsrt_context *ctx = dsrt_context_create(0, threads, 1);
    for (const Case &c : kCases) {
      torch::Tensor x = (values(c.scalar, rows * N, 2.0, 20).to(torch::kFloat) + 3.0)
                            .to(c.scalar)
                            .view({rows, N});
      torch::Tensor dy = values(c.scalar, rows * N, 1.0, 21).view({rows, N});
      torch::Tensor w = values(c.scalar, N, 1.0, 22), b = values(c.scalar, N, 1.0, 23);
      auto [y, mean, rstd] = at::native_layer_norm(x, {N}, w, b, 1e-5);
      auto [gx, gw, gb] =
          at::native_layer_norm_backward(dy, x, {N}, mean, rstd, w, b, {true, true, true});
      torch::Tensor dx = torch::empty_like(x), dw = torch::empty_like(w),
                    db = torch::empty_like(b);
      dsrt_tensor *xt = borrow(ctx, c.dtype, x), *dyt = borrow(ctx, c.dtype, dy),
                  *wt = borrow(ctx, c.dtype, w), *dxt = borrow(ctx, c.dtype, dx),
                  *dwt = borrow(ctx, c.dtype, dw), *dbt = borrow(ctx, c.dtype, db);
      dsrt_layer_norm_grad(ctx, dxt, dwt, dbt, xt, wt, dyt, N, 1e-5);
      const std::string where =
          std::string(" ") + c10::toString(c.scalar) + " at " + std::to_string(threads);
      auto off = [](const torch::Tensor &a, const torch::Tensor &b) {
        return (a.view(torch::kShort) != b.view(torch::kShort)).sum().item<int64_t>();
      };
      EXPECT_LE(off(dx, gx), rows * N / 1000) << "dx" << where;
      EXPECT_LE(off(dw, gw), 2) << "dweight" << where;
      EXPECT_LE(off(db, gb), 2) << "dbias" << where;
      mismatches(dx, gx, false, "dx" + where);
      for (dsrt_tensor *t : {xt, dyt, wt, dxt, dwt, dbt})
        dsrt_tensor_free(ctx, t);
    }
    dsrt_context_destroy(ctx);
  }
  at::set_num_threads(saved);
}

// The embedding's gradient on 16-bit rows against PyTorch's CPU embedding backward, which adds
// each row in 16 bits in the order of the indices (every addition rounded): bit for bit, with
// many repeated indices and the padding row skipped; wide enough for parallel column blocks.
TEST(HalfKernels, EmbeddingGradAsTorch) {
  const int saved = at::get_num_threads();
  const int64_t V = 12, D = 200, n = 640;
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    dsrt_context *ctx = dsrt_context_create(0, threads, 1);
    for (const Case &c : kCases) {
      torch::manual_seed(24);
      torch::Tensor idx = torch::randint(0, V, {n}, torch::kLong);
      torch::Tensor dy = values(c.scalar, n * D, 1.0, 25).view({n, D});
      torch::Tensor want = at::embedding_dense_backward(dy, idx, V, /*padding_idx=*/3, false);
      torch::Tensor dw = torch::full({V, D}, 7.0, c.scalar);
      dsrt_tensor *dyt = borrow(ctx, c.dtype, dy), *dwt = borrow(ctx, c.dtype, dw),
                  *it = borrow(ctx, DSRT_I64, idx);
      dsrt_embedding_grad(ctx, dwt, dyt, it, 3);
      mismatches(dw, want, true,
                 std::string("embedding_grad ") + c10::toString(c.scalar) + " at " +
                     std::to_string(threads));
      for (dsrt_tensor *t : {dyt, dwt, it})
        dsrt_tensor_free(ctx, t);
    }
    dsrt_context_destroy(ctx);
  }
  at::set_num_threads(saved);
}

} // namespace
