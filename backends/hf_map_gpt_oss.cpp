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
// A rank reads only its experts' rows (dim 0) of the fused tensors (EP, or EP folded over TP; FSDP2's
// dim-0 chunk of those) and, under expert TP, only its intermediate slice of each expert.
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

// What one rank loads of the fused [E, ...] tensors: experts [e0, e0 + n) (its EP / EP-over-TP run,
// then FSDP2's dim-0 chunk of that run: Shard(0) of a fused tensor shards its experts) and, under expert
// TP, intermediate units [i0, i0 + il) of each (the rank's 1/tp of I).
struct FusedSlice {
  int64_t e0 = 0, n = 0, i0 = 0, il = 0;
  bool bias_on_rank = true;  // the row-parallel down bias: rank 0 of the expert-TP group only
};

Expected<FusedSlice> SliceOf(const std::string& p, const MoESpec& m, const HfWeightReader& r, bool mxfp4) {
  const int64_t E = m.num_experts, I = m.expert_intermediate;
  const HfExpertSpan own = OwnedExperts(r, E);
  const HfRowSpan f = HfFsdpRows(own.end - own.begin, r.fsdp(true), r.fsdp_rank(true));
  FusedSlice s{own.begin + f.begin, f.len, 0, I, true};
  if (r.tp() <= 1 || !r.expert_tp()) return s;
  s.il = I / r.tp();
  s.i0 = r.tp_rank() * s.il;
  s.bias_on_rank = r.tp_rank() == 0;
  // MXFP4 down_proj packs I in 32-value blocks along its columns: a rank's share must be whole blocks.
  if (I % r.tp() != 0 || (mxfp4 && s.il % 32 != 0))
    return BadInput(p + ".down_proj", "intermediate_size",
                    "expert TP=" + std::to_string(r.tp()) + " needs I/tp" +
                        (mxfp4 ? " a multiple of 32 (MXFP4 blocks)" : " whole"),
                    std::to_string(I));
  return s;
}

Expected<std::vector<HfMlpWeights>> MapFusedExperts(const std::string& p, const MoESpec& m, int64_t h,
                                                    HfWeightReader& r, const SafetensorsCheckpoint& ck) {
  const int64_t E = m.num_experts, I = m.expert_intermediate;
  // Step 1: the rank's experts and intermediate slice (gate/up interleave per unit j as columns 2j,
  // 2j + 1, so units [i0, i0 + il) are the contiguous gate_up columns [2 i0, 2 (i0 + il))).
  const bool mxfp4 = ck.Has(p + ".gate_up_proj_blocks");
  ONBOARD_ASSIGN_OR_RETURN(const FusedSlice s, SliceOf(p, m, r, mxfp4));
  torch::Tensor gate_up, down, down_b;  // [n, 2 il, h], [n, h, il], [n, h]
  if (mxfp4) {
    ONBOARD_ASSIGN_OR_RETURN(
        gate_up, r.ReadMxfp4(p + ".gate_up_proj", {E, 2 * I, h}, s.e0, s.n, 1, 2 * s.i0, 2 * s.il));
    ONBOARD_ASSIGN_OR_RETURN(down, r.ReadMxfp4(p + ".down_proj", {E, h, I}, s.e0, s.n, 2, s.i0, s.il));
  } else {  // dense: gate_up [E, h, 2I], down [E, I, h]
    ONBOARD_ASSIGN_OR_RETURN(
        gate_up, r.ReadSlab(p + ".gate_up_proj", {E, h, 2 * I}, s.e0, s.n, 2, 2 * s.i0, 2 * s.il));
    ONBOARD_ASSIGN_OR_RETURN(down, r.ReadSlab(p + ".down_proj", {E, I, h}, s.e0, s.n, 1, s.i0, s.il));
    gate_up = gate_up.transpose(1, 2);
    down = down.transpose(1, 2);
  }
  ONBOARD_ASSIGN_OR_RETURN(torch::Tensor gate_up_b, r.ReadSlab(p + ".gate_up_proj_bias", {E, 2 * I}, s.e0,
                                                               s.n, 1, 2 * s.i0, 2 * s.il));
  if (s.bias_on_rank) {
    ONBOARD_ASSIGN_OR_RETURN(down_b, r.ReadRows(p + ".down_proj_bias", {E, h}, s.e0, s.n));
  }
  // Step 2: per loaded expert, gate / up from the interleaved columns; others stay empty.
  std::vector<HfMlpWeights> out(static_cast<size_t>(E));
  for (int64_t e = s.e0; e < s.e0 + s.n; ++e) {
    HfMlpWeights& x = out[size_t(e)];
    const int64_t i = e - s.e0;
    x.gate = {gate_up[i].slice(0, 0, 2 * s.il, 2), gate_up_b[i].slice(0, 0, 2 * s.il, 2)};
    x.up = {gate_up[i].slice(0, 1, 2 * s.il, 2), gate_up_b[i].slice(0, 1, 2 * s.il, 2)};
    x.down = {down[i], down_b.defined() ? down_b[i] : torch::Tensor()};
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
