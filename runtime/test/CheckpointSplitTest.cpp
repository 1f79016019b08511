// The checkpoint's tensor-parallel geometry (forEachRun, locate) against LibTorch: part p of a
// tensor split along `dim` into `segments` segments of `parts` blocks is torch's concatenation
// of chunk(parts)[p] of every chunk(segments) segment (of split(sizes) ones when unequal: a
// fused projection of grouped-query heads). On an arange tensor every element is its own
// global index, so the runs' global indices must be the part's values in order.
#include "../src/checkpoint/index.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

namespace {

torch::Tensor torchPart(const torch::Tensor &whole, int64_t dim, int64_t segments,
                        int64_t parts, int64_t p, const std::vector<int64_t> &sizes) {
  std::vector<torch::Tensor> pieces;
  for (const torch::Tensor &seg : sizes.empty() ? whole.chunk(segments, dim)
                                                : whole.split_with_sizes(sizes, dim))
    pieces.push_back(seg.chunk(parts, dim)[p]);
  return torch::cat(pieces, dim).contiguous();
}

void checkSplit(std::vector<int64_t> dims, int64_t dim, int64_t segments, int64_t parts,
                std::vector<int64_t> sizes = {}) {
  SCOPED_TRACE("dims " + std::to_string(dims.size()) + "-d, dim " + std::to_string(dim) +
               ", segments " + std::to_string(segments) + ", parts " + std::to_string(parts) +
               ", " + std::to_string(sizes.size()) + " sizes");
  torch::Tensor whole = torch::arange(torch::tensor(dims).prod().item<int64_t>(),
                                      torch::kInt64).reshape(dims);
  dsrt::ckpt::Split s{dim, segments, parts, sizes};
  std::string why;
  ASSERT_TRUE(dsrt::ckpt::validSplit(s, dims[dim], why)) << why;
  std::vector<int64_t> seen(whole.numel(), 0);
  for (int64_t p = 0; p < parts; ++p) {
    torch::Tensor want = torchPart(whole, dim, segments, parts, p, sizes).flatten();
    const int64_t *w = want.data_ptr<int64_t>();
    const int64_t n = want.numel();
    // The whole part, and a range inside it that starts and ends mid-run.
    for (auto [begin, end] : {std::pair<int64_t, int64_t>{0, n}, {n / 3 + 1, n - n / 5}}) {
      int64_t next = begin;
      dsrt::ckpt::forEachRun(dims, s, p, begin, end,
                             [&](int64_t global, int64_t local, int64_t count) {
                               ASSERT_EQ(local, next);
                               for (int64_t i = 0; i < count; ++i)
                                 ASSERT_EQ(global + i, w[local + i]) << "local " << local + i;
                               next += count;
                             });
      EXPECT_EQ(next, end);
    }
    for (int64_t i = 0; i < n; ++i) {
      int64_t part, local, following;
      dsrt::ckpt::locate(dims, s, w[i], part, local, following);
      ASSERT_EQ(part, p);
      ASSERT_EQ(local, i);
      ASSERT_GE(following, 1);
      // `following` elements from it are contiguous in both: the next ones in the part are the
      // next globals, and the one after them is not.
      for (int64_t k = 1; k < following; ++k)
        ASSERT_EQ(w[i + k], w[i] + k);
      if (i + following < n)
        ASSERT_NE(w[i + following], w[i] + following);
      seen[w[i]] += 1;
    }
  }
  for (int64_t v : seen)
    ASSERT_EQ(v, 1); // the parts cover the tensor exactly once
}

TEST(CheckpointSplit, MatchesTorchChunks) {
  checkSplit({8, 6}, 0, 1, 2);       // column-parallel weight
  checkSplit({6, 8}, 1, 1, 2);       // row-parallel weight
  checkSplit({24, 4}, 0, 3, 2);      // fused q/k/v: three segments
  checkSplit({24, 4}, 0, 3, 4);
  checkSplit({12}, 0, 3, 2);         // a fused bias
  checkSplit({2, 12, 3}, 1, 2, 3);   // a middle dimension
  checkSplit({5, 4, 8}, 2, 1, 4);    // the last, after two
  checkSplit({64, 4}, 0, 3, 2, {32, 16, 16}); // Phi3's qkv_proj: 4 query, 2 key/value heads
  checkSplit({64, 4}, 0, 3, 4, {32, 16, 16});
  checkSplit({64}, 0, 3, 2, {32, 16, 16});    // its bias
  checkSplit({2, 24, 3}, 1, 3, 2, {4, 12, 8}); // a middle dimension
}

TEST(CheckpointSplit, UnequalSegmentsChecked) {
  std::string why;
  EXPECT_FALSE(dsrt::ckpt::validSplit({0, 3, 2, {32, 16, 15}}, 63, why)); // 15 rows over 2
  EXPECT_NE(why.find("not a multiple of the parts"), std::string::npos) << why;
  EXPECT_FALSE(dsrt::ckpt::validSplit({0, 3, 2, {32, 16, 16}}, 62, why));
  EXPECT_NE(why.find("do not add up"), std::string::npos) << why;
  EXPECT_FALSE(dsrt::ckpt::validSplit({0, 2, 2, {32, 16, 16}}, 64, why)); // 3 sizes, 2 segments
}

TEST(CheckpointSplit, WholeIsOneRun) {
  std::vector<int64_t> dims{3, 5};
  int64_t runs = 0;
  dsrt::ckpt::forEachRun(dims, dsrt::ckpt::Split{}, 0, 2, 11,
                         [&](int64_t global, int64_t local, int64_t n) {
                           EXPECT_EQ(global, 2);
                           EXPECT_EQ(local, 2);
                           EXPECT_EQ(n, 9);
                           ++runs;
                         });
  EXPECT_EQ(runs, 1);
  int64_t part, local, following;
  dsrt::ckpt::locate(dims, dsrt::ckpt::Split{}, 4, part, local, following);
  EXPECT_EQ(part, 0);
  EXPECT_EQ(local, 4);
  EXPECT_EQ(following, 11);
}

} // namespace
