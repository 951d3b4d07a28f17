// Kernel loss parity in the probe (issue 12; the loss-compare torchtitan runs in CI): the probe's
// proxy, reduced to its KDA layers, is trained twice for ProbeConfig::loss_parity_steps steps,
// once with the generated KDA kernel and once on the LibTorch reference ops, and the two loss
// curves are compared within validators/loss_parity.h's tolerance.
//
// Why a reduced proxy: a MoE router's top-k and the DSA indexer's top-k make near-tie decisions
// that flip on a 1e-7 summation-order difference, after which the curves part for reasons that are
// not the kernel's (measured on the test proxy KDA x3 + MLA/DSA with MoE: 1e-7 through step 18,
// 3.2e-4 at step 19). The parity proxy keeps every KDA layer of the spec, in order and with its
// dims, each on a dense MLP, so the only difference between the two runs is the KDA forward.
// Runs on 1 rank in full mode, with the probe's task, seed, seq, batch and dtype. The probe's
// control goes with the generated run (perturbed_kda_gate perturbs its kernel; no_lookback
// applies to both runs); controls of parts the parity proxy does not have (router, adapters) are
// dropped.
// Units: losses in nats; tolerance relative per step.
#pragma once

#include <optional>

#include "backends/probe.h"

namespace onboard::backends {

// The parity proxy: the KDA layers of `spec` on dense MLPs; no layers when it has none.
ProxySpec LossParitySpec(const ProxySpec& spec);

// The config of one parity run (`kernel` = "generated" | "torch") in `out_dir`.
ProbeConfig LossParityConfig(const ProbeConfig& probe, const std::string& kernel, const std::string& out_dir);

// Both runs and their comparison; nullopt when the spec has no KDA layer (nothing generated to
// compare) or config.loss_parity_steps == 0. A run that fails (a rank died) is an error; a
// non-finite or shorter generated curve is a failed parity, not an error.
Expected<std::optional<ProbeLossParity>> RunKdaLossParity(const ProxySpec& spec, const ProbeConfig& config,
                                                          ProbeObserver* observer);

}  // namespace onboard::backends
