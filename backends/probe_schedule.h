// Learning-rate schedule of the probe's optimizer steps: linear warm-up to the peak, then cosine
// decay to min_lr_ratio x peak at the last step (the common LLM recipe: Megatron-LM's
// --lr-decay-style cosine with --lr-warmup-iters, torchtitan's warmup_steps + cosine decay).
// The negative control frozen_lora (ProbeConfig::control) gives the adapters a zero rate.
// Units: steps; learning rates dimensionless.
#pragma once

#include <cstdint>

#include "backends/probe.h"

namespace onboard::backends {

// LoRA recipe (DefaultProbeConfig(kLoRA)): adapter steps after the base phase, and the adapters'
// peak lr over the full-mode rate (the base phase trains at lr / kLoraLrScale). Measured, see
// backends/README.md "Probe defaults".
inline constexpr int64_t kLoraSteps = 150;
inline constexpr double kLoraLrScale = 3.0;

// LoRA base phase (mode lora): full training of the base for this many steps on the source task
// before the `steps` recorded adapter steps: ProbeConfig::base_steps (`onboard probe --base-steps N`),
// or when it is -1 the default ceil(kLoraBaseFraction * steps). 0 = adapters on the random base.
inline constexpr double kLoraBaseFraction = 0.6;
int64_t LoraBaseSteps(const ProbeConfig& config);
// The base phase must leave a competent base (copy task): it stops at the first step where the
// mean exact-match accuracy of the last LearningCriteria::window steps reaches the learning
// verdict's min_accuracy (validators/learning_verdict.h, the one home of that bar), and runs on,
// while it is not competent, up to kLoraBaseMaxFactor x LoraBaseSteps; the warm-up + cosine spans
// that maximum. Measured (Kimi-Linear proxy, 2 ranks, the 400-step base): the copy circuit forms
// late (accuracy 5% at step 123, 45% at 273) and the fixed 400-step cosine ended at ~68%, so the
// adapters started from a base that copied 0.9% of the target letters and ended not_learned (60%).
inline constexpr int64_t kLoraBaseMaxFactor = 2;

// Rate of optimizer step `step` (0-based) of a phase of config.steps steps at peak config.lr.
double LearningRate(const ProbeConfig& config, int64_t step);

}  // namespace onboard::backends
