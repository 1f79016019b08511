// Conformance of every dsrt CPU kernel against LibTorch (forward, and gradients via autograd).
#include "dsrt/dsrt.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <omp.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

namespace {

using torch::Tensor;
namespace F = torch::nn::functional;

int32_t toDtype(at::ScalarType s) {
  switch (s) {
  case at::kFloat:
    return DSRT_F32;
  case at::kDouble:
    return DSRT_F64;
  case at::kLong:
    return DSRT_I64;
  case at::kInt:
    return DSRT_I32;
  case at::kBool:
    return DSRT_I1;
  case at::kBFloat16:
    return DSRT_BF16;
  case at::kHalf:
    return DSRT_F16;
  default:
    throw std::runtime_error("unsupported dtype");
  }
}

at::ScalarType toScalar(int32_t d) {
  switch (d) {
  case DSRT_F32:
    return at::kFloat;
  case DSRT_F64:
    return at::kDouble;
  case DSRT_I64:
    return at::kLong;
  case DSRT_I32:
    return at::kInt;
  case DSRT_I1:
    return at::kBool;
  case DSRT_BF16:
    return at::kBFloat16;
  case DSRT_F16:
    return at::kHalf;
  default:
    throw std::runtime_error("unsupported dtype");
  }
}

class Kernels : public ::testing::Test {
protected:
  void SetUp() override {
    torch::manual_seed(1234);
    ctx = dsrt_context_create(0, 2, 42);
  }
  void TearDown() override {
    for (dsrt_tensor *t : owned)
      dsrt_tensor_free(ctx, t);
    EXPECT_EQ(dsrt_device_bytes(ctx), 0u) << "tensors leaked";
    dsrt_context_destroy(ctx);
  }

  /// A runtime copy of a torch tensor (freed at tear-down).
  dsrt_tensor *rt(const Tensor &t0) {
    Tensor t = t0.detach().contiguous();
    std::vector<int64_t> dims(t.sizes().begin(), t.sizes().end());
    dsrt_tensor *r =
        dsrt_tensor_alloc(ctx, toDtype(t.scalar_type()), (int32_t)dims.size(), dims.data());
    if (t.numel())
      std::memcpy(r->data, t.data_ptr(), t.numel() * t.element_size());
    owned.push_back(r);
    return r;
  }
  /// An uninitialized runtime tensor (freed at tear-down).
  dsrt_tensor *empty(at::IntArrayRef dims, at::ScalarType s = at::kFloat) {
    std::vector<int64_t> d(dims.begin(), dims.end());
    dsrt_tensor *r = dsrt_tensor_alloc(ctx, toDtype(s), (int32_t)d.size(), d.data());
    // Poison so that kernels that forget an element show up.
    if (r->numel && (s == at::kFloat || s == at::kDouble))
      std::memset(r->data, 0x7f, r->numel * dsrt_dtype_size(r->dtype));
    owned.push_back(r);
    return r;
  }
  dsrt_tensor *emptyLike(const Tensor &t) { return empty(t.sizes(), t.scalar_type()); }
  static Tensor tt(const dsrt_tensor *r) {
    std::vector<int64_t> dims(r->dims, r->dims + r->rank);
    return torch::from_blob(r->data, dims, toScalar(r->dtype)).clone();
  }

