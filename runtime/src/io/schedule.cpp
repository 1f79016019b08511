//===- schedule.cpp - DeepSpeed's learning-rate schedules --------------------===//
//
// WarmupLR, WarmupDecayLR and WarmupCosineLR as deepspeed/runtime/lr_schedules.py computes them,
// shared by the training driver and ds-reference so that both apply the same lr at each step.
//
#include "dsrt/io.h"

#include <algorithm>
#include <cmath>

namespace dsrt::io {
namespace {
double number(const Json *obj, const char *key, double fallback) {
  const Json *v = obj ? obj->get(key) : nullptr;
  return v && v->isNumber() ? v->number : fallback;
}

/// The warm-up fraction at batch iteration `it` (< warmup steps).
double warmupGamma(double it, double warmupSteps, bool linear) {
  if (linear)
    return it / warmupSteps;
  return (1.0 / std::log(warmupSteps)) * std::log(it + 1);
}
} // namespace

double scheduledLr(const Json &config, int64_t step) {
  const Json *optim = config.get("optimizer");
  double lr = number(optim ? optim->get("params") : nullptr, "lr", 0.0);
  const Json *sch = config.get("scheduler");
  const Json *type = sch ? sch->get("type") : nullptr;
  if (!type || !type->isString())
    return lr;
  const Json *p = sch->get("params");
  // DeepSpeed clamps the warm-up to at least 2 steps.
  double warmup = std::max(2.0, number(p, "warmup_num_steps", 1000));
  const Json *wt = p ? p->get("warmup_type") : nullptr;
  bool linear = wt && wt->isString() && wt->text == "linear";
  double total = number(p, "total_num_steps", 0);
  int64_t it = step - 2; // the scheduler's last_batch_iteration when step `step` runs

  if (type->text == "WarmupCosineLR") {
    if (it < 0)
      return 0.0; // get_lr() before the first scheduler step
    double minRatio = number(p, "warmup_min_ratio", 0.0);
    double cosMin = number(p, "cos_min_ratio", 0.0001);
    double ratio;
    if (it < warmup) {
      ratio = warmupGamma(it, warmup, linear);
      ratio = minRatio + ratio * (1.0 - minRatio);
    } else {
      double realLast = it - warmup + 1;
      double realTotal = std::max(1.0, total - warmup);
      double progress = std::min(1.0, realLast / realTotal);
      ratio = (1 + std::cos(M_PI * progress)) / 2;
      ratio = std::max(0.0, cosMin + (1.0 - cosMin) * ratio);
    }
    return lr * ratio;
  }

  // WarmupLR and WarmupDecayLR: min_lr + (max_lr - min_lr) * gamma.
  double minLr = number(p, "warmup_min_lr", 0.0);
  double maxLr = number(p, "warmup_max_lr", lr);
  if (it < 0)
    return minLr;
  double gamma;
  if (it < warmup)
    gamma = warmupGamma(it, warmup, linear);
  else if (type->text == "WarmupDecayLR")
    gamma = std::max(0.0, (total - it) / std::max(1.0, total - warmup));
  else
    gamma = 1.0;
  return minLr + (maxLr - minLr) * gamma;
}
} // namespace dsrt::io
