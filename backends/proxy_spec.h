// The probe's proxy model (backends/probe.h): the same block pattern as the model, scaled down to
// fit this machine. ProxyFromModel (backends/proxy_spec.cpp) builds it; the worker trains it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/model_ir.h"
#include "core/status.h"

namespace onboard {

// ---- Proxy model ----

// One proxy layer: token mixer + channel mixer.
enum class ProxyMixer { kKDA, kMLA };  // kMLA: gated MLA, with the DSA indexer when index_topk > 0
enum class ProxyChannel { kDense, kMoE };

struct ProxyLayer {
  ProxyMixer mixer = ProxyMixer::kKDA;
  ProxyChannel channel = ProxyChannel::kMoE;
};

// The proxy's vision tower (backends/proxy_vision.h), scaled down from ModelIR::vision: it exists
// in the layout only for the image task (backends/probe_image.h). blocks == 0: the model has none.
struct ProxyVision {
  int64_t blocks = 0;   // pre-norm ViT blocks (the model's depth, capped at 2)
  int64_t hidden = 32;  // tower width dv
  int64_t heads = 2;    // attention heads (hidden % heads == 0)
  int64_t inter = 64;   // MLP width of each block (the model's intermediate/hidden ratio x hidden)
  int64_t patch = 2;    // pixels per patch side
  int64_t merge = 2;    // patches merged per side into one LM token (the model's merge_kernel_size)
  int64_t image = 8;    // pixels per image side: 2 x 2 merged tokens by default
  std::string source;   // the model's tower it was scaled from ("moonvit: depth 27, hidden 1152, ...")
};

// Dimensions of the proxy. Defaults: a 4-layer KDA,KDA,KDA,MLA proxy (~0.3M parameters) whose
// probe step takes tens of milliseconds on one CPU core.
struct ProxySpec {
  std::string source_model;        // ModelIR::name it was derived from
  std::vector<ProxyLayer> layers;  // in order; empty = invalid
  int64_t vocab = 256;             // byte-level tokens (task symbols are a subset)
  int64_t hidden = 64;
  // KDA
  int64_t kda_heads = 2;
  int64_t kda_head_dim = 16;       // key == value head dim
  int64_t conv_kernel = 4;         // short causal depthwise conv width
  double gate_lower_bound = -5.0;  // bounded gate: g = lb * sigmoid(...), lb < 0
  int64_t chunk = 16;              // chunk length of the chunked KDA form
  int64_t gate_rank = 16;          // low-rank output gate width
  // MLA (+ DSA indexer)
  int64_t mla_heads = 2;
  int64_t q_lora_rank = 32;  // 0 = full-rank q projection
  int64_t kv_lora_rank = 32;
  int64_t qk_nope_dim = 16;
  int64_t qk_rope_dim = 8;  // decoupled rope dims of q and the shared key (even when rope)
  // Rotary positions on the rope dims (RoPE, half-split pairs, angle t * rope_theta^(-2i/qk_rope_dim)
  // at token t): set when the source model's softmax attention uses RoPE. false = NoPE: the dims
  // are kept as extra, unrotated key dims (the flagship / Kimi-Linear MLA, mla_use_nope).
  bool rope = false;
  double rope_theta = 10000.0;
  int64_t v_head_dim = 16;
  bool mla_output_gate = true;
  int64_t index_heads = 2;  // DSA lightning indexer heads (0 = no indexer: dense MLA)
  int64_t index_head_dim = 16;
  int64_t index_topk = 8;  // keys kept per query by the indexer
  // Weight of the indexer's KL loss (DeepSeek-V3.2 sparse stage, backends/README.md): per MLA
  // layer, coefficient * sum over queries t of KL(p_t || softmax(I_t)) over the selected keys S_t
  // (p = main attention summed over heads, L1-normalised, detached) / global counted tokens, added
  // to the LM loss; the indexer sees a detached input, so only this loss trains it.
  // 0 = indexer frozen (no KL gradient); >= 0, finite.
  double indexer_kl_weight = 1.0;
  // MoE
  int64_t num_experts = 8;
  int64_t top_k = 2;
  int64_t num_shared = 1;
  int64_t expert_inter = 32;  // routed expert FFN width
  int64_t shared_inter = 64;  // each shared expert's FFN width
  int64_t latent_dim = 32;    // routed experts run at this width (0 = hidden: no latent MoE)
  bool latent_norm = true;
  RouterActivation router = RouterActivation::kSigmoid;
  bool renormalize = true;
  double routed_scaling = 1.0;
  // Aux-loss-free load balancing (DeepSeek-V3's e_score_correction_bias; set when the model has
  // one): a per-expert bias, added to the router scores for the top-k choice only (gate weights use
  // the raw scores), moved after every optimizer step by balance_rate * sign(mean load - load) from
  // the global token counts. balance_rate is per step, dimensionless (score units); DeepSeek-V3
  // used 1e-3 over long training; a probe of tens of steps needs a faster rate (measured: flagship
  // proxy, 2 ranks, 40 steps: whole-probe max/mean 3.78 at 0, 3.78 at 0.01, 2.04 at 0.02, 1.79 at 0.03).
  bool balance_bias = false;
  double balance_rate = 2e-2;
  // Dense MLP (SwiGLU)
  int64_t mlp_inter = 128;
  ProxyVision vision;              // the vision tower (issue 12 item 6); blocks 0 = none
  std::vector<std::string> notes;  // what was mapped or dropped ("GQA mixer mapped to MLA")

  int64_t num_layers() const { return static_cast<int64_t>(layers.size()); }
  Status Validate() const;            // names every field and value that is out of range
  std::string PatternString() const;  // "K K K M | dense,moe,moe,moe"
};

// Scales a model down to a proxy with the same structure: the first 4*blocks layers' mixer
// kinds (KDA / GDN / linear -> KDA; MLA / DSA / softmax kinds -> MLA), the dense-first layers,
// latent MoE with shared experts and the router activation. blocks >= 1 (4 layers per block).
ProxySpec ProxyFromModel(const ModelIR& model, int64_t blocks = 1);

// The proxy as a ModelIR (for ComputeStats / the cost model's EvaluatePlan).
ModelIR ProxyToModelIR(const ProxySpec& spec);

// Parameter counts of the proxy as built (not an estimate).
struct ProxyParamCounts {
  int64_t total = 0;
  int64_t expert = 0;  // routed experts, all of them
  int64_t lora = 0;    // adapters (mode lora)
  int64_t trainable = 0;
};

}  // namespace onboard
