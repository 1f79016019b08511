// dsrt-kernel-bench: the time of every runtime kernel on the shapes of a GPT step (d_model
// 512, 2048 tokens, MLP width 2048, vocab 1024) and of a small CNN, one case per line:
//   NAME <tab> MILLISECONDS (median of the repetitions) <tab> DESCRIPTION
// bench/kernels_vs_torch.py runs the same cases in PyTorch and prints both side by side.
//
// usage: dsrt-kernel-bench [--threads N] [--filter SUBSTRING] [--seconds S] [--list]
#include "dsrt/dsrt.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

dsrt_context *ctx = nullptr;
std::mt19937 gen(0);
std::vector<dsrt_tensor *> owned;

dsrt_tensor *make(int32_t dtype, std::vector<int64_t> dims) {
  dsrt_tensor *t = dsrt_tensor_alloc(ctx, dtype, (int32_t)dims.size(), dims.data());
  owned.push_back(t);
  return t;
}
/// Uniform in [lo, hi) (f32), or integers in [0, hi) (i64).
dsrt_tensor *uniform(std::vector<int64_t> dims, double lo, double hi, int32_t dtype = DSRT_F32) {
  dsrt_tensor *t = make(dtype, dims);
  if (dtype == DSRT_I64) {
    std::vector<int64_t> v(t->numel);
    std::uniform_int_distribution<int64_t> d(0, (int64_t)hi - 1);
    for (auto &x : v)
      x = d(gen);
    dsrt_tensor_from_host(ctx, t, v.data());
  } else {
    std::vector<float> v(t->numel);
    std::uniform_real_distribution<float> d((float)lo, (float)hi);
    for (auto &x : v)
      x = d(gen);
    if (dtype == DSRT_F32) {
      dsrt_tensor_from_host(ctx, t, v.data());
    } else { // bf16: through an f32 tensor
      dsrt_tensor *f = make(DSRT_F32, dims);
      dsrt_tensor_from_host(ctx, f, v.data());
      dsrt_convert(ctx, t, f);
    }
  }
  return t;
}
dsrt_tensor *randn(std::vector<int64_t> dims) { return uniform(dims, -2, 2); }
dsrt_tensor *scalar(float v) {
  dsrt_tensor *t = make(DSRT_F32, {});
  dsrt_tensor_from_host(ctx, t, &v);
  return t;
}
dsrt_tensor *scalar64(double v) {
  dsrt_tensor *t = make(DSRT_F64, {});
  dsrt_tensor_from_host(ctx, t, &v);
  return t;
}

struct Case {
  std::string name, what;
  std::function<std::function<void()>()> setup; ///< makes the tensors, returns the call
};

// The shapes (bench/kernels_vs_torch.py uses the same).
constexpr int64_t T = 2048, D = 512, H = 2048, V = 1024, B = 16, S = 128, NH = 8, HD = 64;

