// INTERNAL to backends/ (includes LibTorch). Negative controls of the probe (ProbeConfig::control,
// `onboard probe --control NAME`): runs that remove what the copy task needs, so the learning
// verdict (validators/learning_verdict.h) must fail them where the normal run converges
// (random_router: on the lookup task, backends/probe_lookup.h; the copy needs no experts).
//   no_lookback    every token mixer (KDA, MLA+DSA) sees each token alone: no look-back at all
//   random_router  each token's top-k experts are drawn at random every micro-step (the gate
//                  weights stay the router's scores): the router cannot specialise experts
//   frozen_lora    mode lora: the adapters get learning rate 0 after the base phase (nothing
//                  trains on the target task; probe_schedule.cpp)
//   perturbed_kda_gate  the generated KDA kernel is built with the wrong gate form (kOriginal on a
//                  log decay: -softplus(g) instead of g, kda_generated.cpp); its forward only,
//                  the backward differentiates the reference ops. Kernel loss parity
//                  (validators/loss_parity.h) must catch it
//   perturbed_dsa_topk  the generated DSA kernel is built with half the top-k (a broken selection,
//                  dsa_generated.cpp); forward and backward both attend over its selection. Kernel
//                  loss parity must catch it
#pragma once

#include <cstdint>

#include "backends/probe.h"
#include "backends/proxy_model.h"

namespace onboard::backends {

// Sets the per-micro-step switches of `config.control` for global micro-batch `micro_batch` of
// optimizer step `step` of a phase (`phase_salt` tells the LoRA base phase from the recorded one).
void ApplyControl(const ProbeConfig& config, int64_t phase_salt, int64_t step, int64_t micro_batch,
                  UnitInputs* inputs, MoeRouting* routing);

}  // namespace onboard::backends
