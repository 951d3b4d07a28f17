// The agent's probe recipe: the probe's own tuned recipe for the run's mode (DefaultProbeConfig,
// backends/probe_schedule.cpp: steps, seq, batch, lr, warm-up, clip, LoRA base phase and adapter
// rank), with the request's explicit overrides (agent::ProbeSettings) on top. It is the one place
// the loop gets training numbers from: `onboard probe` and `onboard run` train the same recipe.
// What the loop itself varies stays outside: the layout (agent/plan_to_probe.h), the knobs the
// rules change (lr, clip, step scale, expert placement, kernel fallbacks) and the round's folder.
//
// Overrides (each unset field keeps the recipe's value):
//   steps        recorded steps (LoRA: adapter steps); the warm-up is then at most a quarter of
//                them (as the LoRA base phase does), and a LoRA base phase follows the steps
//                (ProbeConfig::base_steps = -1: ceil(kLoraBaseFraction x steps), backends/probe_schedule.h)
//   seq          tokens per sequence
//   micro_batch  sequences per rank per step (the recipe: batch / ranks, at least 1)
//   learning_rate, grad_clip   peak lr (LoRA: the adapters' rate) and clip norm
// and, in LoRA mode, the run's adapter rank (RunRequest::lora_rank) for the probe's adapters.
// Units: steps, tokens, sequences; lr dimensionless.
#pragma once

#include "agent/orchestrator.h"
#include "backends/probe.h"

namespace onboard::agent {

// The probe configuration every round starts from (ranks, recipe, overrides, seed, timeout and
// worker binary). Layout fields (ep, fsdp, micro_batch) are left at their "all ranks" defaults.
ProbeConfig ProbeRecipe(const RunRequest& req);

// The image probe's configuration (issue 12 item 6, backends/probe_image.h): the full-mode recipe
// with the request's overrides (ProbeRecipe of the request in mode full: the image task trains in
// full mode only), task image, tp 1 and pp 1 (the tower is not split). The request's control
// applies only where it is the image task's own (no_image); the text probe's controls do not.
ProbeConfig ImageProbeRecipe(const RunRequest& req);

}  // namespace onboard::agent