  dsrt_context *ctx = nullptr;
  std::vector<dsrt_tensor *> owned;
};

::testing::AssertionResult close(const Tensor &got, const Tensor &want0, double rtol = 1e-5,
                                 double atol = 1e-6) {
  Tensor want = want0.detach();
  if (got.sizes() != want.sizes() && got.numel() != want.numel())
    return ::testing::AssertionFailure() << "shape " << got.sizes() << " vs " << want.sizes();
  Tensor g = got.reshape(want.sizes());
  if (g.scalar_type() != want.scalar_type())
    return ::testing::AssertionFailure()
           << "dtype " << g.scalar_type() << " vs " << want.scalar_type();
  if (!g.is_floating_point())
    return torch::equal(g, want) ? ::testing::AssertionSuccess()
                                 : ::testing::AssertionFailure() << "got\n"
                                                                 << g << "\nwant\n"
                                                                 << want;
  if (torch::allclose(g, want, rtol, atol, /*equal_nan=*/true))
    return ::testing::AssertionSuccess();
  Tensor diff = (g.to(at::kDouble) - want.to(at::kDouble)).abs().nan_to_num(1e30);
  Tensor excess = diff - (atol + rtol * want.to(at::kDouble).abs());
  int64_t i = excess.flatten().argmax().item<int64_t>();
  int64_t bad = (excess > 0).sum().item<int64_t>();
  return ::testing::AssertionFailure()
         << bad << " of " << want.numel() << " elements off; worst at flat " << i << ": got "
         << g.flatten()[i].item<double>() << " want " << want.flatten()[i].item<double>();
}

/// For results of long sums (GEMM, reductions of products): the absolute tolerance scales with
/// the largest magnitude, since a different summation order errs relative to the summands.
::testing::AssertionResult closeSum(const Tensor &got, const Tensor &want) {
  double scale = want.numel() ? want.detach().abs().max().item<double>() : 0.0;
  return close(got, want, 1e-5, 1e-6 + 2e-6 * scale);
}

Tensor randn(at::IntArrayRef s) { return torch::randn(s); }

//===----------------------------------------------------------------------===//
// Arena, tensors, slots
//===----------------------------------------------------------------------===//

TEST(Arena, ExactBytesViewsPeakAndSlots) {
  dsrt_context *ctx = dsrt_context_create(0, 1, 0);
  int64_t d35[] = {3, 5}, d7[] = {7}, d15[] = {15};
  dsrt_tensor *a = dsrt_tensor_alloc(ctx, DSRT_F32, 2, d35);
  EXPECT_EQ(dsrt_device_bytes(ctx), 60u);
  EXPECT_EQ((uintptr_t)a->data % 64, 0u);
  dsrt_tensor *b = dsrt_tensor_alloc(ctx, DSRT_I1, 1, d7);
  EXPECT_EQ(dsrt_device_bytes(ctx), 67u);
  dsrt_tensor *c = dsrt_tensor_alloc(ctx, DSRT_I64, 1, d7);
  EXPECT_EQ(dsrt_device_bytes(ctx), 123u);
  EXPECT_EQ(dsrt_device_peak_bytes(ctx), 123u);
  dsrt_tensor *v = dsrt_tensor_view(ctx, a, 1, d15);
  EXPECT_EQ(v->data, a->data);
  EXPECT_EQ(v->numel, 15);
  EXPECT_EQ(dsrt_device_bytes(ctx), 123u);
  dsrt_tensor_free(ctx, a);
  EXPECT_EQ(dsrt_device_bytes(ctx), 123u) << "the view keeps the storage";
  dsrt_tensor_free(ctx, v);
  EXPECT_EQ(dsrt_device_bytes(ctx), 63u);
  dsrt_tensor_free(ctx, c);
  EXPECT_EQ(dsrt_device_peak_bytes(ctx), 123u);
  dsrt_reset_peak(ctx);
  EXPECT_EQ(dsrt_device_peak_bytes(ctx), 7u);
  float constant[15] = {1};
  dsrt_tensor *k = dsrt_tensor_borrow(ctx, DSRT_F32, 2, d35, constant);
  EXPECT_EQ(dsrt_device_bytes(ctx), 7u);
  EXPECT_EQ(k->data, (void *)constant);
  dsrt_tensor_free(ctx, k);
  dsrt_tensor_free(ctx, b);
  EXPECT_EQ(dsrt_device_bytes(ctx), 0u);

  // Slots: zero-filled, counted, replaced by slot_set.
  dsrt_slot_define(ctx, 0, DSRT_F32, 2, d35);
  dsrt_slot_define(ctx, 1, DSRT_I64, 1, d7);
  EXPECT_EQ(dsrt_device_bytes(ctx), 116u);
  dsrt_tensor *s0 = dsrt_slot_get(ctx, 0);
  EXPECT_EQ(s0->rank, 2);
  EXPECT_EQ(s0->dims[1], 5);
  for (int i = 0; i < 15; ++i)
    EXPECT_EQ(((float *)s0->data)[i], 0.f);
  dsrt_tensor *n = dsrt_tensor_alloc(ctx, DSRT_F32, 1, d15);
  ((float *)n->data)[3] = 7.f;
  dsrt_slot_set(ctx, 0, n);
  EXPECT_EQ(dsrt_device_bytes(ctx), 176u) << "old value still held by s0";
  dsrt_tensor_free(ctx, s0);
  EXPECT_EQ(dsrt_device_bytes(ctx), 116u);
  dsrt_tensor_free(ctx, n);
  EXPECT_EQ(dsrt_device_bytes(ctx), 116u) << "the slot holds the new value";
  dsrt_tensor *s0b = dsrt_slot_get(ctx, 0);
  EXPECT_EQ(((float *)s0b->data)[3], 7.f);
  EXPECT_EQ(s0b->rank, 2) << "slot shape kept";
  dsrt_tensor_free(ctx, s0b);
  dsrt_context_destroy(ctx);
}

TEST(Stream, EventsCompleteInOrder) {
  dsrt_context *ctx = dsrt_context_create(0, 1, 0);
  int64_t dims[1] = {4};
  dsrt_tensor *t = dsrt_tensor_alloc(ctx, DSRT_F32, 1, dims);
  dsrt_fill(ctx, t, 2.0);
  dsrt_event *e = dsrt_event_record(ctx);
  dsrt_event_synchronize(e);
  EXPECT_EQ(dsrt_event_query(e), 1);
  EXPECT_EQ(static_cast<float *>(t->data)[3], 2.0f); // the fill before the event is done
  dsrt_event_release(e);
  dsrt_stream_synchronize(ctx);
  dsrt_tensor_free(ctx, t);
  dsrt_context_destroy(ctx);
}

TEST(Arena, BudgetOverflowExitsWithMessage) {
  auto overflow = [] {
    dsrt_context *ctx = dsrt_context_create(500, 1, 0);
    int64_t d[] = {4, 20};
    dsrt_tensor_alloc(ctx, DSRT_F32, 2, d); // 320 bytes
    int64_t e[] = {10, 10};
    dsrt_tensor_alloc(ctx, DSRT_F32, 2, e); // 400 more
  };
  EXPECT_EXIT(
      overflow(), ::testing::ExitedWithCode(1),
      "dsrt: device memory budget exceeded: a 10x10 f32 tensor needs 400 bytes, 320 in use, "
      "budget 500 \\(raise --device-memory or shard/offload\\)");
}

TEST(Arena, BudgetAllowsExactFit) {
  dsrt_context *ctx = dsrt_context_create(400, 1, 0);
  int64_t e[] = {10, 10};
  dsrt_tensor *t = dsrt_tensor_alloc(ctx, DSRT_F32, 2, e);
  EXPECT_EQ(dsrt_device_bytes(ctx), 400u);
  dsrt_tensor_free(ctx, t);
  dsrt_context_destroy(ctx);
}

TEST(Arena, SlotSetMismatchAborts) {
  auto mismatch = [] {
    dsrt_context *ctx = dsrt_context_create(0, 1, 0);
    int64_t d[] = {4};
    int64_t e[] = {5};
    dsrt_slot_define(ctx, 0, DSRT_F32, 1, d);
    dsrt_slot_set(ctx, 0, dsrt_tensor_alloc(ctx, DSRT_F32, 1, e));
  };
  EXPECT_DEATH(mismatch(), "dsrt: slot_set: slot 0 holds a 4 f32 tensor");
}

TEST(Comm, SendRecvArgumentErrorsAbort) {
  // dsrt_send_recv's refusals, each naming the cause (a loopback group of one rank).
  auto call = [](int which) {
    dsrt_context *ctx = dsrt_context_create(0, 1, 0);
    dsrt_comm_init(ctx, 1);
    int64_t n = 4;
    dsrt_tensor *a = dsrt_tensor_alloc(ctx, DSRT_F32, 1, &n),
                *b = dsrt_tensor_alloc(ctx, DSRT_F32, 1, &n);
    switch (which) {
    case 0: // an output without a source rank
      dsrt_send_recv(ctx, DSRT_GROUP_WORLD, a, -1, b, 0);
      break;
    case 1: // a peer outside the group
      dsrt_send_recv(ctx, DSRT_GROUP_WORLD, a, 0, b, 3);
      break;
    case 2: // one rank sending to nobody's receive
      dsrt_send_recv(ctx, DSRT_GROUP_WORLD, nullptr, -1, b, 0);
      break;
    default: // input and output in one storage
      dsrt_send_recv(ctx, DSRT_GROUP_WORLD, a, 0, a, 0);
    }
  };
  EXPECT_DEATH(call(0), "dsrt: send_recv: a receive needs an output and a source rank, a send "
                        "an input and a destination rank");
  EXPECT_DEATH(call(1), "dsrt: send_recv: peer 3 is not a rank of the group of 1");
  EXPECT_DEATH(call(2), "dsrt: send_recv: a group of one rank can only send to itself what it "
                        "receives");
  EXPECT_DEATH(call(3), "dsrt: send_recv: the output must not share the input's storage");
}

TEST_F(Kernels, KernelShapeErrorAborts) {
  dsrt_tensor *a = rt(randn({2, 3})), *b = rt(randn({4})), *o = empty({2, 3});
  EXPECT_DEATH(dsrt_binary(ctx, DSRT_ADD, o, a, b), "dsrt: binary: operand 4 does not broadcast");
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

// The vectorized f32 functions (cpu/vector_math.cpp) on the arguments their fast paths do
// not cover: large (sine and cosine reduce by pi/4 in three parts only up to 8192), zero,
// negative, subnormal, infinite and NaN; the rest of each array goes the vector way.
TEST_F(Kernels, UnaryVectorEdges) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  std::vector<float> v = {0.f, -0.f, 1.f, -1.f, 1e-39f, -1e-39f, 1e-30f, 8191.f, 8193.f,
                          -8193.f, 1e5f, -3e6f, 1e30f, inf, -inf, nan, 0.999999f, 1.000001f,
                          3.4e38f};
  Tensor x = torch::randn({20000}) * 3;
  x.narrow(0, 777, (int64_t)v.size()).copy_(torch::tensor(v));
  for (int op : {DSRT_SIN, DSRT_COS, DSRT_LOG, DSRT_EXP, DSRT_TANH, DSRT_SIGMOID,
                 DSRT_GELU_ERF}) {
    Tensor want = op == DSRT_SIN ? x.sin() : op == DSRT_COS ? x.cos() : op == DSRT_LOG ? x.log()
                  : op == DSRT_EXP ? x.exp() : op == DSRT_TANH ? x.tanh()
                  : op == DSRT_SIGMOID ? x.sigmoid()
                                       : torch::gelu(x.to(at::kDouble)).to(at::kFloat);
    dsrt_tensor *o = emptyLike(x);
    dsrt_unary(ctx, op, o, rt(x));
    Tensor got = tt(o);
    // NaN where PyTorch has NaN (log of negatives, sin of infinity), and close elsewhere.
    EXPECT_TRUE(torch::equal(got.isnan(), want.isnan())) << "op " << op;
    Tensor ok = want.isnan().logical_not();
    EXPECT_TRUE(close(got.masked_select(ok), want.masked_select(ok))) << "op " << op;
    // In place: the edges' libm fallback must read the arguments, not the results.
    dsrt_tensor *io = rt(x.clone());
    dsrt_unary(ctx, op, io, io);
    EXPECT_TRUE(torch::equal(tt(io).isnan(), want.isnan())) << "op " << op << " in place";
    EXPECT_TRUE(close(tt(io).masked_select(ok), want.masked_select(ok)))
        << "op " << op << " in place";
  }
}

TEST_F(Kernels, Unary) {
  for (auto s : {at::kFloat, at::kDouble}) {
    for (const std::vector<int64_t> &shape : {std::vector<int64_t>{3, 7}, {50000}}) {
      Tensor x = torch::randn(shape, s) * 3;
      Tensor xp = x.abs() + 0.1;
      struct Case {
        int op;
        Tensor in, want;
      } cases[] = {
          {DSRT_NEG, x, -x},
          {DSRT_EXP, x, x.exp()},
          {DSRT_LOG, xp, xp.log()},
          {DSRT_SQRT, xp, xp.sqrt()},
          {DSRT_RSQRT, xp, xp.rsqrt()},
          {DSRT_TANH, x, x.tanh()},
          {DSRT_SIGMOID, x, x.sigmoid()},
          {DSRT_RELU, x, x.relu()},
          {DSRT_COS, x, x.cos()},
          {DSRT_SIN, x, x.sin()},
          // GELU's tail is a difference of nearly equal numbers: PyTorch's float kernel is off
          // by up to 10% there, so the oracle computes in double and rounds.
          {DSRT_GELU_ERF, x, torch::gelu(x.to(at::kDouble)).to(s)},
          {DSRT_GELU_TANH, x, torch::gelu(x.to(at::kDouble), "tanh").to(s)},
      };
      for (auto &c : cases) {
        dsrt_tensor *o = emptyLike(c.in);
        dsrt_unary(ctx, c.op, o, rt(c.in));
        EXPECT_TRUE(close(tt(o), c.want)) << "op " << c.op << " dtype " << s;
      }
    }
  }
  Tensor xi = torch::randint(-5, 5, {9}, at::kLong);
  dsrt_tensor *o = emptyLike(xi);
  dsrt_unary(ctx, DSRT_NEG, o, rt(xi));
  EXPECT_TRUE(close(tt(o), -xi));
}

struct ShapePair {
  std::vector<int64_t> a, b;
};
const std::vector<ShapePair> kBroadcastShapes = {
    {{2, 3, 4}, {2, 3, 4}},
    {{2, 3, 4}, {4}},
    {{2, 1, 4}, {3, 1}},
    {{5}, {}},
    {{}, {5}},
    {{3, 1, 5}, {1, 4, 1}},
    {{7, 1}, {1, 13}},
    {{64, 1024}, {1024}},
    {{1, 1024}, {64, 1}},
    {{}, {}},
    {{40000}, {40000}},
    {{4, 1, 3, 1}, {2, 1, 5}},
};

TEST_F(Kernels, BinaryFloat) {
  for (const auto &sp : kBroadcastShapes) {
    Tensor a = randn(sp.a), b = randn(sp.b);
    if (a.numel() > 2)
      a.view(-1)[1] = NAN;
    Tensor pa = a.abs() + 0.5;
    std::vector<int64_t> os = at::infer_size(sp.a, sp.b);
    struct Case {
      int op;
      Tensor x, y, want;
    } cases[] = {
        {DSRT_ADD, a, b, a + b},
        {DSRT_SUB, a, b, a - b},
        {DSRT_MUL, a, b, a * b},
        {DSRT_DIV, a, b, a / b},
        {DSRT_POW, pa, b, torch::pow(pa, b)},
        {DSRT_MAX, a, b, torch::maximum(a, b)},
        {DSRT_MIN, a, b, torch::minimum(a, b)},
    };
    for (auto &c : cases) {
      dsrt_tensor *o = empty(os);
      dsrt_binary(ctx, c.op, o, rt(c.x), rt(c.y));
      EXPECT_TRUE(close(tt(o), c.want))
          << "op " << c.op << " shapes " << a.sizes() << " " << b.sizes();
    }
  }
  Tensor a = torch::randn({4, 5}, torch::kDouble), b = torch::randn({5}, torch::kDouble);
  dsrt_tensor *o = empty({4, 5}, at::kDouble);
  dsrt_binary(ctx, DSRT_MUL, o, rt(a), rt(b));
  EXPECT_TRUE(close(tt(o), a * b));
  // x^2 (the common case) and fractional powers of a scalar exponent; those PyTorch computes
  // without powf (a copy, products, reciprocals) bit for bit as it does.
  for (double e : {2.0, 0.5, 3.0, -1.0, 1.0, -0.5, -2.0, 1.5}) {
    Tensor x = randn({1033}).abs() + 0.1, y = torch::full({}, e);
    dsrt_tensor *r = empty({1033});
    dsrt_binary(ctx, DSRT_POW, r, rt(x), rt(y));
    EXPECT_TRUE(close(tt(r), torch::pow(x, e))) << "exponent " << e;
    if (e != 1.5 && e != 0.5)
      EXPECT_TRUE(torch::equal(tt(r), torch::pow(x, e))) << "exponent " << e;
  }
}

TEST_F(Kernels, GeluGradients) {
  for (const char *approx : {"none", "tanh"}) {
    // 50001: the vector loops (cpu/gelu_grad.cpp) and their scalar tail.
    for (const auto &sp : std::vector<ShapePair>{{{3, 5}, {3, 5}}, {{50001}, {50001}}}) {
      Tensor x = (randn(sp.a) * 3).requires_grad_(), dy = randn(sp.b);
      torch::gelu(x, approx).backward(dy);
      dsrt_tensor *o = empty(sp.a);
      dsrt_binary(ctx, std::string(approx) == "none" ? DSRT_GELU_ERF_GRAD : DSRT_GELU_TANH_GRAD, o,
                  rt(x), rt(dy));
      // The tanh form cancels (1 + tanh) near -1 in float; ATen's vectorized tanh rounds
      // differently from libm's, so allow 1e-5 absolute there.
      EXPECT_TRUE(close(tt(o), x.grad(), 1e-5, 1e-5)) << approx;
    }
  }
}

// The compiler writes an elementwise result over an operand of its shape that dies there
// (ds-lower-to-runtime's reuseDying): each kernel with `out` the same tensor as that operand,
// large enough for the threaded and oneDNN paths, against PyTorch.
TEST_F(Kernels, ElementwiseInPlace) {
  Tensor x = randn({2048, 300}) * 3, y = randn({2048, 300}), row = randn({300});
  Tensor mask = randn({300}) > 0;
  struct Case {
    const char *name;
    std::function<void(dsrt_tensor *)> run; // writes over its argument, a copy of `over`
    Tensor over, want;
  };
  dsrt_tensor *ry = rt(y), *rx = rt(x), *rrow = rt(row), *rmask = rt(mask);
  Tensor ninf = torch::full({}, -INFINITY);
  dsrt_tensor *rninf = rt(ninf);
  auto gradOf = [&](const char *approx) {
    Tensor xx = x.clone().requires_grad_();
    torch::gelu(xx, approx).backward(y);
    return xx.grad();
  };
  std::vector<Case> cases = {
      {"exp", [&](dsrt_tensor *t) { dsrt_unary(ctx, DSRT_EXP, t, t); }, y, y.exp()},
      {"gelu tanh", [&](dsrt_tensor *t) { dsrt_unary(ctx, DSRT_GELU_TANH, t, t); }, x,
       torch::gelu(x, "tanh")},
      {"gelu erf", [&](dsrt_tensor *t) { dsrt_unary(ctx, DSRT_GELU_ERF, t, t); }, x,
       torch::gelu(x)},
      {"add row", [&](dsrt_tensor *t) { dsrt_binary(ctx, DSRT_ADD, t, t, rrow); }, x, x + row},
      {"row - x", [&](dsrt_tensor *t) { dsrt_binary(ctx, DSRT_SUB, t, rrow, t); }, x, row - x},
      {"x * y", [&](dsrt_tensor *t) { dsrt_binary(ctx, DSRT_MUL, t, t, ry); }, x, x * y},
      {"gelu tanh grad over dy",
       [&](dsrt_tensor *t) { dsrt_binary(ctx, DSRT_GELU_TANH_GRAD, t, rx, t); }, y,
       gradOf("tanh")},
      {"gelu erf grad over x",
       [&](dsrt_tensor *t) { dsrt_binary(ctx, DSRT_GELU_ERF_GRAD, t, t, ry); }, x,
       gradOf("none")},
      {"where", [&](dsrt_tensor *t) { dsrt_where(ctx, t, rmask, rninf, t); }, x,
       torch::where(mask, ninf, x)},
  };
  for (auto &c : cases) {
    dsrt_tensor *t = rt(c.over.clone());
    c.run(t);
    EXPECT_TRUE(close(tt(t), c.want, 1e-5, 1e-5)) << c.name;
  }
}

TEST_F(Kernels, BinaryInteger) {
  for (auto s : {at::kLong, at::kInt}) {
    for (const auto &sp : kBroadcastShapes) {
      Tensor a = torch::randint(-9, 9, sp.a, s), b = torch::randint(-9, 9, sp.b, s);
      Tensor e = torch::randint(0, 4, sp.b, s);
      std::vector<int64_t> os = at::infer_size(sp.a, sp.b);
      struct Case {
        int op;
        Tensor y, want;
      } cases[] = {{DSRT_ADD, b, a + b},
                   {DSRT_SUB, b, a - b},
                   {DSRT_MUL, b, a * b},
                   {DSRT_POW, e, torch::pow(a, e)},
                   {DSRT_MAX, b, torch::maximum(a, b)},
                   {DSRT_MIN, b, torch::minimum(a, b)}};
      for (auto &c : cases) {
        dsrt_tensor *o = empty(os, s);
        dsrt_binary(ctx, c.op, o, rt(a), rt(c.y));
        EXPECT_TRUE(close(tt(o), c.want)) << "op " << c.op << " dtype " << s;
      }
    }
  }
  Tensor a = torch::randint(0, 2, {6, 1}).to(at::kBool),
         b = torch::randint(0, 2, {5}).to(at::kBool);
  dsrt_tensor *o = empty({6, 5}, at::kBool);
  dsrt_binary(ctx, DSRT_MUL, o, rt(a), rt(b));
  EXPECT_TRUE(close(tt(o), a.logical_and(b)));
}

TEST_F(Kernels, CmpAndWhere) {
  for (auto s : {at::kFloat, at::kLong, at::kInt, at::kDouble}) {
    for (const auto &sp : kBroadcastShapes) {
      Tensor a = torch::randint(-3, 3, sp.a).to(s), b = torch::randint(-3, 3, sp.b).to(s);
      std::vector<int64_t> os = at::infer_size(sp.a, sp.b);
      Tensor wants[] = {a == b, a != b, a<b, a <= b, a> b, a >= b};
      for (int p = DSRT_EQ; p <= DSRT_GE; ++p) {
        dsrt_tensor *o = empty(os, at::kBool);
        dsrt_cmp(ctx, p, o, rt(a), rt(b));
        EXPECT_TRUE(close(tt(o), wants[p])) << "pred " << p;
      }
      Tensor cond = torch::randint(0, 2, sp.a).to(at::kBool);
      Tensor x = randn(sp.b).to(s), y = randn({1}).to(s);
      std::vector<int64_t> ws = at::infer_size(at::infer_size(sp.a, sp.b), {1});
      dsrt_tensor *o = empty(ws, s);
      dsrt_where(ctx, o, rt(cond), rt(x), rt(y));
      EXPECT_TRUE(close(tt(o), torch::where(cond, x, y)));
    }
  }
}

//===----------------------------------------------------------------------===//
// Reductions, softmax, norms
//===----------------------------------------------------------------------===//

TEST_F(Kernels, Reduce) {
  struct Case {
    std::vector<int64_t> shape;
    std::vector<uint64_t> masks;
  } cases[] = {
      {{2, 3, 4, 5}, {0x1, 0x2, 0x8, 0x6, 0xA, 0x5, 0xF, 0x0, 0x9, 0xE}},
      {{300, 200}, {0x1, 0x2, 0x3}},
      {{5, 1, 7}, {0x2, 0x3, 0x6}},
      {{100000}, {0x1}},
      {{3, 40000}, {0x2, 0x1}},
      {{}, {0x0}},
  };
  for (auto &c : cases) {
    Tensor x = randn(c.shape) + 0.5;
    for (uint64_t m : c.masks) {
      std::vector<int64_t> dims;
      for (int d = 0; d < (int)c.shape.size(); ++d)
        if ((m >> d) & 1)
          dims.push_back(d);
      auto red = [&](int kind, const Tensor &t, bool keep) {
        if (dims.empty())
          return t.clone();
        if (kind == DSRT_SUM)
          return t.sum(dims, keep);
        if (kind == DSRT_MEAN)
          return t.mean(dims, keep);
        return t.amax(dims, keep);
      };
      for (int kind : {DSRT_SUM, DSRT_MEAN, DSRT_AMAX}) {
        for (bool keep : {false, true}) {
          Tensor want = red(kind, x, keep);
          dsrt_tensor *o = emptyLike(want);
          dsrt_reduce(ctx, kind, o, rt(x), m);
          EXPECT_TRUE(close(tt(o), want, 1e-5, 1e-5))
              << "kind " << kind << " mask " << m << " shape " << x.sizes();
        }
      }
      Tensor xi = torch::randint(-100, 100, c.shape, at::kLong);
      Tensor wi = dims.empty() ? xi.clone() : xi.sum(dims);
      dsrt_tensor *oi = emptyLike(wi);
      dsrt_reduce(ctx, DSRT_SUM, oi, rt(xi), m);
      EXPECT_TRUE(close(tt(oi), wi));
      Tensor xi32 = xi.to(at::kInt);
      Tensor wmax = dims.empty() ? xi32.clone() : xi32.amax(dims);
      dsrt_tensor *om = emptyLike(wmax);
      dsrt_reduce(ctx, DSRT_AMAX, om, rt(xi32), m);
      EXPECT_TRUE(close(tt(om), wmax));
    }
  }
  // Booleans sum to i64 like torch; amax propagates NaN.
  Tensor b = torch::randint(0, 2, {4, 6}).to(at::kBool);
  dsrt_tensor *ob = empty({4}, at::kLong);
  dsrt_reduce(ctx, DSRT_SUM, ob, rt(b), 0x2);
  EXPECT_TRUE(close(tt(ob), b.sum(1)));
  Tensor xn = randn({3, 4});
  xn[1][2] = NAN;
  dsrt_tensor *on = empty({3});
  dsrt_reduce(ctx, DSRT_AMAX, on, rt(xn), 0x2);
  EXPECT_TRUE(close(tt(on), xn.amax(1)));
  Tensor xd = randn({6, 7}).to(at::kDouble);
  dsrt_tensor *od = empty({7}, at::kDouble);
  dsrt_reduce(ctx, DSRT_MEAN, od, rt(xd), 0x1);
  EXPECT_TRUE(close(tt(od), xd.mean(0)));
}

TEST_F(Kernels, Cumsum) {
  // f32 against torch.cumsum (and its gradient, the reverse sum), i64 exactly (a mask's
  // positions), bf16 rounded once per element.
  for (auto shape : std::vector<std::vector<int64_t>>{{3, 4, 5}, {2, 1000}}) {
    for (int64_t dim = -1; dim < (int64_t)shape.size(); ++dim) {
      Tensor x = randn(shape).requires_grad_(), dy = randn(shape);
      Tensor y = torch::cumsum(x, dim);
      y.backward(dy);
      dsrt_tensor *o = emptyLike(y), *dx = emptyLike(y);
      dsrt_cumsum(ctx, o, rt(x), dim, 0);
      EXPECT_TRUE(close(tt(o), y)) << "dim " << dim;
      dsrt_cumsum(ctx, dx, rt(dy), dim, 1);
      EXPECT_TRUE(close(tt(dx), x.grad())) << "reverse dim " << dim;
    }
  }
  Tensor mask = torch::randint(0, 2, {4, 16}, at::kLong);
  dsrt_tensor *pos = empty({4, 16}, at::kLong);
  dsrt_cumsum(ctx, pos, rt(mask), 1, 0);
  EXPECT_TRUE(torch::equal(tt(pos), torch::cumsum(mask, 1)));
  Tensor xb = randn({3, 64}).to(at::kBFloat16);
  dsrt_tensor *ob = empty({3, 64}, at::kBFloat16);
  dsrt_cumsum(ctx, ob, rt(xb), 1, 0);
  EXPECT_TRUE(torch::equal(tt(ob), torch::cumsum(xb.to(at::kDouble), 1).to(at::kBFloat16)));
}

TEST_F(Kernels, Attention) {
  // The fused kernel against F.scaled_dot_product_attention and its autograd: causal (square
  // and L != S, top-left aligned), a bool mask broadcast over the heads with a query row that
  // sees no key (zero output and gradient), a float mask added, grouped-query heads, a value
  // width unlike the query's, and lengths that leave partial tiles of queries and keys (32, 64
  // and 256 queries, 512 keys a tile). lse against logsumexp of the masked, scaled scores.
  struct Case {
    int64_t B, Hq, Hk, L, S, E, Ev;
    int mask; // 0 none, 1 bool [B, 1, L, S], 2 float [1, Hq, L, S]
    bool causal;
    double scale;
  };
  for (Case c : {Case{2, 4, 2, 37, 37, 16, 16, 0, true, 0.25},
                 Case{1, 2, 2, 300, 300, 8, 8, 0, true, 0.3},
                 Case{1, 2, 1, 45, 70, 8, 8, 0, true, 0.3},
                 Case{2, 2, 1, 70, 45, 8, 12, 1, false, 0.5},
                 Case{1, 4, 4, 33, 600, 16, 16, 2, false, 0.25},
                 Case{1, 2, 2, 800, 1100, 8, 8, 0, false, 0.35}}) {
    std::string what = "B" + std::to_string(c.B) + " Hq" + std::to_string(c.Hq) + " Hk" +
                       std::to_string(c.Hk) + " L" + std::to_string(c.L) + " S" +
                       std::to_string(c.S) + " mask" + std::to_string(c.mask) +
                       (c.causal ? " causal" : "");
    Tensor q = torch::randn({c.B, c.Hq, c.L, c.E}).requires_grad_();
    Tensor k = torch::randn({c.B, c.Hk, c.S, c.E}).requires_grad_();
    Tensor v = torch::randn({c.B, c.Hk, c.S, c.Ev}).requires_grad_();
    std::optional<Tensor> mask;
    if (c.mask == 1) {
      Tensor m = torch::rand({c.B, 1, c.L, c.S}) > 0.3;
      m.index_put_({0, 0, 1}, false);
      mask = m;
    } else if (c.mask == 2) {
      mask = torch::randn({1, c.Hq, c.L, c.S});
    }
    Tensor y = at::scaled_dot_product_attention(q, k, v, mask, 0.0, c.causal, c.scale,
                                                /*enable_gqa=*/c.Hq != c.Hk);
    Tensor dy = torch::randn(y.sizes());
    y.backward(dy);
    dsrt_tensor *o = emptyLike(y), *lse = empty({c.B, c.Hq, c.L});
    dsrt_attention(ctx, o, lse, rt(q), rt(k), rt(v), mask ? rt(*mask) : nullptr, c.scale,
                   c.causal);
    EXPECT_TRUE(closeSum(tt(o), y)) << what;
    // The reference's log-sum-exp, repeating the key/value heads, in double: LibTorch's f32
    // logsumexp was once in about 60 runs 5e-5 off on one row (its own threads' split).
    Tensor kr = k.detach().to(at::kDouble).repeat_interleave(c.Hq / c.Hk, 1);
    Tensor sc = torch::matmul(q.detach().to(at::kDouble), kr.transpose(-1, -2)) * c.scale;
    if (c.causal)
      sc = sc.masked_fill(torch::ones({c.L, c.S}, at::kBool).tril().logical_not(),
                          -INFINITY);
    else if (c.mask == 1)
      sc = sc.masked_fill(mask->logical_not(), -INFINITY);
    else if (c.mask == 2)
      sc = sc + mask->to(at::kDouble);
    EXPECT_TRUE(closeSum(tt(lse), torch::logsumexp(sc, -1).to(at::kFloat))) << what;
    dsrt_tensor *dq = emptyLike(q), *dk = emptyLike(k), *dv = emptyLike(v);
    dsrt_attention_grad(ctx, dq, dk, dv, rt(q), rt(k), rt(v), mask ? rt(*mask) : nullptr, o, lse,
                        rt(dy), c.scale, c.causal);
    EXPECT_TRUE(closeSum(tt(dq), q.grad())) << what;
    EXPECT_TRUE(closeSum(tt(dk), k.grad())) << what;
    EXPECT_TRUE(closeSum(tt(dv), v.grad())) << what;
    if (c.mask == 1) // the row with no key: zero output, zero gradient
      EXPECT_EQ(tt(o)[0][0][1].abs().sum().item<double>(), 0.0);
  }
  // bf16 against PyTorch's own 16-bit flash kernel (GQA, partial tiles of 64 queries, rows of
  // keys that end in part of a vector), whose probabilities, score gradients and gradients'
  // running sums are 16-bit. The forward exponentiates as ATen does (its fast exp, libm's past
  // the last whole vector); with an exact exp it was 8e-4 apart (one probability in forty
  // rounds the other way), and f32 rounded once 1.9e-3. Its log-sum-exp equals PyTorch's to
  // 1.3e-8 (the fast exp sums to 5e-5 below the exact one on a lone key). The backward from
  // PyTorch's own output and log-sum-exp: the same sums in the same order, measured 0 to 1e-6
  // apart; f32 arithmetic rounded once is 3e-3 to 4e-3 apart.
  auto bf = [](const Tensor &t) { return t.to(at::kBFloat16); };
  auto dist = [](dsrt_tensor *got, const Tensor &want) {
    Tensor w = want.to(at::kFloat);
    return (tt(got).to(at::kFloat) - w).norm().item<double>() / w.norm().item<double>();
  };
  Tensor q = bf(torch::randn({1, 4, 300, 16})), k = bf(torch::randn({1, 2, 300, 16})),
         v = bf(torch::randn({1, 2, 300, 16})), dy = bf(torch::randn({1, 4, 300, 16}));
  auto ref = at::_scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, true, {}, 0.25);
  Tensor y = std::get<0>(ref), l = std::get<1>(ref);
  dsrt_tensor *o16 = empty({1, 4, 300, 16}, at::kBFloat16), *l16 = empty({1, 4, 300});
  dsrt_attention(ctx, o16, l16, rt(q), rt(k), rt(v), nullptr, 0.25, 1);
  // Measured: 1 of 19,200 values a bf16 step apart (1.7e-5; the products summed in another
  // order); with an exact exp, 10% of them.
  EXPECT_LE((tt(o16) != y).sum().item<int64_t>(), y.numel() / 1000) << "values differ";
  EXPECT_LE(dist(l16, l), 1e-6);
  // Rows of keys past their whole vectors, unmasked: 40 = 2 x 16 + 8, libm's exp for the last
  // 8 where ATen's vectors are 16 lanes (8 lanes: its fast exp for all 40).
  {
    Tensor q2 = bf(torch::randn({1, 4, 40, 16}) * 3), k2 = bf(torch::randn({1, 2, 40, 16})),
           v2 = bf(torch::randn({1, 2, 40, 16}));
    Tensor y2 = std::get<0>(
        at::_scaled_dot_product_flash_attention_for_cpu(q2, k2, v2, 0.0, false, {}, 0.25));
    dsrt_tensor *o2 = empty({1, 4, 40, 16}, at::kBFloat16), *l2 = empty({1, 4, 40});
    dsrt_attention(ctx, o2, l2, rt(q2), rt(k2), rt(v2), nullptr, 0.25, 0);
    EXPECT_LE((tt(o2) != y2).sum().item<int64_t>(), y2.numel() / 1000) << "rows of 40 keys";
  }
  // f16 the same way (ATen's fast exp for both 16-bit types; with an exact exp, 31% of the
  // values differ: f16 keeps 3 more bits).
  {
    Tensor qh = q.to(at::kHalf), kh = k.to(at::kHalf), vh = v.to(at::kHalf);
    Tensor yh = std::get<0>(
        at::_scaled_dot_product_flash_attention_for_cpu(qh, kh, vh, 0.0, true, {}, 0.25));
    dsrt_tensor *oh = empty({1, 4, 300, 16}, at::kHalf), *lh = empty({1, 4, 300});
    dsrt_attention(ctx, oh, lh, rt(qh), rt(kh), rt(vh), nullptr, 0.25, 1);
    EXPECT_LE((tt(oh) != yh).sum().item<int64_t>(), yh.numel() / 1000) << "f16";
  }
  auto grads = at::_scaled_dot_product_flash_attention_for_cpu_backward(dy, q, k, v, y, l, 0.0,
                                                                         true, {}, 0.25);
  dsrt_tensor *dq = empty({1, 4, 300, 16}, at::kBFloat16);
  dsrt_tensor *dk = empty({1, 2, 300, 16}, at::kBFloat16);
  dsrt_tensor *dv = empty({1, 2, 300, 16}, at::kBFloat16);
  dsrt_attention_grad(ctx, dq, dk, dv, rt(q), rt(k), rt(v), nullptr, rt(y), rt(l), rt(dy), 0.25,
                      1);
  EXPECT_LE(dist(dq, std::get<0>(grads)), 1e-4);
  EXPECT_LE(dist(dk, std::get<1>(grads)), 1e-4);
  EXPECT_LE(dist(dv, std::get<2>(grads)), 1e-4);
}

