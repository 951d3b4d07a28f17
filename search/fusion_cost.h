// The fusion plan in the cost model: what the mixer's fused kernels (the KDA prologue inside the KDA
// kernel; the DSA indexer scores + top-k + sparse attention in one pass per query block) keep out of
// HBM, as the activation and traffic terms of the unfused alternative.
//
// Units: bytes per token of one layer (16-bit activations, fp32 gate/scores as in search/fusion_plan.h).
// Source: search/fusion_plan.h's kKdaPrologue and kDsaIndexerTopk terms (bytes = write + read of each
// intermediate). An unfused sequence writes each intermediate once and autograd keeps that copy for the
// backward (sigmoid(beta), the activated gate and the normalised q/k are inputs of the next op's
// backward), so:
//   kept  = plan bytes / 2   (one stored copy; for the DSA indexer a lower bound: eager code also keeps
//                             the per-head relu(q.k) logits for the weights' gradient)
//   moved = plan bytes       (write + read, forward)
// The cost model's elementwise term charges elementwise_passes (2) x kept bytes per token (search/
// cost_model.cpp), which equals `moved`; the memory model counts `kept` with the mixer's activations.
// Launches: the unfused sequence runs each fused-away step as its own kernel, forward and backward, so
// the cost model's host launch term adds 2 x launches x launch_s_per_kernel per layer per micro-batch
// (exposed only where the host, not the GPU, is the bottleneck: search/cost_model.cpp Step 4).
// Fused kernels (attention_kernel "flash", the default) keep, move and launch none of it.
#pragma once

#include <cstdint>

#include "core/model_ir.h"
#include "search/model_profile.h"

namespace onboard {

struct MixerFusionBytes {
  double kept = 0;      // activation bytes per token the unfused sequence stores for backward
  double moved = 0;     // HBM bytes per token the unfused sequence writes and reads back (forward)
  double launches = 0;  // kernel launches per layer forward pass the fused kernel saves
};

// The KDA-prologue and DSA-indexer terms of layer `layer`'s fusion plan at sequence length `seq`.
MixerFusionBytes MixerFusionBytesOf(const ModelIR& model, const LayerSpec& layer, int64_t seq);

// Called once per layer by BuildProfile (search/model_profile.cpp): with unfused kernels, the kept
// intermediates join lp->act_mixer (memory, and through it the elementwise traffic term) and the
// launches lp->unfused_mixer_launches (the launch term); records the fused-away bytes in
// lp->fused_mixer_bytes either way.
void ApplyMixerFusion(const ModelIR& model, const LayerSpec& layer, int64_t seq, bool unfused_kernels,
                      LayerProfile* lp);

}  // namespace onboard
