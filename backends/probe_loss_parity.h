// Kernel loss parity in the probe (issue 12; the loss-compare torchtitan runs in CI): the probe's
// proxy, reduced to the layers of one generated kernel, is trained twice for
// ProbeConfig::loss_parity_steps steps, once with the generated kernel and once on the LibTorch
// reference ops, and the two loss curves are compared within validators/loss_parity.h's tolerance.
// One comparison per kernel family the probe runs generated:
//   kda  (ProbeConfig::kda_kernel generated): the spec's KDA layers
//   dsa  (ProbeConfig::dsa_kernel generated): the spec's MLA layers with a DSA indexer
//
// Why a reduced proxy: a MoE router's top-k makes near-tie decisions that flip on a 1e-7
// summation-order difference, after which the curves part for reasons that are not the kernel's
// (measured on the test proxy KDA x3 + MLA/DSA with MoE: 1e-7 through step 18, 3.2e-4 at step 19).
// The parity proxy keeps every layer of the family, in order and with its dims, each on a dense
// MLP, so the only difference between the two runs is that family's forward. The DSA indexer's own
// top-k stays (it is part of the kernel); measured over 50 fp32 steps it did not part the curves
// (1.83e-7, tests/backends/probe_dsa_parity_test.cpp).
// Runs on 1 rank in full mode, with the probe's task, seed, seq, batch and dtype. The probe's
// control goes with the generated run (perturbed_kda_gate / perturbed_dsa_topk perturb its kernel;
// no_lookback applies to both runs); controls of parts the parity proxy does not have (router,
// adapters, the other family's kernel) are dropped.
// Units: losses in nats; tolerance relative per step.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "backends/probe.h"

namespace onboard::backends {

// The parity proxy of `kernel` ("kda" | "dsa"): its layers of `spec` on dense MLPs; no layers when
// the spec has none.
ProxySpec LossParitySpec(const ProxySpec& spec, const std::string& kernel = "kda");

// The config of one parity run of `kernel` ("kda" | "dsa") with implementation `impl` in `out_dir`.
ProbeConfig LossParityConfig(const ProbeConfig& probe, ProbeKernel impl, const std::string& out_dir,
                             const std::string& kernel = "kda");

// Both runs and their comparison for `kernel`; nullopt when the spec has no such layer (nothing
// generated to compare) or config.loss_parity_steps == 0. A run that fails (a rank died) is an
// error; a non-finite or shorter generated curve is a failed parity, not an error.
Expected<std::optional<ProbeLossParity>> RunKernelLossParity(const ProxySpec& spec, const ProbeConfig& config,
                                                             const std::string& kernel,
                                                             ProbeObserver* observer);

// Every family the probe runs generated (kda_kernel / dsa_kernel == kGenerated), in that order.
Expected<std::vector<ProbeLossParity>> RunLossParity(const ProxySpec& spec, const ProbeConfig& config,
                                                     ProbeObserver* observer);

}  // namespace onboard::backends