TEST_F(Kernels, AttentionStrictlyCausal) {
  // DSRT_CAUSAL_STRICT (a striped ring's later blocks: query i sees keys j < i) against
  // PyTorch's causal SDPA of queries 1.. over the same keys (query i - 1 there sees keys
  // j <= i - 1); query 0 sees no key: zero output, lse -inf, no gradient. 300 rows: partial
  // tiles.
  Tensor q = torch::randn({1, 4, 300, 16}).requires_grad_();
  Tensor k = torch::randn({1, 2, 300, 16}).requires_grad_();
  Tensor v = torch::randn({1, 2, 300, 8}).requires_grad_();
  Tensor dy = torch::randn({1, 4, 300, 8});
  Tensor rest = q.narrow(2, 1, 299);
  Tensor y = at::scaled_dot_product_attention(rest, k, v, {}, 0.0, true, 0.3, true);
  y.backward(dy.narrow(2, 1, 299));
  dsrt_tensor *o = empty({1, 4, 300, 8}), *lse = empty({1, 4, 300});
  dsrt_attention(ctx, o, lse, rt(q), rt(k), rt(v), nullptr, 0.3, DSRT_CAUSAL_STRICT);
  EXPECT_TRUE(closeSum(tt(o).narrow(2, 1, 299), y));
  EXPECT_EQ(tt(o).narrow(2, 0, 1).abs().sum().item<double>(), 0.0);
  EXPECT_TRUE(torch::all(torch::isneginf(tt(lse).narrow(2, 0, 1))).item<bool>());
  dsrt_tensor *dq = emptyLike(q), *dk = emptyLike(k), *dv = emptyLike(v);
  dsrt_attention_grad(ctx, dq, dk, dv, rt(q), rt(k), rt(v), nullptr, o, lse, rt(dy), 0.3,
                      DSRT_CAUSAL_STRICT);
  EXPECT_TRUE(closeSum(tt(dq), q.grad()));
  EXPECT_TRUE(closeSum(tt(dk), k.grad()));
  EXPECT_TRUE(closeSum(tt(dv), v.grad()));
}

TEST_F(Kernels, LinearCrossEntropy) {
  // The tiled LM head and loss against F.cross_entropy(F.linear(x, w, b), t, reduction="sum")
  // and autograd: 3 tiles of 4 rows over 11 (a short last tile), a bias, an ignored target,
  // label smoothing; and one tile without a bias.
  for (int64_t tiles : {3, 1}) {
    const bool withBias = tiles == 3;
    Tensor x = randn({11, 8}).requires_grad_(), w = randn({13, 8}).requires_grad_();
    Tensor b = randn({13}).requires_grad_();
    Tensor t = torch::randint(0, 13, {11}, at::kLong);
    t[5] = -100;
    Tensor y = F::cross_entropy(torch::linear(x, w, withBias ? b : Tensor()), t,
                                F::CrossEntropyFuncOptions().reduction(torch::kSum)
                                    .label_smoothing(0.1));
    Tensor dy = torch::full({}, 0.7);
    y.backward(dy);
    const int64_t rows = (11 + tiles - 1) / tiles;
    dsrt_tensor *loss = empty({}), *ws = empty({rows * 13 + 1});
    dsrt_linear_cross_entropy(ctx, loss, ws, rt(x), rt(w), withBias ? rt(b) : nullptr, rt(t),
                              tiles, -100, 0.1);
    EXPECT_TRUE(closeSum(tt(loss), y)) << "tiles " << tiles;
    dsrt_tensor *dx = emptyLike(x), *dw = emptyLike(w), *db = empty({13});
    dsrt_tensor *gws = empty({2 * rows * 13 + 13 * 8 + 13});
    dsrt_linear_cross_entropy_grad(ctx, dx, dw, db, gws, rt(x), rt(w), withBias ? rt(b) : nullptr,
                                   rt(t), rt(dy), tiles, -100, 0.1);
    EXPECT_TRUE(closeSum(tt(dx), x.grad())) << "tiles " << tiles;
    EXPECT_TRUE(closeSum(tt(dw), w.grad())) << "tiles " << tiles;
    if (withBias)
      EXPECT_TRUE(closeSum(tt(db), b.grad()));
    else
      EXPECT_EQ(tt(db).abs().sum().item<double>(), 0.0);
  }
}

