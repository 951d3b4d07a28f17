// Shared Hugging Face config.json field reading (see hf_common.h).
#include "parsers/hf_common.h"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace onboard {

Activation ParseHfActivation(const std::string& s, bool* known) {
  std::string t;
  for (char ch : s) t += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  *known = true;
  if (t == "silu" || t == "swish" || t == "swiglu") return Activation::kSwiGLU;
  if (t == "gelu" || t == "gelu_new" || t == "gelu_pytorch_tanh" || t == "gelu_fast" || t == "geglu")
    return Activation::kGeGLU;
  if (t == "situ") return Activation::kSiTU;
  if (t == "relu2" || t == "relu_squared") return Activation::kReLU2;
  *known = false;
  return Activation::kSwiGLU;
}

void Guess(HfContext& c, const std::string& what) { c.ir.warnings.push_back(what); }

void ReadHfCommon(HfContext& c) {
  JsonFields& t = c.text;
  ModelIR& ir = c.ir;
  ir.vocab = t.Int("vocab_size", 1, kMaxDim);
  ir.hidden = t.Int("hidden_size", 1, kMaxDim);
  c.num_layers = t.Int("num_hidden_layers", 1, kMaxLayers);
  ir.max_position = t.IntOr({"max_position_embeddings", "model_max_length", "seq_length"}, 0, 0, kMaxDim);
  if (ir.max_position == 0) Guess(c, "max_position_embeddings absent: context length unknown (0)");
  // tie_word_embeddings: text part first, then the top level (VLMs write it there).
  if (t.Has("tie_word_embeddings")) {
    ir.tied_embeddings = t.BoolOr("tie_word_embeddings", false);
  } else {
    ir.tied_embeddings = c.top.BoolOr("tie_word_embeddings", false);
  }
  // dtype: torch_dtype (older) or dtype (transformers >= 4.56), text part first.
  std::string dt;
  for (JsonFields* f : {&t, &c.top}) {
    for (const char* k : {"torch_dtype", "dtype"}) {
      if (dt.empty() && f->Has(k)) dt = f->StrOr(k, "");
    }
  }
  if (!dt.empty()) {
    ir.dtype = ParseDType(dt);
    if (ir.dtype == DType::kUnknown) {
      t.Fail(t.Has("torch_dtype") || c.top.Has("torch_dtype") ? "torch_dtype" : "dtype", "unknown dtype", dt);
      ir.dtype = DType::kBF16;
    }
  } else {
    Guess(c, "torch_dtype absent: assumed bf16");
  }
  ir.expert_dtype = ir.dtype;
  // quantization_config: fp8 (DeepSeek / MiniMax block fp8) quantises every linear in the layers;
  // mxfp4 (gpt-oss) only the routed experts.
  std::optional<JsonFields> q = c.top.Sub("quantization_config");
  if (!q) q = t.Sub("quantization_config");
  if (q) {
    ir.quantization = q->StrOr("quant_method", "");
    if (ir.quantization == "fp8") {
      ir.expert_dtype = DType::kFP8;
      ir.linear_dtype = DType::kFP8;
    } else if (ir.quantization == "mxfp4") {
      ir.expert_dtype = DType::kMXFP4;
    } else if (!ir.quantization.empty()) {
      Guess(c, "quantization_config.quant_method '" + ir.quantization +
                   "' not modelled: weights counted at " + DTypeName(ir.dtype));
    }
  }
  const std::string act = t.StrOr("hidden_act", t.StrOr("hidden_activation", "silu"));
  bool known = true;
  c.act = ParseHfActivation(act, &known);
  c.act_gated = c.act != Activation::kReLU2 && c.act != Activation::kGELU;
  if (!known) Guess(c, "hidden_act '" + act + "' unknown: assumed a gated SiLU (SwiGLU) MLP");
}

// YaRN's attention factor, the scale on RoPE's cos/sin (transformers _compute_yarn_parameters, Megatron-LM
// yarn_rotary_pos_embedding.py _yarn_get_concentration_factor): attention_factor when given, else
// mscale(factor, mscale) / mscale(factor, mscale_all_dim) when both are given, else mscale(factor, 1),
// with mscale(s, m) = 0.1 m ln s + 1 for s > 1 (1 otherwise). rope_scaling (transformers 4.x) or
// rope_parameters (5.x); any other rope_type: 1.
double ReadYarnAttentionFactor(JsonFields& t) {
  const char* key = t.Has("rope_scaling") ? "rope_scaling" : "rope_parameters";
  std::optional<JsonFields> r = t.Sub(key);
  if (!r) return 1.0;
  const std::string type = r->Has("rope_type") ? r->StrOr("rope_type", "") : r->StrOr("type", "");
  if (type != "yarn") return 1.0;
  if (r->Has("attention_factor")) return r->DoubleOr("attention_factor", 1.0, 1e-6, 1e6);
  const double factor = r->DoubleOr("factor", 1.0, 1e-6, 1e6);
  auto mscale = [factor](double m) { return factor <= 1 ? 1.0 : 0.1 * m * std::log(factor) + 1.0; };
  if (r->Has("mscale") && r->Has("mscale_all_dim"))
    return mscale(r->DoubleOr("mscale", 1.0, 0.0, 1e6)) /
           mscale(r->DoubleOr("mscale_all_dim", 1.0, 0.0, 1e6));
  return mscale(1.0);
}

