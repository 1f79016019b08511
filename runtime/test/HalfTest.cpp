// bf16 and f16 storage against LibTorch: conversions round as c10::BFloat16 and c10::Half do
// (to nearest even; NaN (not its payload), infinities, f16 overflow and subnormals), fills, and the channels' sum
// of two 16-bit values (added in f32, rounded once).
#include "../src/core/half.h"
#include "dsrt/dsrt.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace {

/// Awkward f32 values: ties, halfway cases, specials, f16's range edges and subnormals, and
/// random values over many magnitudes.
torch::Tensor awkward() {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.0f, inf, -inf,
                          std::numeric_limits<float>::quiet_NaN(), 65504.0f, 65520.0f, 70000.0f,
                          -1e6f, 6e-8f, 3e-8f, 1e-5f, 1.00390625f, 1.01171875f, 3.0e38f,
                          1.0e-39f, 0.333333343f};
  torch::manual_seed(7);
  torch::Tensor r = torch::randn({4096}) * torch::pow(10.0, torch::randint(-9, 9, {4096}));
  return torch::cat({torch::tensor(v), r});
}

void roundTrip(int32_t dtype, at::ScalarType scalar) {
  dsrt_context *ctx = dsrt_context_create(0, 1, 1);
  torch::Tensor x = awkward();
  int64_t n = x.numel();
  dsrt_tensor *in = dsrt_tensor_borrow(ctx, DSRT_F32, 1, &n, x.data_ptr());
  dsrt_tensor *h = dsrt_tensor_alloc(ctx, dtype, 1, &n);
  dsrt_tensor *back = dsrt_tensor_alloc(ctx, DSRT_F32, 1, &n);
  dsrt_convert(ctx, h, in);
  dsrt_convert(ctx, back, h);
  torch::Tensor want = x.to(scalar);
  // Bit for bit, except NaN's payload (torch's vectorized conversion makes 0xffff).
  auto sameBits = [&](const void *got, const torch::Tensor &ref) {
    for (int64_t i = 0; i < n; ++i) {
      uint16_t a = static_cast<const uint16_t *>(got)[i];
      uint16_t b = static_cast<const uint16_t *>(ref.data_ptr())[i];
      if (a != b && !std::isnan(x[i].item<float>())) {
        ADD_FAILURE() << "element " << i << " = " << x[i].item<float>() << ": " << a
                      << " against torch's " << b;
        return;
      }
    }
  };
  sameBits(h->data, want);
  torch::Tensor got = torch::from_blob(back->data, {n}, torch::kFloat);
  EXPECT_TRUE(torch::equal(got.nan_to_num(0), want.to(torch::kFloat).nan_to_num(0)));
  EXPECT_TRUE(torch::equal(got.isnan(), x.isnan()));
  // bf16 <-> f16 through f32, as torch converts.
  dsrt_tensor *other = dsrt_tensor_alloc(ctx, dtype == DSRT_BF16 ? DSRT_F16 : DSRT_BF16, 1, &n);
  dsrt_convert(ctx, other, h);
  torch::Tensor wantOther = want.to(dtype == DSRT_BF16 ? torch::kHalf : torch::kBFloat16);
  sameBits(other->data, wantOther);
  for (dsrt_tensor *t : {in, h, back, other})
    dsrt_tensor_free(ctx, t);
  dsrt_context_destroy(ctx);
}

TEST(Half, Bf16ConversionsRoundAsTorch) { roundTrip(DSRT_BF16, torch::kBFloat16); }
TEST(Half, F16ConversionsRoundAsTorch) { roundTrip(DSRT_F16, torch::kHalf); }

TEST(Half, FillAndSum) {
  dsrt_context *ctx = dsrt_context_create(0, 1, 1);
  int64_t n = 3;
  for (auto [dtype, scalar] : {std::pair{DSRT_BF16, torch::kBFloat16}, {DSRT_F16, torch::kHalf}}) {
    dsrt_tensor *t = dsrt_tensor_alloc(ctx, dtype, 1, &n);
    dsrt_fill(ctx, t, 0.1);
    torch::Tensor want = torch::full({3}, 0.1f).to(scalar);
    EXPECT_EQ(std::memcmp(t->data, want.data_ptr(), 6), 0);
    dsrt_tensor_free(ctx, t);
    torch::Tensor a = awkward().to(scalar), b = (awkward() * 0.37f).to(scalar);
    torch::Tensor sum = (a.to(torch::kFloat) + b.to(torch::kFloat)).to(scalar);
    std::vector<uint16_t> acc(a.numel());
    std::memcpy(acc.data(), b.data_ptr(), acc.size() * 2);
    dsrt::halfAccumulate(dtype, acc.data(), static_cast<const uint16_t *>(a.data_ptr()),
                         a.numel());
    torch::Tensor got = torch::from_blob(acc.data(), {a.numel()}, scalar).to(torch::kFloat);
    EXPECT_TRUE(torch::equal(got.nan_to_num(0), sum.to(torch::kFloat).nan_to_num(0)));
  }
  dsrt_context_destroy(ctx);
}

} // namespace