std::vector<Case> cases() {
  std::vector<Case> c;
  const std::vector<int64_t> E = {T, H}; // an MLP activation: 4.2M elements
  const char *unaryNames[] = {"neg", "exp", "log", "sqrt", "rsqrt", "tanh",
                              "sigmoid", "relu", "gelu_erf", "gelu_tanh", "cos", "sin"};
  for (int op = DSRT_NEG; op <= DSRT_SIN; ++op) {
    bool positive = op == DSRT_LOG || op == DSRT_SQRT || op == DSRT_RSQRT;
    c.push_back({std::string("unary_") + unaryNames[op], "[2048, 2048] f32", [=] {
                   dsrt_tensor *x = positive ? uniform(E, 0.1, 4) : randn(E), *y = make(DSRT_F32, E);
                   return [=] { dsrt_unary(ctx, op, y, x); };
                 }});
  }
  const char *binaryNames[] = {"add", "sub", "mul", "div", "pow", "max", "min",
                               "gelu_erf_grad", "gelu_tanh_grad"};
  for (int op = DSRT_ADD; op <= DSRT_GELU_TANH_GRAD; ++op)
    c.push_back({std::string("binary_") + binaryNames[op], "[2048, 2048] f32 x2", [=] {
                   dsrt_tensor *a = op == DSRT_POW ? uniform(E, 0.1, 4) : randn(E);
                   dsrt_tensor *b = op == DSRT_DIV ? uniform(E, 0.5, 2) : randn(E);
                   dsrt_tensor *y = make(DSRT_F32, E);
                   return [=] { dsrt_binary(ctx, op, y, a, b); };
                 }});
  c.push_back({"binary_add_bias", "[2048, 2048] + [2048]", [=] {
                 dsrt_tensor *a = randn(E), *b = randn({H}), *y = make(DSRT_F32, E);
                 return [=] { dsrt_binary(ctx, DSRT_ADD, y, a, b); };
               }});
  c.push_back({"binary_mul_scalar", "[2048, 2048] * []", [=] {
                 dsrt_tensor *a = randn(E), *b = scalar(0.5f), *y = make(DSRT_F32, E);
                 return [=] { dsrt_binary(ctx, DSRT_MUL, y, a, b); };
               }});
  c.push_back({"cmp_gt", "[2048, 2048] > [2048, 2048]", [=] {
                 dsrt_tensor *a = randn(E), *b = randn(E), *y = make(DSRT_I1, E);
                 return [=] { dsrt_cmp(ctx, DSRT_GT, y, a, b); };
               }});
  c.push_back({"where", "i1 [128, 128] ? [16, 8, 128, 128] : []", [=] {
                 dsrt_tensor *a = randn({B, NH, S, S}), *b = scalar(-1e9f);
                 dsrt_tensor *cond = make(DSRT_I1, {S, S});
                 dsrt_cmp(ctx, DSRT_GT, cond, randn({S, S}), randn({S, S}));
                 dsrt_tensor *y = make(DSRT_F32, {B, NH, S, S});
                 return [=] { dsrt_where(ctx, y, cond, a, b); };
               }});
  c.push_back({"where_masked_fill", "i1 [128, 128] ? [] : [16, 8, 128, 128]", [=] {
                 dsrt_tensor *a = randn({B, NH, S, S}), *b = scalar(-1e9f);
                 dsrt_tensor *cond = make(DSRT_I1, {S, S});
                 dsrt_cmp(ctx, DSRT_GT, cond, randn({S, S}), randn({S, S}));
                 dsrt_tensor *y = make(DSRT_F32, {B, NH, S, S});
                 return [=] { dsrt_where(ctx, y, cond, b, a); };
               }});
  c.push_back({"fill", "[2048, 2048] f32", [=] {
                 dsrt_tensor *y = make(DSRT_F32, E);
                 return [=] { dsrt_fill(ctx, y, 0.0); };
               }});
  c.push_back({"copy", "[2048, 2048] f32", [=] {
                 dsrt_tensor *x = randn(E), *y = make(DSRT_F32, E);
                 return [=] { dsrt_copy(ctx, y, x); };
               }});
  c.push_back({"convert_f32_bf16", "[2048, 2048]", [=] {
                 dsrt_tensor *x = randn(E), *y = make(DSRT_BF16, E);
                 return [=] { dsrt_convert(ctx, y, x); };
               }});
  c.push_back({"convert_bf16_f32", "[2048, 2048]", [=] {
                 dsrt_tensor *x = uniform(E, -2, 2, DSRT_BF16), *y = make(DSRT_F32, E);
                 return [=] { dsrt_convert(ctx, y, x); };
               }});
  c.push_back({"reduce_sum_last", "[2048, 2048] -> [2048]", [=] {
                 dsrt_tensor *x = randn(E), *y = make(DSRT_F32, {T});
                 return [=] { dsrt_reduce(ctx, DSRT_SUM, y, x, 2); };
               }});
  c.push_back({"reduce_sum_first", "[2048, 2048] -> [2048] (a bias gradient)", [=] {
                 dsrt_tensor *x = randn(E), *y = make(DSRT_F32, {H});
                 return [=] { dsrt_reduce(ctx, DSRT_SUM, y, x, 1); };
               }});
  c.push_back({"reduce_amax_last", "[2048, 2048] -> [2048]", [=] {
                 dsrt_tensor *x = randn(E), *y = make(DSRT_F32, {T});
                 return [=] { dsrt_reduce(ctx, DSRT_AMAX, y, x, 2); };
               }});
  const std::vector<int64_t> A = {B, NH, S, S}; // attention scores
  c.push_back({"softmax", "[16, 8, 128, 128] dim -1", [=] {
                 dsrt_tensor *x = randn(A), *y = make(DSRT_F32, A);
                 return [=] { dsrt_softmax(ctx, y, x, 3, 0); };
               }});
  c.push_back({"softmax_grad", "[16, 8, 128, 128] dim -1", [=] {
                 dsrt_tensor *x = randn(A), *y = make(DSRT_F32, A), *dy = randn(A),
                             *dx = make(DSRT_F32, A);
                 dsrt_softmax(ctx, y, x, 3, 0);
                 return [=] { dsrt_softmax_grad(ctx, dx, y, dy, 3, 0); };
               }});
  // Fused attention at the long-sequence benchmark's shape: 8192 tokens, 8 heads of 32.
  const std::vector<int64_t> Q = {1, 8, 8192, 32}, L = {1, 8, 8192};
  c.push_back({"attention", "causal q, k, v [1, 8, 8192, 32]", [=] {
                 dsrt_tensor *q = randn(Q), *k = randn(Q), *v = randn(Q);
                 dsrt_tensor *o = make(DSRT_F32, Q), *lse = make(DSRT_F32, L);
                 return [=] { dsrt_attention(ctx, o, lse, q, k, v, nullptr, 0.125, 1); };
               }});
  c.push_back({"attention_grad", "causal q, k, v [1, 8, 8192, 32]", [=] {
                 dsrt_tensor *q = randn(Q), *k = randn(Q), *v = randn(Q), *dy = randn(Q);
                 dsrt_tensor *o = make(DSRT_F32, Q), *lse = make(DSRT_F32, L);
                 dsrt_tensor *dq = make(DSRT_F32, Q), *dk = make(DSRT_F32, Q),
                             *dv = make(DSRT_F32, Q);
                 dsrt_attention(ctx, o, lse, q, k, v, nullptr, 0.125, 1);
                 return [=] {
                   dsrt_attention_grad(ctx, dq, dk, dv, q, k, v, nullptr, o, lse, dy, 0.125, 1);
                 };
               }});
  c.push_back({"log_softmax", "[2048, 1024] dim -1", [=] {
                 dsrt_tensor *x = randn({T, V}), *y = make(DSRT_F32, {T, V});
                 return [=] { dsrt_softmax(ctx, y, x, 1, 1); };
               }});
  c.push_back({"layer_norm", "[2048, 512] weight, bias [512]", [=] {
                 dsrt_tensor *x = randn({T, D}), *w = randn({D}), *b = randn({D}),
                             *y = make(DSRT_F32, {T, D});
                 return [=] { dsrt_layer_norm(ctx, y, x, w, b, D, 1e-5); };
               }});
  c.push_back({"layer_norm_grad", "[2048, 512] -> dx, dweight, dbias", [=] {
                 dsrt_tensor *x = randn({T, D}), *w = randn({D}), *dy = randn({T, D}),
                             *dx = make(DSRT_F32, {T, D}), *dw = make(DSRT_F32, {D}),
                             *db = make(DSRT_F32, {D});
                 return [=] { dsrt_layer_norm_grad(ctx, dx, dw, db, x, w, dy, D, 1e-5); };
               }});
  // The 16-bit forms (bf16 operands computed in f32, rounded once) of the kernels that the
  // bf16 GPT step runs on bf16 tensors.
  auto bf16 = [](std::vector<int64_t> dims) { return uniform(dims, -2, 2, DSRT_BF16); };
  c.push_back({"bf16_add", "[2048, 2048] bf16 x2", [=] {
                 dsrt_tensor *a = bf16(E), *b = bf16(E), *y = make(DSRT_BF16, E);
                 return [=] { dsrt_binary(ctx, DSRT_ADD, y, a, b); };
               }});
  c.push_back({"bf16_gelu_erf", "[2048, 2048] bf16", [=] {
                 dsrt_tensor *x = bf16(E), *y = make(DSRT_BF16, E);
                 return [=] { dsrt_unary(ctx, DSRT_GELU_ERF, y, x); };
               }});
  c.push_back({"bf16_gelu_erf_grad", "[2048, 2048] bf16 x2", [=] {
                 dsrt_tensor *x = bf16(E), *dy = bf16(E), *y = make(DSRT_BF16, E);
                 return [=] { dsrt_binary(ctx, DSRT_GELU_ERF_GRAD, y, x, dy); };
               }});
  c.push_back({"bf16_where", "i1 [128, 128] ? [] : [16, 8, 128, 128] bf16", [=] {
                 dsrt_tensor *a = bf16({B, NH, S, S}), *b = make(DSRT_BF16, {});
                 dsrt_fill(ctx, b, -1e9);
                 dsrt_tensor *cond = make(DSRT_I1, {S, S});
                 dsrt_cmp(ctx, DSRT_GT, cond, randn({S, S}), randn({S, S}));
                 dsrt_tensor *y = make(DSRT_BF16, {B, NH, S, S});
                 return [=] { dsrt_where(ctx, y, cond, b, a); };
               }});
  c.push_back({"bf16_softmax", "[16, 8, 128, 128] bf16 dim -1", [=] {
                 dsrt_tensor *x = bf16(A), *y = make(DSRT_BF16, A);
                 return [=] { dsrt_softmax(ctx, y, x, 3, 0); };
               }});
  c.push_back({"bf16_softmax_grad", "[16, 8, 128, 128] bf16 dim -1", [=] {
                 dsrt_tensor *x = bf16(A), *y = make(DSRT_BF16, A), *dy = bf16(A),
                             *dx = make(DSRT_BF16, A);
                 dsrt_softmax(ctx, y, x, 3, 0);
                 return [=] { dsrt_softmax_grad(ctx, dx, y, dy, 3, 0); };
               }});
  c.push_back({"bf16_layer_norm", "[2048, 512] bf16 weight, bias [512]", [=] {
                 dsrt_tensor *x = bf16({T, D}), *w = bf16({D}), *b = bf16({D}),
                             *y = make(DSRT_BF16, {T, D});
                 return [=] { dsrt_layer_norm(ctx, y, x, w, b, D, 1e-5); };
               }});
  c.push_back({"bf16_layer_norm_grad", "[2048, 512] bf16 -> dx, dweight, dbias", [=] {
                 dsrt_tensor *x = bf16({T, D}), *w = bf16({D}), *dy = bf16({T, D}),
                             *dx = make(DSRT_BF16, {T, D}), *dw = make(DSRT_BF16, {D}),
                             *db = make(DSRT_BF16, {D});
                 return [=] { dsrt_layer_norm_grad(ctx, dx, dw, db, x, w, dy, D, 1e-5); };
               }});
  const std::vector<int64_t> X = {16, 64, 32, 32}; // a CNN activation
  c.push_back({"batch_norm", "[16, 64, 32, 32]", [=] {
                 dsrt_tensor *x = randn(X), *w = randn({64}), *b = randn({64}),
                             *y = make(DSRT_F32, X), *m = make(DSRT_F32, {64}),
                             *v = make(DSRT_F32, {64});
                 return [=] { dsrt_batch_norm(ctx, y, m, v, x, w, b, 1e-5); };
               }});
  c.push_back({"batch_norm_grad", "[16, 64, 32, 32]", [=] {
                 dsrt_tensor *x = randn(X), *w = randn({64}), *b = randn({64}),
                             *y = make(DSRT_F32, X), *m = make(DSRT_F32, {64}),
                             *v = make(DSRT_F32, {64}), *dy = randn(X),
                             *dx = make(DSRT_F32, X), *dw = make(DSRT_F32, {64}),
                             *db = make(DSRT_F32, {64});
                 dsrt_batch_norm(ctx, y, m, v, x, w, b, 1e-5);
                 return [=] { dsrt_batch_norm_grad(ctx, dx, dw, db, x, w, m, v, dy, 1e-5); };
               }});
  c.push_back({"batch_norm_inference", "[16, 64, 32, 32]", [=] {
                 dsrt_tensor *x = randn(X), *w = randn({64}), *b = randn({64}),
                             *m = randn({64}), *v = uniform({64}, 0.5, 2),
                             *y = make(DSRT_F32, X);
                 return [=] { dsrt_batch_norm_inference(ctx, y, x, w, b, m, v, 1e-5); };
               }});
  c.push_back({"matmul", "[2048, 512] @ [512, 2048]", [=] {
                 dsrt_tensor *a = randn({T, D}), *b = randn({D, H}), *y = make(DSRT_F32, E);
                 return [=] { dsrt_matmul(ctx, y, a, b, 0, 0); };
               }});
  c.push_back({"matmul_dx", "[2048, 2048] @ [2048, 512] (an input gradient)", [=] {
                 dsrt_tensor *a = randn(E), *b = randn({H, D}), *y = make(DSRT_F32, {T, D});
                 return [=] { dsrt_matmul(ctx, y, a, b, 0, 0); };
               }});
  c.push_back({"matmul_batched", "[128, 128, 64] @ [128, 64, 128]^T (attention scores)", [=] {
                 dsrt_tensor *a = randn({B * NH, S, HD}), *b = randn({B * NH, S, HD}),
                             *y = make(DSRT_F32, {B * NH, S, S});
                 return [=] { dsrt_matmul(ctx, y, a, b, 0, 1); };
               }});
  c.push_back({"linear", "[2048, 512] x [2048, 512]^T + [2048]", [=] {
                 dsrt_tensor *x = randn({T, D}), *w = randn({H, D}), *b = randn({H}),
                             *y = make(DSRT_F32, E);
                 return [=] { dsrt_linear(ctx, y, x, w, b); };
               }});
  c.push_back({"linear_down", "[2048, 2048] x [512, 2048]^T + [512] (the MLP's c_proj)", [=] {
                 dsrt_tensor *x = randn(E), *w = randn({D, H}), *b = randn({D}),
                             *y = make(DSRT_F32, {T, D});
                 return [=] { dsrt_linear(ctx, y, x, w, b); };
               }});
  c.push_back({"linear_grad_weight", "dy [2048, 2048], x [2048, 512] -> dw, db", [=] {
                 dsrt_tensor *x = randn({T, D}), *dy = randn(E), *dw = make(DSRT_F32, {H, D}),
                             *db = make(DSRT_F32, {H});
                 return [=] { dsrt_linear_grad_weight(ctx, dw, db, x, dy); };
               }});
  // The bf16 products (oneDNN's bf16 kernels or widened to f32, as ds-report says).
  auto bf16p = [](std::vector<int64_t> dims) { return uniform(dims, -2, 2, DSRT_BF16); };
  c.push_back({"bf16_linear", "[2048, 512] x [2048, 512]^T + [2048] bf16", [=] {
                 dsrt_tensor *x = bf16p({T, D}), *w = bf16p({H, D}), *b = bf16p({H}),
                             *y = make(DSRT_BF16, E);
                 return [=] { dsrt_linear(ctx, y, x, w, b); };
               }});
  c.push_back({"bf16_matmul", "[2048, 2048] @ [2048, 512] bf16 (an input gradient)", [=] {
                 dsrt_tensor *a = bf16p(E), *b = bf16p({H, D}), *y = make(DSRT_BF16, {T, D});
                 return [=] { dsrt_matmul(ctx, y, a, b, 0, 0); };
               }});
  c.push_back({"bf16_linear_grad_weight", "dy [2048, 2048], x [2048, 512] bf16 -> dw, db", [=] {
                 dsrt_tensor *x = bf16p({T, D}), *dy = bf16p(E), *dw = make(DSRT_BF16, {H, D}),
                             *db = make(DSRT_BF16, {H});
                 return [=] { dsrt_linear_grad_weight(ctx, dw, db, x, dy); };
               }});
  c.push_back({"embedding", "[1024, 512] at [16, 128]", [=] {
                 dsrt_tensor *w = randn({V, D}), *i = uniform({B, S}, 0, V, DSRT_I64),
                             *y = make(DSRT_F32, {B, S, D});
                 return [=] { dsrt_embedding(ctx, y, w, i); };
               }});
  c.push_back({"embedding_grad", "[16, 128, 512] into [1024, 512]", [=] {
                 dsrt_tensor *dy = randn({B, S, D}), *i = uniform({B, S}, 0, V, DSRT_I64),
                             *dw = make(DSRT_F32, {V, D});
                 return [=] { dsrt_embedding_grad(ctx, dw, dy, i, -1); };
               }});
  c.push_back({"cross_entropy", "[2048, 1024] mean", [=] {
                 dsrt_tensor *x = randn({T, V}), *t = uniform({T}, 0, V, DSRT_I64),
                             *y = make(DSRT_F32, {});
                 return [=] { dsrt_cross_entropy(ctx, y, x, t, -100, DSRT_REDUCTION_MEAN, 0.0); };
               }});
  c.push_back({"cross_entropy_grad", "[2048, 1024] mean", [=] {
                 dsrt_tensor *x = randn({T, V}), *t = uniform({T}, 0, V, DSRT_I64),
                             *dy = scalar(1.f), *dx = make(DSRT_F32, {T, V});
                 return [=] {
                   dsrt_cross_entropy_grad(ctx, dx, x, t, dy, -100, DSRT_REDUCTION_MEAN, 0.0);
                 };
               }});
  c.push_back({"transpose", "[16, 128, 8, 64] -> [16, 8, 128, 64]", [=] {
                 static const int64_t perm[] = {0, 2, 1, 3};
                 dsrt_tensor *x = randn({B, S, NH, HD}), *y = make(DSRT_F32, {B, NH, S, HD});
                 return [=] { dsrt_transpose(ctx, y, x, perm); };
               }});
  c.push_back({"broadcast", "[512] -> [2048, 512]", [=] {
                 dsrt_tensor *x = randn({D}), *y = make(DSRT_F32, {T, D});
                 return [=] { dsrt_broadcast(ctx, y, x); };
               }});
  c.push_back({"slice", "[2048, 1536] [:, 512:1024]", [=] {
                 dsrt_tensor *x = randn({T, 3 * D}), *y = make(DSRT_F32, {T, D});
                 return [=] { dsrt_slice(ctx, y, x, 1, D, 1); };
               }});
  c.push_back({"insert_slice", "[2048, 512] into [2048, 1536] [:, 512:1024]", [=] {
                 dsrt_tensor *x = randn({T, D}), *y = make(DSRT_F32, {T, 3 * D});
                 return [=] { dsrt_insert_slice(ctx, y, x, 1, D, 1); };
               }});
  c.push_back({"dropout_mask", "[2048, 2048] p 0.1", [=] {
                 dsrt_tensor *y = make(DSRT_F32, E);
                 return [=] { dsrt_dropout_mask(ctx, y, 0.1); };
               }});
  const std::vector<int64_t> W = {64, 64, 3, 3};
  c.push_back({"conv2d", "[16, 64, 32, 32] * [64, 64, 3, 3] pad 1 + bias", [=] {
                 dsrt_tensor *x = randn(X), *w = randn(W), *b = randn({64}),
                             *y = make(DSRT_F32, X);
                 return [=] { dsrt_conv2d(ctx, y, x, w, b, 1, 1, 1, 1, 1, 1, 1); };
               }});
  c.push_back({"conv2d_grad_input", "[16, 64, 32, 32], [64, 64, 3, 3] pad 1", [=] {
                 dsrt_tensor *dy = randn(X), *w = randn(W), *dx = make(DSRT_F32, X);
                 return [=] { dsrt_conv2d_grad_input(ctx, dx, dy, w, 1, 1, 1, 1, 1, 1, 1); };
               }});
  c.push_back({"conv2d_grad_weight", "[16, 64, 32, 32] -> [64, 64, 3, 3] + bias", [=] {
                 dsrt_tensor *x = randn(X), *dy = randn(X), *dw = make(DSRT_F32, W),
                             *db = make(DSRT_F32, {64});
                 return [=] { dsrt_conv2d_grad_weight(ctx, dw, db, x, dy, 1, 1, 1, 1, 1, 1, 1); };
               }});
  const std::vector<int64_t> P = {16, 64, 16, 16};
  c.push_back({"max_pool2d", "[16, 64, 32, 32] 2x2 stride 2", [=] {
                 dsrt_tensor *x = randn(X), *y = make(DSRT_F32, P);
                 return [=] { dsrt_max_pool2d(ctx, y, x, 2, 2, 2, 2, 0, 0, 1, 1); };
               }});
  c.push_back({"max_pool2d_grad", "[16, 64, 32, 32] 2x2 stride 2", [=] {
                 dsrt_tensor *x = randn(X), *dy = randn(P), *dx = make(DSRT_F32, X);
                 return [=] { dsrt_max_pool2d_grad(ctx, dx, x, dy, 2, 2, 2, 2, 0, 0, 1, 1); };
               }});
  c.push_back({"avg_pool2d", "[16, 64, 32, 32] 2x2 stride 2", [=] {
                 dsrt_tensor *x = randn(X), *y = make(DSRT_F32, P);
                 return [=] { dsrt_avg_pool2d(ctx, y, x, 2, 2, 2, 2, 0, 0, 1); };
               }});
  c.push_back({"avg_pool2d_grad", "[16, 64, 32, 32] 2x2 stride 2", [=] {
                 dsrt_tensor *dy = randn(P), *dx = make(DSRT_F32, X);
                 return [=] { dsrt_avg_pool2d_grad(ctx, dx, dy, 2, 2, 2, 2, 0, 0, 1); };
               }});
  c.push_back({"adaptive_avg_pool2d", "[16, 64, 32, 32] -> [16, 64, 1, 1]", [=] {
                 dsrt_tensor *x = randn(X), *y = make(DSRT_F32, {16, 64, 1, 1});
                 return [=] { dsrt_adaptive_avg_pool2d(ctx, y, x); };
               }});
  c.push_back({"adaptive_avg_pool2d_grad", "[16, 64, 1, 1] -> [16, 64, 32, 32]", [=] {
                 dsrt_tensor *dy = randn({16, 64, 1, 1}), *dx = make(DSRT_F32, X);
                 return [=] { dsrt_adaptive_avg_pool2d_grad(ctx, dx, dy); };
               }});
  c.push_back({"adamw_update", "4M parameters, in place", [=] {
                 const std::vector<int64_t> n = {T * H};
                 dsrt_tensor *p = randn(n), *g = randn(n), *m = randn(n),
                             *v = uniform(n, 0, 1), *stepSize = scalar(1e-4f),
                             *bc2 = scalar(0.999f), *decay = scalar(0.99999f),
                             *beta1 = scalar64(0.9);
                 return [=] {
                   dsrt_adamw_update(ctx, p, m, v, p, g, m, v, stepSize, bc2, decay, beta1,
                                     0.999, 1e-8);
                 };
               }});
  return c;
}

