// The flagship (tests/data/hf/flagship.config.json, same as examples/flagship/config.json) and the
// layer-layout traps of the real families.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/model_ir.h"
#include "parsers/hf_config.h"

namespace onboard {
namespace {

ModelIR Load(const std::string& name) {
  auto ir = ParseHfConfigFile(std::string(ONBOARD_TEST_DATA) + "/hf/" + name);
  EXPECT_TRUE(ir.ok()) << ir.status().ToString();
  return ir.ok() ? *ir : ModelIR{};
}

int64_t CountKind(const ModelIR& m, MixerKind k) {
  int64_t n = 0;
  for (const LayerSpec& l : m.layers) n += l.attn.kind == k;
  return n;
}

TEST(HfFlagship, TotalsLayersExpertsVision) {
  const ModelIR m = Load("flagship.config.json");
  ASSERT_EQ(m.layers.size(), 93u);
  EXPECT_EQ(CountKind(m, MixerKind::kKDA), 69);
  EXPECT_EQ(CountKind(m, MixerKind::kDSA), 24);
  const LayerSpec& dsa = m.layers[3];  // full_attn_layers is 1-indexed: 4 -> index 3
  EXPECT_EQ(dsa.attn.kind, MixerKind::kDSA);
  EXPECT_EQ(dsa.attn.dsa_base, MixerKind::kMLA);
  EXPECT_TRUE(dsa.attn.output_gate);
  EXPECT_EQ(dsa.attn.index_topk, 2048);
  EXPECT_EQ(dsa.attn.index_heads, 32);
  EXPECT_EQ(m.layers[92].attn.kind, MixerKind::kDSA);
  EXPECT_EQ(m.layers[0].attn.kind, MixerKind::kKDA);
  EXPECT_EQ(m.layers[0].attn.gate_form, GateForm::kBounded);
  EXPECT_TRUE(m.layers[0].attn.full_rank_gate);
  EXPECT_EQ(m.layers[0].channel, ChannelKind::kDenseMLP);  // first_k_dense_replace = 1
  const LayerSpec& moe = m.layers[1];
  ASSERT_EQ(moe.channel, ChannelKind::kMoE);
  EXPECT_EQ(moe.moe.num_experts, 896);
  EXPECT_EQ(moe.moe.top_k, 16);
  EXPECT_EQ(moe.moe.num_shared, 2);
  EXPECT_EQ(moe.moe.latent_dim, 3584);
  EXPECT_EQ(moe.moe.router, RouterActivation::kSigmoid);
  ASSERT_TRUE(m.vision.has_value());
  EXPECT_EQ(m.vision->kind, "moonvit");
  EXPECT_EQ(m.vision->depth, 27);
  EXPECT_GT(m.vision->params, 300000000);
  const ModelStats s = ComputeStats(m, 4096);
  EXPECT_GE(s.total_params, 2.70e12);
  EXPECT_LE(s.total_params, 2.90e12);
  EXPECT_GE(s.active_params, 95e9);
  EXPECT_LE(s.active_params, 115e9);
  EXPECT_EQ(m.max_position, 1048576);
}

TEST(HfLayouts, OneIndexedKimiLists) {
  const ModelIR m = Load("kimi-linear-48b-a3b-instruct.config.json");
  ASSERT_EQ(m.layers.size(), 27u);
  EXPECT_EQ(CountKind(m, MixerKind::kKDA), 20);
  EXPECT_EQ(CountKind(m, MixerKind::kMLA), 7);
  EXPECT_EQ(m.layers[3].attn.kind, MixerKind::kMLA);   // "4" in full_attn_layers
  EXPECT_EQ(m.layers[26].attn.kind, MixerKind::kMLA);  // "27"
  EXPECT_EQ(m.layers[0].attn.kind, MixerKind::kKDA);
  EXPECT_EQ(m.layers[0].attn.gate_form, GateForm::kOriginal);
  EXPECT_EQ(m.layers[0].attn.q_lora_rank, 0);
}

TEST(HfLayouts, Qwen3NextFullAttentionInterval) {
  const ModelIR m = Load("qwen3-next-80b-a3b-instruct.config.json");
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const bool full = (i + 1) % 4 == 0;
    EXPECT_EQ(m.layers[i].attn.kind, full ? MixerKind::kGQA : MixerKind::kGatedDeltaNet) << i;
  }
  EXPECT_TRUE(m.layers[3].attn.output_gate);
  EXPECT_TRUE(m.layers[3].attn.qk_norm);
  EXPECT_TRUE(m.layers[0].moe.shared_gate);
  EXPECT_EQ(m.layers[0].attn.num_v_heads, 32);
}

TEST(HfLayouts, GptOssSlidingFullSinksBiases) {
  const ModelIR m = Load("gpt-oss-120b.config.json");
  EXPECT_EQ(m.layers[0].attn.kind, MixerKind::kSlidingWindow);
  EXPECT_EQ(m.layers[0].attn.window, 128);
  EXPECT_EQ(m.layers[1].attn.kind, MixerKind::kGQA);
  EXPECT_TRUE(m.layers[1].attn.sinks);
  EXPECT_TRUE(m.layers[1].attn.o_bias);
  EXPECT_TRUE(m.layers[1].moe.router_bias);
  EXPECT_TRUE(m.layers[1].moe.expert_bias);
  EXPECT_DOUBLE_EQ(m.layers[1].moe.act_clamp, 7.0);  // swiglu_limit
  // rope_scaling yarn, factor 32, no attention_factor / mscale: 0.1 ln 32 + 1.
  EXPECT_NEAR(m.layers[0].attn.rope_attention_factor, 1.3465736, 1e-6);
  EXPECT_EQ(m.expert_dtype, DType::kMXFP4);
  EXPECT_EQ(m.dtype, DType::kBF16);
  // MXFP4 experts: 0.53125 bytes per parameter, the U8 bytes of the real index (EXPECTED.json note).
  const ModelStats s = ComputeStats(m, 4096);
  double mx = 0;
  for (const auto& [dt, b] : s.weight_bytes_by_dtype)
    if (dt == DType::kMXFP4) mx = b;
  EXPECT_DOUBLE_EQ(mx, 60914073600.0);
}

// YaRN's attention factor (transformers _compute_yarn_parameters): attention_factor when given, else the
// mscale / mscale_all_dim ratio when both are given, else 0.1 ln(factor) + 1; other rope types: 1. The
// transformers 5 spelling rope_parameters reads the same.
TEST(HfLayouts, YarnAttentionFactor) {
  std::ifstream in(std::string(ONBOARD_TEST_DATA) + "/hf/llama-3.1-8b.config.json");
  const nlohmann::json base = nlohmann::json::parse(in);
  auto factor = [&](const nlohmann::json& rope, const char* key) {
    nlohmann::json j = base;
    j.erase("rope_scaling");
    j[key] = rope;
    auto ir = ParseHfConfigText(j.dump(), "cfg.json");
    EXPECT_TRUE(ir.ok()) << ir.status().ToString();
    return ir.ok() ? ir->layers[0].attn.rope_attention_factor : -1.0;
  };
  EXPECT_DOUBLE_EQ(factor({{"rope_type", "llama3"}, {"factor", 8.0}}, "rope_scaling"), 1.0);
  EXPECT_NEAR(factor({{"rope_type", "yarn"}, {"factor", 4.0}}, "rope_scaling"), 0.1 * std::log(4.0) + 1,
              1e-12);
  EXPECT_NEAR(factor({{"type", "yarn"}, {"factor", 4.0}}, "rope_parameters"), 0.1 * std::log(4.0) + 1, 1e-12);
  EXPECT_DOUBLE_EQ(factor({{"rope_type", "yarn"}, {"factor", 40.0}, {"mscale", 1.0}, {"mscale_all_dim", 1.0}},
                          "rope_scaling"),
                   1.0);
  EXPECT_DOUBLE_EQ(
      factor({{"rope_type", "yarn"}, {"factor", 4.0}, {"attention_factor", 1.25}}, "rope_scaling"), 1.25);
  nlohmann::json bad = base;
  bad["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", "x"}};
  auto ir = ParseHfConfigText(bad.dump(), "cfg.json");
  ASSERT_FALSE(ir.ok());
  EXPECT_NE(ir.status().message().find("rope_scaling.factor"), std::string::npos) << ir.status().ToString();
}

