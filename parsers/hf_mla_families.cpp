// Hugging Face reader for the DeepSeek MLA family: deepseek_v2, deepseek_v3, deepseek_v32 and kimi_k2
// (Kimi-K2 ships DeepSeek-V3's architecture under its own model_type).
//
// Layer i (0-based) is MoE when n_routed_experts > 0, i >= first_k_dense_replace and
// i % moe_layer_freq == 0 (modeling_deepseek.py). MTP layers (num_nextn_predict_layers) are extra
// checkpoint layers, recorded but not counted. DeepSeek-V3.2 adds the lightning indexer
// (index_n_heads, index_head_dim, index_topk) to every layer's MLA: kind DSA on MLA.
#include "parsers/hf_families.h"

namespace onboard {

AttentionSpec ReadMlaAttention(HfContext& c) {
  JsonFields& t = c.text;
  AttentionSpec a;
  a.kind = MixerKind::kMLA;
  a.num_heads = t.Int("num_attention_heads", 1, kMaxCount);
  a.num_kv_heads = a.num_heads;
  a.q_lora_rank = t.IntOr({"q_lora_rank"}, 0, 0, kMaxDim);   // null / absent -> full-rank q_proj
  a.kv_lora_rank = t.Int("kv_lora_rank", 1, kMaxDim);
  a.qk_nope_head_dim = t.Int("qk_nope_head_dim", 0, kMaxDim);
  a.qk_rope_head_dim = t.Int("qk_rope_head_dim", 0, kMaxDim);
  if (a.qk_nope_head_dim + a.qk_rope_head_dim == 0)
    t.Fail("qk_nope_head_dim", "qk_nope_head_dim + qk_rope_head_dim must be > 0", "0");
  a.head_dim = a.qk_nope_head_dim + a.qk_rope_head_dim;
  a.v_head_dim = t.Int("v_head_dim", 1, kMaxDim);
  a.qkv_bias = false;                         // MLA projections carry no bias in released models
  // DSA lightning indexer (DeepSeek-V3.2 index_*; same spellings in kimi configs).
  if (t.Has("index_topk") || t.Has("index_n_heads")) {
    a.kind = MixerKind::kDSA;
    a.dsa_base = MixerKind::kMLA;
    a.index_heads = t.Int("index_n_heads", 1, kMaxCount);
    a.index_head_dim = t.Int("index_head_dim", 1, kMaxDim);
    a.index_topk = t.Int("index_topk", 1, kMaxDim);
  }
  return a;
}

Status ReadDeepSeek(HfContext& c) {
  ReadHfCommon(c);
  JsonFields& t = c.text;
  const AttentionSpec a = ReadMlaAttention(c);
  MoESpec m = ReadHfMoE(c);
  const MlpSpec mlp = ReadHfMlp(c);
  const int64_t first = t.IntOr({"first_k_dense_replace"}, 0, 0, c.num_layers);
  const int64_t freq = t.IntOr({"moe_layer_freq"}, 1, 1, kMaxLayers);
  c.ir.mtp_layers = t.IntOr({"num_nextn_predict_layers"}, 0, 0, kMaxLayers);
  // V3 routing: sigmoid scores + e_score_correction_bias (topk_method noaux_tc); V2: softmax.
  if (c.ir.model_type == "deepseek_v2" && !t.Has("scoring_func")) m.router = RouterActivation::kSoftmax;
  AddLayers(c, [&](int64_t i) {
    LayerSpec l;
    l.attn = a;
    SetChannel(l, m.num_experts > 0 && i >= first && i % freq == 0, m, mlp);
    return l;
  });
  return t.status();
}

}  // namespace onboard