TEST_F(Kernels, SoftmaxAndGrad) {
  for (auto shape : std::vector<std::vector<int64_t>>{{3, 4, 5}, {64, 1000}, {2, 300, 7}}) {
    for (int64_t dim = -1; dim < (int64_t)shape.size(); ++dim) {
      for (int log = 0; log < 2; ++log) {
        Tensor x = (randn(shape) * 4).requires_grad_(), dy = randn(shape);
        Tensor y = log ? torch::log_softmax(x, dim) : torch::softmax(x, dim);
        y.backward(dy);
        dsrt_tensor *o = emptyLike(y), *dx = emptyLike(y);
        dsrt_softmax(ctx, o, rt(x), dim, log);
        EXPECT_TRUE(close(tt(o), y)) << "log " << log << " dim " << dim;
        dsrt_softmax_grad(ctx, dx, rt(y), rt(dy), dim, log);
        EXPECT_TRUE(closeSum(tt(dx), x.grad())) << "grad log " << log << " dim " << dim;
      }
    }
  }
}

// The online softmax's edge lanes (cpu::vexpShiftSum's exponentials, rows of 37 keys: two
// 16-lane blocks and a tail): a float mask with -inf keys (exactly 0) and keys 1e4 below
// (flushed to 0, as PyTorch's float exp gives), and a NaN in one batch's keys, which makes
// that batch's every output NaN in PyTorch and here; the other batch unharmed.
/// Generation's paged key/value cache: new tokens' keys and values written to scattered pages
/// (padding tokens skipped), then attention of the new tokens against their sequences' pages:
/// a chunk of 3 on a cached prefix, one decoded token, and a sequence with none (its rows
/// zeros), grouped-query heads; against SDPA over each sequence's positions gathered in
/// order, each new token seeing the positions up to its own. f32 and bf16 (computed in f32,
/// rounded once).
TEST_F(Kernels, PagedAttention) {
  const int64_t N = 12, P = 4, Hk = 2, Hq = 4, E = 16, Ev = 8, B = 3, T = 3, maxPages = 4;
  const std::vector<int64_t> cls = {7, 13, 2}, qls = {3, 1, 0};
  for (at::ScalarType dt : {at::kFloat, at::kBFloat16}) {
    Tensor pages = torch::randperm(N, at::kLong).slice(0, 0, B * maxPages).reshape({B, maxPages});
    Tensor kc = torch::randn({N, Hk, P, E}).to(dt), vc = torch::randn({N, Hk, P, Ev}).to(dt);
    Tensor k = torch::randn({B, Hk, T, E}).to(dt), v = torch::randn({B, Hk, T, Ev}).to(dt);
    Tensor q = torch::randn({B, Hq, T, E}).to(dt);
    Tensor slots = torch::full({B, T}, -1, at::kLong);
    Tensor kWant = kc.clone(), vWant = vc.clone();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < qls[b]; ++t) {
        const int64_t pos = cls[b] - qls[b] + t, page = pages[b][pos / P].item<int64_t>();
        slots[b][t] = page * P + pos % P;
        kWant[page].select(1, pos % P).copy_(k[b].select(1, t));
        vWant[page].select(1, pos % P).copy_(v[b].select(1, t));
      }
    dsrt_tensor *kr = rt(kc), *vr = rt(vc);
    dsrt_cache_write(ctx, kr, vr, rt(k), rt(v), rt(slots));
    EXPECT_TRUE(close(tt(kr), kWant, 0, 0)) << dt;
    EXPECT_TRUE(close(tt(vr), vWant, 0, 0)) << dt;

    dsrt_tensor *out = empty({B, Hq, T, Ev}, dt);
    dsrt_paged_attention(ctx, out, rt(q), kr, vr, rt(pages), rt(torch::tensor(cls)),
                         rt(torch::tensor(qls)), 0.3);
    Tensor want = torch::zeros({B, Hq, T, Ev});
    for (int64_t b = 0; b < B; ++b) {
      if (!qls[b])
        continue;
      std::vector<Tensor> ks, vs;
      for (int64_t j = 0; j < cls[b]; ++j) {
        const int64_t page = pages[b][j / P].item<int64_t>();
        ks.push_back(kWant[page].select(1, j % P).to(at::kFloat));
        vs.push_back(vWant[page].select(1, j % P).to(at::kFloat));
      }
      Tensor K = torch::stack(ks, 1).repeat_interleave(Hq / Hk, 0); // [Hq, cl, E]
      Tensor V = torch::stack(vs, 1).repeat_interleave(Hq / Hk, 0);
      Tensor pos = torch::arange(cls[b] - qls[b], cls[b]).unsqueeze(1);
      Tensor sees = torch::arange(cls[b]).unsqueeze(0) <= pos; // [ql, cl]
      want[b].slice(1, 0, qls[b]).copy_(at::scaled_dot_product_attention(
          q[b].slice(1, 0, qls[b]).to(at::kFloat), K, V, sees, 0.0, false, 0.3));
    }
    if (dt == at::kFloat)
      EXPECT_TRUE(close(tt(out), want, 1e-5, 1e-6));
    else // one rounding of the f32 result (bf16 keeps 8 bits)
      EXPECT_TRUE(close(tt(out).to(at::kFloat), want, 1.0 / 128, 1e-6));
  }
}

/// Page tables and lengths that do not fit the cache end the job, naming the sequence.
TEST_F(Kernels, PagedAttentionRefusals) {
  Tensor kc = torch::zeros({4, 1, 2, 8}), q = torch::zeros({1, 2, 1, 8});
  Tensor k = torch::zeros({1, 1, 1, 8});
  auto attend = [&](std::vector<int64_t> pages, int64_t cl, int64_t ql) {
    dsrt_paged_attention(ctx, empty({1, 2, 1, 8}), rt(q), rt(kc), rt(kc),
                         rt(torch::tensor(pages).reshape({1, -1})), rt(torch::tensor({cl})),
                         rt(torch::tensor({ql})), 1.0);
  };
  EXPECT_DEATH(attend({0, 4}, 3, 1),
               "dsrt: paged_attention: sequence 0's page 1 is 4, not one of the cache's 4 pages");
  EXPECT_DEATH(attend({0, 1}, 5, 1), "dsrt: paged_attention: sequence 0 has 5 positions in the "
                                     "cache, outside 1 \\(its new tokens\\)..4 \\(2 pages of 2\\)");
  EXPECT_DEATH(attend({0, 1}, 3, 2),
               "dsrt: paged_attention: sequence 0 has 2 new tokens, outside 0..1");
  EXPECT_DEATH(dsrt_cache_write(ctx, rt(kc), rt(kc), rt(k), rt(k), rt(torch::tensor({{8L}}))),
               "dsrt: cache_write: token 0 of sequence 0 goes to slot 8, past the cache's 8");
  Tensor kc2 = torch::zeros({4, 2, 2, 8});
  EXPECT_DEATH(dsrt_paged_attention(ctx, empty({1, 3, 1, 8}), rt(torch::zeros({1, 3, 1, 8})),
                                    rt(kc2), rt(kc2), rt(torch::zeros({1, 1}, at::kLong)),
                                    rt(torch::tensor({1L})), rt(torch::tensor({1L})), 1.0),
               "dsrt: paged_attention: query 1x3x1x8 is not \\[B, Hq, T, 8\\] with a multiple "
               "of the cache's 2 heads");
  // Shapes and dtypes of the caches, keys, slots, result and page table.
  Tensor q2 = torch::zeros({1, 2, 1, 8}), lens = torch::tensor({1L});
  auto attendWith = [&](const Tensor &kcache, const Tensor &vcache, at::IntArrayRef outDims,
                        const Tensor &pages) {
    dsrt_paged_attention(ctx, empty(outDims), rt(q2.to(kcache.scalar_type())), rt(kcache),
                         rt(vcache), rt(pages), rt(lens), rt(lens), 1.0);
  };
  Tensor onePage = torch::zeros({1, 1}, at::kLong);
  EXPECT_DEATH(attendWith(torch::zeros({4, 1, 2}), torch::zeros({4, 1, 2}), {1, 2, 1, 8}, onePage),
               "dsrt: paged_attention: caches 4x1x2 and 4x1x2 are not \\[pages, heads, page "
               "size, width\\]");
  EXPECT_DEATH(attendWith(torch::zeros({4, 1, 2, 8}, at::kDouble),
                          torch::zeros({4, 1, 2, 8}, at::kDouble), {1, 2, 1, 8}, onePage),
               "dsrt: paged_attention: needs an f32, bf16 or f16 cache, got f64");
  EXPECT_DEATH(attendWith(kc, torch::zeros({4, 1, 3, 8}), {1, 2, 1, 8}, onePage),
               "dsrt: paged_attention: key cache 4x1x2x8 and value cache 4x1x3x8 do not match "
               "\\(pages, heads, page size\\)");
  EXPECT_DEATH(attendWith(kc, kc, {1, 2, 1, 4}, onePage),
               "dsrt: paged_attention: result 1x2x1x4 is not \\[B, Hq, T, Ev\\] = \\[1, 2, 1, "
               "8\\]");
  EXPECT_DEATH(attendWith(kc, kc, {1, 2, 1, 8}, torch::zeros({2, 1}, at::kLong)),
               "dsrt: paged_attention: pages 2x1 are not \\[B, max pages\\] with B = 1");
  EXPECT_DEATH(dsrt_cache_write(ctx, rt(kc), rt(kc), rt(torch::zeros({1, 2, 1, 8})), rt(k),
                                rt(torch::tensor({{0L}}))),
               "dsrt: cache_write: keys 1x2x1x8 and values 1x1x1x8 are not \\[B, 1, T, 8\\] "
               "and \\[B, 1, T, 8\\]");
  EXPECT_DEATH(dsrt_cache_write(ctx, rt(kc), rt(kc), rt(k), rt(k), rt(torch::tensor({0L}))),
               "dsrt: cache_write: slots 1 are not \\[B, T\\] = \\[1, 1\\]");
}

/// Generation's token choice against HF's warpers written in torch ops: greedy is
/// torch.argmax (f32 and bf16 logits, a tie taking the first); top_k 1 keeps the largest and
/// its ties at any temperature; with temperature, top-k and top-p, every draw falls in the set
/// HF's TopK and TopP warpers keep, each kept token about as often as its probability (20000
/// draws, within 5 standard deviations), and a draw depends on its (seed, step) alone, not on
/// the rest of the batch; operands of the wrong shape are refused.
TEST_F(Kernels, Sample) {
  const int64_t V = 12;
  auto run = [&](const Tensor &logits, std::vector<float> temp, std::vector<int64_t> k,
                 std::vector<float> p, std::vector<int64_t> seed, std::vector<int64_t> step) {
    dsrt_tensor *tokens = empty({logits.size(0)}, at::kLong);
    dsrt_sample(ctx, tokens, rt(logits), rt(torch::tensor(temp)), rt(torch::tensor(k)),
                rt(torch::tensor(p)), rt(torch::tensor(seed)), rt(torch::tensor(step)));
    return tt(tokens);
  };
  Tensor logits = torch::randn({5, V}) * 2;
  logits[3][4] = logits[3][9] = logits[3].max() + 1; // a tie: the first wins
  for (at::ScalarType dt : {at::kFloat, at::kBFloat16}) {
    Tensor l = logits.to(dt);
    EXPECT_TRUE(close(run(l, {0, 0, 0, 0, 0}, {0, 0, 0, 0, 0}, {1, 1, 1, 1, 1}, {1, 2, 3, 4, 5},
                          {0, 0, 0, 0, 0}),
                      l.to(at::kFloat).argmax(1)))
        << dt;
    // top_k 1 keeps the largest logit, and every logit tied with it (HF's warper keeps
    // ties): the tied row draws between its two.
    Tensor drawn = run(l, {0.7f, 2, 5, 1, 1}, {1, 1, 1, 1, 1}, {1, 1, 0.5f, 1, 1},
                       {1, 2, 3, 4, 5}, {9, 9, 9, 9, 9});
    Tensor greedy = l.to(at::kFloat).argmax(1);
    for (int64_t b : {0, 1, 2, 4})
      EXPECT_EQ(drawn[b].item<int64_t>(), greedy[b].item<int64_t>()) << dt << " row " << b;
    EXPECT_TRUE(drawn[3].item<int64_t>() == 4 || drawn[3].item<int64_t>() == 9) << dt;
  }
  std::vector<int64_t> many(64);
  for (int64_t i = 0; i < 64; ++i)
    many[i] = i;
  Tensor tied = run(logits[3].unsqueeze(0).expand({64, V}).contiguous(),
                    std::vector<float>(64, 1.f), std::vector<int64_t>(64, 1),
                    std::vector<float>(64, 1.f), std::vector<int64_t>(64, 7), many);
  EXPECT_GT((tied == 4).sum().item<int64_t>(), 0) << "top_k 1 dropped a tie";
  EXPECT_GT((tied == 9).sum().item<int64_t>(), 0) << "top_k 1 dropped a tie";
  // HF's TemperatureLogitsWarper, TopKLogitsWarper and TopPLogitsWarper, in torch ops.
  const float temp = 0.5f, topP = 0.9f;
  const int64_t topK = 8;
  Tensor row = torch::randn({V}) * 1.5, z = row / temp;
  Tensor kth = std::get<0>(torch::topk(z, topK)).index({-1});
  Tensor zk = z.masked_fill(z < kth, -INFINITY);
  auto [sorted, idx] = torch::sort(zk, /*dim=*/0, /*descending=*/false);
  Tensor drop = sorted.softmax(0).cumsum(0) <= (1 - topP);
  drop[-1] = false;
  Tensor zp = zk.masked_fill(drop.scatter(0, idx, drop), -INFINITY);
  Tensor prob = zp.softmax(0);
  const int64_t draws = 20000;
  Tensor batch = row.unsqueeze(0).expand({draws, V}).contiguous();
  std::vector<int64_t> steps(draws);
  for (int64_t i = 0; i < draws; ++i)
    steps[i] = i;
  Tensor got = run(batch, std::vector<float>(draws, temp), std::vector<int64_t>(draws, topK),
                   std::vector<float>(draws, topP), std::vector<int64_t>(draws, 77), steps);
  Tensor counts = torch::bincount(got, {}, V).to(at::kDouble);
  for (int64_t i = 0; i < V; ++i) {
    const double pi = prob[i].item<double>(), n = counts[i].item<double>();
    if (pi == 0) {
      EXPECT_EQ(n, 0) << "token " << i << " is not among the kept";
      continue;
    }
    EXPECT_LE(std::fabs(n - draws * pi), 5 * std::sqrt(draws * pi * (1 - pi)) + 1)
        << "token " << i << " probability " << pi;
  }
  EXPECT_GE((prob > 0).sum().item<int64_t>(), 2) << "the warpers kept one token: no draw shown";
  EXPECT_LT((prob > 0).sum().item<int64_t>(), topK) << "top-p dropped nothing";
  // Draw 17 of seed 77 alone, and beside other requests.
  Tensor alone = run(row.unsqueeze(0), {temp}, {topK}, {topP}, {77}, {17});
  Tensor shared = run(torch::stack({torch::randn({V}), row, torch::randn({V})}), {1, temp, 0.5f},
                      {0, topK, 3}, {1, topP, 0.9f}, {5, 77, 6}, {3, 17, 4});
  EXPECT_EQ(alone[0].item<int64_t>(), shared[1].item<int64_t>());
  EXPECT_EQ(alone[0].item<int64_t>(), got[17].item<int64_t>());
  EXPECT_DEATH(run(row, {1}, {0}, {1}, {0}, {0}),
               "dsrt: sample: logits 12 \\(f32\\) are not \\[B, V\\] of f32, bf16 or f16");
  EXPECT_DEATH(run(torch::zeros({1, 0}), {1}, {0}, {1}, {0}, {0}),
               "dsrt: sample: logits 1x0 have no vocabulary");
  EXPECT_DEATH(run(row.unsqueeze(0), {-1}, {0}, {1}, {0}, {0}),
               "dsrt: sample: sequence 0 asks for temperature -1, top_k 0, top_p 1");
  EXPECT_DEATH(run(row.unsqueeze(0), {1}, {0}, {0}, {0}, {0}),
               "dsrt: sample: sequence 0 asks for temperature 1, top_k 0, top_p 0: a "
               "temperature >= 0 \\(0: greedy\\), a top_k >= 0 \\(0: all\\) and a top_p in "
               "\\(0, 1\\] \\(1: all\\)");
}

