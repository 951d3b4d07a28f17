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
// A rank reads only its experts' rows (dim 0) of the fused tensors (EP, or EP folded over TP).
#include "backends/hf_model.h"

namespace onboard {
namespace {

// The experts this reader owns, one contiguous run [begin, end) (EP, or EP folded over the TP group).
HfExpertSpan OwnedExperts(const HfWeightReader& r, int64_t experts) {
  HfExpertSpan s{experts, experts};
  for (int64_t e = experts - 1; e >= 0; --e)
    if (r.OwnsExpert(e)) s.begin = e;
  for (int64_t e = s.begin; e < experts && r.OwnsExpert(e); ++e) s.end = e + 1;
  if (s.begin == experts) s.end = experts;
  return s;
}

// Owned experts' rows of a fused weight as [n, out, in]: MXFP4 blocks when present, else the dense
// [E, in, out] tensor (only those experts' bytes are read).
Expected<torch::Tensor> FusedExperts(const std::string& name, int64_t e, int64_t out, int64_t in,
                                     HfExpertSpan own, HfWeightReader& r, const SafetensorsCheckpoint& ck) {
  const int64_t n = own.end - own.begin;
  if (ck.Has(name + "_blocks")) return r.ReadMxfp4(name, {e, out, in}, own.begin, n);
  ONBOARD_ASSIGN_OR_RETURN(torch::Tensor w, r.ReadRows(name, {e, in, out}, own.begin, n));
  return w.transpose(1, 2);
}

Expected<std::vector<HfMlpWeights>> MapFusedExperts(const std::string& p, const MoESpec& m, int64_t h,
                                                    HfWeightReader& r, const SafetensorsCheckpoint& ck) {
  const int64_t E = m.num_experts, I = m.expert_intermediate;
  // Step 1: fused [E, ...] tensors load by expert (dim 0): EP, or EP folded over TP; not split inside.
  if (r.tp() > 1 && r.expert_tp())
    return BadInput(p + ".gate_up_proj", "expert_tp",
                    "gpt-oss fused experts load whole experts per rank here (fold EP over the TP group)",
                    "true");
  if (r.fsdp() > 1)
    return BadInput(p + ".gate_up_proj", "fsdp", "gpt-oss fused experts are not FSDP-sharded here",
                    std::to_string(r.fsdp()));
  const HfExpertSpan own = OwnedExperts(r, E);
  const int64_t n = own.end - own.begin;
  ONBOARD_ASSIGN_OR_RETURN(torch::Tensor gate_up, FusedExperts(p + ".gate_up_proj", E, 2 * I, h, own, r, ck));
  ONBOARD_ASSIGN_OR_RETURN(torch::Tensor gate_up_b,
                           r.ReadRows(p + ".gate_up_proj_bias", {E, 2 * I}, own.begin, n));
  ONBOARD_ASSIGN_OR_RETURN(torch::Tensor down, FusedExperts(p + ".down_proj", E, h, I, own, r, ck));
  ONBOARD_ASSIGN_OR_RETURN(torch::Tensor down_b, r.ReadRows(p + ".down_proj_bias", {E, h}, own.begin, n));
  // Step 2: per owned expert, gate / up from the interleaved columns; others stay empty.
  std::vector<HfMlpWeights> out(static_cast<size_t>(E));
  for (int64_t e = own.begin; e < own.end; ++e) {
    HfMlpWeights& x = out[size_t(e)];
    const int64_t i = e - own.begin;
    x.gate = {gate_up[i].slice(0, 0, 2 * I, 2), gate_up_b[i].slice(0, 0, 2 * I, 2)};
    x.up = {gate_up[i].slice(0, 1, 2 * I, 2), gate_up_b[i].slice(0, 1, 2 * I, 2)};
    x.down = {down[i], down_b[i]};
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
