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
// backends/README.md "Probe defaults". kLoraLrScale: lr x adapter scale = 0.75e-2 x 2 = 1.5e-2, the
// product every LoRA row converged at (3e-2 at alpha 8, rank 16: scale 0.5) before the scale became
// the exports' 2 (kLoraAlphaPerRank, core/lora_targets.h). With Adam the adapters' per-step change of
// a layer is ~ scale x lr, so that product is what the recipe validated; 3e-2 at scale 2 collapsed
// the qwen3-30b-a3b and mixtral proxies' adapters mid-phase (accuracy 94% -> 6%, grad norms up to
// 248; bench/README.md, 2026-12-06). An lr change made after that failure, for that invariant only.
inline constexpr int64_t kLoraSteps = 150;
inline constexpr double kLoraLrScale = 0.75;
// The adapters' rank: 16, the rank `onboard run` trains by default (RunRequest::lora_rank; the loop's
// probe takes the run's own rank, agent/probe_recipe.cpp). Measured (flagship proxy, hidden 64, 2
// ranks, the same 283-step base, 150 adapter steps): rank 4 ended not_learned at 86.5% copy accuracy,
// still rising (the adapters could not carry the target letters in time); rank 16 converged at 92.7%.
inline constexpr int64_t kLoraRank = 16;
// The largest adapter rank the probe trains (ProbeConfig::Validate): the proxy is 64-256 wide, so a
// larger rank adapts nothing more. The loop's probe takes min(run's rank, this) (agent/probe_recipe.cpp);
// the run's own rank is checked against the plan's limit (search/plan_request_checks.h).
inline constexpr int64_t kMaxLoraRank = 256;

// LoRA base phase (mode lora): full training of the base for this many steps on the source task
// before the `steps` recorded adapter steps: ProbeConfig::base_steps (`onboard probe --base-steps N`),
// or when it is -1 the default ceil(kLoraBaseFraction * steps). 0 = adapters on the random base.
inline constexpr double kLoraBaseFraction = 0.6;
int64_t LoraBaseSteps(const ProbeConfig& config);
// The base phase must leave a competent base (copy task): it trains its planned LoraBaseSteps, then
// stops at the first step where the mean exact-match accuracy of the last LearningCriteria::window
// steps reaches the learning verdict's min_accuracy (validators/learning_verdict.h, the one home of
// that bar), running on while it is not competent up to kLoraBaseMaxFactor x LoraBaseSteps; the
// warm-up + cosine spans that maximum. Measured (Kimi-Linear proxy, 2 ranks, the 400-step base): the
// copy circuit forms late (accuracy 5% at step 123, 45% at 273) and the fixed 400-step cosine ended
// at ~68%, so the adapters started from a base that copied 0.9% of the target letters and ended
// not_learned (60%). Why not stop at the first touch of the bar (issue 12, fourth session): the
// qwen3-30b-a3b proxy (RoPE, copies early) touched it at base step 78 (91.2% on the source task,
// 8.5% on the target letters at adapter step 0) and its adapters ended not_learned at 89.8%; with
// the planned 400 base steps it had converged at 100% (bench/README.md, 2026-12-01).
inline constexpr int64_t kLoraBaseMaxFactor = 2;
// After that stop the base anneals: ceil(kLoraBaseCooldownFraction x LoraBaseSteps) more steps,
// cosine from the rate at the stop to the schedule's min_lr, Adam state and step count continuing
// (BaseCooldownPhase). The decay phase of the warmup-stable-decay schedule (Hu et al. 2024, MiniCPM,
// arXiv 2404.06395; Hagele et al. 2024, arXiv 2405.18392: a 20% cooldown matches a full cosine):
// a checkpoint people fine-tune is taken after its learning-rate decay, while the stop above falls
// mid-cosine (the cosine spans the cap; lr ~0.5 x peak at the planned step). Measured before
// (Kimi-Linear proxy, 2 ranks): the base stopped at step 451 at lr 0.48 x peak, and its adapters
// ended not_learned at 87.6% (bench/README.md, 2026-12-06).
inline constexpr double kLoraBaseCooldownFraction = 0.2;
int64_t LoraBaseCooldownSteps(const ProbeConfig& config);
// The phase config of the cooldown that starts at step `first` (0-based) of phase `base`:
// LearningRate(result, s) for s in [first, first + steps) decays by cosine from
// LearningRate(base, first) to base.lr * base.min_lr_ratio.
ProbeConfig BaseCooldownPhase(const ProbeConfig& base, int64_t first, int64_t steps);

// The random_router control's recipe (issue 12; backends/README.md "Lookup task", seventh design):
// the lookup task (16 x 16 keys of 16 values) on the full recipe with a schedule kRouterControlSteps
// long, for the routed-memory proxy (one RoPE-MLA layer + one routed MoE of 16 experts x inter 8,
// top-1; tests/backends/probe_router_learner.h). Why that length: on the 400-step recipe the router
// was still rising when the cosine ended (78% -> 85% over the last 100 steps), while random routing
// had slowed (46% -> 48.5%); tripling the schedule keeps lr above half the peak to step ~610.
inline constexpr int64_t kRouterControlSteps = 1200;
ProbeConfig RouterControlProbeConfig();

// Rate of optimizer step `step` (0-based) of a phase of config.steps steps at peak config.lr.
double LearningRate(const ProbeConfig& config, int64_t step);

}  // namespace onboard::backends
