//===- schedule.cpp - DeepSpeed's learning-rate schedules --------------------===//
//
// WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle and LRRangeTest as
// deepspeed/runtime/lr_schedules.py computes them, from a schedule whose parameters ds-opt
// resolved (the program descriptor's "run.lr"); shared by the training driver and
// ds-reference so that both apply the same lr (and OneCycle's momentum) at each step.
//
#include "dsrt/io.h"

#include <algorithm>
#include <cmath>

namespace dsrt::io {
namespace {
/// The warm-up fraction at batch iteration `it` (< warmup steps).
double warmupGamma(double it, double warmupSteps, bool linear) {
  if (linear)
    return it / warmupSteps;
  return (1.0 / std::log(warmupSteps)) * std::log(it + 1);
}

/// OneCycle's position in [0, 1] within the cycle at batch iteration `it` (_get_scale_factor).
double oneCycleScale(const LrSchedule &p, int64_t it) {
  double first = p.cycleFirstStepSize, second = p.cycleSecondStepSize;
  double total = first + second, ratio = first / total;
  double batch = static_cast<double>(it + 1);
  double cycle = std::floor(1 + batch / total);
  double x = 1. + batch / total - cycle;
  double scale;
  double stairs;
  if (x <= ratio) {
    scale = x / ratio;
    stairs = static_cast<double>(p.cycleFirstStairCount);
  } else {
    scale = (x - 1) / (ratio - 1);
    stairs = static_cast<double>(p.cycleSecondStairCount);
  }
  // Stairs hold the value flat over each 1/stairs of a half cycle, from the batch offset.
  if (stairs > 0) {
    double inCycle = std::fmod(batch, total);
    double position = inCycle <= first ? inCycle * stairs / first
                                       : (total - inCycle) * stairs / second;
    scale = std::floor(position) / stairs;
  }
  return scale;
}

StepScalars oneCycle(const LrSchedule &p, int64_t it, StepScalars s) {
  double minLr = p.cycleMinLr, maxLr = p.cycleMaxLr;
  double minMom = p.cycleMinMom, maxMom = p.cycleMaxMom;
  double total = p.cycleFirstStepSize + p.cycleSecondStepSize;
  double lr, mom;
  if (it < 0) { // the constructor's values: the cycle's minima
    lr = minLr;
    mom = minMom;
  } else if (it < total) {
    double scale = oneCycleScale(p, it);
    lr = minLr + (maxLr - minLr) * scale;
    mom = maxMom - (maxMom - minMom) * scale;
  } else {
    // After the cycle: decay from the minimum lr and the maximum momentum, unless
    // decay_step_size (both) or the rate (each) is 0.
    double interval = p.decayStepSize != 0 ? (it - total + 1) / p.decayStepSize : 0;
    lr = p.decayStepSize == 0 || p.decayLrRate == 0 ? minLr
                                                     : minLr / (1 + p.decayLrRate * interval);
    mom = p.decayStepSize == 0 || p.decayMomRate == 0 ? maxMom
                                                       : maxMom * (1 + p.decayMomRate * interval);
  }
  if (p.cycleMomentum)
    s.beta1 = mom;
  s.lr = s.auxLr = lr;
  return s;
}

StepScalars rangeTest(const LrSchedule &p, int64_t it, StepScalars s) {
  double lr = p.rangeTestMinLr;
  if (it >= 0) {
    double interval = static_cast<double>(it + 1) / p.rangeTestStepSize;
    if (p.rangeTestStaircase)
      interval = std::floor(interval);
    lr *= 1 + p.rangeTestStepRate * interval;
  }
  s.lr = s.auxLr = lr;
  return s;
}

/// WarmupCosineLR scales each group's own lr.
StepScalars warmupCosine(const LrSchedule &p, int64_t it, StepScalars s) {
  // DeepSpeed clamps the warm-up to at least 2 steps.
  double warmup = std::max<double>(2.0, static_cast<double>(p.warmupNumSteps));
  double ratio = 0.0; // get_lr() before the first scheduler step
  if (it >= 0) {
    if (it < warmup) {
      ratio = warmupGamma(static_cast<double>(it), warmup, p.warmupLinear);
      ratio = p.warmupMinRatio + ratio * (1.0 - p.warmupMinRatio);
    } else {
      double realLast = static_cast<double>(it) - warmup + 1;
      double realTotal = std::max(1.0, static_cast<double>(p.totalNumSteps) - warmup);
      double progress = std::min(1.0, realLast / realTotal);
      ratio = (1 + std::cos(M_PI * progress)) / 2;
      ratio = std::max(0.0, p.cosMinRatio + (1.0 - p.cosMinRatio) * ratio);
    }
  }
  s.lr *= ratio;
  s.auxLr *= ratio;
  return s;
}

/// WarmupLR and WarmupDecayLR: min_lr + (max_lr - min_lr) * gamma, for every group.
StepScalars warmup(const LrSchedule &p, int64_t it, StepScalars s, bool decay) {
  double warmupSteps = std::max<double>(2.0, static_cast<double>(p.warmupNumSteps));
  double gamma = 0;
  if (it < 0)
    gamma = 0;
  else if (it < warmupSteps)
    gamma = warmupGamma(static_cast<double>(it), warmupSteps, p.warmupLinear);
  else if (decay)
    gamma = std::max(0.0, (static_cast<double>(p.totalNumSteps) - static_cast<double>(it)) /
                              std::max(1.0, static_cast<double>(p.totalNumSteps) - warmupSteps));
  else
    gamma = 1.0;
  s.lr = s.auxLr = p.warmupMinLr + (p.warmupMaxLr - p.warmupMinLr) * gamma;
  return s;
}
} // namespace

StepScalars scheduled(const LrSchedule &p, int64_t step) {
  StepScalars s;
  s.lr = p.base;
  s.auxLr = p.auxBase;
  s.beta1 = p.beta1;
  int64_t it = step - 2; // the scheduler's last_batch_iteration when step `step` runs
  switch (p.kind) {
  case DSRT_LR_CONSTANT:
    return s;
  case DSRT_LR_WARMUP:
    return warmup(p, it, s, false);
  case DSRT_LR_WARMUP_DECAY:
    return warmup(p, it, s, true);
  case DSRT_LR_WARMUP_COSINE:
    return warmupCosine(p, it, s);
  case DSRT_LR_ONE_CYCLE:
    return oneCycle(p, it, s);
  case DSRT_LR_RANGE_TEST:
    return rangeTest(p, it, s);
  }
  return s;
}

bool readLrSchedule(const Json &j, LrSchedule &p, std::string &err) {
  bool ok = true;
  auto number = [&](const char *key, double &out) {
    const Json *v = j.get(key);
    if (!v || !v->isNumber())
      ok = false, err = err.empty() ? std::string("lr.") + key : err;
    else
      out = v->number;
  };
  auto integer = [&](const char *key, int64_t &out) {
    double d = 0;
    number(key, d);
    out = static_cast<int64_t>(d);
  };
  auto flag = [&](const char *key, bool &out) {
    const Json *v = j.get(key);
    if (!v || v->kind != Json::Bool)
      ok = false, err = err.empty() ? std::string("lr.") + key : err;
    else
      out = v->boolean;
  };
  const Json *kind = j.get("kind");
  int32_t k = kind && kind->isString() ? dsrt_lr_schedule_from_name(kind->text.c_str()) : -1;
  if (k < 0) {
    err = "lr.kind";
    return false;
  }
  p.kind = static_cast<dsrt_lr_schedule>(k);
  number("base", p.base);
  number("aux_base", p.auxBase);
  number("beta1", p.beta1);
  number("warmup_from", p.warmupMinLr);
  number("warmup_to", p.warmupMaxLr);
  integer("warmup_steps", p.warmupNumSteps);
  flag("warmup_linear", p.warmupLinear);
  integer("total_steps", p.totalNumSteps);
  number("warmup_from_ratio", p.warmupMinRatio);
  number("cosine_floor_ratio", p.cosMinRatio);
  number("cycle_low", p.cycleMinLr);
  number("cycle_high", p.cycleMaxLr);
  number("decay_rate", p.decayLrRate);
  number("cycle_rise_steps", p.cycleFirstStepSize);
  number("cycle_fall_steps", p.cycleSecondStepSize);
  integer("cycle_rise_stairs", p.cycleFirstStairCount);
  integer("cycle_fall_stairs", p.cycleSecondStairCount);
  number("decay_interval", p.decayStepSize);
  flag("cycle_beta1", p.cycleMomentum);
  number("momentum_low", p.cycleMinMom);
  number("momentum_high", p.cycleMaxMom);
  number("momentum_decay_rate", p.decayMomRate);
  number("range_start", p.rangeTestMinLr);
  number("range_interval", p.rangeTestStepSize);
  number("range_rate", p.rangeTestStepRate);
  flag("range_staircase", p.rangeTestStaircase);
  return ok;
}
} // namespace dsrt::io
