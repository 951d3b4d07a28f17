// config.json -> HfForwardConfig (see hf_forward_config.h).
#include "backends/hf_forward_config.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "parsers/hf_config.h"
#include "parsers/json_fields.h"
#include "parsers/mapped_file.h"

namespace onboard {
namespace {

struct LayoutRow {
  const char* model_type;
  HfLayout layout;
  bool norm_topk_default;  // configuration_*.py default of norm_topk_prob
};

// Mixtral always renormalises (modeling_mixtral.py); Qwen MoE configs default norm_topk_prob=False;
// DeepseekV3Config defaults it to True.
constexpr LayoutRow kLayouts[] = {
    {"llama", HfLayout::kLlama, true},
    {"mistral", HfLayout::kLlama, true},
    {"qwen2", HfLayout::kLlama, true},
    {"qwen3", HfLayout::kLlama, true},
    {"qwen2_moe", HfLayout::kLlama, false},
    {"qwen3_moe", HfLayout::kLlama, false},
    {"mixtral", HfLayout::kMixtral, true},
    {"deepseek_v3", HfLayout::kDeepSeekV3, true},
    {"deepseek_v32", HfLayout::kDeepSeekV3, true},
    {"kimi_k2", HfLayout::kDeepSeekV3, true},
    {"glm4_moe", HfLayout::kGlm4Moe, true},
    {"glm4v_moe", HfLayout::kGlm4Moe, true},
    {"gpt_oss", HfLayout::kGptOss, true},
    {"kimi_linear", HfLayout::kKimiLinear, true},
    {"kimi_k3", HfLayout::kKimiK3, true},
};

// Step 2: rope_scaling (or the newer rope_parameters) -> RopeSpec.
void ReadRope(JsonFields& t, const ModelIR& ir, int64_t rope_dim, RopeSpec* r) {
  r->theta = t.DoubleOr("rope_theta", 10000.0, 1e-6, 1e30);
  r->dim = rope_dim;
  r->original_max = ir.max_position;
  std::optional<JsonFields> s = t.Sub("rope_scaling");
  if (!s) s = t.Sub("rope_parameters");
  if (!s) return;
  if (s->Has("rope_theta")) r->theta = s->DoubleOr("rope_theta", r->theta, 1e-6, 1e30);
  const std::string type = s->StrOr("rope_type", s->StrOr("type", "default"));
  if (type == "default") return;
  if (type == "linear") r->type = RopeType::kLinear;
  else if (type == "llama3") r->type = RopeType::kLlama3;
  else if (type == "yarn") r->type = RopeType::kYarn;
  else s->Fail("rope_type", "not supported by the forward (default, linear, llama3, yarn)", type);
  const bool has_orig = s->Has("original_max_position_embeddings");
  r->original_max = s->IntOr({"original_max_position_embeddings"}, ir.max_position, 1, kMaxDim);
  // Newer transformers derive the factor from the context ratio only when `factor` is absent.
  const double ratio = has_orig && r->original_max > 0 ? double(ir.max_position) / double(r->original_max) : 1.0;
  r->factor = s->DoubleOr("factor", ratio, 1e-6, 1e9);
  r->low_freq_factor = s->DoubleOr("low_freq_factor", 1.0, 1e-9, 1e9);
  r->high_freq_factor = s->DoubleOr("high_freq_factor", 4.0, 1e-9, 1e9);
  r->beta_fast = s->DoubleOr("beta_fast", 32.0, 1e-9, 1e9);
  r->beta_slow = s->DoubleOr("beta_slow", 1.0, 1e-9, 1e9);
  r->mscale = s->DoubleOr("mscale", 0.0, 0.0, 1e9);
  r->mscale_all_dim = s->DoubleOr("mscale_all_dim", 0.0, 0.0, 1e9);
  if (s->Has("attention_factor")) r->attention_factor = s->DoubleOr("attention_factor", 1.0, 0.0, 1e9);
  r->truncate = s->BoolOr("truncate", true);
  if (r->type == RopeType::kLlama3 && r->high_freq_factor <= r->low_freq_factor)
    s->Fail("high_freq_factor", "must exceed low_freq_factor", std::to_string(r->high_freq_factor));
}

}  // namespace

const char* HfLayoutName(HfLayout l) {
  switch (l) {
    case HfLayout::kLlama: return "llama";
    case HfLayout::kMixtral: return "mixtral";
    case HfLayout::kDeepSeekV3: return "deepseek_v3";
    case HfLayout::kGlm4Moe:
      return "glm4_moe";
    case HfLayout::kGptOss:
      return "gpt_oss";
    case HfLayout::kKimiLinear:
      return "kimi_linear";
    case HfLayout::kKimiK3:
      return "kimi_k3";
  }
  return "?";
}

double YarnMscale(double scale, double mscale) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

namespace {

// Step 1 (family): the kLayouts row of model_type, or null.
const LayoutRow* FindLayout(const std::string& model_type) {
  const LayoutRow* row = nullptr;
  for (const LayoutRow& r : kLayouts)
    if (model_type == r.model_type) row = &r;
  return row;
}

// Step 1 (names): where the language model's tensors sit. The vision tower is skipped on purpose
// only when the config declares one (a text-only verify of a multimodal checkpoint); a text-only
// config's vision tensors stay unmapped (hf_map.cpp).
void ReadWeightNames(const nlohmann::json& root, HfForwardConfig* c) {
  c->has_vision_config = root.contains("vision_config");
  if (c->ir.model_type == "glm4v_moe") {
    c->weights_root = "model.language_model.";
    if (c->has_vision_config) c->skipped_prefix = "model.visual.";
  }
  if (c->ir.model_type == "kimi_k3") {  // hf_map_kimi_k3.cpp: the names' source
    c->weights_root = "language_model.model.";
    c->head_name = "language_model.lm_head.weight";
    if (c->has_vision_config) {
      c->skipped_prefix = "vision_tower.";
      c->skipped_prefix2 = "mm_projector.";
    }
  }
}

// Step 1 (MLP and norms): the gated MLP's activation (silu, or situ with its betas), the RMSNorm
// epsilon, and whether the routed top-k weights are renormalised.
Status ReadMlpAndNorms(JsonFields& t, const LayoutRow& row, bool kimi, HfForwardConfig* c) {
  const std::string act = t.StrOr("hidden_act", "silu");
  if (act == "situ") {  // SiTU-GLU: its betas are config fields with no published default
    if (!t.Has("activation_situ_beta"))
      return BadInput(c->config_path, t.Path("activation_situ_beta"), "hidden_act situ needs its gate beta",
                      "absent");
    c->situ_beta = t.DoubleOr("activation_situ_beta", 1.0, 1e-6, 1e6);
    c->situ_linear_beta = t.DoubleOr("activation_situ_linear_beta", 0.0, 0.0, 1e6);
  } else if (act != "silu" && act != "swish") {
    return BadInput(c->config_path, t.Path("hidden_act"),
                    "the forward supports silu- or situ-gated MLPs only", act);
  }
  c->rms_eps = t.DoubleOr("rms_norm_eps", 1e-6, 0.0, 1.0);
  c->norm_topk_prob =
      row.layout == HfLayout::kMixtral ? true : t.BoolOr("norm_topk_prob", row.norm_topk_default);
  if (kimi) c->norm_topk_prob = t.BoolOr("moe_renormalize", true);
  return Status::Ok();
}

// Step 2: RoPE over the rotated part of each head; softmax scale.
// Kimi-Linear: the MLA layers carry the structure (layer 0 may be KDA).
Status ReadRopeAndScale(JsonFields& t, bool kimi, HfForwardConfig* c) {
  const LayerSpec* first_attn = &c->ir.layers[0];
  for (const LayerSpec& l : c->ir.layers)
    if (l.attn.kind != MixerKind::kKDA) {
      first_attn = &l;
      break;
    }
  const AttentionSpec& a = first_attn->attn;
  const bool mla = c->layout == HfLayout::kDeepSeekV3 || kimi;
  // glm4_moe rotates the first head_dim * partial_rotary_factor dims (gpt_neox apply_rotary_pos_emb).
  const double partial =
      c->layout == HfLayout::kGlm4Moe ? t.DoubleOr("partial_rotary_factor", 0.5, 1e-6, 1.0) : 1.0;
  ReadRope(t, c->ir, mla ? a.qk_rope_head_dim : int64_t(double(a.head_dim) * partial), &c->rope);
  c->rope.interleave = mla && t.BoolOr("rope_interleave", true);
  if (kimi && t.Has("attn_res_block_size"))  // a released K3 config's attention residuals: not modelled
    return BadInput(c->config_path, t.Path("attn_res_block_size"),
                    "attention residuals (block residual mixing) are not in this forward",
                    std::to_string(t.IntOr({"attn_res_block_size"}, 0, 0, kMaxDim)));
  if (kimi) {
    c->rope.none = t.BoolOr("mla_use_nope", true);
    if (!c->rope.none)
      return BadInput(c->config_path, "mla_use_nope", "KimiMLAAttention requires true", "false");
  }
  c->softmax_scale = 1.0 / std::sqrt(double(a.head_dim));  // MLA: head_dim = nope + rope
  if (mla && c->rope.type != RopeType::kDefault && c->rope.mscale_all_dim != 0.0) {
    const double m = YarnMscale(c->rope.factor, c->rope.mscale_all_dim);
    c->softmax_scale *= m * m;
  }
  return Status::Ok();
}

}  // namespace

Expected<HfForwardConfig> ReadHfForwardConfig(const std::string& dir) {
  HfForwardConfig c;
  c.config_path = dir + "/config.json";
  // Step 1: structure through the existing reader, then the extra fields from the same text.
  ONBOARD_ASSIGN_OR_RETURN(c.ir, ParseHfConfigFile(c.config_path));
  ONBOARD_ASSIGN_OR_RETURN(std::string text, ReadFileCapped(c.config_path, kHfConfigMaxBytes, "(document)"));
  const nlohmann::json root = nlohmann::json::parse(text, nullptr, false);
  const nlohmann::json& tj = root.contains("text_config") ? root["text_config"] : root;
  JsonFields t(tj, c.config_path, root.contains("text_config") ? "text_config" : "");
  const LayoutRow* row = FindLayout(c.ir.model_type);
  if (row == nullptr)
    return BadInput(c.config_path, "model_type", "no weight mapping / forward for this family yet",
                    c.ir.model_type);
  c.layout = row->layout;
  ReadWeightNames(root, &c);
  if (c.ir.layers.empty()) return BadInput(c.config_path, "num_hidden_layers", "no layers");
  const bool kimi = row->layout == HfLayout::kKimiLinear || row->layout == HfLayout::kKimiK3;
  ONBOARD_RETURN_IF_ERROR(ReadMlpAndNorms(t, *row, kimi, &c));

  // Step 2: RoPE over the rotated part of each head; softmax scale.
  ONBOARD_RETURN_IF_ERROR(ReadRopeAndScale(t, kimi, &c));
  // Step 3: gpt_oss expert activation and router order.
  if (c.layout == HfLayout::kGptOss) {
    c.swiglu_limit = t.DoubleOr("swiglu_limit", 7.0, 1e-6, 1e9);
    c.softmax_after_topk = true;
  }
  if (!t.ok()) return t.status();
  if (c.rope.dim % 2 != 0) return BadInput(c.config_path, "head_dim", "rotated dims must be even", std::to_string(c.rope.dim));
  return c;
}

}  // namespace onboard
