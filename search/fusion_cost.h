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
// layer_time.cpp), which equals `moved`; the memory model counts `kept` with the mixer's activations.
// Launches: the unfused sequence runs each fused-away step as its own kernel, forward and backward, so
// the cost model's host launch term adds 2 x launches x launch_s_per_kernel per layer per micro-batch
// (exposed only where the host, not the GPU, is the bottleneck: search/layer_time.cpp Step 4).
// Fused kernels (attention_kernel "flash", the default) keep, move and launch none of it.
//
// The framework-level chains of the same plan (norm+linear prologue or norm+quantise, gated
// activation, router+top-k+permute, residual adds, rotary+attention, MoE unpermute+combine) are what
// fused engines (Transformer Engine, Megatron's fusions) already run fused: the cost model's constants
// are fitted to such runs, so by default nothing is charged for them. PlanRequest::unfused_framework
// costs the unfused alternative: each chain's intermediates are charged like the mixer's above
// (kept = plan bytes / 2 with the mixer's or the channel's activations, so 2 x kept = the write + read
// per token in the elementwise term; the launches in the host launch term). The norm's bytes are the
// same (2 H b, 1 launch) whether it feeds a bf16 GEMM's prologue or an fp8 / mxfp8 quantise, so the
// profile (built before a plan's precision is known) costs both alike; for nvfp4 the fusible part is
// only the amax pass's read (H b, search/fusion_plan.cpp), so 2 H b is an upper bound there.
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

// The framework-level chains of layer `layer` (every term but the KDA prologue and DSA indexer),
// split by block: mixer (its norm, rotary, the o_proj residual) and channel (its norm .. its residual).
struct FrameworkFusionBytes {
  MixerFusionBytes mixer, channel;
};
FrameworkFusionBytes FrameworkFusionBytesOf(const ModelIR& model, const LayerSpec& layer, int64_t seq);

// Called once per layer by BuildProfile (search/model_profile.cpp): with unfused kernels, the kept
// intermediates join lp->act_mixer (memory, and through it the elementwise traffic term) and the
// launches lp->unfused_mixer_launches (the launch term); records the fused-away bytes in
// lp->fused_mixer_bytes either way. With unfused_framework, the framework chains' kept bytes join
// lp->act_mixer / lp->act_channel and their launches lp->unfused_mixer_launches (the layer's unfused
// launches, both blocks).
void ApplyMixerFusion(const ModelIR& model, const LayerSpec& layer, int64_t seq, bool unfused_kernels,
                      LayerProfile* lp, bool unfused_framework = false);

}  // namespace onboard
