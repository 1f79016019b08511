//===- CommTest.cpp - the MPI channel's collectives, run under mpirun -np 2 ------===//
//
// Each rank fills its inputs with values that depend on its rank and the element index; every
// expected result is computed here from that formula, not by another collective. Run with
// DSRT_TEST_MPI_MAX_COUNT set small, every collective is split into many calls (the path
// that messages beyond INT_MAX elements take); the Large tests move more than 2^31 bytes per
// rank for real.
//
#include "dsrt/dsrt.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <cstring>
#include <vector>

namespace {

dsrt_context *ctx() {
  static dsrt_context *c = [] {
    dsrt_context *x = dsrt_context_create(0, 1, 1);
    dsrt_comm_init(x, 0);
    dsrt_comm_set_timeout(x, 120);
    return x;
  }();
  return c;
}
int32_t rank() { return dsrt_comm_rank(ctx()); }
int32_t size() { return dsrt_comm_size(ctx()); }

dsrt_tensor *alloc(int32_t dtype, int64_t n) { return dsrt_tensor_alloc(ctx(), dtype, 1, &n); }
void finish(dsrt_event *e) {
  dsrt_event_wait(ctx(), e);
  dsrt_event_release(e);
}
/// Rank r's value at element i: distinct per rank and position, exact in f32 and bf16 sums.
float value(int r, int64_t i) { return static_cast<float>((i % 97) * (r + 1) + r); }
float sumOverRanks(int64_t i) {
  float s = 0;
  for (int r = 0; r < size(); ++r)
    s += value(r, i);
  return s;
}

TEST(Comm, AllReduceInPlaceAndNot) {
  const int64_t n = 1000;
  dsrt_tensor *a = alloc(DSRT_F32, n), *b = alloc(DSRT_F32, n);
  for (int64_t i = 0; i < n; ++i)
    static_cast<float *>(a->data)[i] = value(rank(), i);
  finish(dsrt_all_reduce(ctx(), DSRT_GROUP_WORLD, b, a, DSRT_COMM_SUM));
  finish(dsrt_all_reduce(ctx(), DSRT_GROUP_WORLD, a, a, DSRT_COMM_SUM));
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(static_cast<float *>(b->data)[i], sumOverRanks(i)) << "element " << i;
    ASSERT_EQ(static_cast<float *>(a->data)[i], sumOverRanks(i)) << "element " << i;
  }
  dsrt_tensor_free(ctx(), a);
  dsrt_tensor_free(ctx(), b);
}

TEST(Comm, AllReduceMaxI64AndBf16Sum) {
  const int64_t n = 333;
  dsrt_tensor *a = alloc(DSRT_I64, n), *h = alloc(DSRT_BF16, n);
  for (int64_t i = 0; i < n; ++i) {
    static_cast<int64_t *>(a->data)[i] = (i * 7919 + rank() * 104729) % 1000003;
    // bf16 of small integers is exact: the upper half of the f32.
    float v = static_cast<float>(i % 13 + rank());
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    static_cast<uint16_t *>(h->data)[i] = static_cast<uint16_t>(bits >> 16);
  }
  finish(dsrt_all_reduce(ctx(), DSRT_GROUP_WORLD, a, a, DSRT_COMM_MAX));
  finish(dsrt_all_reduce(ctx(), DSRT_GROUP_WORLD, h, h, DSRT_COMM_SUM));
  for (int64_t i = 0; i < n; ++i) {
    int64_t want = 0;
    float sum = 0;
    for (int r = 0; r < size(); ++r) {
      want = std::max<int64_t>(want, (i * 7919 + r * 104729) % 1000003);
      sum += static_cast<float>(i % 13 + r);
    }
    ASSERT_EQ(static_cast<int64_t *>(a->data)[i], want);
    uint32_t bits = static_cast<uint32_t>(static_cast<uint16_t *>(h->data)[i]) << 16;
    float got;
    std::memcpy(&got, &bits, 4);
    ASSERT_EQ(got, sum);
  }
  dsrt_tensor_free(ctx(), a);
  dsrt_tensor_free(ctx(), h);
}

