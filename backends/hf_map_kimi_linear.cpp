// HF names -> modules for kimi_linear (modeling_kimi.py checkpoint layout):
//   model.layers.N.{input_layernorm, post_attention_layernorm}.weight            [hidden]
//   KDA layers (linear_attn_config.kda_layers, 1-based): self_attn.{q,k,v}_proj [H*d, hidden],
//     (MapKda and MapKimiMoe are also kimi_k3's, hf_map_kimi_k3.cpp)
//     self_attn.{q,k,v}_conv1d.weight [H*d, 1, K], self_attn.A_log [1, 1, H, 1], self_attn.dt_bias [H*d],
//     self_attn.f_a_proj [d, hidden], f_b_proj [H*d, d], b_proj [H, hidden], g_a_proj [d, hidden],
//     g_b_proj [H*d, d], o_norm.weight [d], o_proj [hidden, H*d]
//   MLA layers: the DeepSeek names with q_proj (q_lora_rank null), no RoPE applied (mla_use_nope)
//   dense (N < first_k_dense_replace): mlp.{gate,up,down}_proj
//   MoE: block_sparse_moe.gate.{weight, e_score_correction_bias}, block_sparse_moe.experts.E.{w1,w2,w3},
//        block_sparse_moe.shared_experts.{gate,up,down}_proj (moe_intermediate_size * num_shared_experts)
#include "backends/hf_model.h"

namespace onboard {

Expected<HfAttentionWeights> MapKda(const std::string& p, const AttentionSpec& a, int64_t h,
                                    HfWeightReader& r) {
  HfAttentionWeights w;
  const int64_t H = a.num_heads, d = a.head_dim, D = H * d, K = a.conv_kernel;
  ONBOARD_ASSIGN_OR_RETURN(w.q, r.Linear(p + ".q_proj", D, h, false));
  ONBOARD_ASSIGN_OR_RETURN(w.k, r.Linear(p + ".k_proj", D, h, false));
  ONBOARD_ASSIGN_OR_RETURN(w.v, r.Linear(p + ".v_proj", D, h, false));
  ONBOARD_ASSIGN_OR_RETURN(w.q_conv, r.Read(p + ".q_conv1d.weight", {D, 1, K}));
  ONBOARD_ASSIGN_OR_RETURN(w.k_conv, r.Read(p + ".k_conv1d.weight", {D, 1, K}));
  ONBOARD_ASSIGN_OR_RETURN(w.v_conv, r.Read(p + ".v_conv1d.weight", {D, 1, K}));
  ONBOARD_ASSIGN_OR_RETURN(w.a_log, r.Read(p + ".A_log", {1, 1, H, 1}));
  ONBOARD_ASSIGN_OR_RETURN(w.dt_bias, r.Read(p + ".dt_bias", {D}));
  ONBOARD_ASSIGN_OR_RETURN(w.f_a, r.Linear(p + ".f_a_proj", d, h, false));
  ONBOARD_ASSIGN_OR_RETURN(w.f_b, r.Linear(p + ".f_b_proj", D, d, false));
  ONBOARD_ASSIGN_OR_RETURN(w.beta, r.Linear(p + ".b_proj", H, h, false));
  if (a.full_rank_gate) {
    ONBOARD_ASSIGN_OR_RETURN(w.g, r.Linear(p + ".g_proj", D, h, false));
  } else {
    ONBOARD_ASSIGN_OR_RETURN(w.g_a, r.Linear(p + ".g_a_proj", d, h, false));
    ONBOARD_ASSIGN_OR_RETURN(w.g_b, r.Linear(p + ".g_b_proj", D, d, false));
  }
  ONBOARD_ASSIGN_OR_RETURN(w.o_norm, r.Read(p + ".o_norm.weight", {d}));
  ONBOARD_ASSIGN_OR_RETURN(w.o, r.Linear(p + ".o_proj", h, D, false));
  return w;
}

Expected<HfMoeWeights> MapKimiMoe(const std::string& b, const MoESpec& m, int64_t h, HfWeightReader& r) {
  HfMoeWeights w;
  ONBOARD_ASSIGN_OR_RETURN(w.router, r.Linear(b + ".gate", m.num_experts, h, false));
  ONBOARD_ASSIGN_OR_RETURN(w.score_bias, r.Read(b + ".gate.e_score_correction_bias", {m.num_experts}));
  const int64_t d = m.latent_dim > 0 ? m.latent_dim : h;  // latent MoE: experts at the latent width
  ONBOARD_ASSIGN_OR_RETURN(w.experts, MapExperts(b + ".experts", m, d, r, "w1", "w3", "w2"));
  if (m.num_shared > 0) {
    w.has_shared = true;
    ONBOARD_ASSIGN_OR_RETURN(w.shared, r.Mlp(b + ".shared_experts", h, m.expert_intermediate * m.num_shared));
  }
  return w;
}

Expected<HfLayerWeights> MapKimiLinearLayer(const HfForwardConfig& c, const LayerSpec& l, HfWeightReader& r) {
  const int64_t h = c.ir.hidden;
  const std::string p = HfLayerPrefix(l);
  ONBOARD_ASSIGN_OR_RETURN(HfLayerWeights w, MapLayerNorms(p, l, h, r));
  if (l.attn.kind == MixerKind::kKDA) {
    if (l.attn.gate_form != GateForm::kOriginal || l.attn.full_rank_gate)
      return BadInput(c.config_path, "linear_attn_config",
                      "the forward has Kimi-Linear's low-rank softplus gate only",
                      GateFormName(l.attn.gate_form));
    ONBOARD_ASSIGN_OR_RETURN(w.attn, MapKda(p + "self_attn", l.attn, h, r));
  } else {
    if (l.attn.kind != MixerKind::kMLA || l.attn.output_gate)
      return BadInput(c.config_path, "num_hidden_layers", "the Kimi-Linear forward has plain MLA layers only",
                      MixerKindName(l.attn.kind));
    ONBOARD_ASSIGN_OR_RETURN(w.attn, MapMla(p + "self_attn", l.attn, h, r));
  }
  if (!w.moe) {
    ONBOARD_ASSIGN_OR_RETURN(w.mlp, r.Mlp(p + "mlp", h, l.mlp.intermediate));
    return w;
  }
  if (l.moe.latent_dim > 0)
    return BadInput(c.config_path, "routed_expert_hidden_size",
                    "latent MoE is kimi_k3's (model_type kimi_k3)", std::to_string(l.moe.latent_dim));
  ONBOARD_ASSIGN_OR_RETURN(w.experts, MapKimiMoe(p + "block_sparse_moe", l.moe, h, r));
  return w;
}

}  // namespace onboard
