// Device conformance: every kernel, copy, event and arena rule of a device against the CPU
// backend (itself checked against LibTorch by KernelsTest.cpp). Parameterized over the devices
// other than the CPU that this runtime was built with. Exits 77 (ctest's skip) only where no
// GPU is present, saying so; a device that cannot start for any other reason (its plugin not
// built, a library missing) fails, as does a skip inside a case. Needs only dsrt
// and GoogleTest: it is what the GPU machine runs (bench/gpu/check.sh).
#include "dsrt/dsrt.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

/// The devices under test: DSRT_CONFORMANCE_DEVICES (comma-separated) or "cuda".
std::vector<std::string> devices() {
  const char *env = std::getenv("DSRT_CONFORMANCE_DEVICES");
  std::string list = env && *env ? env : "cuda";
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= list.size()) {
    size_t comma = list.find(',', at);
    if (comma == std::string::npos)
      comma = list.size();
    if (comma > at)
      out.push_back(list.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

/// One tensor on both contexts: [0] the CPU reference's, [1] the device's.
struct Both {
  dsrt_tensor *t[2] = {nullptr, nullptr};
  dsrt_tensor *operator[](int side) const { return t[side]; }
};

class Conformance : public ::testing::TestWithParam<std::string> {
protected:
  void SetUp() override {
    char why[512] = {0};
    ctx[1] = dsrt_context_create_on(GetParam().c_str(), 0, 2, 42, why, sizeof why);
    if (!ctx[1])
      GTEST_SKIP() << why;
    ctx[0] = dsrt_context_create(0, 2, 42);
  }
  void TearDown() override {
    for (Both &b : owned)
      for (int s = 0; s < 2; ++s)
        if (b.t[s])
          dsrt_tensor_free(ctx[s], b.t[s]);
    for (int s = 0; s < 2; ++s)
      if (ctx[s]) {
        EXPECT_EQ(dsrt_device_bytes(ctx[s]), 0u) << "tensors leaked on side " << s;
        dsrt_context_destroy(ctx[s]);
      }
  }

  /// A tensor with `host`'s bytes on both sides.
  Both put(int32_t dtype, std::vector<int64_t> dims, const void *host) {
    Both b;
    for (int s = 0; s < 2; ++s) {
      b.t[s] = dsrt_tensor_alloc(ctx[s], dtype, (int32_t)dims.size(), dims.data());
      dsrt_tensor_from_host(ctx[s], b.t[s], host);
    }
    owned.push_back(b);
    return b;
  }
  Both randn(std::vector<int64_t> dims, double scale = 1.0) {
    std::vector<float> v(numel(dims));
    std::normal_distribution<float> d(0.f, (float)scale);
    for (float &x : v)
      x = d(gen);
    return put(DSRT_F32, dims, v.data());
  }
  Both positive(std::vector<int64_t> dims) {
    std::vector<float> v(numel(dims));
    std::uniform_real_distribution<float> d(0.1f, 2.f);
    for (float &x : v)
      x = d(gen);
    return put(DSRT_F32, dims, v.data());
  }
  Both indices(std::vector<int64_t> dims, int64_t hi, int32_t dtype = DSRT_I64) {
    std::vector<int64_t> v(numel(dims));
    std::uniform_int_distribution<int64_t> d(0, hi - 1);
    for (int64_t &x : v)
      x = d(gen);
    if (dtype == DSRT_I32) {
      std::vector<int32_t> w(v.begin(), v.end());
      return put(dtype, dims, w.data());
    }
    return put(dtype, dims, v.data());
  }
  Both scalarF32(float v) { return put(DSRT_F32, {}, &v); }
  Both scalarF64(double v) { return put(DSRT_F64, {}, &v); }
  /// An output on both sides, filled with NaN (floats) or 0x5a bytes, so that an element a
  /// kernel forgets shows.
  Both out(std::vector<int64_t> dims, int32_t dtype = DSRT_F32) {
    size_t bytes = numel(dims) * dsrt_dtype_size(dtype);
    std::vector<unsigned char> poison(bytes, 0x5a);
    if (dtype == DSRT_F32)
      for (size_t i = 0; i < bytes / 4; ++i)
        std::memcpy(&poison[i * 4], &kNan, 4);
    return put(dtype, dims, poison.data());
  }
  /// `b` converted to `dtype` (a 16-bit copy of f32 values), on both sides.
  Both as(const Both &b, int32_t dtype) {
    Both c = out(std::vector<int64_t>(b[0]->dims, b[0]->dims + b[0]->rank), dtype);
    run([&](dsrt_context *x, int s) { dsrt_convert(x, c[s], b[s]); });
    return c;
  }
  /// The largest magnitude of the reference side of an f32 tensor.
  double largest(const Both &b) {
    auto r = host(ctx[0], b[0]);
    double big = 0;
    for (int64_t i = 0; i < b[0]->numel; ++i)
      big = std::max(big, std::fabs(value(r, DSRT_F32, i)));
    return big;
  }
  /// Runs f on the reference side (0), then on the device (1).
  void run(const std::function<void(dsrt_context *, int)> &f) {
    for (int s = 0; s < 2; ++s)
      f(ctx[s], s);
  }

  static std::vector<unsigned char> host(dsrt_context *c, const dsrt_tensor *t) {
    std::vector<unsigned char> h(t->numel * dsrt_dtype_size(t->dtype));
    dsrt_tensor_to_host(c, h.data(), t);
    return h;
  }
  static double value(const std::vector<unsigned char> &h, int32_t dtype, int64_t i) {
    switch (dtype) {
    case DSRT_F32: {
      float v;
      std::memcpy(&v, &h[i * 4], 4);
      return v;
    }
    case DSRT_F64: {
      double v;
      std::memcpy(&v, &h[i * 8], 8);
      return v;
    }
    case DSRT_I64: {
      int64_t v;
      std::memcpy(&v, &h[i * 8], 8);
      return (double)v;
    }
    case DSRT_I32: {
      int32_t v;
      std::memcpy(&v, &h[i * 4], 4);
      return v;
    }
    case DSRT_I1:
      return h[i];
    default: { // bf16, f16: compared as bits
      uint16_t v;
      std::memcpy(&v, &h[i * 2], 2);
      return v;
    }
    }
  }

  /// The device's result against the reference's: |d - r| <= atol + rtol |r| (NaN == NaN);
  /// integers and 16-bit bits exactly. `scaled`: the tolerance grows with the largest
  /// magnitude (sums whose order differs).
  ::testing::AssertionResult same(const Both &b, double rtol = 1e-5, double atol = 1e-6,
                                  bool scaled = false) {
    auto r = host(ctx[0], b[0]), d = host(ctx[1], b[1]);
    int32_t dt = b[0]->dtype;
    bool exact = !(dt == DSRT_F32 || dt == DSRT_F64);
    double big = 0;
    for (int64_t i = 0; scaled && i < b[0]->numel; ++i)
      big = std::max(big, std::fabs(value(r, dt, i)));
    if (scaled)
      atol += 2e-6 * big;
    int64_t bad = 0, worst = -1;
    double worstExcess = 0;
    for (int64_t i = 0; i < b[0]->numel; ++i) {
      double x = value(r, dt, i), y = value(d, dt, i);
      if ((std::isnan(x) && std::isnan(y)) || x == y) // equal infinities too (an lse of -inf)
        continue;
      double excess = exact ? (x == y ? 0 : 1) : std::fabs(x - y) - (atol + rtol * std::fabs(x));
      if (std::isnan(excess) || excess > 0) {
        ++bad;
        if (worst < 0 || !(excess <= worstExcess)) {
          worst = i;
          worstExcess = excess;
        }
      }
    }
    if (!bad)
      return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << bad << " of " << b[0]->numel << " elements differ; worst at " << worst
           << ": cpu " << value(r, dt, worst) << ", " << GetParam() << " "
           << value(d, dt, worst);
  }
  static int64_t numel(const std::vector<int64_t> &dims) {
    int64_t n = 1;
    for (int64_t d : dims)
      n *= d;
    return n;
  }

  static constexpr float kNan = NAN;
  dsrt_context *ctx[2] = {nullptr, nullptr};
  std::vector<Both> owned;
  std::mt19937 gen{1234};
};

TEST_P(Conformance, FillCopyConvert) {
  Both f = out({3, 5}), i = out({7}, DSRT_I64), h = out({4, 4}, DSRT_BF16), b = out({9}, DSRT_I1);
  run([&](dsrt_context *c, int s) {
    dsrt_fill(c, f[s], -2.5);
    dsrt_fill(c, i[s], 7);
    dsrt_fill(c, h[s], 1.0 / 3);
    dsrt_fill(c, b[s], 1);
  });
  EXPECT_TRUE(same(f));
  EXPECT_TRUE(same(i));
  EXPECT_TRUE(same(h));
  EXPECT_TRUE(same(b));
  Both x = randn({6, 7}, 100.0), cp = out({42});
  run([&](dsrt_context *c, int s) { dsrt_copy(c, cp[s], x[s]); });
  EXPECT_TRUE(same(cp, 0, 0));
  // Every conversion among f32, f64, i64, i32, i1, bf16, f16 from the same values.
  const int32_t types[] = {DSRT_F32, DSRT_F64, DSRT_I64, DSRT_I32, DSRT_I1, DSRT_BF16, DSRT_F16};
  for (int32_t from : types) {
    Both src = out({6, 7}, from);
    run([&](dsrt_context *c, int s) { dsrt_convert(c, src[s], x[s]); });
    for (int32_t to : types) {
      Both dst = out({6, 7}, to);
      run([&](dsrt_context *c, int s) { dsrt_convert(c, dst[s], src[s]); });
      EXPECT_TRUE(same(dst, 0, 0)) << "convert " << from << " -> " << to;
    }
  }
}

TEST_P(Conformance, Unary) {
  Both x = randn({5, 130}, 2.0), p = positive({5, 130});
  for (int op = DSRT_NEG; op <= DSRT_SIN; ++op) {
    bool needsPositive = op == DSRT_LOG || op == DSRT_SQRT || op == DSRT_RSQRT;
    Both y = out({5, 130});
    run([&](dsrt_context *c, int s) { dsrt_unary(c, op, y[s], needsPositive ? p[s] : x[s]); });
    EXPECT_TRUE(same(y, 2e-6, 1e-6)) << "unary op " << op;
  }
  std::vector<int64_t> iv = {-3, 0, 5, -7, 2, 9};
  Both ix = put(DSRT_I64, {6}, iv.data());
  for (int op : {DSRT_NEG, DSRT_RELU}) {
    Both y = out({6}, DSRT_I64);
    run([&](dsrt_context *c, int s) { dsrt_unary(c, op, y[s], ix[s]); });
    EXPECT_TRUE(same(y)) << "integer unary op " << op;
  }
}

TEST_P(Conformance, BinaryBroadcastCmpWhere) {
  Both a = randn({4, 1, 6}), b = positive({3, 1}), full = randn({4, 3, 6});
  for (int op = DSRT_ADD; op <= DSRT_GELU_TANH_GRAD; ++op) {
    Both y = out({4, 3, 6});
    run([&](dsrt_context *c, int s) { dsrt_binary(c, op, y[s], op == DSRT_POW ? b[s] : a[s], op == DSRT_POW ? a[s] : b[s]); });
    EXPECT_TRUE(same(y, 2e-6, 1e-6)) << "binary op " << op;
    Both z = out({4, 3, 6});
    run([&](dsrt_context *c, int s) { dsrt_binary(c, op, z[s], full[s], full[s]); });
    EXPECT_TRUE(same(z, 2e-6, 1e-6)) << "binary op " << op << " (same shapes)";
    if (op == DSRT_POW)
      continue;
    // In place (the compiler writes over an operand that dies there): out is the full lhs.
    Both w = randn({4, 3, 6});
    run([&](dsrt_context *c, int s) { dsrt_binary(c, op, w[s], w[s], b[s]); });
    EXPECT_TRUE(same(w, 2e-6, 1e-6)) << "binary op " << op << " in place";
  }
  std::vector<int64_t> ia = {5, -3, 8, 0, 7, -2}, ib = {2, 3, -1};
  Both xa = put(DSRT_I64, {2, 3}, ia.data()), xb = put(DSRT_I64, {3}, ib.data());
  for (int op = DSRT_ADD; op <= DSRT_MIN; ++op) {
    Both y = out({2, 3}, DSRT_I64);
    run([&](dsrt_context *c, int s) { dsrt_binary(c, op, y[s], xa[s], xb[s]); });
    EXPECT_TRUE(same(y)) << "integer binary op " << op;
  }
  for (int pred = DSRT_EQ; pred <= DSRT_GE; ++pred) {
    Both m = out({4, 3, 6}, DSRT_I1);
    run([&](dsrt_context *c, int s) { dsrt_cmp(c, pred, m[s], full[s], a[s]); });
    EXPECT_TRUE(same(m)) << "cmp " << pred;
    Both w = out({4, 3, 6});
    run([&](dsrt_context *c, int s) { dsrt_where(c, w[s], m[s], full[s], b[s]); });
    EXPECT_TRUE(same(w, 0, 0)) << "where after cmp " << pred;
    Both v = randn({4, 3, 6});
    run([&](dsrt_context *c, int s) { dsrt_where(c, v[s], m[s], v[s], b[s]); });
    EXPECT_TRUE(same(v, 0, 0)) << "where after cmp " << pred << " in place";
  }
}

TEST_P(Conformance, Reduce) {
  Both x = randn({3, 4, 5, 6});
  for (uint64_t mask : {0x1ull, 0x2ull, 0x8ull, 0x5ull, 0xaull, 0xfull, 0x0ull, 0x7ull}) {
    std::vector<int64_t> dims;
    int64_t all[4] = {3, 4, 5, 6};
    for (int d = 0; d < 4; ++d)
      if (!((mask >> d) & 1))
        dims.push_back(all[d]);
    for (int kind : {DSRT_SUM, DSRT_MEAN, DSRT_AMAX}) {
      Both y = out(dims);
      run([&](dsrt_context *c, int s) { dsrt_reduce(c, kind, y[s], x[s], mask); });
      EXPECT_TRUE(same(y, 1e-5, 1e-6, true)) << "reduce kind " << kind << " mask " << mask;
    }
  }
  Both big = randn({2, 5000}); // one block per output
  Both y = out({2});
  run([&](dsrt_context *c, int s) { dsrt_reduce(c, DSRT_SUM, y[s], big[s], 0x2); });
  EXPECT_TRUE(same(y, 1e-5, 1e-6, true));
  Both rows = randn({1000, 300}); // columns of many rows (a bias gradient): row chunks
  for (int kind : {DSRT_SUM, DSRT_MEAN, DSRT_AMAX}) {
    Both col = out({300});
    run([&](dsrt_context *c, int s) { dsrt_reduce(c, kind, col[s], rows[s], 0x1); });
    EXPECT_TRUE(same(col, 1e-5, 1e-6, true)) << "column reduce kind " << kind;
  }
  std::vector<int64_t> iv(24);
  for (int i = 0; i < 24; ++i)
    iv[i] = i * 7 % 11 - 5;
  Both ix = put(DSRT_I64, {4, 6}, iv.data());
  Both iy = out({4}, DSRT_I64);
  run([&](dsrt_context *c, int s) { dsrt_reduce(c, DSRT_SUM, iy[s], ix[s], 0x2); });
  EXPECT_TRUE(same(iy));
}

TEST_P(Conformance, Cumsum) {
  for (int64_t dim : {0, 1, -1}) {
    for (int reverse = 0; reverse < 2; ++reverse) {
      Both x = randn({4, 33, 7}, 3.0), y = out({4, 33, 7});
      run([&](dsrt_context *c, int s) { dsrt_cumsum(c, y[s], x[s], dim, reverse); });
      EXPECT_TRUE(same(y, 1e-6, 1e-6)) << "dim " << dim << " reverse " << reverse;
    }
  }
  std::vector<int64_t> mv(4 * 16);
  for (size_t i = 0; i < mv.size(); ++i)
    mv[i] = (i * 5 % 7) < 4;
  Both m = put(DSRT_I64, {4, 16}, mv.data()), p = out({4, 16}, DSRT_I64);
  run([&](dsrt_context *c, int s) { dsrt_cumsum(c, p[s], m[s], 1, 0); });
  EXPECT_TRUE(same(p));
}

TEST_P(Conformance, Attention) {
  // The fused attention and its gradient, causal with grouped-query heads, strictly causal
  // (a striped ring's later blocks: row 0 sees no key), and with a bool mask broadcast over
  // the heads (a row that sees no key).
  for (int32_t causal : {DSRT_CAUSAL, DSRT_CAUSAL_STRICT, DSRT_CAUSAL_NONE}) {
    Both q = randn({2, 4, 70, 16}), k = randn({2, 2, 70, 16}), v = randn({2, 2, 70, 8});
    Both o = out({2, 4, 70, 8}), lse = out({2, 4, 70}), dy = randn({2, 4, 70, 8});
    std::vector<uint8_t> mv(2 * 70 * 70);
    for (size_t i = 0; i < mv.size(); ++i)
      mv[i] = i >= 70 && (i * 7 % 11) < 8;
    Both m = put(DSRT_I1, {2, 1, 70, 70}, mv.data());
    Both dq = out({2, 4, 70, 16}), dk = out({2, 2, 70, 16}), dv = out({2, 2, 70, 8});
    run([&](dsrt_context *c, int s) {
      dsrt_attention(c, o[s], lse[s], q[s], k[s], v[s], causal ? nullptr : m[s], 0.25, causal);
      dsrt_attention_grad(c, dq[s], dk[s], dv[s], q[s], k[s], v[s], causal ? nullptr : m[s],
                          o[s], lse[s], dy[s], 0.25, causal);
    });
    EXPECT_TRUE(same(o, 1e-5, 1e-5)) << "causal " << causal;
    EXPECT_TRUE(same(lse, 1e-5, 1e-5)) << "causal " << causal;
    EXPECT_TRUE(same(dq, 1e-4, 1e-5)) << "causal " << causal;
    EXPECT_TRUE(same(dk, 1e-4, 1e-5)) << "causal " << causal;
    EXPECT_TRUE(same(dv, 1e-4, 1e-5)) << "causal " << causal;
  }
}

/// 16-bit attention on cuDNN's fused SDPA (DSRT_CUDA_ATTENTION=cudnn: a case cuDNN refuses
/// ends the job, naming why) and on ds's kernels (=ds), forward and backward, against the
/// CPU's flash kernel (f32 inside, 16-bit results): causal with grouped-query heads (and fewer
/// queries than keys, where top-left alignment shows), unmasked with as many key heads as
/// query heads, and an additive mask broadcast over the heads. cuDNN rounds the probabilities
/// to 16 bits before their product with v and the CPU does not: bounds of a few roundings of
/// the largest entry, where a wrong scale (0.2, not the default 1/8), mask, alignment or head
/// map moves results by their own size.
TEST_P(Conformance, AttentionHalf) {
  for (const char *route : {"cudnn", "ds"}) {
    ::setenv("DSRT_CUDA_ATTENTION", route, 1);
    struct Case {
      int64_t Hk, L;
      int32_t causal;
      bool mask;
    } cases[] = {{2, 128, DSRT_CAUSAL, false},
                 {2, 64, DSRT_CAUSAL, false},
                 {4, 128, DSRT_CAUSAL_NONE, false},
                 {2, 128, DSRT_CAUSAL_NONE, true}};
    for (int32_t dt : {DSRT_BF16, DSRT_F16}) {
      const double ulp = dt == DSRT_BF16 ? 1.0 / 128 : 1.0 / 1024;
      for (const Case &c : cases) {
        const int64_t B = 2, Hq = 4, S = 128, E = 64;
        Both q = as(randn({B, Hq, c.L, E}), dt), k = as(randn({B, c.Hk, S, E}), dt),
             v = as(randn({B, c.Hk, S, E}), dt), dy = as(randn({B, Hq, c.L, E}), dt);
        std::vector<float> mv(B * c.L * S);
        for (size_t i = 0; i < mv.size(); ++i)
          mv[i] = (i * 7 % 11) < 3 ? -30.f : 0.f; // every row keeps most keys
        Both m = as(put(DSRT_F32, {B, 1, c.L, S}, mv.data()), dt);
        Both o = out({B, Hq, c.L, E}, dt), lse = out({B, Hq, c.L});
        Both dq = out({B, Hq, c.L, E}, dt), dk = out({B, c.Hk, S, E}, dt),
             dv = out({B, c.Hk, S, E}, dt);
        run([&](dsrt_context *x, int s) {
          const dsrt_tensor *mask = c.mask ? m[s] : nullptr;
          dsrt_attention(x, o[s], lse[s], q[s], k[s], v[s], mask, 0.2, c.causal);
          dsrt_attention_grad(x, dq[s], dk[s], dv[s], q[s], k[s], v[s], mask, o[s], lse[s],
                              dy[s], 0.2, c.causal);
        });
        const std::string what = std::string(route) + ", dtype " + std::to_string(dt) +
                                 " Hk " + std::to_string(c.Hk) + " L " + std::to_string(c.L) +
                                 " causal " + std::to_string(c.causal) + " mask " +
                                 std::to_string(c.mask);
        EXPECT_TRUE(same(lse, 1e-4, 1e-3)) << what;
        Both o32 = as(o, DSRT_F32);
        EXPECT_TRUE(same(o32, 2 * ulp, 2 * ulp * largest(o32))) << what;
        for (Both *g : {&dq, &dk, &dv}) {
          Both g32 = as(*g, DSRT_F32);
          EXPECT_TRUE(same(g32, 4 * ulp, 4 * ulp * largest(g32))) << what;
        }
      }
    }
  }
  ::unsetenv("DSRT_CUDA_ATTENTION");
}

/// Generation's paged cache: new tokens written to scattered pages (a padding token skipped),
/// then attention of a 3-token chunk on a cached prefix, one decoded token and an idle
/// sequence against them, with grouped-query heads; f32 and bf16.
TEST_P(Conformance, PagedAttention) {
  const int64_t N = 12, P = 4, Hk = 2, Hq = 4, E = 16, B = 3, T = 3;
  const int64_t pv[] = {3, 7, 0, 11, 5, 9, 1, 2, 4, 6, 8, 10}, cl[] = {7, 13, 2},
                ql[] = {3, 1, 0};
  std::vector<int64_t> sv(B * T, -1);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < ql[b]; ++t) {
      const int64_t pos = cl[b] - ql[b] + t;
      sv[b * T + t] = pv[b * 4 + pos / P] * P + pos % P;
    }
  Both pages = put(DSRT_I64, {B, 4}, pv), cls = put(DSRT_I64, {B}, cl),
       qls = put(DSRT_I64, {B}, ql), slots = put(DSRT_I64, {B, T}, sv.data());
  for (int32_t dt : {DSRT_F32, DSRT_BF16}) {
    Both kc = as(randn({N, Hk, P, E}), dt), vc = as(randn({N, Hk, P, E}), dt);
    Both k = as(randn({B, Hk, T, E}), dt), v = as(randn({B, Hk, T, E}), dt);
    Both q = as(randn({B, Hq, T, E}), dt), o = out({B, Hq, T, E}, dt);
    run([&](dsrt_context *c, int s) {
      dsrt_cache_write(c, kc[s], vc[s], k[s], v[s], slots[s]);
      dsrt_paged_attention(c, o[s], q[s], kc[s], vc[s], pages[s], cls[s], qls[s], 0.3);
    });
    EXPECT_TRUE(same(kc)) << "dtype " << dt;
    EXPECT_TRUE(same(vc)) << "dtype " << dt;
    if (dt == DSRT_F32)
      EXPECT_TRUE(same(o, 1e-5, 1e-6));
    else // the same f32 sums in another order, rounded once
      EXPECT_TRUE(same(as(o, DSRT_F32), 1.0 / 128, 1e-6)) << "dtype " << dt;
  }
}

/// Generation's token choice: greedy, and drawn under temperature, top-k and top-p from the
/// same (seed, step) numbers, over a 1000-token vocabulary; f32 and bf16 logits.
TEST_P(Conformance, Sample) {
  const int64_t B = 64, V = 1000;
  std::vector<float> temp(B), topP(B);
  std::vector<int64_t> topK(B), seeds(B), steps(B);
  for (int64_t b = 0; b < B; ++b) {
    temp[b] = b % 4 == 0 ? 0.f : 0.5f + 0.25f * (b % 5);
    topK[b] = b % 3 == 0 ? 0 : 1 + b % 50;
    topP[b] = b % 2 == 0 ? 1.f : 0.3f + 0.1f * (b % 7);
    seeds[b] = 1000 + b;
    steps[b] = b * 3;
  }
  Both t = put(DSRT_F32, {B}, temp.data()), p = put(DSRT_F32, {B}, topP.data()),
       k = put(DSRT_I64, {B}, topK.data()), sd = put(DSRT_I64, {B}, seeds.data()),
       st = put(DSRT_I64, {B}, steps.data());
  for (int32_t dt : {DSRT_F32, DSRT_BF16}) {
    Both logits = as(randn({B, V}, 3.0), dt), tokens = out({B}, DSRT_I64);
    run([&](dsrt_context *c, int s) {
      dsrt_sample(c, tokens[s], logits[s], t[s], k[s], p[s], sd[s], st[s]);
    });
    EXPECT_TRUE(same(tokens)) << "dtype " << dt;
  }
}

TEST_P(Conformance, LinearCrossEntropy) {
  // The tiled LM head and loss (a composite of the linear, cross-entropy and product kernels
  // on views) and its gradient: 3 tiles over 11 rows, a bias, an ignored target.
  Both x = randn({11, 8}), w = randn({13, 8}), b = randn({13}), dy = scalarF32(0.7f);
  std::vector<int64_t> tv(11);
  for (size_t i = 0; i < tv.size(); ++i)
    tv[i] = i == 5 ? -100 : (int64_t)(i * 7 % 13);
  Both t = put(DSRT_I64, {11}, tv.data());
  Both loss = out({}), ws = out({4 * 13 + 1}), gws = out({2 * 4 * 13 + 13 * 8 + 13});
  Both dx = out({11, 8}), dw = out({13, 8}), db = out({13});
  run([&](dsrt_context *c, int s) {
    dsrt_linear_cross_entropy(c, loss[s], ws[s], x[s], w[s], b[s], t[s], 3, -100, 0.1);
    dsrt_linear_cross_entropy_grad(c, dx[s], dw[s], db[s], gws[s], x[s], w[s], b[s], t[s],
                                   dy[s], 3, -100, 0.1);
  });
  EXPECT_TRUE(same(loss, 1e-5, 1e-5));
  EXPECT_TRUE(same(dx, 1e-4, 1e-5));
  EXPECT_TRUE(same(dw, 1e-4, 1e-5));
  EXPECT_TRUE(same(db, 1e-4, 1e-5));
}

TEST_P(Conformance, SoftmaxAndGrad) {
  for (int64_t dim : {-1, 1}) {
    for (int log = 0; log < 2; ++log) {
      Both x = randn({4, 33, 7}, 3.0), y = out({4, 33, 7}), dy = randn({4, 33, 7}),
           dx = out({4, 33, 7});
      run([&](dsrt_context *c, int s) {
        dsrt_softmax(c, y[s], x[s], dim, log);
        dsrt_softmax_grad(c, dx[s], y[s], dy[s], dim, log);
      });
      EXPECT_TRUE(same(y, 1e-5, 1e-6)) << "dim " << dim << " log " << log;
      EXPECT_TRUE(same(dx, 1e-5, 1e-6)) << "grad dim " << dim << " log " << log;
    }
  }
}

TEST_P(Conformance, LayerNormAndGrad) {
  Both x = randn({6, 5, 48}, 2.0), w = randn({48}), b = randn({48}), dy = randn({6, 5, 48});
  Both y = out({6, 5, 48}), dx = out({6, 5, 48}), dw = out({48}), db = out({48});
  run([&](dsrt_context *c, int s) {
    dsrt_layer_norm(c, y[s], x[s], w[s], b[s], 48, 1e-5);
    dsrt_layer_norm_grad(c, dx[s], dw[s], db[s], x[s], w[s], dy[s], 48, 1e-5);
  });
  EXPECT_TRUE(same(y, 1e-5, 1e-5));
  EXPECT_TRUE(same(dx, 1e-4, 1e-5));
  EXPECT_TRUE(same(dw, 1e-5, 1e-5, true));
  EXPECT_TRUE(same(db, 1e-5, 1e-5, true));
  Both y2 = out({6, 5, 48});
  run([&](dsrt_context *c, int s) { dsrt_layer_norm(c, y2[s], x[s], nullptr, nullptr, 240, 1e-5); });
  EXPECT_TRUE(same(y2, 1e-5, 1e-5)) << "no affine, 240-element rows";
}

/// 16-bit layer norm and its backward: the CPU follows PyTorch's CPU arithmetic (16-bit mean
/// and rstd, weight gradients accumulated in 16 bits per block of rows), the device sums in
/// double and rounds once, so they agree to a few 16-bit roundings, compared in f32.
TEST_P(Conformance, LayerNormAndGradHalf) {
  for (int32_t dt : {DSRT_BF16, DSRT_F16}) {
    double ulp = dt == DSRT_BF16 ? 1.0 / 128 : 1.0 / 1024;
    Both x = as(randn({6, 5, 48}, 2.0), dt), w = as(randn({48}), dt), b = as(randn({48}), dt),
         dy = as(randn({6, 5, 48}), dt);
    Both y = out({6, 5, 48}, dt), dx = out({6, 5, 48}, dt), dw = out({48}, dt),
         db = out({48}, dt);
    run([&](dsrt_context *c, int s) {
      dsrt_layer_norm(c, y[s], x[s], w[s], b[s], 48, 1e-5);
      dsrt_layer_norm_grad(c, dx[s], dw[s], db[s], x[s], w[s], dy[s], 48, 1e-5);
    });
    // Outputs of size ~1-5: a few roundings. Weight gradients sum 30 rows: the CPU's 16-bit
    // running sums round at every row, so the bound scales with the largest entry.
    EXPECT_TRUE(same(as(y, DSRT_F32), 2 * ulp, 2 * ulp)) << "dtype " << dt;
    EXPECT_TRUE(same(as(dx, DSRT_F32), 4 * ulp, 8 * ulp)) << "dtype " << dt;
    for (Both *g : {&dw, &db}) {
      Both g32 = as(*g, DSRT_F32);
      EXPECT_TRUE(same(g32, 4 * ulp, 8 * ulp * largest(g32))) << "dtype " << dt;
    }
  }
}

TEST_P(Conformance, BatchNorm) {
  Both x = randn({4, 3, 5, 6}, 2.0), w = randn({3}), b = randn({3}), dy = randn({4, 3, 5, 6});
  Both y = out({4, 3, 5, 6}), mean = out({3}), var = out({3}), dx = out({4, 3, 5, 6}),
       dw = out({3}), db = out({3}), yi = out({4, 3, 5, 6});
  run([&](dsrt_context *c, int s) {
    dsrt_batch_norm(c, y[s], mean[s], var[s], x[s], w[s], b[s], 1e-5);
    dsrt_batch_norm_grad(c, dx[s], dw[s], db[s], x[s], w[s], mean[s], var[s], dy[s], 1e-5);
    dsrt_batch_norm_inference(c, yi[s], x[s], w[s], b[s], mean[s], var[s], 1e-5);
  });
  for (Both *t : {&y, &mean, &var, &yi})
    EXPECT_TRUE(same(*t, 1e-5, 1e-5));
  for (Both *t : {&dx, &dw, &db})
    EXPECT_TRUE(same(*t, 1e-4, 1e-4, true));
}

TEST_P(Conformance, MatmulAndLinear) {
  struct Case {
    std::vector<int64_t> a, b, out;
    int ta, tb;
  } cases[] = {
      {{7, 5}, {5, 9}, {7, 9}, 0, 0},
      {{5, 7}, {9, 5}, {7, 9}, 1, 1},
      {{3, 7, 5}, {5, 9}, {3, 7, 9}, 0, 0},         // shared rhs: folded into M
      {{3, 7, 5}, {3, 5, 9}, {3, 7, 9}, 0, 0},      // strided batches
      {{2, 1, 7, 5}, {1, 3, 9, 5}, {2, 3, 7, 9}, 0, 1}, // broadcast batches
      {{5}, {5, 9}, {9}, 0, 0},                    // vector lhs
      {{4, 7, 5}, {5}, {4, 7}, 0, 0},              // vector rhs
  };
  for (auto &k : cases) {
    Both a = randn(k.a), b = randn(k.b), y = out(k.out);
    run([&](dsrt_context *c, int s) { dsrt_matmul(c, y[s], a[s], b[s], k.ta, k.tb); });
    EXPECT_TRUE(same(y, 1e-5, 1e-6, true)) << "matmul case " << (&k - cases);
  }
  // Strided views (dsrt_matmul_view): q @ k^T out of a fused [2, 5, 3 x 12] QKV projection,
  // written transposed (C^T through the swapped operands) and scaled by 1/2 (alpha), and att @
  // v written into the merged heads [2, 5, 12]; each view covers its whole result.
  Both qkv = randn({2, 5, 36}), att = out({2, 3, 5, 5}), merged = out({2, 5, 12});
  const int64_t scores[] = {2, 3, 5, 5, 4, 0, 180, 4, 36, 1, 12, 180, 4, 1, 36, 0, 75, 25, 1, 5};
  const int64_t values[] = {2, 3, 5, 4, 5, 0, 75, 25, 5, 1, 24, 180, 4, 36, 1, 0, 60, 4, 12, 1};
  run([&](dsrt_context *c, int s) {
    dsrt_matmul_view(c, att[s], qkv[s], qkv[s], scores, 0.5);
    dsrt_matmul_view(c, merged[s], att[s], qkv[s], values, 1.0);
  });
  EXPECT_TRUE(same(att, 1e-5, 1e-6, true)) << "matmul_view q @ k^T";
  EXPECT_TRUE(same(merged, 1e-5, 1e-6, true)) << "matmul_view att @ v";
  Both x = randn({3, 4, 16}), w = randn({12, 16}), bias = randn({12}), y = out({3, 4, 12}),
       dy = randn({3, 4, 12}), dw = out({12, 16}), db = out({12});
  run([&](dsrt_context *c, int s) {
    dsrt_linear(c, y[s], x[s], w[s], bias[s]);
    dsrt_linear_grad_weight(c, dw[s], db[s], x[s], dy[s]);
  });
  EXPECT_TRUE(same(y, 1e-5, 1e-6, true));
  EXPECT_TRUE(same(dw, 1e-5, 1e-6, true));
  EXPECT_TRUE(same(db, 1e-5, 1e-6, true));
}

/// 16-bit products (the device's own 16-bit GEMMs, f32 accumulation, rounded once; the CPU's
/// oneDNN bf16 or widened f32): equal to about one rounding. Shapes large enough that a wrong
/// transpose or stride is far outside it.
TEST_P(Conformance, MatmulAndLinearHalf) {
  for (int32_t dt : {DSRT_BF16, DSRT_F16}) {
    double ulp = dt == DSRT_BF16 ? 1.0 / 128 : 1.0 / 1024;
    Both a = as(randn({3, 17, 40}), dt), b = as(randn({3, 40, 24}), dt),
         bt = as(randn({24, 40}), dt);
    Both y = out({3, 17, 24}, dt), yt = out({3, 17, 24}, dt);
    Both x = as(randn({51, 40}), dt), w = as(randn({24, 40}), dt), bias = as(randn({24}), dt);
    Both dy = as(randn({51, 24}), dt), lin = out({51, 24}, dt), dw = out({24, 40}, dt),
         db = out({24}, dt);
    // The strided views of MatmulAndLinear's attention (alpha 1/2, results written transposed
    // and into the merged heads) in 16 bits.
    Both qkv = as(randn({2, 5, 36}), dt), att = out({2, 3, 5, 5}, dt), merged = out({2, 5, 12}, dt);
    const int64_t scores[] = {2, 3, 5, 5, 4, 0, 180, 4, 36, 1, 12, 180, 4, 1, 36, 0, 75, 25, 1, 5};
    const int64_t values[] = {2, 3, 5, 4, 5, 0, 75, 25, 5, 1, 24, 180, 4, 36, 1, 0, 60, 4, 12, 1};
    run([&](dsrt_context *c, int s) {
      dsrt_matmul(c, y[s], a[s], b[s], 0, 0);  // strided batches
      dsrt_matmul(c, yt[s], a[s], bt[s], 0, 1); // shared rhs, transposed
      dsrt_linear(c, lin[s], x[s], w[s], bias[s]);
      dsrt_linear_grad_weight(c, dw[s], db[s], x[s], dy[s]);
      dsrt_matmul_view(c, att[s], qkv[s], qkv[s], scores, 0.5);
      dsrt_matmul_view(c, merged[s], att[s], qkv[s], values, 1.0);
    });
    for (Both *t : {&y, &yt, &lin, &dw, &db, &att, &merged}) {
      Both t32 = as(*t, DSRT_F32);
      EXPECT_TRUE(same(t32, 2 * ulp, 2 * ulp * largest(t32)))
          << "dtype " << dt << " result " << (t - &y);
    }
  }
}

TEST_P(Conformance, EmbeddingAndGrad) {
  for (int32_t it : {DSRT_I64, DSRT_I32}) {
    Both w = randn({11, 8}), idx = indices({3, 5}, 11, it), y = out({3, 5, 8}),
         dy = randn({3, 5, 8}), dw = out({11, 8});
    run([&](dsrt_context *c, int s) {
      dsrt_embedding(c, y[s], w[s], idx[s]);
      dsrt_embedding_grad(c, dw[s], dy[s], idx[s], /*padding_idx=*/3);
    });
    EXPECT_TRUE(same(y, 0, 0));
    EXPECT_TRUE(same(dw, 1e-6, 1e-6));
  }
  // 16-bit rows, added in index order with every addition rounded (PyTorch's CPU backward):
  // the same bits on every device.
  for (int32_t dt : {DSRT_BF16, DSRT_F16}) {
    Both idx = indices({40, 6}, 5), dy = as(randn({40, 6, 24}), dt), dw = out({5, 24}, dt);
    run([&](dsrt_context *c, int s) { dsrt_embedding_grad(c, dw[s], dy[s], idx[s], 3); });
    EXPECT_TRUE(same(as(dw, DSRT_F32), 0, 0)) << "dtype " << dt;
  }
}

// A router's top-k and the routed experts' products and weight gradients (both layouts;
// ids beyond the experts give zeros).
TEST_P(Conformance, TopKAndExperts) {
  Both r = randn({40, 8}), v = out({40, 2}), i = out({40, 2}, DSRT_I64);
  for (int32_t smallest : {0, 1}) {
    run([&](dsrt_context *c, int s) { dsrt_top_k(c, v[s], i[s], r[s], smallest); });
    EXPECT_TRUE(same(v, 0, 0));
    EXPECT_TRUE(same(i));
  }
  Both ids = indices({3, 40}, 6, DSRT_I64), sv = out({3, 40}, DSRT_I64),
       si = out({3, 40}, DSRT_I64);
  run([&](dsrt_context *c, int s) { dsrt_top_k(c, sv[s], si[s], ids[s], 1); });
  EXPECT_TRUE(same(sv));
  EXPECT_TRUE(same(si));
  // Capacity dropping of 40 tokens' two choices among 6 experts (ids up to 6: one no expert
  // takes), 5 rows each.
  Both pairs = indices({80}, 7, DSRT_I64), kept = out({80}, DSRT_I64);
  run([&](dsrt_context *c, int s) { dsrt_expert_capacity(c, kept[s], pairs[s], 6, 2, 5); });
  EXPECT_TRUE(same(kept));
  for (int32_t transposed : {0, 1}) {
    Both x = randn({40, 24}), w = randn(transposed ? std::vector<int64_t>{5, 24, 16}
                                                   : std::vector<int64_t>{5, 16, 24}),
         ids = indices({40}, 6, DSRT_I64), y = out({40, 16}), dy = randn({40, 16}),
         dw = out(transposed ? std::vector<int64_t>{5, 24, 16} : std::vector<int64_t>{5, 16, 24});
    run([&](dsrt_context *c, int s) {
      dsrt_expert_linear(c, y[s], x[s], w[s], ids[s], transposed);
      dsrt_expert_linear_grad_weight(c, dw[s], x[s], dy[s], ids[s], transposed);
    });
    EXPECT_TRUE(same(y, 1e-5, 1e-5)) << "transposed " << transposed;
    EXPECT_TRUE(same(dw, 1e-5, 1e-5)) << "transposed " << transposed;
  }
}

// SwiGLU and its gradient on 40 rows of 37 pairs, every fourth row's id negative (zeros), and
// without ids.
TEST_P(Conformance, Swiglu) {
  std::vector<int64_t> ids(40);
  for (size_t r = 0; r < ids.size(); ++r)
    ids[r] = r % 4 == 3 ? -1 : int64_t(r % 5);
  Both x = randn({40, 74}), dy = randn({40, 37}), rows = put(DSRT_I64, {40}, ids.data()),
       y = out({40, 37}), dx = out({40, 74}), y2 = out({40, 37}), dx2 = out({40, 74});
  run([&](dsrt_context *c, int s) {
    dsrt_swiglu(c, y[s], x[s], rows[s], 0);
    dsrt_swiglu_grad(c, dx[s], x[s], dy[s], rows[s], 0);
    dsrt_swiglu(c, y2[s], x[s], nullptr, 0);
    dsrt_swiglu_grad(c, dx2[s], x[s], dy[s], nullptr, 0);
  });
  EXPECT_TRUE(same(y, 1e-6, 1e-6));
  EXPECT_TRUE(same(dx, 1e-6, 1e-6));
  EXPECT_TRUE(same(y2, 1e-6, 1e-6));
  EXPECT_TRUE(same(dx2, 1e-6, 1e-6));
}

// Tables of data (a mask's rows, token types): 8-byte and 1-byte elements gathered exactly.
TEST_P(Conformance, EmbeddingOfData) {
  std::vector<int64_t> wide(11 * 3);
  std::vector<unsigned char> flags(11 * 3);
  for (size_t i = 0; i < wide.size(); ++i) {
    wide[i] = (int64_t)(i * 2654435761u) - (int64_t(1) << 31);
    flags[i] = (i * 7) % 3 == 0;
  }
  for (auto [dt, data] : {std::pair<int32_t, const void *>{DSRT_I64, wide.data()},
                          {DSRT_I1, flags.data()}}) {
    Both w = put(dt, {11, 3}, data), idx = indices({4, 5}, 11), y = out({4, 5, 3}, dt);
    run([&](dsrt_context *c, int s) { dsrt_embedding(c, y[s], w[s], idx[s]); });
    EXPECT_TRUE(same(y, 0, 0)) << "dtype " << dt;
  }
}

TEST_P(Conformance, CrossEntropyAndGrad) {
  for (int red : {DSRT_REDUCTION_NONE, DSRT_REDUCTION_MEAN, DSRT_REDUCTION_SUM}) {
    for (double ls : {0.0, 0.1}) {
      std::vector<int64_t> tv = {1, 4, -100, 0, 6, 2, 6, -100, 3};
      Both x = randn({9, 7}, 3.0), t = put(DSRT_I64, {9}, tv.data());
      std::vector<int64_t> yd = red == DSRT_REDUCTION_NONE ? std::vector<int64_t>{9}
                                                           : std::vector<int64_t>{};
      Both y = out(yd), dy = randn(yd), dx = out({9, 7});
      run([&](dsrt_context *c, int s) {
        dsrt_cross_entropy(c, y[s], x[s], t[s], -100, red, ls);
        dsrt_cross_entropy_grad(c, dx[s], x[s], t[s], dy[s], -100, red, ls);
      });
      EXPECT_TRUE(same(y, 1e-6, 1e-6)) << "reduction " << red << " smoothing " << ls;
      EXPECT_TRUE(same(dx, 1e-6, 1e-7)) << "grad reduction " << red << " smoothing " << ls;
    }
  }
}

TEST_P(Conformance, TransposeBroadcastSlices) {
  Both x = randn({2, 3, 4, 5});
  int64_t perm[4] = {2, 0, 3, 1};
  Both t = out({4, 2, 5, 3});
  run([&](dsrt_context *c, int s) { dsrt_transpose(c, t[s], x[s], perm); });
  EXPECT_TRUE(same(t, 0, 0));
  Both small = randn({3, 1, 5}), bc = out({2, 3, 4, 5});
  run([&](dsrt_context *c, int s) { dsrt_broadcast(c, bc[s], small[s]); });
  EXPECT_TRUE(same(bc, 0, 0));
  Both sl = out({2, 3, 2, 5});
  run([&](dsrt_context *c, int s) { dsrt_slice(c, sl[s], x[s], 2, 1, 2); });
  EXPECT_TRUE(same(sl, 0, 0));
  Both into = randn({2, 3, 4, 5});
  run([&](dsrt_context *c, int s) { dsrt_insert_slice(c, into[s], sl[s], 2, 0, 3); });
  EXPECT_TRUE(same(into, 0, 0));
}

TEST_P(Conformance, DropoutMaskIsTheContextsGenerator) {
  Both m = out({1000});
  run([&](dsrt_context *c, int s) { dsrt_dropout_mask(c, m[s], 0.3); });
  EXPECT_TRUE(same(m, 0, 0)) << "the same seed gives the same mask on every device";
}

TEST_P(Conformance, Conv2dAndGrads) {
  struct Case {
    std::vector<int64_t> x, w;
    int64_t sh, sw, ph, pw, dh, dw, g;
    bool bias;
  } cases[] = {
      {{2, 3, 8, 8}, {4, 3, 3, 3}, 1, 1, 1, 1, 1, 1, 1, true},
      {{2, 4, 9, 7}, {6, 2, 3, 2}, 2, 1, 1, 0, 1, 2, 2, false},
      {{1, 6, 10, 10}, {6, 1, 3, 3}, 1, 2, 2, 1, 2, 1, 6, true},
      {{3, 5, 6}, {2, 3, 3, 3}, 1, 1, 1, 1, 1, 1, 1, true},
  };
  for (auto &k : cases) {
    bool batched = k.x.size() == 4;
    int64_t H = k.x[batched ? 2 : 1], W = k.x[batched ? 3 : 2];
    int64_t OH = (H + 2 * k.ph - (k.dh * (k.w[2] - 1) + 1)) / k.sh + 1;
    int64_t OW = (W + 2 * k.pw - (k.dw * (k.w[3] - 1) + 1)) / k.sw + 1;
    std::vector<int64_t> yd = batched ? std::vector<int64_t>{k.x[0], k.w[0], OH, OW}
                                      : std::vector<int64_t>{k.w[0], OH, OW};
    Both x = randn(k.x), w = randn(k.w), b = randn({k.w[0]}), y = out(yd), dy = randn(yd),
         dx = out(k.x), dw = out(k.w), db = out({k.w[0]});
    run([&](dsrt_context *c, int s) {
      dsrt_conv2d(c, y[s], x[s], w[s], k.bias ? b[s] : nullptr, k.sh, k.sw, k.ph, k.pw, k.dh,
                  k.dw, k.g);
      dsrt_conv2d_grad_input(c, dx[s], dy[s], w[s], k.sh, k.sw, k.ph, k.pw, k.dh, k.dw, k.g);
      dsrt_conv2d_grad_weight(c, dw[s], k.bias ? db[s] : nullptr, x[s], dy[s], k.sh, k.sw, k.ph,
                              k.pw, k.dh, k.dw, k.g);
    });
    EXPECT_TRUE(same(y, 1e-5, 1e-6, true)) << "conv case " << (&k - cases);
    EXPECT_TRUE(same(dx, 1e-5, 1e-6, true)) << "conv dx case " << (&k - cases);
    EXPECT_TRUE(same(dw, 1e-5, 1e-6, true)) << "conv dw case " << (&k - cases);
    if (k.bias)
      EXPECT_TRUE(same(db, 1e-5, 1e-6, true)) << "conv db case " << (&k - cases);
  }
}

TEST_P(Conformance, PoolingAndGrads) {
  Both x = randn({2, 3, 9, 8}), dyMax = randn({2, 3, 4, 4}), dyAvg = randn({2, 3, 5, 4}),
       dyAd = randn({2, 3, 4, 3});
  Both ym = out({2, 3, 4, 4}), dxm = out({2, 3, 9, 8}), ya = out({2, 3, 5, 4}),
       dxa = out({2, 3, 9, 8}), yd = out({2, 3, 4, 3}), dxd = out({2, 3, 9, 8});
  run([&](dsrt_context *c, int s) {
    dsrt_max_pool2d(c, ym[s], x[s], 3, 2, 2, 2, 1, 0, 1, 2);
    dsrt_max_pool2d_grad(c, dxm[s], x[s], dyMax[s], 3, 2, 2, 2, 1, 0, 1, 2);
    dsrt_avg_pool2d(c, ya[s], x[s], 3, 3, 2, 2, 1, 1, 0);
    dsrt_avg_pool2d_grad(c, dxa[s], dyAvg[s], 3, 3, 2, 2, 1, 1, 0);
    dsrt_adaptive_avg_pool2d(c, yd[s], x[s]);
    dsrt_adaptive_avg_pool2d_grad(c, dxd[s], dyAd[s]);
  });
  for (Both *t : {&ym, &dxm, &ya, &dxa, &yd, &dxd})
    EXPECT_TRUE(same(*t, 1e-6, 1e-6)) << "pooling result " << (t - &ym);
}

TEST_P(Conformance, AdamWUpdate) {
  Both p = randn({1000}), g = randn({1000}), m = randn({1000}, 0.1), v = positive({1000});
  Both step = scalarF32(1e-3f), bc2 = scalarF32(0.3f), dec = scalarF32(0.999f),
       beta1 = scalarF64(0.9);
  Both po = out({1000}), mo = out({1000}), vo = out({1000});
  run([&](dsrt_context *c, int s) {
    dsrt_adamw_update(c, po[s], mo[s], vo[s], p[s], g[s], m[s], v[s], step[s], bc2[s], dec[s],
                      beta1[s], 0.999, 1e-8);
  });
  for (Both *t : {&po, &mo, &vo})
    EXPECT_TRUE(same(*t, 0, 0)) << "one formula (kernels/scalar_ops.h): bit-equal";
  run([&](dsrt_context *c, int s) { // in place, as the compiled optimizer step calls it
    dsrt_adamw_update(c, p[s], m[s], v[s], p[s], g[s], m[s], v[s], step[s], bc2[s], dec[s],
                      beta1[s], 0.999, 1e-8);
  });
  EXPECT_TRUE(same(p, 0, 0));
}

TEST_P(Conformance, EventsAndHostCopies) {
  Both x = randn({1 << 16}), y = out({1 << 16});
  run([&](dsrt_context *c, int s) {
    dsrt_unary(c, DSRT_EXP, y[s], x[s]);
    dsrt_event *e = dsrt_event_record(c);
    dsrt_event_wait(c, e); // the stream waits for a point it has passed: no deadlock
    dsrt_event_synchronize(e);
    EXPECT_EQ(dsrt_event_query(e), 1) << "side " << s;
    dsrt_event_release(e);
    dsrt_stream_synchronize(c);
  });
  EXPECT_TRUE(same(y, 2e-6, 1e-6));
  // The source of a host-to-device copy may be reused as soon as the call returns.
  std::vector<float> buf(1 << 16, 1.5f), back(1 << 16);
  dsrt_tensor_from_host(ctx[1], y[1], buf.data());
  std::fill(buf.begin(), buf.end(), -7.f);
  dsrt_tensor_to_host(ctx[1], back.data(), y[1]);
  EXPECT_EQ(back[0], 1.5f);
  EXPECT_EQ(back[(1 << 16) - 1], 1.5f);
}

TEST_P(Conformance, ArenaCountsExactlyAndKeepsTheBudget) {
  // The same allocations give the same byte counts as on the CPU (the plan predicts them).
  int64_t dims[2] = {37, 11};
  for (int s = 0; s < 2; ++s) {
    dsrt_reset_peak(ctx[s]);
    dsrt_tensor *a = dsrt_tensor_alloc(ctx[s], DSRT_F32, 2, dims);
    dsrt_tensor *b = dsrt_tensor_alloc(ctx[s], DSRT_BF16, 2, dims);
    dsrt_tensor_free(ctx[s], a);
    dsrt_tensor *c = dsrt_tensor_alloc(ctx[s], DSRT_I64, 1, dims);
    EXPECT_EQ(dsrt_device_bytes(ctx[s]), 37u * 11 * 2 + 37 * 8) << "side " << s;
    EXPECT_EQ(dsrt_device_peak_bytes(ctx[s]), 37u * 11 * 4 + 37 * 11 * 2) << "side " << s;
    dsrt_tensor_free(ctx[s], b);
    dsrt_tensor_free(ctx[s], c);
  }
}

TEST_P(Conformance, ArenaBudgetEndsTheJobNamingTheNeed) {
  GTEST_FLAG_SET(death_test_style, "threadsafe"); // a GPU context does not survive fork()
  char why[512];
  dsrt_context *small = dsrt_context_create_on(GetParam().c_str(), 1000, 1, 0, why, sizeof why);
  ASSERT_NE(small, nullptr) << why;
  int64_t dims[1] = {1000};
  EXPECT_EXIT(dsrt_tensor_alloc(small, DSRT_F32, 1, dims), ::testing::ExitedWithCode(1),
              "device memory budget exceeded: a 1000 f32 tensor needs 4000 bytes");
  dsrt_context_destroy(small);
}

TEST_P(Conformance, CollectivesOfOneRank) {
  // Each context's group of one: loopback on the CPU, the device's own channel otherwise (nccl
  // on cuda). The inputs are made on the compute stream right before each collective, which
  // must wait for them.
  std::string report(dsrt_report(nullptr, 0) + 1, '\0');
  dsrt_report(report.data(), report.size());
  if (GetParam() == "cuda" && report.find("\nnccl: built yes") == std::string::npos)
    FAIL() << "the nccl channel was not built (see ds-report; scripts/setup.sh installs NCCL)";
  for (int s = 0; s < 2; ++s)
    dsrt_comm_init(ctx[s], 1);
  EXPECT_STREQ(dsrt_comm_channel(ctx[0]), "loopback");
  Both x = randn({1000}), b = randn({77}), made = out({1000}), sum = out({1000}),
       gathered = out({1000}), scattered = out({1000}), mx = out({1000});
  run([&](dsrt_context *c, int s) {
    auto done = [&](dsrt_event *e) {
      dsrt_event_wait(c, e);
      dsrt_event_release(e);
    };
    dsrt_unary(c, DSRT_EXP, made[s], x[s]);
    done(dsrt_all_reduce(c, DSRT_GROUP_WORLD, sum[s], made[s], DSRT_COMM_SUM));
    done(dsrt_all_gather(c, DSRT_GROUP_WORLD, gathered[s], made[s]));
    done(dsrt_reduce_scatter(c, DSRT_GROUP_WORLD, scattered[s], made[s], DSRT_COMM_SUM));
    done(dsrt_all_reduce(c, DSRT_GROUP_WORLD, mx[s], made[s], DSRT_COMM_MAX));
    done(dsrt_comm_broadcast(c, DSRT_GROUP_WORLD, b[s], 0));
    dsrt_comm_barrier(c);
  });
  for (Both *t : {&sum, &gathered, &scattered, &mx})
    EXPECT_TRUE(same(*t, 2e-6, 1e-6)) << "collective " << (t - &sum) << " on "
                                      << dsrt_comm_channel(ctx[1]);
  EXPECT_TRUE(same(b, 0, 0));
  // The driver's host buffers (dsrt_tensor_host) travel on the host, whatever the device.
  std::vector<int64_t> mine = {3, 1, 4}, all(3, 0);
  int64_t three = 3;
  dsrt_tensor *hin = dsrt_tensor_host(ctx[1], DSRT_I64, 1, &three, mine.data());
  dsrt_tensor *hout = dsrt_tensor_host(ctx[1], DSRT_I64, 1, &three, all.data());
  dsrt_event_release(dsrt_all_gather(ctx[1], DSRT_GROUP_WORLD, hout, hin));
  EXPECT_EQ(all, mine) << "host buffers through " << dsrt_comm_channel(ctx[1]);
  dsrt_tensor_free(ctx[1], hin);
  dsrt_tensor_free(ctx[1], hout);
  char msg[64];
  EXPECT_EQ(dsrt_comm_agree(ctx[1], nullptr, msg, sizeof msg), -1) << "host traffic";
}

INSTANTIATE_TEST_SUITE_P(Devices, Conformance, ::testing::ValuesIn(devices()),
                         [](const ::testing::TestParamInfo<std::string> &i) { return i.param; });

} // namespace

/// Whether a device's reason for not starting is that this machine has no GPU.
static bool noGpu(const std::string &why) {
  for (const char *s : {"no NVIDIA driver", "no usable GPU", "no GPU visible"})
    if (why.find(s) != std::string::npos)
      return true;
  return false;
}

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  std::string none;
  for (const std::string &d : devices()) {
    char why[512] = {0};
    dsrt_context *c = dsrt_context_create_on(d.c_str(), 0, 2, 42, why, sizeof why);
    if (c) {
      dsrt_context_destroy(c);
      continue;
    }
    if (!noGpu(why)) {
      std::fprintf(stderr, "FAIL: %s\n", why);
      return 1;
    }
    none += std::string(none.empty() ? "" : "; ") + why;
  }
  if (!none.empty()) {
    std::printf("SKIP: no GPU here (%s)\n", none.c_str());
    return 77;
  }
  return RUN_ALL_TESTS();
}