TEST(Comm, AllGatherInPlaceAndNot) {
  const int64_t n = 1001; // bytes per rank, not a multiple of any split
  dsrt_tensor *mine = alloc(DSRT_I1, n), *out = alloc(DSRT_I1, n * size()),
              *place = alloc(DSRT_I1, n * size());
  auto byte = [](int r, int64_t i) { return static_cast<uint8_t>((i * 31 + r * 7) & 0xff); };
  for (int64_t i = 0; i < n; ++i) {
    static_cast<uint8_t *>(mine->data)[i] = byte(rank(), i);
    static_cast<uint8_t *>(place->data)[rank() * n + i] = byte(rank(), i);
  }
  finish(dsrt_all_gather(ctx(), DSRT_GROUP_WORLD, out, mine));
  dsrt_tensor *part = dsrt_tensor_view_at(ctx(), place, rank() * n, 1, &n);
  finish(dsrt_all_gather(ctx(), DSRT_GROUP_WORLD, place, part));
  for (int r = 0; r < size(); ++r)
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(static_cast<uint8_t *>(out->data)[r * n + i], byte(r, i));
      ASSERT_EQ(static_cast<uint8_t *>(place->data)[r * n + i], byte(r, i));
    }
  for (dsrt_tensor *t : {mine, out, part, place})
    dsrt_tensor_free(ctx(), t);
}

TEST(Comm, ReduceScatter) {
  const int64_t n = 500; // elements per rank
  dsrt_tensor *in = alloc(DSRT_F32, n * size()), *out = alloc(DSRT_F32, n);
  for (int64_t i = 0; i < n * size(); ++i)
    static_cast<float *>(in->data)[i] = value(rank(), i);
  finish(dsrt_reduce_scatter(ctx(), DSRT_GROUP_WORLD, out, in, DSRT_COMM_SUM));
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(static_cast<float *>(out->data)[i], sumOverRanks(rank() * n + i)) << i;
  // Into this rank's own part of the input (in place).
  dsrt_tensor *own = dsrt_tensor_view_at(ctx(), in, rank() * n, 1, &n);
  finish(dsrt_reduce_scatter(ctx(), DSRT_GROUP_WORLD, own, in, DSRT_COMM_SUM));
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(static_cast<float *>(own->data)[i], sumOverRanks(rank() * n + i)) << i;
  for (dsrt_tensor *t : {in, out, own})
    dsrt_tensor_free(ctx(), t);
}

TEST(Comm, GatherToOneRank) {
  // Rank q sends 100 q + 3 bytes; rank 1 receives them in rank order.
  std::vector<int64_t> bytes(size());
  int64_t total = 0;
  for (int q = 0; q < size(); ++q)
    total += bytes[q] = 100 * q + 3;
  std::vector<uint8_t> mine(bytes[rank()]), all(rank() == 1 ? total : 0);
  for (size_t i = 0; i < mine.size(); ++i)
    mine[i] = static_cast<uint8_t>(rank() * 50 + i);
  finish(dsrt_gather(ctx(), DSRT_GROUP_WORLD, all.data(), mine.data(), bytes.data(), 1));
  if (rank() != 1)
    return;
  int64_t at = 0;
  for (int q = 0; q < size(); ++q)
    for (int64_t i = 0; i < bytes[q]; ++i, ++at)
      ASSERT_EQ(all[at], static_cast<uint8_t>(q * 50 + i)) << "rank " << q << " byte " << i;
}

