// HF names -> modules for gpt_oss (modeling_gpt_oss.py; the MXFP4 release layout of
// integrations/mxfp4.py):
//   model.layers.N.{input_layernorm, post_attention_layernorm}.weight   [hidden]
//   model.layers.N.self_attn.{q,k,v,o}_proj.{weight,bias}                 q [H*d, hidden], k/v [KV*d, hidden]
//   model.layers.N.self_attn.sinks                                        [H]
//   model.layers.N.mlp.router.{weight,bias}                               [E, hidden], [E]
//   experts, MXFP4: mlp.experts.gate_up_proj_{blocks,scales}  [E, 2I, hidden/32, 16], [E, 2I, hidden/32]
//                   mlp.experts.down_proj_{blocks,scales}     [E, hidden, I/32, 16], [E, hidden, I/32]
//   experts, dense: mlp.experts.gate_up_proj [E, hidden, 2I]; mlp.experts.down_proj [E, I, hidden]
//   biases:         mlp.experts.gate_up_proj_bias [E, 2I]; mlp.experts.down_proj_bias [E, hidden]
// gate_up interleaves its outputs: column 2j is gate j, column 2j+1 is up j.
#include "backends/hf_model.h"

namespace onboard {
namespace {

// Fused expert weight as [E, out, in]: MXFP4 blocks when present, else the dense [E, in, out] tensor.
Expected<torch::Tensor> FusedExperts(const std::string& name, int64_t e, int64_t out, int64_t in,
                                     HfWeightReader& r, const SafetensorsCheckpoint& ck) {
  if (ck.Has(name + "_blocks")) return r.ReadMxfp4(name, {e, out, in});
  ONBOARD_ASSIGN_OR_RETURN(torch::Tensor w, r.Read(name, {e, in, out}));
  return w.transpose(1, 2);
}

Expected<std::vector<HfMlpWeights>> MapFusedExperts(const std::string& p, const MoESpec& m, int64_t h,
                                                    HfWeightReader& r, const SafetensorsCheckpoint& ck) {
  const int64_t E = m.num_experts, I = m.expert_intermediate;
  ONBOARD_ASSIGN_OR_RETURN(torch::Tensor gate_up, FusedExperts(p + ".gate_up_proj", E, 2 * I, h, r, ck));
  ONBOARD_ASSIGN_OR_RETURN(torch::Tensor gate_up_b, r.Read(p + ".gate_up_proj_bias", {E, 2 * I}));
  ONBOARD_ASSIGN_OR_RETURN(torch::Tensor down, FusedExperts(p + ".down_proj", E, h, I, r, ck));
  ONBOARD_ASSIGN_OR_RETURN(torch::Tensor down_b, r.Read(p + ".down_proj_bias", {E, h}));
  std::vector<HfMlpWeights> out(static_cast<size_t>(E));
  for (int64_t e = 0; e < E; ++e) {
    if (!r.OwnsExpert(e)) continue;  // another rank's expert
    HfMlpWeights& x = out[size_t(e)];
    x.gate = {gate_up[e].slice(0, 0, 2 * I, 2), gate_up_b[e].slice(0, 0, 2 * I, 2)};
    x.up = {gate_up[e].slice(0, 1, 2 * I, 2), gate_up_b[e].slice(0, 1, 2 * I, 2)};
    x.down = {down[e], down_b[e]};
  }
  return out;
}

}  // namespace

Expected<HfLayerWeights> MapGptOssLayer(const HfForwardConfig& c, const LayerSpec& l, HfWeightReader& r) {
  const int64_t h = c.ir.hidden;
  const std::string p = HfLayerPrefix(l);
  ONBOARD_ASSIGN_OR_RETURN(HfLayerWeights w, MapLayerNorms(p, l, h, r));
  w.moe = true;
  ONBOARD_ASSIGN_OR_RETURN(w.attn, MapGqaAttention(p + "self_attn", l.attn, h, r));
  ONBOARD_ASSIGN_OR_RETURN(w.attn.sinks, r.Read(p + "self_attn.sinks", {l.attn.num_heads}));
  ONBOARD_ASSIGN_OR_RETURN(w.experts.router, r.Linear(p + "mlp.router", l.moe.num_experts, h, true));
  ONBOARD_ASSIGN_OR_RETURN(w.experts.experts,
                           MapFusedExperts(p + "mlp.experts", l.moe, h, r, r.checkpoint()));
  return w;
}

}  // namespace onboard
