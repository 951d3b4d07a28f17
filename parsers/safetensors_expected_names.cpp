// ExpectedTensorNames: the Hugging Face checkpoint tensor names (and shapes) a ModelIR implies.
//
// Naming families (transformers modeling_*.py):
//   llama-like  model.layers.N.self_attn.{q,k,v,o}_proj.{weight,bias}, mlp.{gate,up,down}_proj.weight
//   mixtral     model.layers.N.block_sparse_moe.gate.weight, ...experts.J.{w1,w2,w3}.weight
//   qwen*_moe   model.layers.N.mlp.gate.weight, mlp.experts.J.{gate,up,down}_proj.weight,
//               mlp.shared_expert.*, mlp.shared_expert_gate.weight
//   deepseek    MLA self_attn.{q_a_proj,q_a_layernorm,q_b_proj,kv_a_proj_with_mqa,kv_a_layernorm,kv_b_proj},
//               mlp.gate.{weight,e_score_correction_bias}, mlp.experts.J.*, mlp.shared_experts.*
//   gpt_oss     self_attn.sinks, mlp.router.{weight,bias}, mlp.experts.{gate_up_proj,down_proj}_{blocks,
//               scales,bias} (MXFP4: blocks [E, out, in/32, 16] u8, scales [E, out, in/32] u8)
// Shapes are torch Linear layout [out, in]. Units: element counts.
#include <functional>

#include "parsers/safetensors.h"