TEST_F(Kernels, AttentionEdgeValues) {
  const float inf = std::numeric_limits<float>::infinity();
  Tensor q = torch::randn({2, 2, 9, 8}), k = torch::randn({2, 2, 37, 8});
  Tensor v = torch::randn({2, 2, 37, 8}), mask = torch::randn({1, 1, 9, 37});
  for (int64_t c : {3, 17, 36})
    mask.index_put_({0, 0, torch::indexing::Slice(), c}, -inf);
  for (int64_t c : {5, 20, 33})
    mask.index_put_({0, 0, torch::indexing::Slice(), c}, -1e4f);
  k.index_put_({1, 0, 30, 2}, std::numeric_limits<float>::quiet_NaN());
  Tensor y = at::scaled_dot_product_attention(q, k, v, mask, 0.0, false, 0.35);
  dsrt_tensor *o = emptyLike(y), *lse = empty({2, 2, 9});
  dsrt_attention(ctx, o, lse, rt(q), rt(k), rt(v), rt(mask), 0.35, 0);
  Tensor got = tt(o);
  EXPECT_TRUE(torch::equal(got.isnan(), y.isnan()));
  EXPECT_TRUE(y[1][0].isnan().all().item<bool>());
  EXPECT_TRUE(close(got[0], y[0]));
  EXPECT_TRUE(close(got[1][1], y[1][1]));
}

TEST_F(Kernels, LayerNormAndGrad) {
  struct Case {
    std::vector<int64_t> shape, normShape;
    bool affine;
  } cases[] = {{{4, 7}, {7}, true},  {{2, 3, 64}, {64}, true},      {{2, 3, 5}, {3, 5}, true},
               {{6, 9}, {9}, false}, {{16, 128, 512}, {512}, true}, {{3, 3}, {3}, true}};
  for (auto &c : cases) {
    Tensor x = (randn(c.shape) * 2 + 1).requires_grad_(), dy = randn(c.shape);
    Tensor w = (randn(c.normShape) + 1).requires_grad_(), b = randn(c.normShape).requires_grad_();
    double eps = 1e-5;
    Tensor y = c.affine ? torch::layer_norm(x, c.normShape, w, b, eps)
                        : torch::layer_norm(x, c.normShape, {}, {}, eps);
    y.backward(dy);
    int64_t nn = 1;
    for (int64_t d : c.normShape)
      nn *= d;
    dsrt_tensor *o = emptyLike(y);
    dsrt_tensor *rw = c.affine ? rt(w) : nullptr, *rb = c.affine ? rt(b) : nullptr;
    dsrt_layer_norm(ctx, o, rt(x), rw, rb, nn, eps);
    EXPECT_TRUE(close(tt(o), y, 1e-5, 1e-5)) << x.sizes();
    dsrt_tensor *dx = emptyLike(x);
    dsrt_tensor *dw = c.affine ? emptyLike(w) : nullptr, *db = c.affine ? emptyLike(b) : nullptr;
    dsrt_layer_norm_grad(ctx, dx, dw, db, rt(x), rw, rt(dy), nn, eps);
    EXPECT_TRUE(closeSum(tt(dx), x.grad())) << x.sizes();
    if (c.affine) {
      EXPECT_TRUE(closeSum(tt(dw), w.grad())) << x.sizes();
      EXPECT_TRUE(closeSum(tt(db), b.grad())) << x.sizes();
    }
  }
}

TEST_F(Kernels, BatchNorm) {
  for (auto shape : std::vector<std::vector<int64_t>>{{8, 3}, {4, 5, 6, 7}, {16, 64, 8, 8}}) {
    int64_t C = shape[1];
    Tensor x = (randn(shape) * 2 + 0.5).requires_grad_(), dy = randn(shape);
    Tensor w = (randn({C}) + 1).requires_grad_(), b = randn({C}).requires_grad_();
    Tensor rm = torch::zeros({C}), rv = torch::ones({C});
    double eps = 1e-5;
    Tensor y = torch::batch_norm(x, w, b, rm, rv, /*training=*/true, 0.1, eps, false);
    y.backward(dy);
    std::vector<int64_t> red = {0};
    for (size_t d = 2; d < shape.size(); ++d)
      red.push_back(d);
    Tensor mean = x.detach().mean(red), var = x.detach().var(red, /*unbiased=*/false);
    dsrt_tensor *o = emptyLike(y), *m = empty({C}), *v = empty({C});
    dsrt_batch_norm(ctx, o, m, v, rt(x), rt(w), rt(b), eps);
    EXPECT_TRUE(close(tt(o), y, 1e-5, 1e-5));
    EXPECT_TRUE(close(tt(m), mean, 1e-5, 1e-6));
    EXPECT_TRUE(close(tt(v), var, 1e-5, 1e-6));
    dsrt_tensor *dx = emptyLike(x), *dw = empty({C}), *db = empty({C});
    dsrt_batch_norm_grad(ctx, dx, dw, db, rt(x), rt(w), m, v, rt(dy), eps);
    EXPECT_TRUE(closeSum(tt(dx), x.grad()));
    EXPECT_TRUE(closeSum(tt(dw), w.grad()));
    EXPECT_TRUE(closeSum(tt(db), b.grad()));
    // Inference with running statistics.
    Tensor rmean = randn({C}), rvar = torch::rand({C}) + 0.5;
    Tensor yi =
        torch::batch_norm(x.detach(), w.detach(), b.detach(), rmean, rvar, false, 0.1, eps, false);
    dsrt_tensor *oi = emptyLike(yi);
    dsrt_batch_norm_inference(ctx, oi, rt(x), rt(w), rt(b), rt(rmean), rt(rvar), eps);
    EXPECT_TRUE(close(tt(oi), yi, 1e-5, 1e-5));
  }
}

/// Training batch norm gives PyTorch's results bit for bit (cpu/batch_norm.cpp follows ATen's
/// sums and roundings) at 1 and 2 threads: planes of many values, of fewer than a vector's
/// lanes, with a short last vector, and NC11 (ATen's channels-last kernel, per-thread sums).
/// Bit for bit where ATen runs its AVX2 kernels; on a CPU without AVX2 (QEMU's Nehalem) ATen
/// runs its baseline kernel, whose order ds does not follow: there within rounding.
TEST_F(Kernels, BatchNormAsPyTorch) {
  const int saved = at::get_num_threads();
  const bool bits = __builtin_cpu_supports("avx2");
  auto same = [bits](const Tensor &got, const Tensor &want) {
    return bits ? ::testing::AssertionResult(got.equal(want)) : closeSum(got, want);
  };
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    dsrt_context *c = dsrt_context_create(0, threads, 42);
    for (auto shape : std::vector<std::vector<int64_t>>{
             {8, 64, 16, 16}, {8, 128, 4, 4}, {8, 256, 2, 2}, {8, 512, 1, 1}, {3, 20, 5, 7},
             {5, 12}, {2, 3, 1, 1}}) {
      const int64_t C = shape[1];
      Tensor x = randn(shape) * 2 + 0.5, dy = randn(shape), w = randn({C}) + 1, b = randn({C});
      const double eps = 1e-5;
      auto [y, mean, invstd] = at::native_batch_norm(x, w, b, {}, {}, true, 0.1, eps);
      auto [gx, gw, gb] = at::native_batch_norm_backward(dy, x, w, {}, {}, mean, invstd, true,
                                                         eps, {true, true, true});
      dsrt_tensor *o = emptyLike(x), *m = empty({C}), *v = empty({C});
      dsrt_batch_norm(c, o, m, v, rt(x), rt(w), rt(b), eps);
      dsrt_tensor *dx = emptyLike(x), *dw = empty({C}), *db = empty({C});
      dsrt_batch_norm_grad(c, dx, dw, db, rt(x), rt(w), m, v, rt(dy), eps);
      const std::string where = c10::str(shape, " at ", threads, " thread(s)");
      EXPECT_TRUE(same(tt(o), y)) << "y " << where;
      EXPECT_TRUE(same(tt(m), mean)) << "mean " << where;
      EXPECT_TRUE(same(tt(dx), gx)) << "dx " << where;
      EXPECT_TRUE(same(tt(dw), gw)) << "dweight " << where;
      EXPECT_TRUE(same(tt(db), gb)) << "dbias " << where;
    }
    dsrt_context_destroy(c);
  }
  at::set_num_threads(saved);
}

//===----------------------------------------------------------------------===//
// Matmul, linear, embedding, cross-entropy
//===----------------------------------------------------------------------===//

TEST_F(Kernels, Matmul) {
  struct Case {
    std::vector<int64_t> a, b;
    bool ta, tb;
  } cases[] = {
      {{3, 4}, {4, 5}, false, false},
      {{4, 3}, {4, 5}, true, false},
      {{3, 4}, {5, 4}, false, true},
      {{4, 3}, {5, 4}, true, true},
      {{2, 3, 4}, {2, 4, 5}, false, false},
      {{2, 1, 3, 4}, {5, 4, 6}, false, false},
      {{7, 3, 4}, {4, 5}, false, false},
      {{7, 4, 3}, {4, 5}, true, false},
      {{4}, {4, 5}, false, false},
      {{2, 3, 4}, {4}, false, false},
      {{4}, {4}, false, false},
      {{16, 8, 33, 16}, {16, 8, 33, 16}, false, true},
      {{3, 4}, {6, 4, 5}, false, false},
      {{64, 128}, {128, 96}, false, false},
      {{2, 3, 0}, {2, 0, 5}, false, false},
  };
  for (auto &c : cases) {
    Tensor a = randn(c.a), b = randn(c.b);
    Tensor ae = c.ta ? a.transpose(-1, -2) : a, be = c.tb ? b.transpose(-1, -2) : b;
    Tensor want = torch::matmul(ae, be);
    dsrt_tensor *o = emptyLike(want);
    dsrt_matmul(ctx, o, rt(a), rt(b), c.ta, c.tb);
    EXPECT_TRUE(closeSum(tt(o), want)) << a.sizes() << " x " << b.sizes();
  }
}

TEST_F(Kernels, LinearAndGrad) {
  for (auto xs : std::vector<std::vector<int64_t>>{{5, 7}, {2, 3, 7}, {7}, {64, 33, 7}}) {
    for (bool hasBias : {true, false}) {
      Tensor x = randn(xs).requires_grad_(), w = randn({9, 7}).requires_grad_(),
             b = randn({9}).requires_grad_();
      Tensor y = hasBias ? torch::linear(x, w, b) : torch::linear(x, w);
      Tensor dy = randn(y.sizes());
      y.backward(dy);
      dsrt_tensor *o = emptyLike(y);
      dsrt_linear(ctx, o, rt(x), rt(w), hasBias ? rt(b) : nullptr);
      EXPECT_TRUE(close(tt(o), y, 1e-5, 1e-5));
      dsrt_tensor *dw = emptyLike(w), *db = hasBias ? emptyLike(b) : nullptr;
      dsrt_linear_grad_weight(ctx, dw, db, rt(x), rt(dy));
      EXPECT_TRUE(closeSum(tt(dw), w.grad()));
      if (hasBias)
        EXPECT_TRUE(closeSum(tt(db), b.grad()));
      // dx of linear is a plain matmul with w.
      dsrt_tensor *dx = emptyLike(x);
      dsrt_matmul(ctx, dx, rt(dy), rt(w), 0, 0);
      EXPECT_TRUE(closeSum(tt(dx), x.grad()));
    }
  }
}

