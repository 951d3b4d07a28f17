// Hugging Face readers for families whose token mixer is softmax attention (GQA/MHA, sliding window):
// llama/mistral/qwen2/qwen3, mixtral, qwen2_moe/qwen3_moe/qwen3_vl_moe, glm4_moe, gpt_oss, minimax_m2,
// and the generic fallback for an unknown model_type.
#include "parsers/hf_families.h"

namespace onboard {
namespace {

// Qwen2/3-MoE rule (modeling_qwen3_moe.py): layer i is MoE when it is not in mlp_only_layers,
// num_experts > 0 and (i + 1) % decoder_sparse_step == 0.
std::function<bool(int64_t)> QwenMoeLayers(HfContext& c, const MoESpec& m) {
  const std::set<int64_t> mlp_only = ReadZeroBasedLayerList(c, c.text, "mlp_only_layers");
  const int64_t step = c.text.IntOr({"decoder_sparse_step"}, 1, 1, kMaxLayers);
  const bool any = m.num_experts > 0;
  return [mlp_only, step, any](int64_t i) { return any && !mlp_only.count(i) && (i + 1) % step == 0; };
}

// DeepSeek/GLM rule: MoE from first_k_dense_replace on, every moe_layer_freq-th layer.
std::function<bool(int64_t)> FirstKDenseLayers(HfContext& c, const MoESpec& m) {
  const int64_t first = c.text.IntOr({"first_k_dense_replace"}, 0, 0, c.num_layers);
  const int64_t freq = c.text.IntOr({"moe_layer_freq"}, 1, 1, kMaxLayers);
  const bool any = m.num_experts > 0;
  return [first, freq, any](int64_t i) { return any && i >= first && i % freq == 0; };
}

LayerSpec Layer(const AttentionSpec& a, bool moe, const MoESpec& m, const MlpSpec& mlp) {
  LayerSpec l;
  l.attn = a;
  SetChannel(l, moe, m, mlp);
  return l;
}

// Sliding window from mistral/qwen fields: sliding_window (non-null) and, for qwen, use_sliding_window.
void ApplySlidingWindow(HfContext& c, AttentionSpec* a) {
  if (!c.text.Has("sliding_window")) return;
  const int64_t w = c.text.Int("sliding_window", 0, kMaxDim);
  const bool use = c.text.Has("use_sliding_window") ? c.text.BoolOr("use_sliding_window", false) : true;
  if (use && w > 0 && (c.ir.max_position == 0 || w < c.ir.max_position)) {
    a->window = w;
    a->kind = MixerKind::kSlidingWindow;
  }
}

}  // namespace

Status ReadLlamaFamily(HfContext& c) {
  ReadHfCommon(c);
  AttentionSpec a = ReadHfAttention(c);
  const std::string mt = c.ir.model_type;
  if (mt == "qwen2") {           // q/k/v always biased, o never (modeling_qwen2.py)
    a.qkv_bias = true;
    a.o_bias = false;
  }
  if (mt == "qwen3") a.qk_norm = true;  // per-head q_norm / k_norm
  ApplySlidingWindow(c, &a);
  const MlpSpec mlp = ReadHfMlp(c);
  AddLayers(c, [&](int64_t) { return Layer(a, false, {}, mlp); });
  return c.text.status();
}

Status ReadMixtral(HfContext& c) {
  ReadHfCommon(c);
  AttentionSpec a = ReadHfAttention(c);
  ApplySlidingWindow(c, &a);
  MoESpec m = ReadHfMoE(c, "intermediate_size");
  if (m.num_experts == 0) c.text.Fail("num_local_experts", "required for mixtral", "");
  m.num_shared = 0;
  AddLayers(c, [&](int64_t) { return Layer(a, true, m, {}); });
  return c.text.status();
}

Status ReadQwenMoE(HfContext& c) {
  ReadHfCommon(c);
  AttentionSpec a = ReadHfAttention(c);
  if (c.ir.model_type == "qwen2_moe") {
    a.qkv_bias = true;
    a.o_bias = false;
  } else {
    a.qk_norm = true;  // qwen3_moe, qwen3_vl_moe
  }
  ApplySlidingWindow(c, &a);
  const MoESpec m = ReadHfMoE(c);
  const MlpSpec mlp = ReadHfMlp(c);
  const auto is_moe = QwenMoeLayers(c, m);
  AddLayers(c, [&](int64_t i) { return Layer(a, is_moe(i), m, mlp); });
  return c.text.status();
}

Status ReadGlm4MoE(HfContext& c) {
  ReadHfCommon(c);
  AttentionSpec a = ReadHfAttention(c);
  a.o_bias = false;                            // attention_bias covers q/k/v only (modeling_glm4_moe.py)
  a.qk_norm = c.text.BoolOr("use_qk_norm", false);
  MoESpec m = ReadHfMoE(c);
  m.expert_score_bias = m.num_experts > 0;     // Glm4MoeTopkRouter always has e_score_correction_bias
  m.router = RouterActivation::kSigmoid;
  const MlpSpec mlp = ReadHfMlp(c);
  const auto is_moe = FirstKDenseLayers(c, m);
  c.ir.mtp_layers = c.text.IntOr({"num_nextn_predict_layers"}, 0, 0, kMaxLayers);
  AddLayers(c, [&](int64_t i) { return Layer(a, is_moe(i), m, mlp); });
  return c.text.status();
}

Status ReadGptOss(HfContext& c) {
  ReadHfCommon(c);
  AttentionSpec full = ReadHfAttention(c);
  full.qkv_bias = full.o_bias = c.text.BoolOr("attention_bias", true);
  full.sinks = true;                           // per-head learned sink logits
  AttentionSpec sliding = full;
  sliding.kind = MixerKind::kSlidingWindow;
  sliding.window = c.text.IntOr({"sliding_window"}, 128, 1, kMaxDim);
  MoESpec m = ReadHfMoE(c, "intermediate_size");
  if (m.num_experts == 0) c.text.Fail("num_local_experts", "required for gpt_oss", "");
  m.router_bias = true;                        // router is nn.Linear(hidden, E, bias=True)
  m.expert_bias = true;                        // gate_up_proj_bias [E, 2I], down_proj_bias [E, h]
  m.act_clamp = c.text.DoubleOr("swiglu_limit", 7.0, 0.0, 1e6);  // GptOssConfig default 7.0
  m.num_shared = 0;
  // layer_types: "sliding_attention" / "full_attention"; absent -> alternating from sliding (config default).
  const std::vector<std::string> types = c.text.StrList("layer_types");
  if (!types.empty() && static_cast<int64_t>(types.size()) != c.num_layers)
    c.text.Fail("layer_types", "length must equal num_hidden_layers=" + std::to_string(c.num_layers),
                std::to_string(types.size()) + " entries");
  if (types.empty()) Guess(c, "layer_types absent: assumed alternating sliding/full attention");
  for (size_t i = 0; i < types.size(); ++i) {
    if (types[i] != "sliding_attention" && types[i] != "full_attention")
      c.text.Fail("layer_types[" + std::to_string(i) + "]", "expected sliding_attention or full_attention",
                  types[i]);
  }
  AddLayers(c, [&](int64_t i) {
    const size_t k = static_cast<size_t>(i);
    const bool slide = k < types.size() ? types[k] == "sliding_attention" : i % 2 == 0;
    return Layer(slide ? sliding : full, true, m, {});
  });
  return c.text.status();
}

Status ReadMiniMaxM2(HfContext& c) {
  ReadHfCommon(c);
  AttentionSpec a = ReadHfAttention(c);
  a.qk_norm = c.text.BoolOr("use_qk_norm", true);
  a.qk_norm_full = a.qk_norm;                  // q_norm over H*d, k_norm over KV*d ("per_layer")
  MoESpec m = ReadHfMoE(c, "intermediate_size");
  if (m.num_experts == 0) c.text.Fail("num_local_experts", "required for minimax_m2", "");
  c.ir.mtp_layers = c.text.IntOr({"num_mtp_modules"}, 0, 0, kMaxLayers);
  AddLayers(c, [&](int64_t) { return Layer(a, true, m, {}); });
  return c.text.status();
}

// Fields that declare state-space (Mamba) mixers or per-layer block kinds: a llama-style reading of
// such a config is a different model (Nemotron-H's 52 one-block layers "MEMEM*E..." read as 52
// attention + MoE layers: 102.3B parameters against 31.6B), so the fallback refuses it.
constexpr const char* kHybridBlockFields[] = {
    "hybrid_override_pattern", "layers_block_type", "ssm_state_size",    "mamba_num_heads",
    "mamba_d_state",           "mamba_d_ssm",       "attn_layer_period", "block_configs"};

Status ReadGeneric(HfContext& c) {
  // Step 1: refuse what the llama-style reading cannot be (before the common fields, which such a
  // config may not have: Nemotron 3 Ultra lists layers_block_type instead of num_hidden_layers).
  for (const char* key : kHybridBlockFields) {
    if (!c.text.Has(key)) continue;
    const std::string v = c.text.json().at(key).dump();
    c.text.Fail(key,
                "model_type '" + c.ir.model_type +
                    "' is not supported: it declares state-space (Mamba) or per-layer block kinds, which a "
                    "llama-style reading would turn into a different model",
                v.size() > 60 ? v.substr(0, 57) + "..." : v);
    return c.text.status();
  }
  ReadHfCommon(c);
  Guess(c, "model_type '" + c.ir.model_type +
               "' unknown: read as a llama-style decoder (GQA from num_attention_heads/num_key_value_heads, "
               "gated MLP from intermediate_size)");
  AttentionSpec a = ReadHfAttention(c);
  ApplySlidingWindow(c, &a);
  const MoESpec m = ReadHfMoE(c);
  const MlpSpec mlp = ReadHfMlp(c);
  std::function<bool(int64_t)> is_moe = [](int64_t) { return false; };
  if (m.num_experts > 0) {
    if (c.text.Has("first_k_dense_replace") || c.text.Has("moe_layer_freq")) {
      is_moe = FirstKDenseLayers(c, m);
      Guess(c, "MoE layers from first_k_dense_replace/moe_layer_freq (DeepSeek rule)");
    } else {
      is_moe = QwenMoeLayers(c, m);
      Guess(c, "MoE layers from mlp_only_layers/decoder_sparse_step (Qwen rule; every layer by default)");
    }
    Guess(c, "num_experts=" + std::to_string(m.num_experts) + " top_k=" + std::to_string(m.top_k) +
                 " expert width=" + std::to_string(m.expert_intermediate));
  }
  AddLayers(c, [&](int64_t i) { return Layer(a, is_moe(i), m, mlp); });
  return c.text.status();
}

}  // namespace onboard
