// HfForwardConfig: what a faithful forward of a Hugging Face checkpoint needs beyond the ModelIR
// (parsers/hf_config.h): RMSNorm eps, the RoPE variant and its parameters, the routing defaults each
// family's modeling code uses, the MLA softmax scale.
//
// Sources (transformers): modeling_rope_utils.py (_compute_default/linear/llama3/yarn_parameters),
// models/{llama,qwen2,qwen3,qwen2_moe,qwen3_moe,mixtral,deepseek_v3,glm4_moe,gpt_oss}/configuration_*.py
// defaults. Units: dims in elements; theta/factors dimensionless; positions in tokens.
#pragma once

#include <optional>
#include <string>

#include "core/model_ir.h"
#include "core/status.h"

namespace onboard {

// The tensor naming + module layout family a checkpoint's model_type maps to (one hf_map_*.cpp each).
enum class HfLayout {
  kLlama,       // llama, mistral, qwen2, qwen3 (dense) and qwen2_moe / qwen3_moe (MoE layers)
  kMixtral,     // block_sparse_moe.{gate, experts.E.w1/w2/w3}
  kDeepSeekV3,  // deepseek_v3, kimi_k2: MLA + sigmoid noaux_tc routing + shared experts
  kGlm4Moe,     // glm4_moe: GQA (q/k/v bias, partial RoPE, optional q/k norm) + DeepSeek-style MoE
  kGptOss,      // gpt_oss: sinks, alternating sliding window, MXFP4 fused experts, router with bias
  kKimiLinear,  // kimi_linear: KDA + MLA without RoPE (mla_use_nope), block_sparse_moe sigmoid routing
  kKimiK3,      // kimi_k3 (the flagship): kimi_linear's text model under language_model. with full-rank /
                // bounded KDA gates, gated MLA (+ DSA indexer), latent MoE (hf_map_kimi_k3.cpp)
};
const char* HfLayoutName(HfLayout l);

enum class RopeType { kDefault, kLinear, kLlama3, kYarn };

struct RopeSpec {
  RopeType type = RopeType::kDefault;
  double theta = 10000.0;           // rope_theta
  int64_t dim = 0;                  // rotated dims per head (qk_rope_head_dim for MLA)
  double factor = 1.0;              // rope_scaling.factor
  double low_freq_factor = 1.0;     // llama3
  double high_freq_factor = 4.0;    // llama3
  int64_t original_max = 0;         // rope_scaling.original_max_position_embeddings (else max_position)
  double beta_fast = 32.0;          // yarn
  double beta_slow = 1.0;           // yarn
  double mscale = 0.0;              // yarn (0 = absent)
  double mscale_all_dim = 0.0;      // yarn (0 = absent)
  std::optional<double> attention_factor;  // yarn: explicit cos/sin scale
  bool truncate = true;             // yarn: floor/ceil the correction range
  bool interleave = false;          // DeepSeek rope_interleave: pairs (2i, 2i+1) instead of halves
  bool none = false;                // no rotation at all (Kimi-Linear MLA: mla_use_nope)
};

struct HfForwardConfig {
  std::string config_path;
  ModelIR ir;                       // structure: layers, heads, MoE spec, tying
  HfLayout layout = HfLayout::kLlama;
  double rms_eps = 1e-6;            // rms_norm_eps
  RopeSpec rope;
  bool norm_topk_prob = true;       // renormalise the top-k routing weights (family default when absent)
  double softmax_scale = 0.0;       // attention logits scale (1/sqrt(qk dim), x mscale^2 for MLA+YaRN)
  // gpt_oss experts (modeling_gpt_oss.py GptOssExperts): gate clamped above at swiglu_limit, up clamped
  // to +-swiglu_limit, out = (up + 1) * gate * sigmoid(swiglu_alpha * gate).
  double swiglu_limit = 0.0;    // 0 = plain SwiGLU experts
  double swiglu_alpha = 1.702;  // GptOssExperts.alpha (a constant of the modeling code, not a config field)
  bool softmax_after_topk = false;  // gpt_oss router: top-k of the logits, then softmax over those k
  // hidden_act situ (Kimi K3's SiTU-GLU, every MLP and expert): act = b * tanh(gate / b) * sigmoid(gate) with
  // b = activation_situ_beta, times up softcapped as bl * tanh(up / bl) (bl = activation_situ_linear_beta,
  // 0 = plain up). 0 = SwiGLU.
  double situ_beta = 0.0;
  double situ_linear_beta = 0.0;
  // Where the decoder's tensors live: "model." (text models) or "model.language_model." (glm4v_moe:
  // GLM-4.5V's language model; its vision tower "model.visual.*" is not loaded: the forward runs text
  // ids, for which M-RoPE's three position rows are equal and it is the 1-D RoPE of glm4_moe).
  std::string weights_root = "model.";
  std::string skipped_prefix;  // checkpoint tensors not loaded on purpose ("model.visual." for glm4v_moe)
  // kimi_k3 (KimiK3ForConditionalGeneration, Kimi-VL's wrapper): the head is "language_model.lm_head.weight"
  // and the MoonViT tower + projector ("vision_tower.", "mm_projector.") are skipped by the text mapper and
  // read by hf_map_moonvit.cpp when verify gets images.
  std::string head_name = "lm_head.weight";
  std::string skipped_prefix2;  // a second prefix not loaded on purpose ("mm_projector." for kimi_k3)
  // config.json has a vision_config: only then is the vision tower skipped on purpose (a text-only
  // verify of a multimodal checkpoint; the prefixes above). Without one, a vision tensor in the
  // checkpoint is unmapped (hf_map.cpp CheckAllMapped: kBadInput naming file and tensor).
  bool has_vision_config = false;
};

// Reads DIR/config.json. A model_type without a forward here is kBadInput naming it.
[[nodiscard]] Expected<HfForwardConfig> ReadHfForwardConfig(const std::string& dir);

// yarn_get_mscale (modeling_deepseek_v3.py / modeling_rope_utils.py): 1 for scale <= 1.
double YarnMscale(double scale, double mscale);

}  // namespace onboard
