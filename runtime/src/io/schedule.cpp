//===- schedule.cpp - DeepSpeed's learning-rate schedules --------------------===//
//
// WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle and LRRangeTest as
// deepspeed/runtime/lr_schedules.py computes them, shared by the training driver and
// ds-reference so that both apply the same lr (and OneCycle's momentum) at each step.
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
bool flag(const Json *obj, const char *key, bool fallback) {
  const Json *v = obj ? obj->get(key) : nullptr;
  return v && v->kind == Json::Bool ? v->boolean : fallback;
}

/// The warm-up fraction at batch iteration `it` (< warmup steps).
double warmupGamma(double it, double warmupSteps, bool linear) {
  if (linear)
    return it / warmupSteps;
  return (1.0 / std::log(warmupSteps)) * std::log(it + 1);
}

/// OneCycle's position in [0, 1] within the cycle at batch iteration `it` (_get_scale_factor).
double oneCycleScale(const Json *p, int64_t it) {
  double first = number(p, "cycle_first_step_size", 2000);
  double second = number(p, "cycle_second_step_size", first);
  double total = first + second, ratio = first / total;
  double batch = static_cast<double>(it + 1);
  double cycle = std::floor(1 + batch / total);
  double x = 1. + batch / total - cycle;
  double scale;
  double stairs;
  if (x <= ratio) {
    scale = x / ratio;
    stairs = number(p, "cycle_first_stair_count", 0);
  } else {
    scale = (x - 1) / (ratio - 1);
    stairs = number(p, "cycle_second_stair_count", 0);
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
} // namespace

StepScalars scheduled(const Json &config, int64_t step) {
  const Json *optim = config.get("optimizer");
  const Json *op = optim ? optim->get("params") : nullptr;
  StepScalars s;
  s.lr = number(op, "lr", 0.0);
  const Json *optType = optim ? optim->get("type") : nullptr;
  bool muon = optType && optType->isString() && optType->text == "Muon";
  s.auxLr = muon ? number(op, "adam_lr", s.lr) : s.lr;
  const Json *betas = op ? op->get("betas") : nullptr;
  s.beta1 = betas && betas->kind == Json::Array && !betas->items.empty()
                ? betas->items[0].number
                : 0.9;

  const Json *sch = config.get("scheduler");
  const Json *type = sch ? sch->get("type") : nullptr;
  if (!type || !type->isString())
    return s;
  const Json *p = sch->get("params");
  int64_t it = step - 2; // the scheduler's last_batch_iteration when step `step` runs
  const std::string &t = type->text;
  // Every schedule but WarmupCosineLR sets all groups to one lr; WarmupCosineLR scales each
  // group's own.
  auto all = [&](double lr) {
    s.lr = s.auxLr = lr;
    return s;
  };

  if (t == "OneCycle") {
    double minLr = number(p, "cycle_min_lr", 0), maxLr = number(p, "cycle_max_lr", 0);
    double minMom = number(p, "cycle_min_mom", 0.8), maxMom = number(p, "cycle_max_mom", 0.9);
    bool cycleMomentum = flag(p, "cycle_momentum", true);
    double first = number(p, "cycle_first_step_size", 2000);
    double total = first + number(p, "cycle_second_step_size", first);
    double decaySize = number(p, "decay_step_size", 0);
    double lrRate = number(p, "decay_lr_rate", 0), momRate = number(p, "decay_mom_rate", 0);
    if (it < 0) { // the constructor's values: the cycle's minima
      if (cycleMomentum)
        s.beta1 = minMom;
      return all(minLr);
    }
    double lr, mom;
    if (it < total) {
      double scale = oneCycleScale(p, it);
      lr = minLr + (maxLr - minLr) * scale;
      mom = maxMom - (maxMom - minMom) * scale;
    } else {
      // After the cycle: decay from the minimum lr and the maximum momentum, unless
      // decay_step_size (both) or the rate (each) is 0.
      double interval = decaySize != 0 ? (it - total + 1) / decaySize : 0;
      lr = decaySize == 0 || lrRate == 0 ? minLr : minLr / (1 + lrRate * interval);
      mom = decaySize == 0 || momRate == 0 ? maxMom : maxMom * (1 + momRate * interval);
    }
    if (cycleMomentum)
      s.beta1 = mom;
    return all(lr);
  }

  if (t == "LRRangeTest") {
    double minLr = number(p, "lr_range_test_min_lr", 1e-3);
    if (it < 0)
      return all(minLr);
    double interval = static_cast<double>(it + 1) / number(p, "lr_range_test_step_size", 2000);
    if (flag(p, "lr_range_test_staircase", false))
      interval = std::floor(interval);
    return all(minLr * (1 + number(p, "lr_range_test_step_rate", 1.0) * interval));
  }

  // DeepSpeed clamps the warm-up to at least 2 steps.
  double warmup = std::max(2.0, number(p, "warmup_num_steps", 1000));
  const Json *wt = p ? p->get("warmup_type") : nullptr;
  bool linear = wt && wt->isString() && wt->text == "linear";
  double total = number(p, "total_num_steps", 0);

  if (t == "WarmupCosineLR") {
    double ratio = 0.0; // get_lr() before the first scheduler step
    if (it >= 0) {
      double minRatio = number(p, "warmup_min_ratio", 0.0);
      double cosMin = number(p, "cos_min_ratio", 0.0001);
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
    }
    s.lr *= ratio;
    s.auxLr *= ratio;
    return s;
  }

  // WarmupLR and WarmupDecayLR: min_lr + (max_lr - min_lr) * gamma.
  double minLr = number(p, "warmup_min_lr", 0.0);
  double maxLr = number(p, "warmup_max_lr", s.lr);
  if (it < 0)
    return all(minLr);
  double gamma;
  if (it < warmup)
    gamma = warmupGamma(it, warmup, linear);
  else if (t == "WarmupDecayLR")
    gamma = std::max(0.0, (total - it) / std::max(1.0, total - warmup));
  else
    gamma = 1.0;
  return all(minLr + (maxLr - minLr) * gamma);
}
} // namespace dsrt::io
