// kimi_k3 (the flagship's layout): a small checkpoint in KimiK3ForConditionalGeneration's names
// (hf_test_kimi_k3.h: BF16, one file or 3 shards + index) -> mapping (hf_map_kimi_k3.cpp) -> forward,
// against the loop-style reference on the text model's view (hf_reference_k3.h, hf_reference_kda.h).
// Negative controls: a reference without the latent norm, with the norm before the experts, without the
// MLA output gate, with the softplus decay in place of the bounded one, or SwiGLU in place of SiTU must
// disagree. A missing tensor is named with its shape; verify runs text (images: hf_kimi_k3_image_test.cpp),
// and refuses vision tensors when the config has no vision_config; the real-weights LoRA probe on layers 1-2
// (KDA + latent MoE, gated MLA + latent MoE) over 2 ranks learns.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "backends/hf_npy.h"
#include "backends/hf_verify.h"
#include "backends/probe_weights.h"
#include "tests/backends/hf_compare.h"
#include "tests/backends/hf_test_kimi_k3.h"
#include "tests/backends/probe_weights_options.h"

namespace onboard {
namespace {

using hftest::kF32Tol;
using hftest::kF64Tol;
using hftest::kWrongAtLeast;
using hftest::MaxDiff;
using hftest::RefOverrides;
using hftest::With;

double K3Diff(const hftest::Checkpoint& c, torch::ScalarType dtype, RefOverrides o = {}, int shards = 1) {
  const hftest::Checkpoint view = hftest::K3TextView(c);
  return MaxDiff(c, dtype, o, shards, {}, &view);
}

TEST(HfKimiK3, ConfigReadsTheFlagshipLayout) {
  const std::string dir = hftest::TempDir();
  hftest::MakeKimiK3().Write(dir);
  Expected<HfForwardConfig> c = ReadHfForwardConfig(dir);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->layout, HfLayout::kKimiK3);
  EXPECT_EQ(c->weights_root, "language_model.model.");
  EXPECT_EQ(c->head_name, "language_model.lm_head.weight");
  EXPECT_TRUE(c->rope.none);
  EXPECT_DOUBLE_EQ(c->situ_beta, 2.0);
  const LayerSpec& kda = c->ir.layers[1];
  EXPECT_EQ(kda.attn.kind, MixerKind::kKDA);
  EXPECT_TRUE(kda.attn.full_rank_gate);
  EXPECT_EQ(kda.attn.gate_form, GateForm::kBounded);
  const LayerSpec& mla = c->ir.layers[2];
  EXPECT_EQ(mla.attn.kind, MixerKind::kDSA);
  EXPECT_TRUE(mla.attn.output_gate);
  EXPECT_EQ(mla.moe.latent_dim, 16);
  EXPECT_TRUE(mla.moe.latent_norm);
  EXPECT_EQ(c->ir.layers[0].channel, ChannelKind::kDenseMLP);
}

// The flagship's own config.json: hidden_act situ without its betas is refused naming the field.
TEST(HfKimiK3, FlagshipConfigWithoutSituBetasIsRefusedNamingTheField) {
  const std::string dir = hftest::TempDir();
  std::ifstream in(std::string(ONBOARD_TEST_DATA) + "/../../examples/flagship/config.json");
  ASSERT_TRUE(in.good());
  std::ofstream(dir + "/config.json") << in.rdbuf();
  Expected<HfForwardConfig> c = ReadHfForwardConfig(dir);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), ErrorCode::kBadInput);
  EXPECT_NE(c.status().message().find("activation_situ_beta"), std::string::npos) << c.status().message();
}

// A released K3 config's attention residuals (attn_res_block_size) change the function: refused, not ignored.
TEST(HfKimiK3, AttentionResidualsAreRefusedNamingTheField) {
  hftest::Checkpoint c = hftest::MakeKimiK3();
  c.config["text_config"]["attn_res_block_size"] = 12;
  const std::string dir = hftest::TempDir();
  c.Write(dir);
  Expected<HfForwardConfig> cfg = ReadHfForwardConfig(dir);
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(cfg.status().message().find("attn_res_block_size"), std::string::npos) << cfg.status().message();
  c.config["text_config"]["attn_res_block_size"] = nullptr;  // null: absent
  c.Write(dir);
  EXPECT_TRUE(ReadHfForwardConfig(dir).ok());
}

