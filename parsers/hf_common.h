// Shared pieces of the Hugging Face config.json readers (hf_*.cpp).
//
// A family reader gets an HfContext: `top` is the whole config.json, `text` the language-model part
// (`text_config` when present, else the top level), `vision` the `vision_config` when present. It fills
// `ir` and returns the first error; each field read is type- and range-checked by JsonFields.
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/model_ir.h"
#include "core/status.h"
#include "parsers/json_fields.h"

namespace onboard {

constexpr int64_t kMaxLayers = 100000;
constexpr int64_t kMaxCount = 1 << 20;  // heads, experts, top-k, groups

struct HfContext {
  JsonFields& top;
  JsonFields& text;
  std::optional<JsonFields> vision;
  ModelIR& ir;
  int64_t num_layers = 0;
  Activation act = Activation::kSwiGLU;
  bool act_gated = true;
};

using HfFamilyReader = std::function<Status(HfContext&)>;

// Step 1 of every reader: vocab, hidden, layer count, context, tying, dtypes, quantisation, activation.
void ReadHfCommon(HfContext& c);

// Plain softmax attention from the usual fields (num_attention_heads, num_key_value_heads, head_dim,
// attention_bias); kind MHA/GQA from the head counts.
AttentionSpec ReadHfAttention(HfContext& c);

// Dense MLP of width `intermediate_key` (default "intermediate_size").
MlpSpec ReadHfMlp(HfContext& c, const char* intermediate_key = "intermediate_size");

// Routed-expert block from the spellings the families use (num_experts / n_routed_experts /
// num_local_experts; num_experts_per_tok / num_experts_per_token / experts_per_token; n_shared_experts /
// num_shared_experts; moe_intermediate_size; scoring_func / moe_router_activation_func; n_group /
// num_expert_group; topk_group; routed_scaling_factor; norm_topk_prob / moe_renormalize;
// topk_method "noaux_tc" -> score correction bias). num_experts == 0 when the config has none.
// `expert_width_key` names the routed expert FFN width field.
MoESpec ReadHfMoE(HfContext& c, const char* expert_width_key = "moe_intermediate_size");

// Activation from hidden_act ("silu" -> SwiGLU when gated, ...); unknown -> SwiGLU + warning.
Activation ParseHfActivation(const std::string& s, bool* known);

// Sets l's channel mixer: the MoE `moe` when `is_moe`, else the dense `mlp`.
void SetChannel(LayerSpec& l, bool is_moe, const MoESpec& moe, const MlpSpec& mlp);

// Adds num_layers layers built by `make(i)` (0-based) to c.ir; does nothing once a field read failed.
void AddLayers(HfContext& c, const std::function<LayerSpec(int64_t)>& make);

// A 1-indexed layer list (kimi kda_layers / full_attn_layers) -> 0-based set; entries must lie in
// [1, num_layers]; checked and named in errors.
std::set<int64_t> ReadOneBasedLayerList(HfContext& c, JsonFields& f, const std::string& key);

// A 0-based layer list (qwen mlp_only_layers).
std::set<int64_t> ReadZeroBasedLayerList(HfContext& c, JsonFields& f, const std::string& key);

// Records a guess as a warning ("<field> absent: assumed <value>").
void Guess(HfContext& c, const std::string& what);

}  // namespace onboard
