// The fused KDA prologue checked against the unfused sequence. Fused: one kernel takes the raw gate
// input, raw q/k and beta logits, and applies the gate activation (original or bounded), the q/k L2
// norm and the beta sigmoid itself. Unfused: those three steps run first as separate passes in fp32
// (UnfusedKdaPrologue), then a kernel with gate "none", raw q/k and beta as given.
// Per odd-shape length: outputs poisoned with NaN, fused vs unfused and fused vs the fp64 recurrence
// (relative L2 < 1e-5 each, output and final state). The runner is CPU (LoadCpuKernel) or the CUDA
// kernels under CPU emulation of the CUDA model (not a GPU run).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "codegen/kernel_spec.h"
#include "core/status.h"
#include "validators/kernel_check.h"
#include "validators/reference_kda.h"

namespace onboard::validators {

// One kernel run: output [B,T,HV,V] and final state [B,HV,K,V], NaN-poisoned before the call.
struct KdaRun {
  std::vector<float> o, state;
};
using KdaRunner = std::function<Expected<KdaRun>(const codegen::KdaSpec&, const KdaInputs&)>;

// The kernel spec of the unfused sequence: gate "none", no q/k norm, no beta sigmoid, same dims.
codegen::KdaSpec UnfusedKdaSpec(const codegen::KdaSpec& fused);

// The prologue as separate fp32 steps: g <- log decay (fused.gate_form), q, k <- L2-normalised (when
// fused.normalize_qk), beta <- sigmoid(beta) (when fused.beta_sigmoid). a_log / dt_bias are consumed.
KdaInputs UnfusedKdaPrologue(const codegen::KdaSpec& fused, const KdaInputs& in);

// Rows "unfused prologue" and "fp64 recurrence" (each + `suffix`, with `note`) for every length; kBadInput when `fused` has gate
// "none" (nothing to fuse).
[[nodiscard]] Expected<std::vector<KernelCheckRow>> CheckKdaPrologueFusion(const codegen::KdaSpec& fused,
                                                                           const std::vector<int64_t>& lengths,
                                                                           uint64_t seed, const KdaRunner& run,
                                                                           const std::string& suffix = "",
                                                                           const std::string& note = "");

// The fusion check over a check plan's KDA specs: the first spec of each gate form (original, bounded)
// with beta_sigmoid on, at its odd-shape lengths (KdaCheckLengths).
[[nodiscard]] Expected<std::vector<KernelCheckRow>> CheckKdaPrologueFusionForPlan(
    const std::vector<codegen::KdaSpec>& plan, uint64_t seed, const KdaRunner& run, const std::string& suffix = "",
    const std::string& note = "");

// Runners: the generated CPU kernel, and the CUDA kernel under CPU emulation (f32 operands).
KdaRunner CpuKdaRunner(int64_t num_threads);
KdaRunner EmulatedCudaKdaRunner(int cuda_arch);

}  // namespace onboard::validators
