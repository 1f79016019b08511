//===- half_rows.cpp - 16-bit rows as f32 and back (half_rows.h) ----------===//
#include "half_rows.h"

#include <algorithm>

using namespace dsrt;

// Built per ISA: the conversions are memory-bound passes over the operands. The lambdas inline
// into each clone.
DSRT_CPU_CLONES void dsrt::cpu::widenRow(int32_t dtype, float *__restrict y,
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

DSRT_CPU_CLONES void dsrt::cpu::narrowRow(int32_t dtype, uint16_t *__restrict y,
                                          const float *__restrict x,
                                          const float *__restrict bias, int64_t n) {
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

namespace {
constexpr int64_t kRow = 1 << 14;
} // namespace

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
    const uint16_t *src = (const uint16_t *)t->data;
    float *dst = values[i].data();
    const int64_t n = t->numel;
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
    for (int64_t at = 0; at < n; at += kRow)
      widenRow(t->dtype, dst + at, src + at, std::min(kRow, n - at));
  }
}

dsrt::cpu::WidenedCall::~WidenedCall() {
  uint16_t *dst = (uint16_t *)result->data;
  const float *src = values[0].data();
  const int64_t n = result->numel;
  const int32_t dtype = result->dtype;
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
  for (int64_t at = 0; at < n; at += kRow)
    narrowRow(dtype, dst + at, src + at, nullptr, std::min(kRow, n - at));
}
