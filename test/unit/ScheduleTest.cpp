// DeepSpeed's schedules at chosen steps, against values worked out by hand from
// deepspeed/runtime/lr_schedules.py (step s runs at last_batch_iteration s - 2), through the
// whole contract: the config parser resolves the scheduler (DeepSpeed's defaults), ds-opt
// records it in #ds.run, the lowering writes it into the program descriptor, and the runtime
// reads it back and schedules.
#include "ds/Config/DeepSpeedConfig.h"
#include "ds/Pipelines/Pipelines.h"
#include "dsrt/io.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace {

dsrt::io::StepScalars at(const std::string &config, int64_t step) {
  // The batch keys the parser needs, before the schedule's.
  std::string text = R"({"train_batch_size": 1, "train_micro_batch_size_per_gpu": 1, )" +
                     config.substr(1);
  auto cfg = ds::parseDeepSpeedConfig(text, 0);
  if (!cfg) {
    ADD_FAILURE() << llvm::toString(cfg.takeError());
    return {};
  }
  dsrt::io::Json run;
  dsrt::io::LrSchedule schedule;
  std::string err;
  EXPECT_TRUE(dsrt::io::parseJson(mlir::ds::describeRun(*cfg), run, err)) << err;
  EXPECT_TRUE(run.get("lr") && dsrt::io::readLrSchedule(*run.get("lr"), schedule, err)) << err;
  return dsrt::io::scheduled(schedule, step);
}

// Equal up to the rounding of the schedule's own arithmetic.
#define EXPECT_CLOSE(a, b) EXPECT_NEAR(a, b, 1e-12 * std::abs(b))

const char *kAdamW = R"("optimizer": {"type": "AdamW", "params": {"lr": 0.001, "betas": [0.9, 0.99]}})";

TEST(Schedule, OneCycleLrAndMomentum) {
  std::string c = std::string("{") + kAdamW + R"(, "scheduler": {"type": "OneCycle", "params": {
      "cycle_min_lr": 1e-5, "cycle_max_lr": 1e-4, "cycle_first_step_size": 5,
      "cycle_second_step_size": 7, "decay_step_size": 2, "decay_lr_rate": 0.5,
      "decay_mom_rate": 0.01, "cycle_min_mom": 0.8, "cycle_max_mom": 0.9}}})";
  // Step 1: the constructor's minima.
  EXPECT_CLOSE(at(c, 1).lr, 1e-5);
  EXPECT_CLOSE(at(c, 1).beta1, 0.8);
  // Step 2: batch 1 of a 12-batch cycle rising over 5: scale 0.2.
  EXPECT_CLOSE(at(c, 2).lr, 1e-5 + 9e-5 * 0.2);
  EXPECT_CLOSE(at(c, 2).beta1, 0.9 - 0.1 * 0.2);
  // Step 7: batch 6, falling: scale (0.5 - 1) / (5/12 - 1) = 6/7.
  EXPECT_CLOSE(at(c, 7).lr, 1e-5 + 9e-5 * 6.0 / 7.0);
  EXPECT_CLOSE(at(c, 7).beta1, 0.9 - 0.1 * 6.0 / 7.0);
  // Step 14: one batch after the cycle, interval 1/2: lr min / 1.25, momentum max * 1.005.
  EXPECT_CLOSE(at(c, 14).lr, 8e-6);
  EXPECT_CLOSE(at(c, 14).beta1, 0.9 * 1.005);
}

TEST(Schedule, OneCycleStairsAndNoMomentum) {
  std::string c = std::string("{") + kAdamW + R"(, "scheduler": {"type": "OneCycle", "params": {
      "cycle_min_lr": 0.0, "cycle_max_lr": 1.0, "cycle_first_step_size": 6,
      "cycle_first_stair_count": 3, "cycle_momentum": false}}})";
  // Batches 1..6 rise in 3 stairs of 2 batches: floor(b * 3 / 6) / 3.
  EXPECT_EQ(at(c, 2).lr, 0.0);       // batch 1
  EXPECT_CLOSE(at(c, 3).lr, 1.0 / 3.0); // batch 2
  EXPECT_CLOSE(at(c, 7).lr, 1.0);       // batch 6, the peak
  EXPECT_CLOSE(at(c, 9).lr, 2.0 / 3.0); // batch 8: (12 - 8) * 3 / 6 = 2
  // Without cycle_momentum the optimizer keeps its own beta1.
  EXPECT_CLOSE(at(c, 5).beta1, 0.9);
  // After the cycle with decay_step_size 0: the minimum.
  EXPECT_EQ(at(c, 20).lr, 0.0);
}

TEST(Schedule, LRRangeTest) {
  std::string smooth = std::string("{") + kAdamW + R"(, "scheduler": {"type": "LRRangeTest",
      "params": {"lr_range_test_min_lr": 1e-5, "lr_range_test_step_size": 3,
      "lr_range_test_step_rate": 2.0}}})";
  std::string stairs = smooth;
  stairs.replace(stairs.find("2.0}"), 4, "2.0, \"lr_range_test_staircase\": true}");
  EXPECT_CLOSE(at(smooth, 1).lr, 1e-5);
  // Step 5: batch 4 of steps of 3: 1 + 2 * 4/3, or 1 + 2 * floor(4/3) on stairs.
  EXPECT_CLOSE(at(smooth, 5).lr, 1e-5 * (1 + 2.0 * 4.0 / 3.0));
  EXPECT_CLOSE(at(stairs, 5).lr, 3e-5);
}

TEST(Schedule, MuonGroups) {
  const char *muon = R"("optimizer": {"type": "Muon", "params": {"lr": 0.02, "adam_lr": 0.001}})";
  // No schedule: each group keeps its lr.
  EXPECT_CLOSE(at(std::string("{") + muon + "}", 3).lr, 0.02);
  EXPECT_CLOSE(at(std::string("{") + muon + "}", 3).auxLr, 0.001);
  // WarmupCosineLR scales each group's own lr; WarmupLR sets both to one value (its maximum
  // defaults to the first group's lr).
  std::string cosine = std::string("{") + muon + R"(, "scheduler": {"type": "WarmupCosineLR",
      "params": {"warmup_num_steps": 4, "total_num_steps": 10, "warmup_type": "linear"}}})";
  EXPECT_CLOSE(at(cosine, 4).lr, 0.02 * 0.5); // batch 2 of 4, linear warm-up
  EXPECT_CLOSE(at(cosine, 4).auxLr, 0.001 * 0.5);
  std::string warmup = std::string("{") + muon + R"(, "scheduler": {"type": "WarmupLR",
      "params": {"warmup_num_steps": 4, "warmup_type": "linear"}}})";
  EXPECT_CLOSE(at(warmup, 4).lr, 0.01);
  EXPECT_CLOSE(at(warmup, 4).auxLr, 0.01);
}

} // namespace