AttentionSpec ReadHfAttention(HfContext& c) {
  JsonFields& t = c.text;
  AttentionSpec a;
  a.num_heads = t.Int("num_attention_heads", 1, kMaxCount);
  a.num_kv_heads = t.IntOr({"num_key_value_heads", "num_kv_heads"}, a.num_heads, 1, kMaxCount);
  if (a.num_heads % a.num_kv_heads != 0)
    t.Fail("num_key_value_heads", "must divide num_attention_heads=" + std::to_string(a.num_heads),
           std::to_string(a.num_kv_heads));
  if (t.Has("head_dim")) {
    a.head_dim = t.Int("head_dim", 1, kMaxDim);
  } else {
    if (c.ir.hidden % a.num_heads != 0)
      t.Fail("num_attention_heads", "head_dim absent and hidden_size=" + std::to_string(c.ir.hidden) +
                                        " is not a multiple of it", std::to_string(a.num_heads));
    a.head_dim = std::max<int64_t>(1, c.ir.hidden / a.num_heads);
  }
  a.v_head_dim = a.head_dim;
  a.kind = a.num_kv_heads == a.num_heads ? MixerKind::kMHA : MixerKind::kGQA;
  const bool bias = t.BoolOr("attention_bias", false);
  a.qkv_bias = bias;
  a.o_bias = bias;
  a.rope_attention_factor = ReadYarnAttentionFactor(t);
  return a;
}

MlpSpec ReadHfMlp(HfContext& c, const char* intermediate_key) {
  MlpSpec m;
  m.act = c.act;
  m.gated = c.act_gated;
  m.intermediate = c.text.Int(intermediate_key, 1, kMaxDim);
  m.bias = c.text.BoolOr("mlp_bias", false);
  return m;
}

MoESpec ReadHfMoE(HfContext& c, const char* expert_width_key) {
  JsonFields& t = c.text;
  MoESpec m;
  m.num_experts =
      t.IntOr({"num_experts", "n_routed_experts", "num_local_experts", "moe_num_experts"}, 0, 0, kMaxCount);
  if (m.num_experts == 0) return m;
  const std::string k_key =
      t.FirstPresent({"num_experts_per_tok", "num_experts_per_token", "experts_per_token", "moe_top_k"});
  if (k_key.empty()) {
    t.Fail("num_experts_per_tok", "required for a MoE model (num_experts=" + std::to_string(m.num_experts) + ")", "");
  } else {
    m.top_k = t.Int(k_key, 1, m.num_experts);
  }
  m.expert_intermediate = t.Int(t.Has(expert_width_key) ? expert_width_key : "intermediate_size", 1, kMaxDim);
  m.num_shared = t.IntOr({"n_shared_experts", "num_shared_experts"}, 0, 0, kMaxCount);
  if (t.Has("shared_expert_intermediate_size")) {
    // Qwen2/3-MoE style: one shared expert of this total width, behind a sigmoid gate.
    m.shared_intermediate = t.Int("shared_expert_intermediate_size", 0, kMaxDim);
    m.num_shared = m.shared_intermediate > 0 ? 1 : 0;
    m.shared_gate = m.num_shared > 0;
  } else {
    m.shared_intermediate = m.num_shared > 0 ? m.expert_intermediate : 0;  // each shared expert = a routed one
  }
  const std::string score = t.StrOr("scoring_func", t.StrOr("moe_router_activation_func", "softmax"));
  if (score == "sigmoid") {
    m.router = RouterActivation::kSigmoid;
  } else if (score != "softmax") {
    t.Fail(t.Has("scoring_func") ? "scoring_func" : "moe_router_activation_func",
           "expected \"softmax\" or \"sigmoid\"", score);
  }
  m.num_groups = t.IntOr({"n_group", "num_expert_group"}, 1, 1, m.num_experts);
  m.topk_groups = t.IntOr({"topk_group"}, 1, 1, m.num_groups);
  m.routed_scaling = t.DoubleOr("routed_scaling_factor", 1.0, 0.0, 1e6);
  m.renormalize = t.BoolOr("norm_topk_prob", t.BoolOr("moe_renormalize", true));
  m.expert_score_bias = t.StrOr("topk_method", "") == "noaux_tc" || t.BoolOr("use_routing_bias", false);
  m.act = c.act;
  m.gated = c.act_gated;
  return m;
}

void AddLayers(HfContext& c, const std::function<LayerSpec(int64_t)>& make) {
  if (!c.text.ok()) return;  // an earlier field was bad: the per-layer lists may be inconsistent
  for (int64_t i = 0; i < c.num_layers; ++i) {
    LayerSpec l = make(i);
    l.index = i;
    c.ir.layers.push_back(l);
  }
}

std::set<int64_t> ReadOneBasedLayerList(HfContext& c, JsonFields& f, const std::string& key) {
  std::set<int64_t> out;
  for (int64_t x : f.IntList(key, 1, std::max<int64_t>(1, c.num_layers))) out.insert(x - 1);
  return out;
}

std::set<int64_t> ReadZeroBasedLayerList(HfContext& c, JsonFields& f, const std::string& key) {
  std::set<int64_t> out;
  for (int64_t x : f.IntList(key, 0, std::max<int64_t>(0, c.num_layers - 1))) out.insert(x);
  return out;
}

void SetChannel(LayerSpec& l, bool is_moe, const MoESpec& moe, const MlpSpec& mlp) {
  if (is_moe) {
    l.channel = ChannelKind::kMoE;
    l.moe = moe;
  } else {
    l.channel = ChannelKind::kDenseMLP;
    l.mlp = mlp;
  }
}

}  // namespace onboard
