// HF names -> modules for llama, mistral, qwen2, qwen3 (dense) and qwen2_moe / qwen3_moe (MoE):
//   model.layers.N.{input_layernorm, post_attention_layernorm}.weight           [hidden]
//   model.layers.N.self_attn.{q,k,v,o}_proj.{weight,bias}                        q [H*d, hidden], k/v [KV*d, hidden]
//   model.layers.N.self_attn.{q,k}_norm.weight                                   [d] (qwen3)
//   dense: model.layers.N.mlp.{gate,up,down}_proj.weight                         [I, hidden] / [hidden, I]
//   MoE:   model.layers.N.mlp.gate.weight [E, hidden]; mlp.experts.E.{gate,up,down}_proj.weight
//          qwen2_moe: mlp.shared_expert.{gate,up,down}_proj.weight, mlp.shared_expert_gate.weight [1, hidden]
#include "backends/hf_model.h"

namespace onboard {

Expected<HfAttentionWeights> MapGqaAttention(const std::string& p, const AttentionSpec& a, int64_t hidden,
                                             HfWeightReader& r) {
  HfAttentionWeights w;
  const int64_t qd = a.num_heads * a.head_dim, kvd = a.num_kv_heads * a.head_dim;
  ONBOARD_ASSIGN_OR_RETURN(w.q, r.Linear(p + ".q_proj", qd, hidden, a.qkv_bias));
  ONBOARD_ASSIGN_OR_RETURN(w.k, r.Linear(p + ".k_proj", kvd, hidden, a.qkv_bias));
  ONBOARD_ASSIGN_OR_RETURN(w.v, r.Linear(p + ".v_proj", kvd, hidden, a.qkv_bias));
  ONBOARD_ASSIGN_OR_RETURN(w.o, r.Linear(p + ".o_proj", hidden, qd, a.o_bias));
  if (a.qk_norm) {
    ONBOARD_ASSIGN_OR_RETURN(w.q_norm, r.Read(p + ".q_norm.weight", {a.head_dim}));
    ONBOARD_ASSIGN_OR_RETURN(w.k_norm, r.Read(p + ".k_norm.weight", {a.head_dim}));
  }
  return w;
}

Expected<std::vector<HfMlpWeights>> MapExperts(const std::string& p, const MoESpec& m, int64_t hidden,
                                               HfWeightReader& r, const char* gate, const char* up,
                                               const char* down) {
  std::vector<HfMlpWeights> out;
  for (int64_t e = 0; e < m.num_experts; ++e) {
    if (!r.OwnsExpert(e)) {
      out.emplace_back();  // another rank's expert
      continue;
    }
    ONBOARD_ASSIGN_OR_RETURN(HfMlpWeights x, r.Mlp(p + "." + std::to_string(e), hidden, m.expert_intermediate, gate, up, down));
    out.push_back(std::move(x));
  }
  return out;
}

Expected<HfLayerWeights> MapLayerNorms(const std::string& p, const LayerSpec& l, int64_t h,
                                       HfWeightReader& r) {
  HfLayerWeights w;
  w.index = l.index;
  ONBOARD_ASSIGN_OR_RETURN(w.input_norm, r.Read(p + "input_layernorm.weight", {h}));
  ONBOARD_ASSIGN_OR_RETURN(w.post_norm, r.Read(p + "post_attention_layernorm.weight", {h}));
  w.moe = l.channel == ChannelKind::kMoE;
  return w;
}

Expected<HfLayerWeights> MapLlamaLayer(const HfForwardConfig& c, const LayerSpec& l, HfWeightReader& r) {
  const int64_t h = c.ir.hidden;
  const std::string p = HfLayerPrefix(l);
  ONBOARD_ASSIGN_OR_RETURN(HfLayerWeights w, MapLayerNorms(p, l, h, r));
  ONBOARD_ASSIGN_OR_RETURN(w.attn, MapGqaAttention(p + "self_attn", l.attn, h, r));
  if (!w.moe) {
    ONBOARD_ASSIGN_OR_RETURN(w.mlp, r.Mlp(p + "mlp", h, l.mlp.intermediate));
    return w;
  }
  const MoESpec& m = l.moe;
  ONBOARD_ASSIGN_OR_RETURN(w.experts.router, r.Linear(p + "mlp.gate", m.num_experts, h, false));
  ONBOARD_ASSIGN_OR_RETURN(w.experts.experts, MapExperts(p + "mlp.experts", m, h, r, "gate_proj", "up_proj", "down_proj"));
  if (m.num_shared > 0) {  // qwen2_moe: one shared expert behind a sigmoid gate
    w.experts.has_shared = true;
    ONBOARD_ASSIGN_OR_RETURN(w.experts.shared, r.Mlp(p + "mlp.shared_expert", h, m.shared_intermediate));
    if (m.shared_gate) {
      ONBOARD_ASSIGN_OR_RETURN(w.experts.shared_gate, r.Linear(p + "mlp.shared_expert_gate", 1, h, false));
    }
  }
  return w;
}

}  // namespace onboard
