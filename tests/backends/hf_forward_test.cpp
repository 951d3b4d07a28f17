// HF checkpoints written by the test (real names, random bf16 weights) -> weight mapping -> forward,
// checked against the independent loop-style reference (hf_reference_forward.h). The same comparison
// with a deliberately wrong reference (rope theta, eps) must fail.
#include <gtest/gtest.h>

#include <cstdlib>

#include "backends/hf_model.h"
#include "backends/hf_rope.h"
#include "tests/backends/hf_compare.h"

namespace onboard {
namespace {

using hftest::Checkpoint;
using hftest::kF32Tol;
using hftest::kF64Tol;
using hftest::kWrongAtLeast;
using hftest::MaxDiff;
using hftest::RefOverrides;
using hftest::TempDir;

TEST(HfForward, LlamaMatchesReference) {
  const Checkpoint c = hftest::MakeDense("llama");
  EXPECT_LT(MaxDiff(c, torch::kDouble), kF64Tol);
  EXPECT_LT(MaxDiff(c, torch::kFloat), kF32Tol);
}

TEST(HfForward, Qwen2BiasesMatchReference) { EXPECT_LT(MaxDiff(hftest::MakeDense("qwen2"), torch::kDouble), kF64Tol); }

TEST(HfForward, Qwen3QkNormTiedHeadMatchesReference) {
  EXPECT_LT(MaxDiff(hftest::MakeDense("qwen3"), torch::kDouble), kF64Tol);
}

TEST(HfForward, Qwen3MoeMatchesReference) { EXPECT_LT(MaxDiff(hftest::MakeQwen3Moe(), torch::kDouble), kF64Tol); }

TEST(HfForward, MixtralMatchesReference) { EXPECT_LT(MaxDiff(hftest::MakeMixtral(), torch::kDouble), kF64Tol); }

TEST(HfForward, DeepSeekV3MlaYarnGroupedRoutingMatchesReference) {
  const Checkpoint c = hftest::MakeDeepSeekV3();
  EXPECT_LT(MaxDiff(c, torch::kDouble), kF64Tol);
  EXPECT_LT(MaxDiff(c, torch::kFloat), kF32Tol);
}

// DeepSeek-V3's release layout: every in-layer projection F8_E4M3 + "<name>_scale_inv" (128x128
// blocks); embedding, norms, router and head BF16. The reference uses the dequantised values.
TEST(HfForward, DeepSeekV3Fp8BlockScaledMatchesReference) {
  Checkpoint c = hftest::MakeDeepSeekV3();
  int quantised = 0;
  for (auto& [name, t] : c.tensors) {
    const bool proj = name.find("_proj.weight") != std::string::npos;
    if (proj && name.find("model.layers.") == 0) {
      c.QuantizeFp8(name);
      ++quantised;
    }
  }
  EXPECT_GT(quantised, 20);
  EXPECT_LT(MaxDiff(c, torch::kDouble, {}, 2), kF64Tol);
}

TEST(HfForward, ShardedCheckpointMatchesReference) {
  EXPECT_LT(MaxDiff(hftest::MakeDense("llama"), torch::kDouble, {}, /*shards=*/3), kF64Tol);
}

TEST(HfForward, Llama3RopeScalingMatchesReference) {
  Checkpoint c = hftest::MakeDense("llama");
  c.config["rope_theta"] = 500000.0;
  c.config["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                              {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 64}};
  EXPECT_LT(MaxDiff(c, torch::kDouble), kF64Tol);
}

// YaRN on a GQA family (Qwen3 style): the attention factor 0.1 ln(factor) + 1 scales cos/sin.
TEST(HfForward, Qwen3YarnMatchesReference) {
  Checkpoint c = hftest::MakeDense("qwen3");
  c.config["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32}};
  EXPECT_LT(MaxDiff(c, torch::kDouble), kF64Tol);
}

TEST(HfForward, LayerSliceMatchesReference) {
  EXPECT_LT(MaxDiff(hftest::MakeDeepSeekV3(), torch::kDouble, {}, 1, HfLayerRange{1, 2}), kF64Tol);
  EXPECT_LT(MaxDiff(hftest::MakeDense("qwen3", 3), torch::kDouble, {}, 1, HfLayerRange{1, 1}), kF64Tol);
}

// The check can fail: a reference with the wrong rope theta or RMSNorm eps disagrees.
TEST(HfForward, WrongRopeThetaOrEpsInReferenceFails) {
  const Checkpoint c = hftest::MakeDense("qwen3");
  EXPECT_GT(MaxDiff(c, torch::kDouble, RefOverrides{2.0, -1.0}), kWrongAtLeast);
  EXPECT_GT(MaxDiff(c, torch::kDouble, RefOverrides{1.0, 0.5}), kWrongAtLeast);
  EXPECT_GT(MaxDiff(hftest::MakeDeepSeekV3(), torch::kDouble, RefOverrides{3.0, -1.0}), kWrongAtLeast);
}

// YaRN factors: DeepSeek-V3's published rope_scaling (factor 40, mscale = mscale_all_dim = 1) gives
// a cos/sin factor of 1 and a softmax scale of (0.1 ln 40 + 1)^2 / sqrt(192).
TEST(HfForward, YarnMscaleGoesToSoftmaxScale) {
  Checkpoint c = hftest::MakeDeepSeekV3();
  c.config["rope_scaling"]["factor"] = 40.0;
  const std::string dir = TempDir();
  c.Write(dir);
  Expected<HfForwardConfig> cfg = ReadHfForwardConfig(dir);
  ASSERT_TRUE(cfg.ok()) << cfg.status().message();
  const double m = 0.1 * std::log(40.0) + 1.0;
  EXPECT_NEAR(cfg->softmax_scale, m * m / std::sqrt(12.0), 1e-12);
  double factor = 0;
  (void)RopeInvFreq(cfg->rope, &factor);
  EXPECT_DOUBLE_EQ(factor, 1.0);
}

}  // namespace
}  // namespace onboard
