// fp16's loss scaler, as DeepSpeed's: a static scale, or a dynamic one that halves on an
// overflow (with ZeRO, once `hysteresis` overflows have been absorbed) and doubles after
// `loss_scale_window` steps without one. The compiled step multiplies the
// loss gradient by the scale, divides the gradients by it and reports whether they overflowed
// (then it left the parameters and optimizer state as they were: the step is skipped).
#ifndef DSRT_DRIVER_LOSS_SCALER_H
#define DSRT_DRIVER_LOSS_SCALER_H

#include "program.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace dsrt::driver {

struct LossScaler {
  bool dynamic = true;
  /// ZeRO stage 0 (DeepSpeed's FP16_Optimizer, fused_optimizer.py): every overflow halves the
  /// scale (no hysteresis) and the minimum only clamps it. ZeRO stages 1-3 use
  /// DynamicLossScaler (loss_scaler.py): hysteresis, and an error at the minimum.
  bool fused = false;
  double scale = 65536, factor = 2, minScale = 1;
  int64_t window = 1000, delayedShift = 2;
  bool consecutiveHysteresis = false;
  // Progress (checkpointed).
  int64_t curHysteresis = 2, lastOverflowIter = -1, curIter = 0;

  /// From the program's compiled scaler and its configured ZeRO stage.
  void configure(const LossScalerSpec &spec, int64_t zeroStage) {
    dynamic = spec.dynamic;
    fused = zeroStage == 0;
    scale = spec.scale;
    window = spec.window;
    delayedShift = curHysteresis = spec.hysteresis;
    minScale = spec.minScale;
    consecutiveHysteresis = spec.consecutiveHysteresis;
  }
  /// The scale after a step that did (or did not) overflow. Returns false when a ZeRO run
  /// overflows at the minimum scale (DeepSpeed raises then).
  bool update(bool overflow) {
    if (!dynamic)
      return true;
    if (overflow) {
      if (fused || delayedShift == 1 || curHysteresis == 1) {
        if (!fused && scale == minScale)
          return false;
        scale = std::max(scale / factor, minScale);
      } else {
        --curHysteresis;
      }
      lastOverflowIter = curIter;
    } else {
      if (consecutiveHysteresis && !fused)
        curHysteresis = delayedShift;
      // Doubles after `window` steps without an overflow since the last one.
      int64_t stable = curIter - lastOverflowIter - 1;
      if (stable > 0 && stable % window == 0) {
        if (!consecutiveHysteresis && !fused)
          curHysteresis = delayedShift;
        scale *= factor;
      }
    }
    ++curIter;
    return true;
  }
};

} // namespace dsrt::driver

#endif // DSRT_DRIVER_LOSS_SCALER_H
