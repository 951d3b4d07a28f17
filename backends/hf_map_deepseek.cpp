// HF names -> modules for deepseek_v3 / deepseek_v32 / kimi_k2 (modeling_deepseek_v3.py checkpoint layout):
//   self_attn.q_proj [H*(dn+dr), hidden]  or  q_a_proj [rq, hidden], q_a_layernorm [rq], q_b_proj [H*(dn+dr),
//   rq] self_attn.kv_a_proj_with_mqa [rkv+dr, hidden], kv_a_layernorm [rkv], kv_b_proj [H*(dn+dv), rkv]
//   self_attn.o_proj [hidden, H*dv]
//   deepseek_v32: self_attn.indexer.{wq_b [nI*dI, rq], wk [dI, hidden], k_norm.{weight,bias} [dI],
//                 weights_proj [nI, hidden]}
//   dense (i < first_k_dense_replace): mlp.{gate,up,down}_proj (intermediate_size)
//   MoE: mlp.gate.weight [E, hidden], mlp.gate.e_score_correction_bias [E] (noaux_tc),
//        mlp.experts.E.{gate,up,down}_proj (moe_intermediate_size),
//        mlp.shared_experts.{gate,up,down}_proj (moe_intermediate_size * n_shared_experts)
// FP8 checkpoints carry "<weight>_scale_inv" beside each quantised weight (read by HfWeightReader).
// dn = qk_nope_head_dim, dr = qk_rope_head_dim, dv = v_head_dim, rq/rkv = q/kv_lora_rank.
#include "backends/hf_model.h"

namespace onboard {

Expected<HfAttentionWeights> MapMla(const std::string& p, const AttentionSpec& a, int64_t h, HfWeightReader& r) {
  HfAttentionWeights w;
  const int64_t qk = a.qk_nope_head_dim + a.qk_rope_head_dim;
  if (a.q_lora_rank > 0) {
    ONBOARD_ASSIGN_OR_RETURN(w.q_a, r.Linear(p + ".q_a_proj", a.q_lora_rank, h, false));
    ONBOARD_ASSIGN_OR_RETURN(w.q_a_norm, r.Read(p + ".q_a_layernorm.weight", {a.q_lora_rank}));
    ONBOARD_ASSIGN_OR_RETURN(w.q_b, r.Linear(p + ".q_b_proj", a.num_heads * qk, a.q_lora_rank, false));
  } else {
    ONBOARD_ASSIGN_OR_RETURN(w.q, r.Linear(p + ".q_proj", a.num_heads * qk, h, false));
  }
  ONBOARD_ASSIGN_OR_RETURN(w.kv_a, r.Linear(p + ".kv_a_proj_with_mqa", a.kv_lora_rank + a.qk_rope_head_dim, h, false));
  ONBOARD_ASSIGN_OR_RETURN(w.kv_a_norm, r.Read(p + ".kv_a_layernorm.weight", {a.kv_lora_rank}));
  ONBOARD_ASSIGN_OR_RETURN(w.kv_b, r.Linear(p + ".kv_b_proj", a.num_heads * (a.qk_nope_head_dim + a.v_head_dim),
                                            a.kv_lora_rank, false));
  ONBOARD_ASSIGN_OR_RETURN(w.o, r.Linear(p + ".o_proj", h, a.num_heads * a.v_head_dim, false));
  if (a.output_gate) {  // kimi_k3 gated MLA: g_proj [H*dv, hidden]
    ONBOARD_ASSIGN_OR_RETURN(w.g, r.Linear(p + ".g_proj", a.num_heads * a.v_head_dim, h, false));
  }
  return w;
}

// DeepSeek-V3.2 indexer: wq_b, wk, k_norm (LayerNorm weight + bias), weights_proj.
Status MapIndexer(const std::string& p, const AttentionSpec& a, int64_t h, HfWeightReader& r,
                  HfAttentionWeights* w) {
  const int64_t n = a.index_heads, d = a.index_head_dim;
  ONBOARD_ASSIGN_OR_RETURN(w->idx_wq_b, r.Linear(p + ".wq_b", n * d, a.q_lora_rank, false));
  ONBOARD_ASSIGN_OR_RETURN(w->idx_wk, r.Linear(p + ".wk", d, h, false));
  ONBOARD_ASSIGN_OR_RETURN(w->idx_k_norm_w, r.Read(p + ".k_norm.weight", {d}));
  ONBOARD_ASSIGN_OR_RETURN(w->idx_k_norm_b, r.Read(p + ".k_norm.bias", {d}));
  ONBOARD_ASSIGN_OR_RETURN(w->idx_weights, r.Linear(p + ".weights_proj", n, h, false));
  return Status::Ok();
}

Expected<HfMoeWeights> MapSigmoidMoe(const std::string& p, const MoESpec& m, int64_t h, HfWeightReader& r) {
  HfMoeWeights w;
  ONBOARD_ASSIGN_OR_RETURN(w.router, r.Linear(p + ".gate", m.num_experts, h, false));
  if (m.expert_score_bias) {
    ONBOARD_ASSIGN_OR_RETURN(w.score_bias, r.Read(p + ".gate.e_score_correction_bias", {m.num_experts}));
  }
  ONBOARD_ASSIGN_OR_RETURN(w.experts,
                           MapExperts(p + ".experts", m, h, r, "gate_proj", "up_proj", "down_proj"));
  if (m.num_shared > 0) {
    w.has_shared = true;
    ONBOARD_ASSIGN_OR_RETURN(w.shared, r.Mlp(p + ".shared_experts", h, m.expert_intermediate * m.num_shared));
  }
  return w;
}

Expected<HfLayerWeights> MapDeepSeekLayer(const HfForwardConfig& c, const LayerSpec& l, HfWeightReader& r) {
  const int64_t h = c.ir.hidden;
  const std::string p = HfLayerPrefix(l);
  const bool dsa = l.attn.kind == MixerKind::kDSA;
  if (l.attn.kind != MixerKind::kMLA && !(dsa && l.attn.dsa_base == MixerKind::kMLA))
    return BadInput(c.config_path, "index_topk", "the DSA forward here runs on MLA only",
                    MixerKindName(l.attn.dsa_base));
  if (dsa && l.attn.q_lora_rank == 0)
    return BadInput(c.config_path, "q_lora_rank",
                    "the DSA indexer reads the low-rank query (q_lora_rank > 0)", "0");
  ONBOARD_ASSIGN_OR_RETURN(HfLayerWeights w, MapLayerNorms(p, l, h, r));
  ONBOARD_ASSIGN_OR_RETURN(w.attn, MapMla(p + "self_attn", l.attn, h, r));
  if (dsa) ONBOARD_RETURN_IF_ERROR(MapIndexer(p + "self_attn.indexer", l.attn, h, r, &w.attn));
  if (!w.moe) {
    ONBOARD_ASSIGN_OR_RETURN(w.mlp, r.Mlp(p + "mlp", h, l.mlp.intermediate));
    return w;
  }
  ONBOARD_ASSIGN_OR_RETURN(w.experts, MapSigmoidMoe(p + "mlp", l.moe, h, r));
  return w;
}

}  // namespace onboard