// Products on strided views (the compiler's slices, reshapes and transposes around a matmul,
// not copied): attention's heads read out of a fused [B, T, 3 * H * D] projection, results
// written into a [B, T, H * D] merge or transposed; PyTorch's matmul of the same as_strided
// views (times alpha) is the answer, and the result's elements outside its view keep what they
// held. A power-of-two alpha scales each sum exactly: the scaled scores are bit for bit the
// unscaled ones times 1/8, as PyTorch's (q @ k^T) * (1 / sqrt(64)). In bf16 and f16 the same
// views (the 16-bit step's attention) give the f32 product of the 16-bit values, scaled and
// rounded once, within one 16-bit rounding (the accumulation order differs), and a bf16 alpha
// of 1/8 is as exact as f32's; the larger shape has heads enough for oneDNN's batched kernel.
TEST_F(Kernels, MatmulView) {
  for (auto s : {at::kFloat, at::kBFloat16, at::kHalf}) {
    const double ulp = s == at::kBFloat16 ? 1.0 / 128 : 1.0 / 1024;
    for (auto [B, T, H, D] : {std::array<int64_t, 4>{2, 5, 3, 4}, {2, 64, 8, 32}}) {
      if (s == at::kFloat && T > 5)
        continue;
      const int64_t C = 3 * H * D;
      Tensor qkv = randn({B, T, C}).to(s), att = randn({B, H, T, T}).to(s);
      auto view = [](const Tensor &t, std::vector<int64_t> v, int64_t rows, int64_t cols,
                     int64_t b0, int64_t b1) {
        return t.flatten().as_strided({b0, b1, rows, cols}, {v[1], v[2], v[3], v[4]}, v[0]);
      };
      struct Case {
        const char *name;
        Tensor a, b;
        std::vector<int64_t> sizes, av, bv, cv; // b0 b1 M N K; views {offset, s0, s1, rows, cols}
        std::vector<int64_t> outShape;
        double alpha = 1.0;
      } cases[] = {
          // q @ k^T: q at column 0, k at column H * D, read transposed (unit row stride).
          {"q @ k^T", qkv, qkv, {B, H, T, T, D}, {0, T * C, D, C, 1}, {H * D, T * C, D, 1, C},
           {0, H * T * T, T * T, T, 1}, {B, H, T, T}},
          // att @ v written straight into the merged heads [B, T, H * D].
          {"att @ v -> merged", att, qkv, {B, H, T, D, T}, {0, H * T * T, T * T, T, 1},
           {2 * H * D, T * C, D, C, 1}, {0, T * H * D, D, H * D, 1}, {B, T, H * D}},
          // A result with unit row stride (its transpose is contiguous): computed as C^T.
          {"(q @ k^T)^T", qkv, qkv, {B, H, T, T, D}, {0, T * C, D, C, 1},
           {H * D, T * C, D, 1, C}, {0, H * T * T, T * T, 1, T}, {B, H, T, T}},
          // The scores scaled by 1/8 (alpha) and by 3 (not a power of two: within rounding).
          {"q @ k^T / 8", qkv, qkv, {B, H, T, T, D}, {0, T * C, D, C, 1},
           {H * D, T * C, D, 1, C}, {0, H * T * T, T * T, T, 1}, {B, H, T, T}, 0.125},
          {"(q @ k^T)^T * 3", qkv, qkv, {B, H, T, T, D}, {0, T * C, D, C, 1},
           {H * D, T * C, D, 1, C}, {0, H * T * T, T * T, 1, T}, {B, H, T, T}, 3.0},
          // No batches of dim 0 (a rank-3 product) and a K of 0 (the result's views are zeroed).
          {"rank 3", att, qkv, {1, H, T, D, T}, {0, 0, T * T, T, 1}, {0, 0, D, C, 1},
           {0, 0, T * D, D, 1}, {H, T, D}},
          {"K = 0", att, qkv, {B, H, T, D, 0}, {0, H * T * T, T * T, T, 1}, {0, T * C, D, C, 1},
           {0, T * H * D, D, H * D, 1}, {B, T, H * D}},
      };
      for (auto &c : cases) {
        std::vector<int64_t> all = c.sizes;
        for (auto *v : {&c.av, &c.bv, &c.cv})
          all.insert(all.end(), v->begin(), v->end());
        const int64_t b0 = c.sizes[0], b1 = c.sizes[1], M = c.sizes[2], N = c.sizes[3],
                      K = c.sizes[4];
        Tensor want = (torch::matmul(view(c.a, c.av, M, K, b0, b1).to(at::kFloat),
                                     view(c.b, c.bv, K, N, b0, b1).to(at::kFloat)) *
                       c.alpha).to(s);
        Tensor before = randn(c.outShape).to(s);
        dsrt_tensor *o = rt(before);
        dsrt_matmul_view(ctx, o, rt(c.a), rt(c.b), all.data(), c.alpha);
        Tensor got = tt(o), mask = torch::zeros_like(got, torch::kBool);
        view(mask, c.cv, M, N, b0, b1).fill_(true);
        Tensor mine = view(got, c.cv, M, N, b0, b1);
        std::string what = std::string(c.name) + " " + c10::toString(s) + " T " +
                           std::to_string(T);
        EXPECT_TRUE(s == at::kFloat ? closeSum(mine, want)
                                    : close(mine.to(at::kFloat), want.to(at::kFloat), ulp, ulp))
            << what;
        EXPECT_TRUE(torch::equal(got.masked_select(~mask), before.masked_select(~mask))) << what;
        // Exact but for results below the type's normal range, where PyTorch's second rounding
        // (of the scaled value) differs: f16's starts at 6.1e-5, within these scores' reach.
        if (c.alpha == 0.125 && s != at::kHalf) {
          dsrt_tensor *unscaled = rt(before);
          dsrt_matmul_view(ctx, unscaled, rt(c.a), rt(c.b), all.data(), 1.0);
          EXPECT_TRUE(torch::equal(got, tt(unscaled) * 0.125)) << what;
        }
      }
    }
  }
}

TEST_F(Kernels, MatmulViewErrorsAbort) {
  // Refusals name the operand and the cause: a view past its tensor's end, a matrix with no
  // unit stride, rows or columns that overlap, a negative stride.
  auto call = [](std::vector<int64_t> av, std::vector<int64_t> v = {1, 1, 2, 2, 2}) {
    dsrt_context *ctx = dsrt_context_create(0, 1, 0);
    int64_t d[] = {4, 6};
    dsrt_tensor *a = dsrt_tensor_alloc(ctx, DSRT_F32, 2, d), *b = dsrt_tensor_alloc(ctx, DSRT_F32, 2, d),
                *o = dsrt_tensor_alloc(ctx, DSRT_F32, 2, d);
    v.insert(v.end(), av.begin(), av.end());
    for (int64_t x : {0, 0, 0, 6, 1, 0, 0, 0, 6, 1})
      v.push_back(x);
    dsrt_matmul_view(ctx, o, a, b, v.data(), 1.0);
  };
  EXPECT_DEATH(call({20, 0, 0, 6, 1}), "dsrt: matmul_view: lhs view reaches element 27 of a "
                                       "tensor of 24");
  EXPECT_DEATH(call({0, 0, 0, 6, 2}), "lhs view has neither unit row nor unit column stride");
  EXPECT_DEATH(call({0, 0, 0, 1, 1}), "lhs view's rows overlap");
  EXPECT_DEATH(call({0, 0, 0, 1, 0}), "lhs view's columns overlap");
  EXPECT_DEATH(call({0, 0, -1, 6, 1}), "lhs view has a negative offset or stride");
  // A product of f32, bf16 or f16 alone, all three operands of one type.
  auto typed = [](int32_t lhs, int32_t result) {
    dsrt_context *c = dsrt_context_create(0, 1, 0);
    int64_t d[] = {2, 2};
    int64_t v[20] = {1, 1, 2, 2, 2, 0, 0, 0, 2, 1, 0, 0, 0, 2, 1, 0, 0, 0, 2, 1};
    dsrt_tensor *a = dsrt_tensor_alloc(c, lhs, 2, d), *o = dsrt_tensor_alloc(c, result, 2, d);
    dsrt_matmul_view(c, o, a, a, v, 1.0);
  };
  EXPECT_DEATH(typed(DSRT_I64, DSRT_I64),
               "dsrt: matmul_view: result is i64: expected f32, bf16 or f16");
  EXPECT_DEATH(typed(DSRT_F32, DSRT_BF16), "dsrt: matmul_view: lhs");
  EXPECT_DEATH(call({0, 0, 0, 6, 1}, {1, 1, 2, -2, 2}),
               "negative size in 1 x 1 batches of 2 x -2 x 2");
}

// Products whose K is at least N run on 2 threads as one sgemm per block of rows
// (cpu/matmul.cpp splitRows): a linear layer whose input is wider than its output, and a weight
// gradient over more tokens than inputs (three shapes: 64 -> 257 and 160 -> 300 with more
// outputs than inputs, 300 -> 160). PyTorch's results, and each element summed as on one
// thread, so the thread count does not change the bits.
TEST_F(Kernels, WideProductsOnThreads) {
  Tensor x = randn({301, 1024}), w = randn({128, 1024}), b = randn({128});
  dsrt_tensor *y[2];
  const int saved = omp_get_max_threads();
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    y[threads - 1] = emptyLike(torch::linear(x, w, b));
    dsrt_linear(ctx, y[threads - 1], rt(x), rt(w), rt(b));
  }
  EXPECT_TRUE(closeSum(tt(y[1]), torch::linear(x, w, b)));
  EXPECT_TRUE(torch::equal(tt(y[0]), tt(y[1])));
  for (auto [in, out] : {std::pair<int64_t, int64_t>{64, 257}, {160, 300}, {300, 160}}) {
    Tensor tokens = randn({1024, in}), dy = randn({1024, out});
    dsrt_tensor *dw[2], *db[2];
    for (int threads : {1, 2}) {
      omp_set_num_threads(threads);
      dw[threads - 1] = emptyLike(torch::empty({out, in}));
      db[threads - 1] = emptyLike(torch::empty({out}));
      dsrt_linear_grad_weight(ctx, dw[threads - 1], db[threads - 1], rt(tokens), rt(dy));
    }
    EXPECT_TRUE(closeSum(tt(dw[1]), dy.t().mm(tokens))) << in << " -> " << out;
    EXPECT_TRUE(closeSum(tt(db[1]), dy.sum(0))) << in << " -> " << out;
    EXPECT_TRUE(torch::equal(tt(dw[0]), tt(dw[1]))) << in << " -> " << out;
  }
  omp_set_num_threads(saved);
}

// 16-bit products (cpu/gemm_half.cpp: bf16 on oneDNN's bf16 kernels where the CPU has them,
// f16 and the rest widened): the f32 product of the 16-bit values, rounded once, as PyTorch's
// own 16-bit CPU linear and matmul give it (within one 16-bit rounding: the accumulation order
// differs). Shapes large enough for oneDNN's blocked kernels and the batched attention form.
TEST_F(Kernels, Products16Bit) {
  for (auto s : {at::kBFloat16, at::kHalf}) {
    const double ulp = s == at::kBFloat16 ? 1.0 / 128 : 1.0 / 1024;
    auto near = [&](const Tensor &got, const Tensor &want) {
      return close(got.to(at::kFloat), want.to(at::kFloat), ulp, ulp);
    };
    for (auto xs : std::vector<std::vector<int64_t>>{{5, 7}, {4, 96, 64}}) {
      const int64_t K = xs.back(), O = K == 7 ? 9 : 160;
      Tensor x = randn(xs).to(s), w = randn({O, K}).to(s), b = randn({O}).to(s);
      Tensor want = torch::linear(x.to(at::kFloat), w.to(at::kFloat), b.to(at::kFloat)).to(s);
      dsrt_tensor *o = empty(want.sizes(), s);
      dsrt_linear(ctx, o, rt(x), rt(w), rt(b));
      EXPECT_TRUE(near(tt(o), want)) << "linear " << s;
      EXPECT_TRUE(near(tt(o), torch::linear(x, w, b))) << "PyTorch's own 16-bit linear " << s;
      Tensor dy = randn(want.sizes()).to(s);
      Tensor dy2 = dy.reshape({-1, O}).to(at::kFloat), x2 = x.reshape({-1, K}).to(at::kFloat);
      dsrt_tensor *dw = empty({O, K}, s), *db = empty({O}, s);
      dsrt_linear_grad_weight(ctx, dw, db, rt(x), rt(dy));
      EXPECT_TRUE(near(tt(dw), dy2.t().mm(x2).to(s))) << "dw " << s;
      EXPECT_TRUE(near(tt(db), dy2.sum(0).to(s))) << "db " << s;
    }
    // Attention's batched products: q k^T and the weights times v; the second shape has
    // enough heads for one product per thread.
    for (auto qs : std::vector<std::vector<int64_t>>{{2, 4, 33, 16}, {4, 8, 64, 32}}) {
      Tensor q = randn(qs).to(s), k = randn(qs).to(s);
      Tensor scores =
          torch::matmul(q.to(at::kFloat), k.to(at::kFloat).transpose(-1, -2)).to(s);
      dsrt_tensor *o = empty(scores.sizes(), s);
      dsrt_matmul(ctx, o, rt(q), rt(k), 0, 1);
      EXPECT_TRUE(near(tt(o), scores)) << "batched matmul " << s;
      Tensor v = randn(qs).to(s);
      Tensor av = torch::matmul(scores.to(at::kFloat), v.to(at::kFloat)).to(s);
      dsrt_tensor *o2 = empty(av.sizes(), s);
      dsrt_matmul(ctx, o2, rt(scores), rt(v), 0, 0);
      EXPECT_TRUE(near(tt(o2), av)) << "batched matmul " << s;
    }
  }
}

TEST_F(Kernels, EmbeddingAndGrad) {
  for (auto idxType : {at::kLong, at::kInt}) {
    for (int64_t pad : {-1, 3}) {
      Tensor w = randn({10, 6}).requires_grad_();
      Tensor idx = torch::randint(0, 10, {4, 5}, at::kLong);
      idx[0][0] = 3;
      idx[1][1] = 3;
      Tensor y = F::embedding(idx, w,
                              F::EmbeddingFuncOptions().padding_idx(
                                  pad >= 0 ? c10::optional<int64_t>(pad) : c10::nullopt));
      Tensor dy = randn(y.sizes());
      y.backward(dy);
      dsrt_tensor *o = emptyLike(y);
      dsrt_embedding(ctx, o, rt(w), rt(idx.to(idxType)));
      EXPECT_TRUE(close(tt(o), y));
      dsrt_tensor *dw = emptyLike(w);
      dsrt_embedding_grad(ctx, dw, rt(dy), rt(idx.to(idxType)), pad);
      EXPECT_TRUE(close(tt(dw), w.grad())) << "padding " << pad;
    }
  }
  // Large enough to run in parallel.
  Tensor w = randn({1000, 512}).requires_grad_();
  Tensor idx = torch::randint(0, 1000, {16, 128}, at::kLong);
  Tensor y = F::embedding(idx, w);
  Tensor dy = randn(y.sizes());
  y.backward(dy);
  dsrt_tensor *dw = emptyLike(w);
  dsrt_embedding_grad(ctx, dw, rt(dy), rt(idx), -1);
  EXPECT_TRUE(close(tt(dw), w.grad(), 1e-5, 1e-5));
}