namespace onboard {
namespace {

using Shape = std::vector<int64_t>;

int64_t Prod(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

struct Emitter {
  std::vector<ExpectedTensor>* out;
  void Add(const std::string& name, Shape shape) { out->push_back({name, shape, Prod(shape)}); }
  void AddParams(const std::string& name, Shape shape, int64_t params) { out->push_back({name, shape, params}); }
};

enum class Naming { kLlama, kMixtral, kQwenMoE, kDeepSeek, kGptOss };

Naming NamingFor(const std::string& model_type, std::vector<std::string>* warnings) {
  if (model_type == "mixtral") return Naming::kMixtral;
  if (model_type == "qwen2_moe" || model_type == "qwen3_moe") return Naming::kQwenMoE;
  if (model_type == "deepseek_v2" || model_type == "deepseek_v3" || model_type == "kimi_k2" ||
      model_type == "glm4_moe")
    return Naming::kDeepSeek;
  if (model_type == "gpt_oss") return Naming::kGptOss;
  static const char* kLlamaLike[] = {"llama", "mistral", "qwen2", "qwen3", "gemma", "phi3", "olmo2"};
  for (const char* t : kLlamaLike)
    if (model_type == t) return Naming::kLlama;
  if (warnings) warnings->push_back("model_type '" + model_type + "': tensor names assumed to follow llama naming");
  return Naming::kLlama;
}

void Attention(Emitter& e, const std::string& p, const AttentionSpec& a, int64_t h) {
  const int64_t H = a.num_heads, KV = a.num_kv_heads > 0 ? a.num_kv_heads : a.num_heads;
  const int64_t d = a.head_dim, dv = a.v_head_dim > 0 ? a.v_head_dim : a.head_dim;
  const std::string s = p + "self_attn.";
  if (a.kind == MixerKind::kMLA || (a.kind == MixerKind::kDSA && a.dsa_base == MixerKind::kMLA)) {
    const int64_t qk = a.qk_nope_head_dim + a.qk_rope_head_dim;
    if (a.q_lora_rank > 0) {
      e.Add(s + "q_a_proj.weight", {a.q_lora_rank, h});
      e.Add(s + "q_a_layernorm.weight", {a.q_lora_rank});
      e.Add(s + "q_b_proj.weight", {H * qk, a.q_lora_rank});
    } else {
      e.Add(s + "q_proj.weight", {H * qk, h});
    }
    e.Add(s + "kv_a_proj_with_mqa.weight", {a.kv_lora_rank + a.qk_rope_head_dim, h});
    e.Add(s + "kv_a_layernorm.weight", {a.kv_lora_rank});
    e.Add(s + "kv_b_proj.weight", {H * (a.qk_nope_head_dim + dv), a.kv_lora_rank});
    e.Add(s + "o_proj.weight", {h, H * dv});
    if (a.o_bias) e.Add(s + "o_proj.bias", {h});
    return;
  }
  e.Add(s + "q_proj.weight", {H * d, h});
  e.Add(s + "k_proj.weight", {KV * d, h});
  e.Add(s + "v_proj.weight", {KV * dv, h});
  e.Add(s + "o_proj.weight", {h, H * dv});
  if (a.qkv_bias) {
    e.Add(s + "q_proj.bias", {H * d});
    e.Add(s + "k_proj.bias", {KV * d});
    e.Add(s + "v_proj.bias", {KV * dv});
  }
  if (a.o_bias) e.Add(s + "o_proj.bias", {h});
  if (a.qk_norm) {  // per head [d], or over all heads [H*d] / [KV*d] (qk_norm_full)
    e.Add(s + "q_norm.weight", {a.qk_norm_full ? H * d : d});
    e.Add(s + "k_norm.weight", {a.qk_norm_full ? KV * d : d});
  }
  if (a.sinks) e.Add(s + "sinks", {H});
}

void GatedFfn(Emitter& e, const std::string& p, int64_t in, int64_t width, bool gated = true) {
  if (gated) e.Add(p + "gate_proj.weight", {width, in});
  e.Add(p + "up_proj.weight", {width, in});
  e.Add(p + "down_proj.weight", {in, width});
}

void DenseMlp(Emitter& e, const std::string& p, const MlpSpec& m, int64_t h) {
  if (m.gated) {
    GatedFfn(e, p + "mlp.", h, m.intermediate);
  } else {
    e.Add(p + "mlp.up_proj.weight", {m.intermediate, h});
    e.Add(p + "mlp.down_proj.weight", {h, m.intermediate});
  }
  if (m.bias) {
    if (m.gated) e.Add(p + "mlp.gate_proj.bias", {m.intermediate});
    e.Add(p + "mlp.up_proj.bias", {m.intermediate});
    e.Add(p + "mlp.down_proj.bias", {h});
  }
}

void Moe(Emitter& e, const std::string& p, const MoESpec& m, int64_t h, Naming naming) {
  const int64_t E = m.num_experts, I = m.expert_intermediate;
  if (naming == Naming::kGptOss) {
    // MXFP4 experts: 32 values per block of 16 bytes; parameters count the unpacked values.
    const std::string x = p + "mlp.experts.";
    e.Add(p + "mlp.router.weight", {E, h});
    if (m.router_bias) e.Add(p + "mlp.router.bias", {E});
    e.AddParams(x + "gate_up_proj_blocks", {E, 2 * I, h / 32, 16}, E * 2 * I * h);
    e.AddParams(x + "gate_up_proj_scales", {E, 2 * I, h / 32}, 0);
    e.AddParams(x + "down_proj_blocks", {E, h, I / 32, 16}, E * h * I);
    e.AddParams(x + "down_proj_scales", {E, h, I / 32}, 0);
    if (m.expert_bias) {
      e.Add(x + "gate_up_proj_bias", {E, 2 * I});
      e.Add(x + "down_proj_bias", {E, h});
    }
    return;
  }
  if (naming == Naming::kMixtral) {
    const std::string b = p + "block_sparse_moe.";
    e.Add(b + "gate.weight", {E, h});
    for (int64_t j = 0; j < E; ++j) {
      const std::string x = b + "experts." + std::to_string(j) + ".";
      e.Add(x + "w1.weight", {I, h});
      e.Add(x + "w2.weight", {h, I});
      e.Add(x + "w3.weight", {I, h});
    }
    return;
  }
  const std::string b = p + "mlp.";
  e.Add(b + "gate.weight", {E, h});
  if (m.expert_score_bias) e.Add(b + "gate.e_score_correction_bias", {E});
  for (int64_t j = 0; j < E; ++j) GatedFfn(e, b + "experts." + std::to_string(j) + ".", h, I, m.gated);
  if (m.num_shared > 0) {
    if (naming == Naming::kDeepSeek) {
      GatedFfn(e, b + "shared_experts.", h, m.num_shared * m.shared_intermediate);
    } else {
      GatedFfn(e, b + "shared_expert.", h, m.num_shared * m.shared_intermediate);
    }
  }
  if (m.shared_gate) e.Add(b + "shared_expert_gate.weight", {1, h});
}

}  // namespace

std::vector<ExpectedTensor> ExpectedTensorNames(const ModelIR& model, std::vector<std::string>* warnings) {
  std::vector<ExpectedTensor> out;
  // Step 0: refuse to enumerate absurd models (hostile configs: 10^5 layers x 10^6 experts).
  long double count = 3;
  for (const LayerSpec& l : model.layers)
    count += 24 + (l.channel == ChannelKind::kMoE ? 3.0L * static_cast<long double>(l.moe.num_experts) : 0);
  if (count > kMaxExpectedTensors) {
    if (warnings) warnings->push_back("model implies over " + std::to_string(kMaxExpectedTensors) + " tensors; names not enumerated");
    return out;
  }
  Emitter e{&out};
  const Naming naming = NamingFor(model.model_type, warnings);
  const int64_t h = model.hidden;
  // Step 1: embeddings.
  e.Add("model.embed_tokens.weight", {model.vocab, h});
  // Step 2: layers.
  for (const LayerSpec& l : model.layers) {
    const std::string p = "model.layers." + std::to_string(l.index) + ".";
    if (!IsSoftmaxAttention(l.attn.kind) && warnings)
      warnings->push_back(p + "self_attn: " + MixerKindName(l.attn.kind) + " tensor names are not enumerated");
    Attention(e, p, l.attn, h);
    if (l.norms >= 1) e.Add(p + "input_layernorm.weight", {h});
    if (l.norms >= 2) e.Add(p + "post_attention_layernorm.weight", {h});
    if (l.norm_bias) {
      if (l.norms >= 1) e.Add(p + "input_layernorm.bias", {h});
      if (l.norms >= 2) e.Add(p + "post_attention_layernorm.bias", {h});
    }
    if (l.channel == ChannelKind::kDenseMLP) {
      DenseMlp(e, p, l.mlp, h);
    } else {
      Moe(e, p, l.moe, h, naming);
    }
  }
  // Step 3: final norm and head.
  if (model.final_norm) e.Add("model.norm.weight", {h});
  if (!model.tied_embeddings) e.Add("lm_head.weight", {model.vocab, h});
  return out;
}

}  // namespace onboard
