// glm4_moe, gpt_oss, deepseek_v32 and kimi_linear checkpoints written by the test (real names; gpt-oss
// experts in MXFP4 as released, or dense BF16) -> mapping -> forward, against the loop-style reference. Each
// family has a negative check: the reference without the feature (sinks, sliding window, clamp, partial RoPE,
// the DSA selection, the indexer's half-split RoPE, the KDA short conv and dt_bias) must disagree.
#include <gtest/gtest.h>

#include "tests/backends/hf_compare.h"
#include "tests/backends/hf_test_families.h"

namespace onboard {
namespace {

using hftest::kF32Tol;
using hftest::kF64Tol;
using hftest::kWrongAtLeast;
using hftest::MaxDiff;
using hftest::RefOverrides;
using hftest::With;

TEST(HfFamilies, Glm4MoePartialRopeQkNormGroupedRoutingMatchesReference) {
  const hftest::Checkpoint c = hftest::MakeGlm4Moe();
  EXPECT_LT(MaxDiff(c, torch::kDouble), kF64Tol);
  EXPECT_LT(MaxDiff(c, torch::kFloat), kF32Tol);
}

TEST(HfFamilies, Glm4MoeReferenceWithFullRotaryFails) {
  EXPECT_GT(
      MaxDiff(hftest::MakeGlm4Moe(), torch::kDouble, With([](RefOverrides& o) { o.rotary_fraction = 1.0; })),
      kWrongAtLeast);
}

TEST(HfFamilies, GptOssMxfp4MatchesReference) {
  const hftest::Checkpoint c = hftest::MakeGptOss(true);
  EXPECT_LT(MaxDiff(c, torch::kDouble), kF64Tol);
  EXPECT_LT(MaxDiff(c, torch::kFloat), kF32Tol);
  EXPECT_LT(MaxDiff(c, torch::kDouble, {}, /*shards=*/3), kF64Tol);
}

TEST(HfFamilies, GptOssDenseBf16ExpertsMatchReference) {
  EXPECT_LT(MaxDiff(hftest::MakeGptOss(false), torch::kDouble), kF64Tol);
}

// The comparison can fail: a reference without sinks, or with full attention on the sliding layer.
TEST(HfFamilies, GptOssReferenceWithoutSinksOrWindowFails) {
  const hftest::Checkpoint c = hftest::MakeGptOss(true);
  EXPECT_GT(MaxDiff(c, torch::kDouble, With([](RefOverrides& o) { o.drop_sinks = true; })), kWrongAtLeast);
  EXPECT_GT(MaxDiff(c, torch::kDouble, With([](RefOverrides& o) { o.full_windows = true; })), kWrongAtLeast);
}

// swiglu_limit 0.5 clamps most gate/up values: the forward follows it, an unclamped reference does not.
TEST(HfFamilies, GptOssClampIsApplied) {
  hftest::Checkpoint c = hftest::MakeGptOss(true);
  c.config["swiglu_limit"] = 0.5;
  EXPECT_LT(MaxDiff(c, torch::kDouble), kF64Tol);
  EXPECT_GT(MaxDiff(c, torch::kDouble, With([](RefOverrides& o) { o.swiglu_limit = 1e9; })), kWrongAtLeast);
}

// A missing MXFP4 scale tensor or blocks of the wrong shape: kBadInput naming the tensor.
TEST(HfFamilies, GptOssBrokenMxfp4IsNamed) {
  for (int broken = 0; broken < 2; ++broken) {
    hftest::Checkpoint c = hftest::MakeGptOss(true);
    const std::string name = "model.layers.1.mlp.experts.down_proj";
    if (broken == 0) c.raw.erase(name + "_scales");
    if (broken == 1) c.raw[name + "_blocks"].shape = {4, 32, 2, 8};
    const std::string dir = hftest::TempDir();
    c.Write(dir);
    Expected<HfForwardConfig> cfg = ReadHfForwardConfig(dir);
    ASSERT_TRUE(cfg.ok()) << cfg.status().message();
    Expected<SafetensorsCheckpoint> ck = SafetensorsCheckpoint::Open(dir);
    ASSERT_TRUE(ck.ok()) << ck.status().message();
    Expected<HfModelWeights> w = MapHfWeights(*cfg, *ck, {}, torch::kFloat);
    ASSERT_FALSE(w.ok());
    EXPECT_NE(w.status().message().find(broken == 0 ? name + "_scales" : name + "_blocks"), std::string::npos)
        << w.status().message();
  }
}

// DeepSeek-V3.2: MLA restricted to the indexer's top-3 keys per query (7 tokens, so most queries drop keys).
// With 2 indexer heads a key often scores exactly 0 (relu of two negative dots); equal scores take the
// earlier key first on both sides (the 1.39 logit gap before that rule was torch::topk's tie order).
TEST(HfFamilies, DeepSeekV32IndexerTopKMatchesReference) {
  const hftest::Checkpoint c = hftest::MakeDeepSeekV32();
  EXPECT_LT(MaxDiff(c, torch::kDouble), kF64Tol);
  EXPECT_LT(MaxDiff(c, torch::kFloat), kF32Tol);
}

// The comparison can fail: dense MLA (no selection), the indexer rotated in MLA's interleaved pairs, k_norm
// without its bias, or ties given to the later key.
TEST(HfFamilies, DeepSeekV32ReferenceWithoutIndexerOrInterleavedIndexerRopeFails) {
  const hftest::Checkpoint c = hftest::MakeDeepSeekV32();
  EXPECT_GT(MaxDiff(c, torch::kDouble, With([](RefOverrides& o) { o.dense_dsa = true; })), kWrongAtLeast);
  EXPECT_GT(MaxDiff(c, torch::kDouble, With([](RefOverrides& o) { o.indexer_interleave = true; })),
            kWrongAtLeast);
  EXPECT_GT(MaxDiff(c, torch::kDouble, With([](RefOverrides& o) { o.indexer_no_k_bias = true; })),
            kWrongAtLeast);
  EXPECT_GT(MaxDiff(c, torch::kDouble, With([](RefOverrides& o) { o.indexer_ties_last = true; })),
            kWrongAtLeast);
}

// Kimi-Linear: KDA layers (short convs, low-rank softplus decay, delta rule, gated norm) and an MLA
// layer without RoPE, block_sparse_moe sigmoid routing.
TEST(HfFamilies, KimiLinearKdaAndMlaMatchReference) {
  const hftest::Checkpoint c = hftest::MakeKimiLinear();
  EXPECT_LT(MaxDiff(c, torch::kDouble), kF64Tol);
  EXPECT_LT(MaxDiff(c, torch::kFloat), kF32Tol);
}

// The comparison can fail: a reference without the short convolutions, or without dt_bias in the gate.
TEST(HfFamilies, KimiLinearReferenceWithoutConvOrDtBiasFails) {
  const hftest::Checkpoint c = hftest::MakeKimiLinear();
  EXPECT_GT(MaxDiff(c, torch::kDouble, With([](RefOverrides& o) { o.kda_no_conv = true; })), kWrongAtLeast);
  EXPECT_GT(MaxDiff(c, torch::kDouble, With([](RefOverrides& o) { o.kda_drop_dt_bias = true; })),
            kWrongAtLeast);
}

}  // namespace
}  // namespace onboard