// A router's top-k against torch.topk: values and indices, ties by the lower index.
TEST_F(Kernels, TopK) {
  Tensor x = randn({37, 8});
  x[3][5] = x[3][2]; // a tie: PyTorch and ds both give the lower index first here
  for (bool largest : {true, false}) {
    for (int64_t k : {1, 2, 8}) {
      auto [v, i] = torch::topk(x, k, -1, largest);
      dsrt_tensor *dv = empty({37, k}), *di = empty({37, k}, at::kLong);
      dsrt_top_k(ctx, dv, di, rt(x), !largest);
      EXPECT_TRUE(close(tt(dv), v)) << "k " << k << " largest " << largest;
      EXPECT_TRUE(close(tt(di), i)) << "k " << k << " largest " << largest;
    }
  }
  // With k the whole row and the smallest first: torch.sort(stable=True) of expert ids.
  Tensor ids = torch::randint(0, 6, {3, 40}, at::kLong);
  auto [sv, si] = torch::sort(ids, /*stable=*/true, -1, /*descending=*/false);
  dsrt_tensor *dv = empty({3, 40}, at::kLong), *di = empty({3, 40}, at::kLong);
  dsrt_top_k(ctx, dv, di, rt(ids), 1);
  EXPECT_TRUE(close(tt(dv), sv));
  EXPECT_TRUE(close(tt(di), si));
}

// Capacity dropping against DeepSpeed-MoE's top2gating arithmetic written in LibTorch: one-hot
// masks per choice, cumulative sums for the places, the second choices' places after every
// first choice of the expert, kept where the place is below the capacity. One choice, two
// and three (the same queue, choice by choice), i64 and i32 ids, ids no expert takes.
TEST_F(Kernels, ExpertCapacity) {
  const int64_t T = 45, E = 6;
  for (int64_t choices : {1, 2, 3}) {
    for (int64_t capacity : {0, 4, 9, 100}) {
      Tensor ids = torch::randint(0, E, {T, choices}, at::kLong);
      ids[7][0] = -1; // a row no expert takes: copied, takes no place
      ids[11][choices - 1] = E;
      Tensor expected = ids.clone(), before = torch::zeros({1, E}, at::kLong);
      for (int64_t j = 0; j < choices; ++j) {
        Tensor col = ids.select(1, j), valid = col.ge(0).logical_and(col.lt(E));
        Tensor mask = torch::one_hot(col.clamp(0, E - 1), E) * valid.unsqueeze(1).to(at::kLong);
        Tensor place = torch::cumsum(mask, 0) - 1 + before;
        before = before + mask.sum(0, true);
        Tensor kept = (place.lt(capacity).to(at::kLong) * mask).sum(1).gt(0);
        expected.select(1, j).copy_(torch::where(valid.logical_and(kept.logical_not()),
                                                 torch::full_like(col, -1), col));
      }
      for (auto dtype : {at::kLong, at::kInt}) {
        Tensor flat = ids.reshape({-1}).to(dtype);
        dsrt_tensor *got = empty({T * choices}, dtype);
        dsrt_expert_capacity(ctx, got, rt(flat), E, choices, capacity);
        EXPECT_TRUE(torch::equal(tt(got), expected.reshape({-1}).to(dtype)))
            << choices << " choices, capacity " << capacity;
      }
    }
  }
}

// Routed experts against HF's batched_mm arithmetic in PyTorch: each row times its expert's
// gathered weights (bmm), and autograd's gradients; both weight layouts, ids of i64 and i32,
// rows routed outside the experts (zeros over garbage, no gradient), an expert with no rows.
// The ids in token order, and as expert parallelism receives rows (each sender's sorted by
// expert: runs of 16 rows and more multiplied where they lie, shorter ones gathered, expert
// 0's rows in a run and a gathered group whose gradients add, -1 past the rows received).
TEST_F(Kernels, ExpertLinearAndGrad) {
  const int64_t N = 50, E = 5, in = 24, out = 40;
  Tensor tokenOrder = torch::randint(0, E - 1, {N}, at::kLong); // expert E-1 gets no rows
  tokenOrder[7] = -1;
  tokenOrder[11] = E; // another rank's experts
  auto run = [](int64_t id, int64_t n) { return torch::full({n}, id, at::kLong); };
  Tensor received = torch::cat({run(0, 17), run(1, 3), run(3, 16), run(0, 5), run(-1, 9)});
  for (const Tensor &ids : {tokenOrder, received}) {
    for (bool transposed : {false, true}) {
      for (auto idxType : {at::kLong, at::kInt}) {
        Tensor w = randn(transposed ? at::IntArrayRef{E, in, out} : at::IntArrayRef{E, out, in})
                       .requires_grad_();
        Tensor x = randn({N, in}).requires_grad_();
        Tensor valid = (ids >= 0) & (ids < E);
        Tensor rows = w.index({ids.clamp(0, E - 1)});
        Tensor y = transposed ? torch::bmm(x.unsqueeze(1), rows).squeeze(1)
                              : torch::bmm(rows, x.unsqueeze(-1)).squeeze(-1);
        y = y * valid.unsqueeze(-1).to(at::kFloat);
        Tensor dy = randn(y.sizes());
        y.backward(dy);
        dsrt_tensor *o = emptyLike(y);
        dsrt_expert_linear(ctx, o, rt(x), rt(w), rt(ids.to(idxType)), transposed);
        EXPECT_TRUE(closeSum(tt(o), y)) << "transposed " << transposed;
        // Unrouted rows undefined: the routed rows the same, those of negative id as they
        // were, those past the experts still zeros (ds.swiglu reads them).
        dsrt_tensor *ou = rt(torch::full(y.sizes(), 7.f));
        dsrt_expert_linear(ctx, ou, rt(x), rt(w), rt(ids.to(idxType)),
                           transposed | DSRT_EXPERT_UNROUTED_UNDEFINED);
        EXPECT_TRUE(torch::equal(tt(ou).index({valid}), tt(o).index({valid})));
        EXPECT_TRUE(torch::all(tt(ou).index({ids < 0}) == 7.f).item<bool>());
        EXPECT_TRUE(torch::all(tt(ou).index({ids >= E}) == 0.f).item<bool>());
        // dx: the same kernel with the weight's other orientation.
        dsrt_tensor *dx = emptyLike(x);
        dsrt_expert_linear(ctx, dx, rt(dy), rt(w), rt(ids.to(idxType)), !transposed);
        EXPECT_TRUE(closeSum(tt(dx), x.grad())) << "transposed " << transposed;
        dsrt_tensor *dw = emptyLike(w);
        dsrt_expert_linear_grad_weight(ctx, dw, rt(x), rt(dy), rt(ids.to(idxType)), transposed);
        EXPECT_TRUE(closeSum(tt(dw), w.grad())) << "transposed " << transposed;
      }
    }
  }
}

// SwiGLU of a gate-and-up tensor and its gradient against LibTorch's silu and autograd: 37
// pairs a row (vector tails), gates out to +-100 (the sigmoid's saturated ends), rows
// enough to run in parallel; with row ids, the rows of negative id hold NaN and must come out
// zeros (not read); without, a 3-D input.
TEST_F(Kernels, SwigluAndGrad) {
  const int64_t R = 2000, F = 37;
  Tensor ids = torch::randint(0, 4, {R}, at::kLong);
  ids.index_put_({torch::arange(1500, R)}, -1); // padding past the received rows
  ids[7] = -1;                                  // a row routed to no expert
  Tensor x = randn({R, 2 * F}) * 4;
  x.index_put_({3, torch::arange(0, 4)}, torch::tensor({-100.f, 100.f, -90.f, 90.f}));
  Tensor dead = ids < 0;
  for (auto idxType : {at::kLong, at::kInt}) {
    Tensor xi = x.clone();
    xi.index_put_({dead}, std::numeric_limits<float>::quiet_NaN());
    Tensor xl = x.clone().requires_grad_();
    Tensor live = (~dead).unsqueeze(-1).to(at::kFloat);
    Tensor y = torch::silu(xl.narrow(1, 0, F)) * xl.narrow(1, F, F) * live;
    Tensor dy = randn({R, F});
    y.backward(dy);
    dsrt_tensor *o = emptyLike(y), *dx = emptyLike(x), *rows = rt(ids.to(idxType));
    dsrt_swiglu(ctx, o, rt(xi), rows, 0);
    EXPECT_TRUE(closeSum(tt(o), y)) << "ids " << idxType;
    dsrt_swiglu_grad(ctx, dx, rt(xi), rt(dy), rows, 0);
    EXPECT_TRUE(closeSum(tt(dx), xl.grad())) << "ids " << idxType;
    // Unrouted rows undefined: the live rows the same, the others as they were (a marker).
    Tensor marker = torch::full({R, 2 * F}, 7.f);
    dsrt_tensor *ou = rt(marker.narrow(1, 0, F)), *dxu = rt(marker);
    dsrt_swiglu(ctx, ou, rt(xi), rows, DSRT_EXPERT_UNROUTED_UNDEFINED);
    dsrt_swiglu_grad(ctx, dxu, rt(xi), rt(dy), rows, DSRT_EXPERT_UNROUTED_UNDEFINED);
    EXPECT_TRUE(torch::equal(tt(ou).index({~dead}), tt(o).index({~dead})));
    EXPECT_TRUE(torch::equal(tt(dxu).index({~dead}), tt(dx).index({~dead})));
    EXPECT_TRUE(torch::all(tt(ou).index({dead}) == 7.f).item<bool>());
    EXPECT_TRUE(torch::all(tt(dxu).index({dead}) == 7.f).item<bool>());
  }
  Tensor x3 = (randn({3, 5, 2 * F}) * 4).requires_grad_();
  Tensor y3 = torch::silu(x3.narrow(2, 0, F)) * x3.narrow(2, F, F);
  Tensor dy3 = randn(y3.sizes());
  y3.backward(dy3);
  dsrt_tensor *o3 = emptyLike(y3), *dx3 = emptyLike(x3);
  dsrt_swiglu(ctx, o3, rt(x3), nullptr, 0);
  EXPECT_TRUE(closeSum(tt(o3), y3));
  dsrt_swiglu_grad(ctx, dx3, rt(x3), rt(dy3), nullptr, 0);
  EXPECT_TRUE(closeSum(tt(dx3), x3.grad()));
  // The refusals, each naming what disagrees.
  dsrt_tensor *odd = rt(randn({6, 7})), *half = empty({6, 3}), *x8 = rt(randn({6, 8})),
              *y4 = empty({6, 4}), *five = rt(torch::zeros({5}, at::kLong));
  EXPECT_DEATH(dsrt_swiglu(ctx, half, odd, nullptr, 0),
               "dsrt: swiglu: x 6x7 is not the gate and up halves of out 6x3");
  EXPECT_DEATH(dsrt_swiglu(ctx, y4, x8, five, 0),
               "dsrt: swiglu: rows 5 for x 6x8, expected .R. for x .R, 2F.");
}

// Tables of data (an attention mask's rows, token types): 64-bit, 32-bit and boolean elements
// gathered whole, against LibTorch's index_select.
TEST_F(Kernels, EmbeddingOfData) {
  Tensor idx = torch::randint(0, 7, {3, 4}, at::kLong);
  for (auto dt : {at::kLong, at::kInt, at::kBool}) {
    Tensor w = dt == at::kBool ? torch::randint(0, 2, {7, 5}, at::kLong).to(dt)
                               : torch::randint(-(int64_t(1) << 40), int64_t(1) << 40, {7, 5},
                                                at::kLong)
                                     .to(dt);
    Tensor y = w.index_select(0, idx.flatten()).view({3, 4, 5});
    dsrt_tensor *o = emptyLike(y);
    dsrt_embedding(ctx, o, rt(w), rt(idx));
    EXPECT_TRUE(tt(o).equal(y)) << "dtype " << dt;
  }
}

TEST_F(Kernels, CrossEntropyAndGrad) {
  struct Case {
    std::vector<int64_t> logits;
    int64_t ignore;
    double ls;
  } cases[] = {{{6, 5}, -100, 0.0},       {{6, 5}, 2, 0.0},   {{6, 5}, -100, 0.1},
               {{6, 5}, 2, 0.25},         {{5}, -100, 0.0},   {{5}, -100, 0.2},
               {{2048, 1000}, -100, 0.0}, {{300, 50}, 7, 0.1}};
  const char *names[] = {"none", "mean", "sum"};
  for (auto &c : cases) {
    for (int red = DSRT_REDUCTION_NONE; red <= DSRT_REDUCTION_SUM; ++red) {
      for (auto tType : {at::kLong, at::kInt}) {
        int64_t C = c.logits.back();
        Tensor x = (randn(c.logits) * 3).requires_grad_();
        Tensor t = c.logits.size() == 2 ? torch::randint(0, C, {c.logits[0]}, at::kLong)
                                        : torch::randint(0, C, {}, at::kLong);
        if (c.ignore >= 0 && t.dim() == 1) {
          t[0] = c.ignore;
          t[3] = c.ignore;
        }
        at::Reduction::Reduction r = red == DSRT_REDUCTION_NONE   ? at::Reduction::None
                                     : red == DSRT_REDUCTION_MEAN ? at::Reduction::Mean
                                                                  : at::Reduction::Sum;
        Tensor loss = at::cross_entropy_loss(x, t, {}, r, c.ignore, c.ls);
        Tensor dy = red == DSRT_REDUCTION_NONE ? randn(loss.sizes()) : randn({});
        loss.backward(dy);
        dsrt_tensor *o = emptyLike(loss);
        dsrt_cross_entropy(ctx, o, rt(x), rt(t.to(tType)), c.ignore, red, c.ls);
        EXPECT_TRUE(close(tt(o), loss, 1e-5, 1e-5))
            << names[red] << " " << x.sizes() << " ls " << c.ls << " ignore " << c.ignore;
        dsrt_tensor *dx = emptyLike(x);
        dsrt_cross_entropy_grad(ctx, dx, rt(x), rt(t.to(tType)), rt(dy), c.ignore, red, c.ls);
        EXPECT_TRUE(close(tt(dx), x.grad(), 1e-5, 1e-6))
            << "grad " << names[red] << " " << x.sizes() << " ls " << c.ls;
      }
    }
  }
}

// Rows whose spread leaves exp's polynomial range take libm (expRow's fallback), also where
// dlogits is the logits' own buffer.
TEST_F(Kernels, CrossEntropyGradWideRowsInPlace) {
  Tensor x = randn({64, 300}) * 3;
  for (int64_t r = 0; r < 64; r += 2)
    x[r].narrow(0, 0, 10).fill_(-300.0);
  x.requires_grad_();
  Tensor t = torch::randint(0, 300, {64}, at::kLong);
  Tensor loss = at::cross_entropy_loss(x, t, {}, at::Reduction::Mean, -100, 0.1);
  Tensor dy = torch::full({}, 0.7);
  loss.backward(dy);
  dsrt_tensor *dx = emptyLike(x), *xin = rt(x.detach());
  dsrt_cross_entropy_grad(ctx, dx, xin, rt(t), rt(dy), -100, DSRT_REDUCTION_MEAN, 0.1);
  EXPECT_TRUE(close(tt(dx), x.grad(), 1e-5, 1e-6));
  dsrt_cross_entropy_grad(ctx, xin, xin, rt(t), rt(dy), -100, DSRT_REDUCTION_MEAN, 0.1);
  EXPECT_TRUE(close(tt(xin), x.grad(), 1e-5, 1e-6)) << "in place";
}

