// HF names -> modules for glm4_moe (GLM-4.5 / 4.6, modeling_glm4_moe.py checkpoint layout):
//   model.layers.N.{input_layernorm, post_attention_layernorm}.weight   [hidden]
//   model.layers.N.self_attn.{q,k,v}_proj.{weight,bias}                   q [H*d, hidden], k/v [KV*d, hidden]
//   model.layers.N.self_attn.o_proj.weight                                [hidden, H*d] (no bias)
//   model.layers.N.self_attn.{q,k}_norm.weight                            [d] when use_qk_norm
//   dense (N < first_k_dense_replace): mlp.{gate,up,down}_proj            (intermediate_size)
//   MoE: the DeepSeek-V3 names (mlp.gate, gate.e_score_correction_bias, experts.E.*, shared_experts.*)
#include "backends/hf_model.h"

namespace onboard {

Expected<HfLayerWeights> MapGlm4MoeLayer(const HfForwardConfig& c, const LayerSpec& l, HfWeightReader& r) {
  const int64_t h = c.ir.hidden;
  const std::string p = HfLayerPrefix(l);
  ONBOARD_ASSIGN_OR_RETURN(HfLayerWeights w, MapLayerNorms(p, l, h, r));
  ONBOARD_ASSIGN_OR_RETURN(w.attn, MapGqaAttention(p + "self_attn", l.attn, h, r));
  if (!w.moe) {
    ONBOARD_ASSIGN_OR_RETURN(w.mlp, r.Mlp(p + "mlp", h, l.mlp.intermediate));
    return w;
  }
  ONBOARD_ASSIGN_OR_RETURN(w.experts, MapSigmoidMoe(p + "mlp", l.moe, h, r));
  return w;
}

}  // namespace onboard
