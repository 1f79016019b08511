//===- half_rows.h - 16-bit values as f32 and back, for the CPU's kernels --===//
//
// The CPU computes on bf16 and f16 tensors in f32, rounding each result once to nearest even
// as PyTorch's 16-bit CPU kernels do: these are the conversions, over rows (built per ISA) and
// as element functions that inline into a kernel's own vector loop.
//
#ifndef DSRT_CPU_HALF_ROWS_H
#define DSRT_CPU_HALF_ROWS_H

#include "cpu_device.h"
#include "../core/half.h"

#include <initializer_list>
#include <vector>

namespace dsrt::cpu {

/// y[i] = x[i] as f32 over one row of `n` 16-bit values of `dtype`.
void widenRow(int32_t dtype, float *__restrict y, const uint16_t *__restrict x, int64_t n);
/// y[i] = x[i] (+ bias[i] in f32 where given), rounded to `dtype`, over one row.
void narrowRow(int32_t dtype, uint16_t *__restrict y, const float *__restrict x,
               const float *__restrict bias, int64_t n);

/// widenRow and narrowRow over a whole array of `n` values, in chunks over the threads.
void widenArray(int32_t dtype, float *y, const uint16_t *x, int64_t n);
void narrowArray(int32_t dtype, uint16_t *y, const float *x, int64_t n);

/// Scratch row `i` (0, 1 or 2) of the calling thread, of at least `n` floats: where a 16-bit
/// kernel widens its operands' rows (kernel workspace, outside the arena's count).
inline float *threadRow(int i, int64_t n) {
  thread_local std::vector<float> rows[3];
  if ((int64_t)rows[i].size() < n)
    rows[i].resize(static_cast<size_t>(n));
  return rows[i].data();
}

/// The element conversions of one 16-bit type, for a loop that stores 16 bits and computes in
/// f32 (withHalf picks the type at run time).
struct Bf16Elements {
  using T = uint16_t;
  static constexpr int32_t kDtype = DSRT_BF16;
  static float load(uint16_t v) { return bf16ToFloat(v); }
  static uint16_t store(float v) { return floatToBf16(v); }
};
struct F16Elements {
  using T = uint16_t;
  static constexpr int32_t kDtype = DSRT_F16;
  static float load(uint16_t v) { return f16ToFloat(v); }
  static uint16_t store(float v) { return floatToF16(v); }
};
/// The same for f32 values, for loops written once for all three types.
struct F32Elements {
  using T = float;
  static float load(float v) { return v; }
  static float store(float v) { return v; }
};
/// Calls f with Bf16Elements() or F16Elements() for `dtype` (DSRT_BF16 or DSRT_F16).
template <class F> void withHalf(int32_t dtype, F &&f) {
  if (dtype == DSRT_BF16)
    f(Bf16Elements());
  else
    f(F16Elements());
}

/// A kernel's 16-bit call made on f32 copies, for the layouts that its 16-bit form has no
/// loops of its own for: the operands widened on construction, the result rounded into the
/// 16-bit one when it goes. The copies are kernel workspace, outside the arena's count.
class WidenedCall {
public:
  WidenedCall(dsrt_tensor *out, std::initializer_list<const dsrt_tensor *> ins);
  ~WidenedCall();
  WidenedCall(const WidenedCall &) = delete;
  WidenedCall &operator=(const WidenedCall &) = delete;
  dsrt_tensor *out() { return &wide[0]; }
  const dsrt_tensor *in(size_t i) const { return &wide[i + 1]; }

private:
  dsrt_tensor *result;
  std::vector<dsrt_tensor> wide;          ///< the result's copy, then the operands'
  std::vector<std::vector<float>> values; ///< their f32 values
};

} // namespace dsrt::cpu

#endif // DSRT_CPU_HALF_ROWS_H