//===----------------------------------------------------------------------===//
// Data movement, conversions, dropout
//===----------------------------------------------------------------------===//

TEST_F(Kernels, FillCopyConvert) {
  at::ScalarType types[] = {at::kFloat, at::kDouble, at::kLong, at::kInt, at::kBool};
  for (auto s : types) {
    dsrt_tensor *o = empty({3, 5}, s);
    dsrt_fill(ctx, o, 2.75);
    EXPECT_TRUE(close(tt(o), torch::full({3, 5}, 2.75).to(s)));
    Tensor x = (randn({4, 6}) * 5).to(s);
    dsrt_tensor *c = empty({24}, s);
    dsrt_copy(ctx, c, rt(x));
    EXPECT_TRUE(close(tt(c), x.reshape({24})));
    for (auto d : types) {
      Tensor src = (randn({7, 3}) * 4).to(s);
      dsrt_tensor *cv = empty({7, 3}, d);
      dsrt_convert(ctx, cv, rt(src));
      EXPECT_TRUE(close(tt(cv), src.to(d))) << s << " -> " << d;
    }
  }
}

TEST_F(Kernels, TransposeBroadcastSlice) {
  at::ScalarType types[] = {at::kFloat, at::kDouble, at::kLong, at::kInt, at::kBool};
  for (auto s : types) {
    Tensor x = (randn({2, 3, 4, 5}) * 5).to(s);
    for (std::vector<int64_t> perm : {std::vector<int64_t>{0, 1, 3, 2},
                                      {3, 2, 1, 0},
                                      {0, 2, 1, 3},
                                      {1, 0, 2, 3},
                                      {0, 1, 2, 3},
                                      {2, 0, 3, 1}}) {
      Tensor want = x.permute(perm).contiguous();
      dsrt_tensor *o = emptyLike(want);
      dsrt_transpose(ctx, o, rt(x), perm.data());
      EXPECT_TRUE(close(tt(o), want)) << "perm " << at::IntArrayRef(perm);
    }
    Tensor big = (randn({64, 300}) * 5).to(s);
    int64_t p2[] = {1, 0};
    dsrt_tensor *ob = empty({300, 64}, s);
    dsrt_transpose(ctx, ob, rt(big), p2);
    EXPECT_TRUE(close(tt(ob), big.t().contiguous()));

    for (const auto &sp : std::vector<ShapePair>{{{3, 1}, {2, 3, 4}},
                                                 {{}, {5, 2}},
                                                 {{4}, {3, 4}},
                                                 {{2, 1, 3}, {2, 5, 3}},
                                                 {{1, 1}, {1, 1}}}) {
      Tensor in = (randn(sp.a) * 5).to(s);
      dsrt_tensor *o = empty(sp.b, s);
      dsrt_broadcast(ctx, o, rt(in));
      EXPECT_TRUE(close(tt(o), in.expand(sp.b).contiguous()));
    }

    for (int64_t dim = 0; dim < 4; ++dim) {
      for (auto [start, step] :
           std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {1, 1}, {1, 2}, {0, 3}}) {
        int64_t len = x.size(dim);
        if (start >= len)
          continue;
        Tensor want = x.slice(dim, start, len, step).contiguous();
        dsrt_tensor *o = emptyLike(want);
        dsrt_slice(ctx, o, rt(x), dim, start, step);
        EXPECT_TRUE(close(tt(o), want)) << "dim " << dim << " start " << start << " step " << step;
        // insert_slice writes it back into a copy of a different base.
        Tensor base = (randn(x.sizes()) * 5).to(s);
        Tensor expected = base.clone();
        expected.slice(dim, start, len, step).copy_(want);
        dsrt_tensor *ob2 = rt(base);
        dsrt_insert_slice(ctx, ob2, rt(want), dim, start, step);
        EXPECT_TRUE(close(tt(ob2), expected));
      }
    }
  }
  // Slices of a large last dim, as in attention's q/k/v split.
  Tensor qkv = randn({16, 128, 1536});
  for (int64_t i = 0; i < 3; ++i) {
    Tensor want = qkv.slice(2, i * 512, (i + 1) * 512).contiguous();
    dsrt_tensor *o = emptyLike(want);
    dsrt_slice(ctx, o, rt(qkv), 2, i * 512, 1);
    EXPECT_TRUE(close(tt(o), want));
  }
}

TEST_F(Kernels, DropoutMask) {
  for (double p : {0.0, 0.1, 0.5}) {
    dsrt_tensor *m = empty({200, 500});
    dsrt_dropout_mask(ctx, m, p);
    Tensor t = tt(m);
    float keep = 1.f / (1.f - (float)p);
    Tensor zero = t == 0, kept = t == keep;
    EXPECT_TRUE((zero | kept).all().item<bool>());
    double frac = zero.to(at::kDouble).mean().item<double>();
    EXPECT_NEAR(frac, p, 0.01) << "p " << p;
    EXPECT_NEAR(t.to(at::kDouble).mean().item<double>(), 1.0, 0.02);
  }
  // Same seed, same masks.
  dsrt_context *a = dsrt_context_create(0, 1, 7), *b = dsrt_context_create(0, 1, 7);
  int64_t d[] = {1000};
  dsrt_tensor *ma = dsrt_tensor_alloc(a, DSRT_F32, 1, d),
              *mb = dsrt_tensor_alloc(b, DSRT_F32, 1, d);
  dsrt_dropout_mask(a, ma, 0.3);
  dsrt_dropout_mask(b, mb, 0.3);
  EXPECT_EQ(std::memcmp(ma->data, mb->data, 4000), 0);
  dsrt_dropout_mask(a, ma, 0.3);
  EXPECT_NE(std::memcmp(ma->data, mb->data, 4000), 0);
  dsrt_tensor_free(a, ma);
  dsrt_tensor_free(b, mb);
  dsrt_context_destroy(a);
  dsrt_context_destroy(b);
}

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

TEST_F(Kernels, Conv2dAndGrads) {
  struct Case {
    std::vector<int64_t> x, w;
    int64_t sh, sw, ph, pw, dh, dw, g;
    bool bias;
  } cases[] = {
      {{2, 3, 8, 8}, {4, 3, 3, 3}, 1, 1, 1, 1, 1, 1, 1, true},
      {{2, 4, 9, 7}, {6, 2, 3, 2}, 2, 1, 1, 0, 1, 2, 2, false},
      {{1, 6, 10, 10}, {6, 1, 3, 3}, 1, 2, 2, 1, 2, 1, 6, true},
      {{3, 3, 11, 11}, {8, 3, 5, 5}, 3, 3, 2, 2, 1, 1, 1, true},
      {{2, 8, 7, 9}, {4, 8, 1, 1}, 2, 2, 0, 0, 1, 1, 1, false},
      {{3, 5, 6}, {2, 3, 3, 3}, 1, 1, 1, 1, 1, 1, 1, true},
      {{8, 64, 16, 16}, {128, 64, 3, 3}, 2, 2, 1, 1, 1, 1, 1, false},
  };
  for (auto &c : cases) {
    Tensor x = randn(c.x).requires_grad_(), w = randn(c.w).requires_grad_(),
           b = randn({c.w[0]}).requires_grad_();
    Tensor y =
        torch::conv2d(x, w, c.bias ? b : Tensor(), {c.sh, c.sw}, {c.ph, c.pw}, {c.dh, c.dw}, c.g);
    Tensor dy = randn(y.sizes());
    y.backward(dy);
    dsrt_tensor *o = emptyLike(y);
    dsrt_conv2d(ctx, o, rt(x), rt(w), c.bias ? rt(b) : nullptr, c.sh, c.sw, c.ph, c.pw, c.dh, c.dw,
                c.g);
    EXPECT_TRUE(closeSum(tt(o), y)) << x.sizes() << " " << w.sizes();
    dsrt_tensor *dx = emptyLike(x);
    dsrt_conv2d_grad_input(ctx, dx, rt(dy), rt(w), c.sh, c.sw, c.ph, c.pw, c.dh, c.dw, c.g);
    EXPECT_TRUE(closeSum(tt(dx), x.grad())) << "dx " << x.sizes() << " " << w.sizes();
    dsrt_tensor *dw = emptyLike(w), *db = c.bias ? emptyLike(b) : nullptr;
    dsrt_conv2d_grad_weight(ctx, dw, db, rt(x), rt(dy), c.sh, c.sw, c.ph, c.pw, c.dh, c.dw, c.g);
    EXPECT_TRUE(closeSum(tt(dw), w.grad())) << "dw " << x.sizes() << " " << w.sizes();
    if (c.bias)
      EXPECT_TRUE(closeSum(tt(db), b.grad())) << "db " << x.sizes();
  }
}

TEST_F(Kernels, MaxPool2dAndGrad) {
  struct Case {
    std::vector<int64_t> x;
    int64_t kh, kw, sh, sw, ph, pw, dh, dw;
    bool ceil;
  } cases[] = {
      {{2, 3, 8, 8}, 2, 2, 2, 2, 0, 0, 1, 1, false},
      {{2, 3, 9, 7}, 3, 3, 2, 2, 1, 1, 1, 1, false},
      {{1, 2, 10, 11}, 3, 2, 2, 3, 1, 1, 2, 1, false},
      {{2, 3, 9, 7}, 3, 3, 2, 2, 1, 0, 1, 1, true},
      {{3, 6, 6}, 2, 2, 1, 1, 0, 0, 1, 1, false},
      {{4, 64, 32, 32}, 3, 3, 2, 2, 1, 1, 1, 1, false},
      // The vectorized paths: 2x2 windows tiling the plane (an odd row and column left over),
      // rows of more than 256 outputs, 3x3 stride 2 unpadded, overlapping 2x2, clipped ceil.
      {{2, 3, 9, 7}, 2, 2, 2, 2, 0, 0, 1, 1, false},
      {{1, 2, 4, 600}, 2, 2, 2, 2, 0, 0, 1, 1, false},
      {{2, 3, 11, 13}, 3, 3, 2, 2, 0, 0, 1, 1, false},
      {{2, 3, 9, 7}, 2, 2, 1, 1, 0, 0, 1, 1, false},
      {{2, 3, 9, 7}, 2, 2, 2, 2, 0, 0, 1, 1, true},
  };
  for (auto &c : cases) {
    // Rounded values make ties, which must route to the first maximum.
    Tensor x = torch::round(randn(c.x) * 2).requires_grad_();
    if (c.kh == 2 && c.kw == 2 && !c.ph && !c.ceil) { // NaN wins its window, as in ATen
      torch::NoGradGuard g;
      x.view({-1})[5] = NAN;
    }
    Tensor y = torch::max_pool2d(x, {c.kh, c.kw}, {c.sh, c.sw}, {c.ph, c.pw}, {c.dh, c.dw}, c.ceil);
    Tensor dy = randn(y.sizes());
    y.backward(dy);
    dsrt_tensor *o = emptyLike(y);
    dsrt_max_pool2d(ctx, o, rt(x), c.kh, c.kw, c.sh, c.sw, c.ph, c.pw, c.dh, c.dw);
    EXPECT_TRUE(close(tt(o), y)) << x.sizes();
    dsrt_tensor *dx = emptyLike(x);
    dsrt_max_pool2d_grad(ctx, dx, rt(x), rt(dy), c.kh, c.kw, c.sh, c.sw, c.ph, c.pw, c.dh, c.dw);
    EXPECT_TRUE(close(tt(dx), x.grad())) << "grad " << x.sizes() << " k " << c.kh << " s " << c.sh;
  }
}

TEST_F(Kernels, AvgPool2dAndGrad) {
  struct Case {
    std::vector<int64_t> x;
    int64_t kh, kw, sh, sw, ph, pw;
    bool ceil;
  } cases[] = {
      {{2, 3, 8, 8}, 2, 2, 2, 2, 0, 0, false},   {{2, 3, 9, 7}, 3, 3, 2, 2, 1, 1, false},
      {{1, 2, 10, 11}, 3, 2, 2, 3, 1, 1, false}, {{2, 3, 9, 7}, 3, 3, 2, 2, 1, 0, true},
      {{3, 7, 6}, 4, 3, 3, 2, 2, 1, true},       {{4, 32, 16, 16}, 3, 3, 1, 1, 1, 1, false},
  };
  for (auto &c : cases) {
    for (bool include : {true, false}) {
      Tensor x = randn(c.x).requires_grad_();
      Tensor y = torch::avg_pool2d(x, {c.kh, c.kw}, {c.sh, c.sw}, {c.ph, c.pw}, c.ceil, include);
      Tensor dy = randn(y.sizes());
      y.backward(dy);
      dsrt_tensor *o = emptyLike(y);
      dsrt_avg_pool2d(ctx, o, rt(x), c.kh, c.kw, c.sh, c.sw, c.ph, c.pw, include);
      EXPECT_TRUE(close(tt(o), y)) << x.sizes() << " include_pad " << include;
      dsrt_tensor *dx = emptyLike(x);
      dsrt_avg_pool2d_grad(ctx, dx, rt(dy), c.kh, c.kw, c.sh, c.sw, c.ph, c.pw, include);
      EXPECT_TRUE(close(tt(dx), x.grad())) << "grad " << x.sizes() << " include_pad " << include;
    }
  }
}

TEST_F(Kernels, AdaptiveAvgPool2dAndGrad) {
  struct Case {
    std::vector<int64_t> x, out;
  } cases[] = {{{2, 3, 7, 10}, {1, 1}},
               {{2, 3, 7, 10}, {3, 5}},
               {{2, 3, 7, 10}, {4, 3}},
               {{3, 5, 5}, {7, 6}},
               {{8, 512, 4, 4}, {1, 1}}};
  for (auto &c : cases) {
    Tensor x = randn(c.x).requires_grad_();
    Tensor y = torch::adaptive_avg_pool2d(x, c.out);
    Tensor dy = randn(y.sizes());
    y.backward(dy);
    dsrt_tensor *o = emptyLike(y);
    dsrt_adaptive_avg_pool2d(ctx, o, rt(x));
    EXPECT_TRUE(close(tt(o), y)) << x.sizes() << " -> " << at::IntArrayRef(c.out);
    dsrt_tensor *dx = emptyLike(x);
    dsrt_adaptive_avg_pool2d_grad(ctx, dx, rt(dy));
    EXPECT_TRUE(close(tt(dx), x.grad())) << "grad " << x.sizes();
  }
}

} // namespace

/// Idle OpenMP threads (LibTorch's and dsrt's share libgomp) must sleep, not spin: on a small,
/// shared machine spinning makes this suite several times slower. OpenMP reads the policy only
/// at start-up, so re-execute once with it set (as the ds driver does).
int main(int argc, char **argv) {
  if (!std::getenv("OMP_WAIT_POLICY")) {
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    execv("/proc/self/exe", argv);
  }
  // The oracle computes without its bundled oneDNN (see CMakeLists.txt): one oneDNN per process.
  at::globalContext().setUserEnabledMkldnn(false);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

