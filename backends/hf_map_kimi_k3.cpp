// HF names -> modules for kimi_k3, the flagship (examples/flagship/config.json:
// KimiK3ForConditionalGeneration, model_type kimi_k3, text_config in kimi_linear style, vision_config
// MoonViT). Names. The wrapper is Kimi-VL's / Kimi-K2.5's remote code (self.language_model = the text
// CausalLM, self.vision_tower, self.mm_projector), so the text model's tensors are
//   language_model.model.{embed_tokens, norm}.weight, language_model.lm_head.weight,
//   language_model.model.layers.N.<the Kimi-Linear names below>
// (HfForwardConfig::weights_root / head_name). Layer names are Kimi-Linear's (modeling_kimi.py), with the
// K3 additions as a released K3 loader spells them (sglang's kimi_k3 model: g_proj, routed_expert_*):
//   {input_layernorm, post_attention_layernorm}.weight                              [hidden]
//   KDA (linear_attn_config.kda_layers, 1-based): MapKda (hf_map_kimi_linear.cpp); use_full_rank_gate
//     replaces g_a_proj -> g_b_proj by self_attn.g_proj [H*d, hidden]; gate_lower_bound (the bounded
//     decay gate) adds no tensor
//   gated MLA (the other layers): MapMla (hf_map_deepseek.cpp): q_a_proj, q_a_layernorm, q_b_proj
//     (q_lora_rank) or q_proj, kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj, and with
//     mla_use_output_gate self_attn.g_proj [H*dv, hidden]; with index_topk the DeepSeek-V3.2 indexer
//     self_attn.indexer.{wq_b, wk, k_norm.{weight,bias}, weights_proj} (MapIndexer)
//   dense (N < first_k_dense_replace): mlp.{gate,up,down}_proj (intermediate_size)
//   MoE: MapKimiMoe (block_sparse_moe.gate + e_score_correction_bias, experts.E.{w1,w3,w2} at the latent
//     width L = routed_expert_hidden_size, shared_experts.* at full width) plus
//     block_sparse_moe.routed_expert_down_proj [L, hidden], routed_expert_norm.weight [L]
//     (latent_moe_use_norm), routed_expert_up_proj [hidden, L]
//   vision_tower.*, mm_projector.*: skipped here on purpose; the MoonViT tower + projector are mapped by
//   hf_map_moonvit.cpp when verify gets images
// A_log keeps Kimi-Linear's [1, 1, H, 1].
#include "backends/hf_model.h"

namespace onboard {
namespace {

Expected<HfAttentionWeights> MapK3Mixer(const HfForwardConfig& c, const std::string& p,
                                        const AttentionSpec& a, int64_t h, HfWeightReader& r) {
  if (a.kind == MixerKind::kKDA) return MapKda(p, a, h, r);
  const bool dsa = a.kind == MixerKind::kDSA;
  if (a.kind != MixerKind::kMLA && !(dsa && a.dsa_base == MixerKind::kMLA))
    return BadInput(c.config_path, "num_hidden_layers", "kimi_k3 layers are KDA or (gated) MLA",
                    MixerKindName(a.kind));
  if (dsa && a.q_lora_rank == 0)
    return BadInput(c.config_path, "q_lora_rank",
                    "the DSA indexer reads the low-rank query (q_lora_rank > 0)", "0");
  ONBOARD_ASSIGN_OR_RETURN(HfAttentionWeights w, MapMla(p, a, h, r));
  if (dsa) ONBOARD_RETURN_IF_ERROR(MapIndexer(p + ".indexer", a, h, r, &w));
  return w;
}

}  // namespace

Expected<HfLayerWeights> MapKimiK3Layer(const HfForwardConfig& c, const LayerSpec& l, HfWeightReader& r) {
  const int64_t h = c.ir.hidden;
  const std::string p = HfLayerPrefix(l);
  // Step 1: norms and the token mixer.
  ONBOARD_ASSIGN_OR_RETURN(HfLayerWeights w, MapLayerNorms(p, l, h, r));
  ONBOARD_ASSIGN_OR_RETURN(w.attn, MapK3Mixer(c, p + "self_attn", l.attn, h, r));
  if (!w.moe) {
    ONBOARD_ASSIGN_OR_RETURN(w.mlp, r.Mlp(p + "mlp", h, l.mlp.intermediate));
    return w;
  }
  // Step 2: Kimi's MoE, then the latent projections around the routed experts.
  const MoESpec& m = l.moe;
  const std::string b = p + "block_sparse_moe";
  ONBOARD_ASSIGN_OR_RETURN(w.experts, MapKimiMoe(b, m, h, r));
  if (m.latent_dim > 0) {
    ONBOARD_ASSIGN_OR_RETURN(w.experts.latent_down,
                             r.Linear(b + ".routed_expert_down_proj", m.latent_dim, h, false));
    if (m.latent_norm) {
      ONBOARD_ASSIGN_OR_RETURN(w.experts.latent_norm,
                               r.Read(b + ".routed_expert_norm.weight", {m.latent_dim}));
    }
    ONBOARD_ASSIGN_OR_RETURN(w.experts.latent_up,
                             r.Linear(b + ".routed_expert_up_proj", h, m.latent_dim, false));
  }
  return w;
}

}  // namespace onboard
