// fp16's loss scaler, as DeepSpeed's: a static scale, or a dynamic one that halves on an
// overflow (with ZeRO, once `hysteresis` overflows have been absorbed) and doubles after
// `loss_scale_window` steps without one. The compiled step multiplies the
// loss gradient by the scale, divides the gradients by it and reports whether they overflowed
// (then it left the parameters and optimizer state as they were: the step is skipped).
#ifndef DSRT_DRIVER_LOSS_SCALER_H
#define DSRT_DRIVER_LOSS_SCALER_H

#include "dsrt/io.h"

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

  /// From the compiled config's "fp16" section and its ZeRO stage.
  void configure(const dsrt::io::Json &fp16, int64_t zeroStage) {
    auto num = [&](const char *k, double d) {
      const dsrt::io::Json *j = fp16.get(k);
      return j && j->kind == dsrt::io::Json::Number ? j->number : d;
    };
    double fixed = num("loss_scale", 0);
    dynamic = fixed == 0;
    fused = zeroStage == 0;
    scale = dynamic ? std::ldexp(1.0, static_cast<int>(num("initial_scale_power", 16))) : fixed;
    window = static_cast<int64_t>(num("loss_scale_window", 1000));
    delayedShift = curHysteresis = static_cast<int64_t>(num("hysteresis", 2));
    minScale = num("min_loss_scale", 1);
    const dsrt::io::Json *c = fp16.get("consecutive_hysteresis");
    consecutiveHysteresis = c && c->kind == dsrt::io::Json::Bool && c->boolean;
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
