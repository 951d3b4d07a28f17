// Hugging Face readers for hybrid linear/softmax attention families:
//   kimi_linear, kimi_k3 (flagship): KDA layers + (gated) MLA layers, optionally with the DSA indexer;
//       layer lists linear_attn_config.kda_layers / full_attn_layers are 1-INDEXED (modeling_kimi.py:
//       is_kda_layer(i) = (i + 1) in kda_layers). MoE from first_k_dense_replace / moe_layer_freq,
//       latent MoE when routed_expert_hidden_size < hidden_size.
//   qwen3_next: layer_types, else every full_attention_interval-th layer (1-based: 4th, 8th, ...) is gated
//       softmax attention (q_proj 2x wide for the output gate, per-head q/k norm), the rest gated DeltaNet.
//   minimax (MiniMax-01): layer_types or attn_type_list (0 = lightning linear attention, 1 = softmax).
#include "parsers/hf_families.h"

namespace onboard {

Status ReadKimiLinear(HfContext& c) {
  ReadHfCommon(c);
  JsonFields& t = c.text;
  // Step 1: the two mixers.
  AttentionSpec mla = ReadMlaAttention(c);
  mla.output_gate = t.BoolOr("mla_use_output_gate", false);
  AttentionSpec kda;
  kda.kind = MixerKind::kKDA;
  std::set<int64_t> kda_layers, full_layers;
  std::optional<JsonFields> lin = t.Sub("linear_attn_config");
  if (lin) {
    kda.num_heads = lin->Int("num_heads", 1, kMaxCount);
    kda.num_kv_heads = kda.num_heads;
    kda.num_v_heads = kda.num_heads;
    kda.head_dim = lin->Int("head_dim", 1, kMaxDim);
    kda.v_head_dim = kda.head_dim;
    kda.conv_kernel = lin->IntOr({"short_conv_kernel_size"}, 4, 0, 1024);
    kda.full_rank_gate = lin->BoolOr("use_full_rank_gate", false);
    if (lin->Has("gate_lower_bound")) {
      kda.gate_form = GateForm::kBounded;
      kda.gate_lower_bound = lin->DoubleOr("gate_lower_bound", -5.0, -1e6, -1e-12);
    } else {
      kda.gate_form = GateForm::kOriginal;
    }
    kda_layers = ReadOneBasedLayerList(c, *lin, "kda_layers");
    full_layers = ReadOneBasedLayerList(c, *lin, "full_attn_layers");
    for (int64_t i : kda_layers) {
      if (full_layers.count(i))
        lin->Fail("kda_layers", "layer listed in both kda_layers and full_attn_layers (1-indexed)",
                  std::to_string(i + 1));
    }
  } else {
    Guess(c, "linear_attn_config absent: every layer is MLA");
  }
  // Step 2: the routed experts (latent when routed_expert_hidden_size is set).
  MoESpec m = ReadHfMoE(c);
  m.expert_score_bias = m.num_experts > 0;  // KimiMoEGate carries e_score_correction_bias
  if (t.Has("routed_expert_hidden_size")) {
    m.latent_dim = t.Int("routed_expert_hidden_size", 1, c.ir.hidden);
    if (m.latent_dim == c.ir.hidden) m.latent_dim = 0;
    m.latent_norm = m.latent_dim > 0 && t.BoolOr("latent_moe_use_norm", false);
  }
  const MlpSpec mlp = ReadHfMlp(c);
  const int64_t first = t.IntOr({"first_k_dense_replace"}, 0, 0, c.num_layers);
  const int64_t freq = t.IntOr({"moe_layer_freq"}, 1, 1, kMaxLayers);
  c.ir.mtp_layers = t.IntOr({"num_nextn_predict_layers"}, 0, 0, kMaxLayers);
  // Step 3: layers. A layer in neither list is MLA (the modeling code's else branch), with a warning.
  int64_t unlisted = 0;
  AddLayers(c, [&](int64_t i) {
    LayerSpec l;
    if (kda_layers.count(i)) {
      l.attn = kda;
    } else {
      l.attn = mla;
      if (lin && !full_layers.count(i)) ++unlisted;
    }
    SetChannel(l, m.num_experts > 0 && i >= first && i % freq == 0, m, mlp);
    return l;
  });
  if (unlisted > 0)
    Guess(c, std::to_string(unlisted) + " layers in neither kda_layers nor full_attn_layers: read as MLA");
  return t.status();
}

Status ReadQwen3Next(HfContext& c) {
  ReadHfCommon(c);
  JsonFields& t = c.text;
  AttentionSpec full = ReadHfAttention(c);
  full.o_bias = false;
  full.qk_norm = true;
  full.output_gate = true;                     // q_proj emits query and gate: 2 * H * d wide
  AttentionSpec gdn;
  gdn.kind = MixerKind::kGatedDeltaNet;
  gdn.num_heads = t.Int("linear_num_key_heads", 1, kMaxCount);
  gdn.num_kv_heads = gdn.num_heads;
  gdn.num_v_heads = t.Int("linear_num_value_heads", 1, kMaxCount);
  gdn.head_dim = t.Int("linear_key_head_dim", 1, kMaxDim);
  gdn.v_head_dim = t.Int("linear_value_head_dim", 1, kMaxDim);
  gdn.conv_kernel = t.IntOr({"linear_conv_kernel_dim"}, 4, 0, 1024);
  gdn.gate_form = GateForm::kOriginal;
  if (gdn.num_v_heads % gdn.num_heads != 0)
    t.Fail("linear_num_value_heads", "must be a multiple of linear_num_key_heads=" + std::to_string(gdn.num_heads),
           std::to_string(gdn.num_v_heads));
  const std::vector<std::string> types = t.StrList("layer_types");
  const int64_t interval = t.IntOr({"full_attention_interval"}, 4, 1, kMaxLayers);
  if (!types.empty() && static_cast<int64_t>(types.size()) != c.num_layers)
    t.Fail("layer_types", "length must equal num_hidden_layers=" + std::to_string(c.num_layers),
           std::to_string(types.size()) + " entries");
  for (size_t i = 0; i < types.size(); ++i) {
    if (types[i] != "linear_attention" && types[i] != "full_attention")
      t.Fail("layer_types[" + std::to_string(i) + "]", "expected linear_attention or full_attention", types[i]);
  }
  MoESpec m = ReadHfMoE(c);
  const std::set<int64_t> mlp_only = ReadZeroBasedLayerList(c, t, "mlp_only_layers");
  const int64_t step = t.IntOr({"decoder_sparse_step"}, 1, 1, kMaxLayers);
  const MlpSpec mlp = ReadHfMlp(c);
  AddLayers(c, [&](int64_t i) {
    LayerSpec l;
    const size_t k = static_cast<size_t>(i);
    const bool is_full = k < types.size() ? types[k] == "full_attention" : (i + 1) % interval == 0;
    l.attn = is_full ? full : gdn;
    SetChannel(l, m.num_experts > 0 && !mlp_only.count(i) && (i + 1) % step == 0, m, mlp);
    return l;
  });
  return t.status();
}

Status ReadMiniMaxLightning(HfContext& c) {
  ReadHfCommon(c);
  JsonFields& t = c.text;
  AttentionSpec softmax = ReadHfAttention(c);
  softmax.qkv_bias = softmax.o_bias = false;
  AttentionSpec lin;
  lin.kind = MixerKind::kLinearAttention;
  lin.num_heads = softmax.num_heads;
  lin.num_kv_heads = softmax.num_heads;
  lin.head_dim = softmax.head_dim;
  lin.v_head_dim = softmax.head_dim;
  lin.chunk_size = t.IntOr({"block_size"}, 256, 1, kMaxDim);
  // Layer kinds: layer_types (transformers) or attn_type_list (remote code, 1 = softmax).
  std::vector<bool> is_softmax;
  if (t.Has("layer_types")) {
    for (const std::string& s : t.StrList("layer_types")) is_softmax.push_back(s == "full_attention");
  } else if (t.Has("attn_type_list")) {
    for (int64_t x : t.IntList("attn_type_list", 0, 1)) is_softmax.push_back(x == 1);
  } else {
    Guess(c, "layer_types / attn_type_list absent: assumed every 8th layer softmax, the rest lightning");
    for (int64_t i = 0; i < c.num_layers; ++i) is_softmax.push_back((i + 1) % 8 == 0);
  }
  if (static_cast<int64_t>(is_softmax.size()) != c.num_layers)
    t.Fail(t.Has("layer_types") ? "layer_types" : "attn_type_list",
           "length must equal num_hidden_layers=" + std::to_string(c.num_layers),
           std::to_string(is_softmax.size()) + " entries");
  MoESpec m = ReadHfMoE(c, "intermediate_size");
  if (m.num_experts == 0) t.Fail("num_local_experts", "required for minimax", "");
  m.num_shared = 0;
  if (t.Has("shared_intermediate_size") && t.Int("shared_intermediate_size", 0, kMaxDim) > 0) {
    m.num_shared = 1;
    m.shared_intermediate = t.Int("shared_intermediate_size", 0, kMaxDim);
  }
  AddLayers(c, [&](int64_t i) {
    LayerSpec l;
    const bool sm = static_cast<size_t>(i) < is_softmax.size() && is_softmax[static_cast<size_t>(i)];
    l.attn = sm ? softmax : lin;
    l.channel = ChannelKind::kMoE;
    l.moe = m;
    return l;
  });
  return t.status();
}

}  // namespace onboard
