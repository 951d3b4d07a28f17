// A tiny random GLM-4.5V (glm4v_moe) checkpoint for the image / video tests: the glm4_moe test decoder
// with full rotary dims (8 -> 4 frequencies: mrope_section 1, 1, 2) plus a 2-block vision tower
// (hidden 16, 2 heads, patch 2, temporal patch 2, merge 2, a 4 x 4 learned position table) under
// model.visual.*; MakeTextAndVision() keeps the glm4_moe names (the references read those),
// ToGlm45v() writes the same tensors in GLM-4.5V's layout and config. Token ids: 60 image_token_id,
// 61 / 62 video start / end; the tests use 58 / 59 as begin / end of image (plain text to the model).
#pragma once

#include <cmath>
#include <random>

#include "tests/backends/hf_test_families.h"

namespace onboard::hftest {

constexpr int64_t kImageToken = 60, kVideoStart = 61, kVideoEnd = 62, kBeginImage = 58, kEndImage = 59;
constexpr int64_t kPatchValues = 3 * 2 * 2 * 2;  // C * T * P * P

inline const nlohmann::json kGlm4vVision = {{"model_type", "glm4v_moe"}, {"depth", 2},
                                            {"hidden_size", 16},         {"num_heads", 2},
                                            {"intermediate_size", 24},   {"out_hidden_size", 32},
                                            {"patch_size", 2},           {"image_size", 8},
                                            {"spatial_merge_size", 2},   {"temporal_patch_size", 2},
                                            {"in_channels", 3},          {"rms_norm_eps", 1e-5},
                                            {"hidden_act", "silu"},      {"attention_bias", true}};

inline Checkpoint MakeTextAndVision() {
  Checkpoint c = MakeGlm4Moe();
  c.config["partial_rotary_factor"] = 1.0;
  c.config["rope_scaling"] = {{"rope_type", "default"}, {"mrope_section", {1, 1, 2}}};
  const int64_t h = 16, out = 32, I = 24;
  const std::string v = "model.visual.";
  c.Add(v + "patch_embed.proj.weight", {h, 3, 2, 2, 2}, 1.0 / std::sqrt(double(kPatchValues)));
  c.Add(v + "patch_embed.proj.bias", {h}, 0.1);
  c.Norm(v + "post_conv_layernorm.weight", h);
  c.Add(v + "embeddings.position_embedding.weight", {16, h}, 1.0);
  for (int b = 0; b < 2; ++b) {
    const std::string p = v + "blocks." + std::to_string(b) + ".";
    c.Norm(p + "norm1.weight", h);
    c.Norm(p + "norm2.weight", h);
    c.Linear(p + "attn.qkv", 3 * h, h, true);
    c.Linear(p + "attn.proj", h, h);
    c.Mlp(p + "mlp", h, out);
  }
  c.Norm(v + "post_layernorm.weight", h);
  c.Add(v + "downsample.weight", {out, h, 2, 2}, 0.125);
  c.Add(v + "downsample.bias", {out}, 0.1);
  c.Linear(v + "merger.proj", out, out);
  c.Norm(v + "merger.post_projection_norm.weight", out);
  c.Add(v + "merger.post_projection_norm.bias", {out}, 0.1);
  c.Mlp(v + "merger", out, I);
  return c;
}

inline Checkpoint ToGlm45v(const Checkpoint& g) {
  Checkpoint v = g;
  v.tensors.clear();
  for (const auto& [name, t] : g.tensors) {
    const bool lm = name.rfind("model.", 0) == 0 && name.rfind("model.visual.", 0) != 0;
    v.tensors[lm ? "model.language_model." + name.substr(6) : name] = t;
  }
  nlohmann::json text = g.config;
  text["model_type"] = "glm4v_moe_text";
  v.config = {{"architectures", {"Glm4vMoeForConditionalGeneration"}},
              {"model_type", "glm4v_moe"},
              {"tie_word_embeddings", false},
              {"image_token_id", kImageToken},
              {"video_start_token_id", kVideoStart},
              {"video_end_token_id", kVideoEnd},
              {"text_config", text},
              {"vision_config", kGlm4vVision}};
  return v;
}

// `rows` processor rows of kPatchValues N(0, 1) values (float-rounded), seeded.
inline std::vector<std::vector<double>> PixelRows(int64_t rows, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> d(0.0, 1.0);
  std::vector<std::vector<double>> px(static_cast<size_t>(rows),
                                      std::vector<double>(static_cast<size_t>(kPatchValues)));
  for (auto& r : px)
    for (double& x : r) x = double(float(d(rng)));
  return px;
}

}  // namespace onboard::hftest
