// The probe's learning-rate schedule (backends/probe_schedule.h): warm-up + cosine, and the LoRA base
// phase's cooldown (BaseCooldownPhase), which must start at the base schedule's rate at the stop and
// end at its floor.
#include <gtest/gtest.h>

#include "backends/probe_schedule.h"

namespace onboard {
namespace {

ProbeConfig BaseSchedule() {
  ProbeConfig c = DefaultProbeConfig(FinetuneMode::kFull);
  c.steps = 800;  // the LoRA base phase's schedule spans its cap (kLoraBaseMaxFactor x 400)
  c.warmup = 20;
  return c;
}

TEST(ProbeSchedule, CooldownStartsAtTheStopRateAndEndsAtTheFloor) {
  const ProbeConfig base = BaseSchedule();
  const int64_t first = 452, steps = 80;  // a stop mid-cosine, then 0.2 x 400 steps
  const ProbeConfig cool = backends::BaseCooldownPhase(base, first, steps);
  const double at_stop = backends::LearningRate(base, first);
  EXPECT_GT(at_stop, 0.4 * base.lr);  // mid-cosine: the rate the base would otherwise be frozen at
  EXPECT_NEAR(backends::LearningRate(cool, first), at_stop, 1e-15);
  EXPECT_NEAR(backends::LearningRate(cool, first + steps - 1), base.lr * base.min_lr_ratio, 1e-15);
  for (int64_t s = first + 1; s < first + steps; ++s)
    EXPECT_LT(backends::LearningRate(cool, s), backends::LearningRate(cool, s - 1)) << s;
  // Negative control: the base schedule itself has not decayed by then (what the stop used to hand over).
  EXPECT_GT(backends::LearningRate(base, first + steps - 1), 2 * base.lr * base.min_lr_ratio);
}

TEST(ProbeSchedule, CooldownIsAFifthOfTheBasePhase) {
  ProbeConfig lora = DefaultProbeConfig(FinetuneMode::kLoRA);
  EXPECT_EQ(backends::LoraBaseCooldownSteps(lora), 80);  // 400 planned base steps
  lora.base_steps = 24;
  EXPECT_EQ(backends::LoraBaseCooldownSteps(lora), 5);  // ceil(4.8)
  lora.base_steps = 0;                                  // adapters on the random base: nothing to anneal
  EXPECT_EQ(backends::LoraBaseCooldownSteps(lora), 0);
}

}  // namespace
}  // namespace onboard