// KDA (full-rank output gate, bounded decay), gated MLA + DSA top-3, latent MoE with its norm, SiTU-GLU.
TEST(HfKimiK3, TextModelMatchesReference) {
  const hftest::Checkpoint c = hftest::MakeKimiK3();
  const double f64 = K3Diff(c, torch::kDouble), f32 = K3Diff(c, torch::kFloat);
  std::printf("kimi_k3 max |logit diff| vs the reference: fp64 %.3g, fp32 %.3g\n", f64, f32);
  EXPECT_LT(f64, kF64Tol);
  EXPECT_LT(f32, kF32Tol);
  EXPECT_LT(K3Diff(c, torch::kDouble, {}, /*shards=*/3), kF64Tol);
}

// The comparison can fail on each K3 feature.
TEST(HfKimiK3, ReferenceWithoutEachK3FeatureFails) {
  const hftest::Checkpoint c = hftest::MakeKimiK3();
  const std::pair<const char*, void (*)(RefOverrides&)> wrong[] = {
      {"latent norm skipped", [](RefOverrides& o) { o.k3_skip_latent_norm = true; }},
      {"latent norm before the experts", [](RefOverrides& o) { o.k3_norm_after_down = true; }},
      {"no MLA output gate", [](RefOverrides& o) { o.k3_no_mla_gate = true; }},
      {"softplus decay", [](RefOverrides& o) { o.k3_softplus_decay = true; }},
      {"SwiGLU for SiTU", [](RefOverrides& o) { o.situ_as_silu = true; }},
      {"dense MLA (no indexer)", [](RefOverrides& o) { o.dense_dsa = true; }},
  };
  for (const auto& [what, f] : wrong) {
    const double miss = K3Diff(c, torch::kDouble, With(f));
    std::printf("kimi_k3 reference with %s: max |logit diff| %.3g (fp64)\n", what, miss);
    EXPECT_GT(miss, kWrongAtLeast) << what;
  }
}

// A missing tensor: kBadInput naming it (the checkpoint's own name) and its expected shape.
TEST(HfKimiK3, MissingTensorIsNamedWithItsShape) {
  const std::pair<std::string, std::string> cases[] = {
      {"language_model.model.layers.2.block_sparse_moe.routed_expert_norm.weight", "[16]"},
      {"language_model.model.layers.2.self_attn.g_proj.weight", "[32,32]"},
      {"language_model.model.layers.3.self_attn.g_proj.weight", "[16,32]"},
      {"language_model.lm_head.weight", "[64,32]"},
  };
  for (const auto& [name, shape] : cases) {
    hftest::Checkpoint c = hftest::MakeKimiK3();
    c.tensors.erase(name);
    const std::string dir = hftest::TempDir();
    c.Write(dir);
    Expected<HfForwardConfig> cfg = ReadHfForwardConfig(dir);
    ASSERT_TRUE(cfg.ok()) << cfg.status().message();
    Expected<SafetensorsCheckpoint> ck = SafetensorsCheckpoint::Open(dir);
    ASSERT_TRUE(ck.ok()) << ck.status().message();
    Expected<HfModelWeights> w = MapHfWeights(*cfg, *ck, {}, torch::kFloat);
    ASSERT_FALSE(w.ok()) << name;
    EXPECT_EQ(w.status().code(), ErrorCode::kBadInput);
    EXPECT_NE(w.status().message().find(name), std::string::npos) << w.status().message();
    EXPECT_NE(w.status().message().find(shape), std::string::npos) << w.status().message();
  }
}

