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

// Rate of optimizer step `step` (0-based) of a phase of config.steps steps at peak config.lr.
double LearningRate(const ProbeConfig& config, int64_t step);

}  // namespace onboard::backends