TEST(HfLayouts, DeepSeekDenseFirstLayersAndMtp) {
  const ModelIR m = Load("deepseek-v3.config.json");
  EXPECT_EQ(m.layers[2].channel, ChannelKind::kDenseMLP);
  EXPECT_EQ(m.layers[3].channel, ChannelKind::kMoE);
  EXPECT_EQ(m.layers[3].moe.num_groups, 8);
  EXPECT_TRUE(m.layers[3].moe.expert_score_bias);
  EXPECT_EQ(m.mtp_layers, 1);
  EXPECT_EQ(m.expert_dtype, DType::kFP8);
  EXPECT_EQ(m.layers[0].attn.kind, MixerKind::kMLA);
}

TEST(HfLayouts, Glm45vTextAndVisionNesting) {
  const ModelIR m = Load("glm-4.5v.config.json");
  EXPECT_EQ(m.hidden, 4096);  // from text_config
  EXPECT_EQ(m.layers[0].channel, ChannelKind::kDenseMLP);
  EXPECT_EQ(m.layers[1].moe.num_shared, 1);
  EXPECT_TRUE(m.layers[0].attn.qkv_bias);
  EXPECT_FALSE(m.layers[0].attn.o_bias);
  ASSERT_TRUE(m.vision.has_value());
  EXPECT_EQ(m.vision->kind, "glm4v");
  EXPECT_EQ(m.vision->depth, 24);
  EXPECT_EQ(m.vision->intermediate, 4096);  // blocks' MLP is out_hidden_size wide
}

}  // namespace
}  // namespace onboard

