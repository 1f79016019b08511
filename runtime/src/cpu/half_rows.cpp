//===- half_rows.cpp - 16-bit rows as f32 and back (half_rows.h) ----------===//
#include "half_rows.h"
#include "avx512_lanes.h"

#include <algorithm>

using namespace dsrt;
using namespace dsrt::cpu;

namespace {
// bf16 in 16 lanes of AVX-512F, written out (avx512_lanes.h): GCC vectorizes the loops below at 8
// lanes in its AVX-512F clone (16-bit lanes in a zmm need AVX512BW, which target_clones cannot
// name), and rounding took ~35 instructions per 16 values there (a GELU in bf16 spent 40% of
// its time in the two conversions).
__attribute__((target("avx512f"))) void widenBf16x16(float *__restrict y,
                                                     const uint16_t *__restrict x, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, loadBf16x16(x + i));
  for (; i < n; ++i)
    y[i] = bf16ToFloat(x[i]);
}
__attribute__((target("avx512f"))) void narrowBf16x16(uint16_t *__restrict y,
                                                      const float *__restrict x,
                                                      const float *__restrict bias, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    storeBf16x16(y + i, bias ? _mm512_add_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(bias + i))
                             : _mm512_loadu_ps(x + i));
  for (; i < n; ++i)
    y[i] = floatToBf16(bias ? x[i] + bias[i] : x[i]);
}
} // namespace

// Built per ISA: the conversions are memory-bound passes over the operands. The lambdas inline
// into each clone.
DSRT_CPU_CLONES static void widenLoop(int32_t dtype, float *__restrict y,
                                      const uint16_t *__restrict x, int64_t n) {
  auto loop = [&](auto widen1) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i)
      y[i] = widen1(x[i]);
  };
  if (dtype == DSRT_BF16)
    loop([](uint16_t v) { return bf16ToFloat(v); });
  else
    loop([](uint16_t v) { return f16ToFloat(v); });
}

DSRT_CPU_CLONES static void narrowLoop(int32_t dtype, uint16_t *__restrict y,
                                       const float *__restrict x, const float *__restrict bias,
                                       int64_t n) {
  auto loop = [&](auto round) {
    if (bias) {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i)
        y[i] = round(x[i] + bias[i]);
    } else {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i)
        y[i] = round(x[i]);
    }
  };
  if (dtype == DSRT_BF16)
    loop([](float v) { return floatToBf16(v); });
  else
    loop([](float v) { return floatToF16(v); });
}

void dsrt::cpu::widenRow(int32_t dtype, float *__restrict y, const uint16_t *__restrict x,
                         int64_t n) {
  if (dtype == DSRT_BF16 && avx512Bf16Lanes())
    return widenBf16x16(y, x, n);
  widenLoop(dtype, y, x, n);
}

void dsrt::cpu::narrowRow(int32_t dtype, uint16_t *__restrict y, const float *__restrict x,
                          const float *__restrict bias, int64_t n) {
  if (dtype == DSRT_BF16 && avx512Bf16Lanes())
    return narrowBf16x16(y, x, bias, n);
  narrowLoop(dtype, y, x, bias, n);
}

namespace {
constexpr int64_t kRow = 1 << 14;
} // namespace

void dsrt::cpu::widenArray(int32_t dtype, float *y, const uint16_t *x, int64_t n) {
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
  for (int64_t at = 0; at < n; at += kRow)
    widenRow(dtype, y + at, x + at, std::min(kRow, n - at));
}

void dsrt::cpu::narrowArray(int32_t dtype, uint16_t *y, const float *x, int64_t n) {
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
  for (int64_t at = 0; at < n; at += kRow)
    narrowRow(dtype, y + at, x + at, nullptr, std::min(kRow, n - at));
}

dsrt::cpu::WidenedCall::WidenedCall(dsrt_tensor *out,
                                    std::initializer_list<const dsrt_tensor *> ins)
    : result(out) {
  std::vector<const dsrt_tensor *> all{out};
  all.insert(all.end(), ins.begin(), ins.end());
  values.resize(all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    const dsrt_tensor *t = all[i];
    values[i].resize(static_cast<size_t>(t->numel));
    dsrt_tensor w = *t;
    w.dtype = DSRT_F32;
    w.data = values[i].data();
    w.storage = nullptr;
    wide.push_back(w);
    if (i == 0)
      continue;
    widenArray(t->dtype, values[i].data(), (const uint16_t *)t->data, t->numel);
  }
}

dsrt::cpu::WidenedCall::~WidenedCall() {
  narrowArray(result->dtype, (uint16_t *)result->data, values[0].data(), result->numel);
}