double msPerCall(const std::function<void()> &call, double seconds) {
  call(); // warm up (primitive creation, page faults)
  call();
  std::vector<double> times;
  auto begin = std::chrono::steady_clock::now();
  do {
    auto t0 = std::chrono::steady_clock::now();
    call();
    dsrt_stream_synchronize(ctx);
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                        .count());
  } while (times.size() < 5 ||
           (std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count() <
                seconds &&
            times.size() < 1000));
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

} // namespace

int main(int argc, char **argv) {
  int threads = 1;
  double seconds = 0.3;
  std::string filter;
  bool list = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc)
      threads = std::atoi(argv[++i]);
    else if (a == "--filter" && i + 1 < argc)
      filter = argv[++i];
    else if (a == "--seconds" && i + 1 < argc)
      seconds = std::atof(argv[++i]);
    else if (a == "--list")
      list = true;
    else {
      std::fprintf(stderr, "usage: dsrt-kernel-bench [--threads N] [--filter SUBSTRING] "
                           "[--seconds S] [--list]\n");
      return 2;
    }
  }
  ctx = dsrt_context_create_on("cpu", 0, threads, 0, nullptr, 0);
  for (const Case &c : cases()) {
    if (!filter.empty() && c.name.find(filter) == std::string::npos)
      continue;
    if (list) {
      std::printf("%s\t%s\n", c.name.c_str(), c.what.c_str());
      continue;
    }
    std::function<void()> call = c.setup();
    double ms = msPerCall(call, seconds);
    std::printf("%s\t%.4f\t%s\n", c.name.c_str(), ms, c.what.c_str());
    std::fflush(stdout);
    for (dsrt_tensor *t : owned)
      dsrt_tensor_free(ctx, t);
    owned.clear();
  }
  dsrt_context_destroy(ctx);
  return 0;
}
