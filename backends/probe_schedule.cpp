// Warm-up + cosine learning-rate schedule of the probe (see probe_schedule.h).
#include "backends/probe_schedule.h"

#include <algorithm>
#include <cmath>

namespace onboard::backends {

double LearningRate(const ProbeConfig& c, int64_t step) {
  // Step 1: the control that trains nothing (adapters frozen at their initial values).
  if (c.control == kControlFrozenLora && c.mode == FinetuneMode::kLoRA) return 0.0;
  // Step 2: linear warm-up over the first `warmup` steps: lr * (step+1) / warmup.
  if (step < c.warmup) return c.lr * static_cast<double>(step + 1) / static_cast<double>(c.warmup);
  // Step 3: cosine from lr to min_lr_ratio * lr over the remaining steps.
  const double span = static_cast<double>(std::max<int64_t>(1, c.steps - c.warmup));
  const double t = std::min(1.0, static_cast<double>(step - c.warmup) / span);
  const double min_lr = c.lr * c.min_lr_ratio;
  return min_lr + 0.5 * (c.lr - min_lr) * (1.0 + std::cos(M_PI * t));
}

ProbeConfig RouterControlProbeConfig() {
  ProbeConfig c = DefaultProbeConfig(FinetuneMode::kFull);
  c.task = ProbeTask::kLookup;
  c.lookup_keys = 16;
  c.lookup_values = 16;
  c.steps = kRouterControlSteps;
  return c;
}

int64_t LoraBaseSteps(const ProbeConfig& config) {
  if (config.base_steps >= 0) return config.base_steps;
  return static_cast<int64_t>(std::ceil(kLoraBaseFraction * static_cast<double>(config.steps)));
}

int64_t LoraBaseCooldownSteps(const ProbeConfig& config) {
  return static_cast<int64_t>(
      std::ceil(kLoraBaseCooldownFraction * static_cast<double>(LoraBaseSteps(config))));
}

ProbeConfig BaseCooldownPhase(const ProbeConfig& base, int64_t first, int64_t steps) {
  // Step 1: the rate at the stop, and the floor the base schedule would have reached.
  const double from = LearningRate(base, first);
  const double floor = base.lr * base.min_lr_ratio;
  // Step 2: a cosine phase whose warm-up ends at `first` (LearningRate's t = 0 there) and whose
  // last step is first + steps - 1 (t = 1 there), from `from` down to `floor`.
  ProbeConfig c = base;
  c.lr = from;
  c.min_lr_ratio = from > 0 ? std::min(1.0, floor / from) : 1.0;
  c.warmup = first;
  c.steps = first + std::max<int64_t>(1, steps - 1);
  return c;
}

}  // namespace onboard::backends

namespace onboard {

// The recipe per mode, measured on the listed configs (backends/README.md "Probe defaults"):
//   full  ProbeConfig's defaults: 400 steps, AdamW peak lr 1e-2, 20 warm-up steps, cosine to 0.1x,
//         32 sequences of 16 tokens (7 copied symbols of 32)
//   lora  a base phase of the full recipe's length on the source task (a competent base), then
//         kLoraSteps adapter steps at kLoraLrScale x the full lr (adapters start at B = 0 and move
//         ~lr per Adam step, times the adapter scale alpha / r = 2: probe_schedule.h)
ProbeConfig DefaultProbeConfig(FinetuneMode mode) {
  ProbeConfig c;
  c.mode = mode;
  if (mode == FinetuneMode::kLoRA) {
    c.base_steps = c.steps;
    c.steps = backends::kLoraSteps;
    c.lr *= backends::kLoraLrScale;
    c.lora_rank = backends::kLoraRank;
  }
  return c;
}

}  // namespace onboard