TEST(Comm, BroadcastAndAgree) {
  const int64_t n = 1003;
  dsrt_tensor *t = alloc(DSRT_I1, n);
  for (int64_t i = 0; i < n; ++i)
    static_cast<uint8_t *>(t->data)[i] = static_cast<uint8_t>(rank() == 1 ? i * 3 : 0);
  finish(dsrt_comm_broadcast(ctx(), DSRT_GROUP_WORLD, t, 1));
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(static_cast<uint8_t *>(t->data)[i], static_cast<uint8_t>(i * 3));
  dsrt_tensor_free(ctx(), t);
  char msg[64] = "unchanged";
  EXPECT_EQ(dsrt_comm_agree(ctx(), nullptr, msg, sizeof msg), -1);
  EXPECT_STREQ(msg, "unchanged");
  // Ranks 1 and up fail: the lowest one's message reaches every rank.
  std::string mine = "rank " + std::to_string(rank()) + " failed";
  EXPECT_EQ(dsrt_comm_agree(ctx(), rank() >= 1 ? mine.c_str() : nullptr, msg, sizeof msg), 1);
  EXPECT_STREQ(msg, "rank 1 failed");
  dsrt_comm_barrier(ctx());
}

// One rank's fatal error ends every rank: rank 1 ends the job while rank 0 waits in a
// collective that rank 1 never joins (run alone: --gtest_filter=Abort.*).
TEST(Abort, EndsEveryRank) {
  if (rank() == 1) {
    std::fprintf(stderr, "dsrt-test: rank 1 ends the job\n");
    dsrt_comm_abort(ctx(), 3);
  }
  int64_t one = 1;
  float v = 1;
  dsrt_tensor *t = dsrt_tensor_borrow(ctx(), DSRT_F32, 1, &one, &v);
  finish(dsrt_all_reduce(ctx(), DSRT_GROUP_WORLD, t, t, DSRT_COMM_SUM));
  FAIL() << "rank " << rank() << " was not ended";
}

// More than 2^31 bytes per rank (ctest label `large`: run with --gtest_filter=Large.*).
const int64_t kLarge = (int64_t(1) << 31) + 64;

TEST(Large, AllGatherInPlace) {
  dsrt_tensor *all = alloc(DSRT_I1, kLarge * size());
  uint8_t *d = static_cast<uint8_t *>(all->data);
  auto byte = [](int r, int64_t i) { return static_cast<uint8_t>((i + r * 101 + (i >> 20)) & 0xff); };
  for (int64_t i = 0; i < kLarge; ++i)
    d[rank() * kLarge + i] = byte(rank(), i);
  dsrt_tensor *part = dsrt_tensor_view_at(ctx(), all, rank() * kLarge, 1, &kLarge);
  finish(dsrt_all_gather(ctx(), DSRT_GROUP_WORLD, all, part));
  for (int r = 0; r < size(); ++r)
    for (int64_t i = 0; i < kLarge; ++i)
      if (d[r * kLarge + i] != byte(r, i))
        FAIL() << "rank " << r << "'s byte " << i << " is " << int(d[r * kLarge + i]);
  dsrt_tensor_free(ctx(), part);
  dsrt_tensor_free(ctx(), all);
}

TEST(Large, AllReduceInPlace) {
  const int64_t n = kLarge / 4; // f32 elements: more than 2^31 bytes
  dsrt_tensor *t = alloc(DSRT_F32, n);
  float *d = static_cast<float *>(t->data);
  for (int64_t i = 0; i < n; ++i)
    d[i] = value(rank(), i);
  finish(dsrt_all_reduce(ctx(), DSRT_GROUP_WORLD, t, t, DSRT_COMM_SUM));
  for (int64_t i = 0; i < n; ++i)
    if (d[i] != sumOverRanks(i))
      FAIL() << "element " << i << " is " << d[i] << ", want " << sumOverRanks(i);
  dsrt_tensor_free(ctx(), t);
}

} // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ctx();
  int rc = RUN_ALL_TESTS();
  dsrt_context_destroy(ctx());
  return rc;
}