// `onboard verify`'s path: text ids pass against the reference's logits (the MoonViT tensors are not
// read without pixels: hf_kimi_k3_image_test.cpp); a stray text tensor is still reported as unmapped.
TEST(HfKimiK3, VerifyRunsText) {
  const hftest::Checkpoint c = hftest::MakeKimiK3();
  const std::string dir = hftest::TempDir();
  c.Write(dir, /*shards=*/2);
  std::vector<float> ref;
  for (const auto& r : hftest::Reference(hftest::K3TextView(c)).Logits(hftest::kIds))
    ref.insert(ref.end(), r.begin(), r.end());
  ASSERT_TRUE(WriteNpyF32(dir + "/ref.npy", {1, int64_t(hftest::kIds.size()), 64}, ref.data()).ok());
  std::ofstream(dir + "/ids.json") << nlohmann::json({hftest::kIds}).dump();
  HfVerifyOptions o;
  o.checkpoint = dir;
  o.ids_path = dir + "/ids.json";
  o.reference = dir + "/ref.npy";
  Expected<HfVerifyResult> r = RunHfVerify(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->passed) << r->max_abs;
  hftest::Checkpoint stray = c;
  stray.Add("language_model.model.layers.1.self_attn.extra.weight", {4}, 1.0);
  const std::string sdir = hftest::TempDir();
  stray.Write(sdir);
  o.checkpoint = sdir;
  Expected<HfVerifyResult> s = RunHfVerify(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("extra.weight"), std::string::npos) << s.status().message();
}

// A text-only kimi_k3 config (no vision_config) whose checkpoint still holds the MoonViT tower and
// projector: verify refuses it (kBadInput: exit 2) naming the file, a vision tensor and why. The
// same checkpoint with its vision_config verifies text (the tower skipped on purpose: control).
TEST(HfKimiK3, VisionTensorsWithoutVisionConfigAreUnmapped) {
  hftest::Checkpoint c = hftest::MakeKimiK3();
  const std::string dir = hftest::TempDir();
  c.Write(dir);
  std::ofstream(dir + "/ids.json") << nlohmann::json({hftest::kIds}).dump();
  HfVerifyOptions o;
  o.checkpoint = dir;
  o.ids_path = dir + "/ids.json";
  Expected<HfVerifyResult> with = RunHfVerify(o);
  ASSERT_TRUE(with.ok()) << with.status().message();
  c.config.erase("vision_config");
  const std::string tdir = hftest::TempDir();
  c.Write(tdir);
  o.checkpoint = tdir;
  Expected<HfVerifyResult> r = RunHfVerify(o);
  ASSERT_FALSE(r.ok());
  const std::string m = r.status().message();
  EXPECT_EQ(r.status().code(), ErrorCode::kBadInput) << m;
  EXPECT_NE(m.find("model.safetensors"), std::string::npos) << m;
  EXPECT_TRUE(m.find("vision_tower.") != std::string::npos || m.find("mm_projector.") != std::string::npos)
      << m;
  EXPECT_NE(m.find("has no vision_config"), std::string::npos) << m;
}

// `onboard probe CKPT --weights --layers 1-2 --mode lora --ranks 2` with the shared recipe
// (probe_weights_options.h, unchanged): held-out loss below the frozen checkpoint's.
TEST(HfKimiK3, LoraProbeOnRealLayersLowersHeldOutLoss) {
  const std::string ckpt = hftest::WriteCheckpoint(hftest::MakeKimiK3(256));
  WeightsProbeOptions o = hftest::ProbeWeightsOptions(ckpt, 2);
  o.layers = {1, 2};
  Expected<WeightsProbeResult> r = RunWeightsProbe(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->learned) << r->verdict;
  EXPECT_LT(r->held_out_final, (1 - kWeightsProbeMinFall) * r->held_out_frozen);
  // KDA q/k/v/o of layer 1, the MLA's o_proj of layer 2, both MoE layers' shared-expert gate/up/down
  EXPECT_EQ(r->targets.size(), 11u);
}

}  // namespace
}  // namespace onboard