namespace onboard {
namespace {

TEST(HfLayouts, Qwen3VlMoeTextMatchesQwen3MoeAndAddsVision) {
  // Qwen3-VL-30B-A3B's text_config has Qwen3-30B-A3B's dimensions: same language-model count.
  const ModelIR vl = Load("extra/qwen3-vl-30b-a3b-instruct.config.json");
  const ModelIR text = Load("qwen3-30b-a3b.config.json");
  ASSERT_TRUE(vl.vision.has_value());
  EXPECT_EQ(vl.vision->kind, "qwen3_vl");
  const ModelStats a = ComputeStats(vl, 4096), b = ComputeStats(text, 4096);
  EXPECT_EQ(a.total_params - a.vision_params, b.total_params);
  // The vision tower counted module by module from transformers' Qwen3VLMoeVisionModel
  // (models/qwen3_vl_moe/modeling_qwen3_vl_moe.py; huggingface/transformers as mirrored at decba1d2ea),
  // for this config: h 1152, I 4304, depth 27, patch 16, temporal 2, merge 2, out 2048, 3 deepstack layers.
  const int64_t h = 1152, I = 4304, hm = h * 4, out = 2048;
  const int64_t patch_embed = 3 * 2 * 16 * 16 * h + h;  // Conv3d(3, h, (2, 16, 16), bias=True)
  const int64_t pos_embed = 2304 * h;                   // nn.Embedding(num_position_embeddings, h)
  const int64_t block = 2 * (2 * h)                     // norm1, norm2: LayerNorm(h)
                        + (h * 3 * h + 3 * h)           // attn.qkv: Linear(h, 3h, bias=True)
                        + (h * h + h)                   // attn.proj: Linear(h, h)
                        + (h * I + I) + (I * h + h);    // mlp.linear_fc1, linear_fc2 (bias=True)
  const int64_t fcs =
      (hm * hm + hm) + (hm * out + out);         // PatchMerger.linear_fc1 (hm, hm), linear_fc2 (hm, out)
  const int64_t merger = 2 * h + fcs;            // use_postshuffle_norm=False: LayerNorm(h)
  const int64_t deepstack = 3 * (2 * hm + fcs);  // use_postshuffle_norm=True: LayerNorm(hm)
  EXPECT_EQ(a.vision_params, patch_embed + pos_embed + 27 * block + merger + deepstack);
  EXPECT_EQ(a.vision_params, 538631408);
}

// MoonViT's projector takes merge_kernel_size[0] x merge_kernel_size[1] patches per token:
// transformers' Kimi_K25MultimodalProjection (models/kimi_k25/modeling_kimi_k25.py, mirrored at decba1d2ea)
// is in_proj Linear(hm, hm) and out_proj Linear(hm, text hidden), both with bias, hm = h * m0 * m1. The
// flagship's tower (h 1152, text hidden 7168) at a 3x3 kernel against its 2x2: only the projector
// changes. Reading spatial_merge_size's default (2) instead of merge_kernel_size fails it.
TEST(HfLayouts, MoonVitProjectorFollowsMergeKernelSize) {
  std::ifstream in(std::string(ONBOARD_TEST_DATA) + "/hf/flagship.config.json");
  const nlohmann::json base = nlohmann::json::parse(in);
  auto vision = [&](int64_t m) {
    nlohmann::json j = base;
    j["vision_config"]["merge_kernel_size"] = {m, m};
    auto ir = ParseHfConfigText(j.dump(), "flagship-merge" + std::to_string(m));
    EXPECT_TRUE(ir.ok()) << ir.status().ToString();
    return ir.ok() && ir->vision ? ir->vision->params : 0;
  };
  auto projector = [](int64_t m) {
    const int64_t h = 1152, text = 7168, hm = h * m * m;
    return (hm * hm + hm) + (hm * text + text);
  };
  EXPECT_EQ(vision(3) - vision(2), projector(3) - projector(2));
  // A non-square kernel (m0 != m1) is refused, naming the field and the value: every consumer of the
  // tower (parameter count, image tokens, the probes' patch merge) merges square blocks.
  nlohmann::json j = base;
  j["vision_config"]["merge_kernel_size"] = {2, 3};
  auto ir = ParseHfConfigText(j.dump(), "flagship-2x3");
  ASSERT_FALSE(ir.ok());
  EXPECT_NE(ir.status().message().find("merge_kernel_size"), std::string::npos) << ir.status().message();
  EXPECT_NE(ir.status().message().find("[2, 3]"), std::string::npos) << ir.status().message();
}

TEST(HfLayouts, MiniMaxLightningEveryEighthSoftmax) {
  const ModelIR m = Load("extra/minimax-text-01.config.json");
  ASSERT_EQ(m.layers.size(), 80u);
  EXPECT_EQ(m.layers[0].attn.kind, MixerKind::kLinearAttention);
  EXPECT_EQ(m.layers[7].attn.kind, MixerKind::kGQA);
  EXPECT_EQ(m.layers[8].attn.kind, MixerKind::kLinearAttention);
}

TEST(HfLayouts, DeepSeekV32IsDsaOnMla) {
  const ModelIR m = Load("extra/deepseek-v3.2-exp.config.json");
  EXPECT_EQ(m.layers[0].attn.kind, MixerKind::kDSA);
  EXPECT_EQ(m.layers[0].attn.dsa_base, MixerKind::kMLA);
  EXPECT_EQ(m.layers[0].attn.index_heads, 64);
  // The indexer (wq_b 1536x8192, wk 7168x128, weights_proj 7168x64, k_norm 2x128) on each of 61 layers.
  const ModelIR v3 = Load("deepseek-v3.config.json");
  const int64_t per_layer = 1536 * 64 * 128 + 7168 * 128 + 7168 * 64 + 2 * 128;
  EXPECT_EQ(ComputeStats(m, 4096).total_params - ComputeStats(v3, 4096).total_params, 61 * per_layer);
}

}  // namespace
}  // namespace onboard
