// glm4v_moe (GLM-4.5V): its language model is glm4_moe's decoder under "model.language_model.*" with
// the config in "text_config"; the vision tower "model.visual.*" is not loaded (the forward runs text
// ids, for which M-RoPE's three position rows coincide: 1-D RoPE on the partial rotary dims).
// Checked: the same weights renamed into GLM-4.5V's layout give bit-equal fp64 logits to the glm4_moe
// checkpoint (itself matched against the independent reference, anchored here too); a missing
// language-model tensor is named by its GLM-4.5V name; a stray language-model tensor is unmapped; the
// vision tower is skipped only when the config has a vision_config.
#include <gtest/gtest.h>

#include "tests/backends/hf_compare.h"
#include "tests/backends/hf_test_families.h"

namespace onboard {
namespace {

// The glm4_moe test checkpoint in GLM-4.5V's layout, plus one (skipped) vision-tower tensor.
hftest::Checkpoint MakeGlm4vMoe() {
  const hftest::Checkpoint g = hftest::MakeGlm4Moe();
  hftest::Checkpoint v = g;
  v.tensors.clear();
  for (const auto& [name, t] : g.tensors)
    v.tensors[name.rfind("model.", 0) == 0 ? "model.language_model." + name.substr(6) : name] = t;
  nlohmann::json text = g.config;
  text["model_type"] = "glm4v_moe_text";
  text["rope_scaling"] = {{"rope_type", "default"}, {"mrope_section", {0, 1, 1}}};
  v.config = {{"architectures", {"Glm4vMoeForConditionalGeneration"}},
              {"model_type", "glm4v_moe"},
              {"tie_word_embeddings", false},
              {"text_config", text},
              {"vision_config",
               {{"model_type", "glm4v_moe"},
                {"depth", 1},
                {"hidden_size", 16},
                {"num_heads", 2},
                {"intermediate_size", 32},
                {"out_hidden_size", 32},
                {"patch_size", 2},
                {"image_size", 8},
                {"spatial_merge_size", 2},
                {"temporal_patch_size", 2},
                {"in_channels", 3},
                {"rms_norm_eps", 1e-5},
                {"hidden_act", "silu"}}}};
  v.Add("model.visual.blocks.0.attn.qkv.weight", {48, 16}, 0.1);
  return v;
}

struct Load {
  std::string dir;
  Expected<HfForwardConfig> cfg = Status(ErrorCode::kInternal, "unset");
  Expected<SafetensorsCheckpoint> ck = Status(ErrorCode::kInternal, "unset");
};

Load Open(const hftest::Checkpoint& c) {
  Load l{hftest::TempDir()};
  c.Write(l.dir);
  l.cfg = ReadHfForwardConfig(l.dir);
  l.ck = SafetensorsCheckpoint::Open(l.dir);
  return l;
}

TEST(HfGlm4v, LanguageModelLogitsEqualGlm4MoesOnTheSameWeights) {
  const hftest::Checkpoint g = hftest::MakeGlm4Moe();
  EXPECT_LT(hftest::MaxDiff(g, torch::kDouble), hftest::kF64Tol);  // glm4_moe vs the reference
  Load a = Open(g), b = Open(MakeGlm4vMoe());
  ASSERT_TRUE(a.cfg.ok() && a.ck.ok());
  ASSERT_TRUE(b.cfg.ok()) << b.cfg.status().message();
  ASSERT_TRUE(b.ck.ok());
  EXPECT_EQ(b.cfg->weights_root, "model.language_model.");
  EXPECT_EQ(b.cfg->rope.dim, a.cfg->rope.dim);  // text_config's partial_rotary_factor
  Expected<HfModelWeights> wa = MapHfWeights(*a.cfg, *a.ck, {}, torch::kDouble);
  Expected<HfModelWeights> wb = MapHfWeights(*b.cfg, *b.ck, {}, torch::kDouble);
  ASSERT_TRUE(wa.ok()) << wa.status().message();
  ASSERT_TRUE(wb.ok()) << wb.status().message();
  EXPECT_TRUE(torch::equal(HfForward(*a.cfg, *wa, hftest::kIds), HfForward(*b.cfg, *wb, hftest::kIds)));
  // The vision tower was not read: the decoder's bytes only.
  EXPECT_EQ(b.ck->touched_bytes() + 48 * 16 * 2, b.ck->data_bytes());
  EXPECT_EQ(wb->used.front(), "model.language_model.embed_tokens.weight");
}

TEST(HfGlm4v, MissingAndStrayLanguageModelTensorsAreNamed) {
  hftest::Checkpoint v = MakeGlm4vMoe();
  v.tensors.erase("model.language_model.layers.1.self_attn.k_proj.weight");
  Load m = Open(v);
  ASSERT_TRUE(m.cfg.ok() && m.ck.ok());
  Expected<HfModelWeights> w = MapHfWeights(*m.cfg, *m.ck, {}, torch::kDouble);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("model.language_model.layers.1.self_attn.k_proj.weight"),
            std::string::npos)
      << w.status().message();
  hftest::Checkpoint s = MakeGlm4vMoe();
  s.Add("model.language_model.layers.0.self_attn.extra", {4}, 0.1);
  Load n = Open(s);
  ASSERT_TRUE(n.cfg.ok() && n.ck.ok());
  Expected<HfModelWeights> x = MapHfWeights(*n.cfg, *n.ck, {}, torch::kDouble);
  ASSERT_FALSE(x.ok());
  EXPECT_NE(x.status().message().find("model.language_model.layers.0.self_attn.extra"), std::string::npos)
      << x.status().message();
  EXPECT_NE(x.status().message().find("not mapped"), std::string::npos) << x.status().message();
}

// The vision tower is skipped only when config.json declares one: the same checkpoint without its
// vision_config (a text-only model) refuses the tower's tensor, naming the file, the tensor and why;
// with it, the mapping succeeds (control).
TEST(HfGlm4v, VisionTensorWithoutVisionConfigIsUnmapped) {
  hftest::Checkpoint v = MakeGlm4vMoe();
  Load with = Open(v);
  ASSERT_TRUE(with.cfg.ok() && with.ck.ok());
  EXPECT_TRUE(MapHfWeights(*with.cfg, *with.ck, {}, torch::kDouble).ok());
  v.config.erase("vision_config");
  Load l = Open(v);
  ASSERT_TRUE(l.cfg.ok()) << l.cfg.status().message();
  ASSERT_TRUE(l.ck.ok());
  Expected<HfModelWeights> w = MapHfWeights(*l.cfg, *l.ck, {}, torch::kDouble);
  ASSERT_FALSE(w.ok());
  const std::string m = w.status().message();
  EXPECT_EQ(w.status().code(), ErrorCode::kBadInput) << m;
  EXPECT_NE(m.find("model.safetensors"), std::string::npos) << m;
  EXPECT_NE(m.find("model.visual.blocks.0.attn.qkv.weight"), std::string::npos) << m;
  EXPECT_NE(m.find("has no vision_config"), std::string::npos) << m;
}

}  // namespace
}  // namespace onboard
