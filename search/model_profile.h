// ModelProfile: the per-layer numbers the cost model reads, derived once per (model, seq) from
// ComputeStats (core/model_stats.cpp) plus the split the planner needs: what TP divides, what EP
// moves, what each recompute policy keeps.
//
// Units: parameters are counts; FLOPs per token are forward FLOPs (multiply-add = 2); activation
// bytes are per token of one sequence, 16-bit tensors unless stated; h = hidden, s = seq, H = heads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/block_kind.h"
#include "core/model_ir.h"

namespace onboard {

struct LayerProfile {
  MixerKind mixer = MixerKind::kMHA;        // block kinds as enums; the cost model compares these
  ChannelKind channel = ChannelKind::kDenseMLP;
  BlockKind mixer_kind = BlockKind::kMHA;    // MixerBlockKind(mixer) (core/block_kind.h)
  BlockKind channel_kind = BlockKind::kMLP;  // ChannelBlockKind(channel)
  size_t mixer_kind_id = 0;         // index of mixer_kind / channel_kind in ModelProfile::kinds (policy
  size_t channel_kind_id = 0;       // lookups by index on the search's hot path, KindPolicies)
  bool softmax = false;             // softmax attention (scores materialised when unfused)
  bool bf16_gemms = false;  // a bf16 first / last layer of a quantised plan (Plan::bf16_layers_first):
                            // costed with CostContext::bf16_twin (MarkBf16GemmLayers)
  int64_t heads = 0;                // query heads (TP divides them)
  // Parameters.
  double params = 0;                // all parameters of the layer
  double dense_params = 0;          // parameters outside routed experts (TP/FSDP sharded)
  double expert_params = 0;         // all routed-expert parameters (EP/expert-FSDP sharded)
  double expert_params_each = 0;
  double lora_params_per_rank = 0;         // LoRA adapter params per unit rank r: sum over adapted
                                           // matrices (attention + dense/shared MLP) of (in + out), TP-split
  double lora_expert_params_per_rank = 0;  // the routed experts' adapters per unit rank, all experts
                                           // (MoE layers without a shared expert, core/lora_targets.h
                                           // AdaptsRoutedExperts); EP / expert-FSDP sharded like them
  // Forward FLOPs per token.
  double dense_gemm_flops = 0;      // 2 * dense matmul params (attention projections, MLP, shared, latent, router)
  double mixer_gemm_flops = 0;      // of which the mixer's projections (2 * attention params)
  double core_flops = 0;            // seq-dependent attention / recurrence (ComputeStats attn_flops_per_token)
  double routed_flops = 0;          // top_k * 2 * expert_params_each
  int64_t experts = 0, top_k = 0;
  double dispatch_width = 0;        // hidden, or the latent width for latent MoE (elements)
  double expert_inter = 0;          // routed expert FFN width
  double cross_node_fraction = 1;   // group-limited routing: min(1, topk_groups / top_k) when groups > 1
  // Activation bytes per token kept for backward, no recompute, fused (flash) attention, no dropout.
  double act_norms = 0;             // 2*h*norms, replicated across TP unless sequence-parallel
  double act_inputs = 0;            // block inputs of the mixer and the channel GEMMs, 2*h each (replicated w/o SP)
  double act_mixer = 0;             // TP-split mixer tensors
  double act_mixer_selective = 0;   // bytes selective recompute drops from act_mixer (KDA conv/gates)
  double act_channel = 0;           // TP-split dense channel tensors (MLP, shared experts, latent, router)
  double act_routed = 0;            // routed-expert tensors per token (live on EP ranks)
  double scores_bytes_per_key = 0;  // unfused softmax: bytes per token per key (H*(2 + 3*dropout)),
                                    // times s; kept only with recompute none
  double dropout_mask_bytes = 0;    // 1-byte masks after attention and channel (2*h*dropout>0), replicated
  double hidden = 0;
  // Recompute of the MLA up-projections (Megatron recompute_modules=[mla_up_proj]).
  double mla_up_flops = 0;          // forward FLOPs per token of q_b and kv_b
  // fp8 quantisation: elements per token entering the layer's GEMMs (K dims), forward.
  double mixer_gemm_inputs = 0;     // attention projections
  double channel_gemm_inputs = 0;   // dense MLP / shared experts / latent (TP-split parts count whole)
  double routed_gemm_inputs = 0;    // per token: top_k * (dispatch width + expert width)
  // Context parallelism: what one CP rank hands the next, per token (softmax K,V) or per layer.
  double cp_kv_elems = 0;           // softmax: K and V elements per token as attention consumes them
  double attn_out_elems = 0;  // softmax: attention output elements per token (query heads * v head dim),
                              // what a CP ring step's output correction rewrites
  double kda_state_elems = 0;       // KDA / gated DeltaNet: recurrent state elements (HV * dk * dv), fp32
  double dsa_gather_elems = 0;      // DSA: indexer key + compressed KV (latent + rope) elements per token
  double fused_mixer_bytes = 0;  // KDA prologue / DSA indexer: HBM bytes per token the fused kernels keep on
                                 // chip (search/fusion_cost.h); charged in act_mixer only when unfused
  double unfused_mixer_launches = 0;  // kernel launches per layer forward the unfused KDA prologue / DSA
                                      // indexer adds (search/fusion_cost.h); 0 with fused kernels
  // Eager (unfused) elementwise work Megatron-Core runs for some model features (gpt-oss):
  double rope_unfused_elems = 0;  // Q and K elements per token RoPE rotates unfused: a YaRN attention
                                  // factor != 1 bypasses TE's fused RoPE (Megatron-LM rope_utils.py); 0 fused
  double clamp_elems = 0;         // per routed copy: the expert width I whose GLU input is clamped by eager
                                  // torch ops before the fused activation (fused_bias_geglu.py); 0 = no clamp
  double expert_bias_elems = 0;   // per routed copy: fc2 output elements the prob-weighted expert bias is
                                  // added to eagerly (experts.py _apply_bias); 0 = no expert bias
  // Layers whose profiles are equal in every field above cost the same under any plan: the cost model
  // computes one per class (ModelProfile::class_first) and copies it (BuildProfile fills these).
  size_t class_id = 0;  // index into ModelProfile::class_first
};

// True when every field above (not class_id) is equal. A new LayerProfile field must be added here:
// a static_assert on the struct's size in model_profile.cpp says so.
bool SameLayerCost(const LayerProfile& a, const LayerProfile& b);

struct ModelProfile {
  std::vector<LayerProfile> layers;
  int64_t seq = 0;
  double hidden = 0, vocab = 0;
  int64_t min_heads = 0;            // smallest query-head count of any layer (TP must divide)
  int64_t experts = 0;              // routed experts (0 = dense)
  double embed_params = 0, head_params = 0, vision_params = 0, other_params = 0;
  double total_params = 0, active_params = 0, expert_params = 0;
  double head_flops = 0;            // 2*h*vocab per token
  double model_flops_per_token = 0; // forward, incl. head (ComputeStats)
  double dropout = 0;
  bool unfused_attention = false;   // softmax kernels materialise s x s scores
  std::vector<BlockKind> kinds;     // block kinds present, in first-seen order
  std::vector<size_t> class_first;  // first layer of each class of equal layers (LayerProfile::class_id)
};

// Builds the profile. `dropout` > 0 adds Korthikanti's 1-byte masks; `unfused_attention` adds the
// s x s score tensors (5*H*s bytes per token with dropout, 2*H*s without) to recompute-none memory.
// unfused_framework: the framework-level fusion chains costed unfused (search/fusion_cost.h).
ModelProfile BuildProfile(const ModelIR& model, int64_t seq, double dropout, bool unfused_attention,
                          bool unfused_framework = false);
// Marks the first `first` and the last `last` decoder layers bf16_gemms and re-forms the classes of equal
// layers, so that a marked layer never shares a class with an unmarked one.
void MarkBf16GemmLayers(int64_t first, int64_t last, ModelProfile* p);

}  // namespace onboard
