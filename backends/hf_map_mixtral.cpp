// HF names -> modules for mixtral (modeling_mixtral.py checkpoint layout):
//   model.layers.N.self_attn.{q,k,v,o}_proj.weight                      as llama
//   model.layers.N.block_sparse_moe.gate.weight                         [E, hidden]
//   model.layers.N.block_sparse_moe.experts.E.{w1 (gate), w3 (up)}.weight [I, hidden]; w2 (down) [hidden, I]
#include "backends/hf_model.h"

namespace onboard {

Expected<HfLayerWeights> MapMixtralLayer(const HfForwardConfig& c, const LayerSpec& l, HfWeightReader& r) {
  const int64_t h = c.ir.hidden;
  const std::string p = HfLayerPrefix(l);
  ONBOARD_ASSIGN_OR_RETURN(HfLayerWeights w, MapLayerNorms(p, l, h, r));
  w.moe = true;
  ONBOARD_ASSIGN_OR_RETURN(w.attn, MapGqaAttention(p + "self_attn", l.attn, h, r));
  ONBOARD_ASSIGN_OR_RETURN(w.experts.router, r.Linear(p + "block_sparse_moe.gate", l.moe.num_experts, h, false));
  ONBOARD_ASSIGN_OR_RETURN(w.experts.experts, MapExperts(p + "block_sparse_moe.experts", l.moe, h, r, "w1", "w3", "w2"));
  return w;
}

}  // namespace onboard
