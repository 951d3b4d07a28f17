// Megatron-Core v0.9's reported FLOP count (search/megatron_reported_flops.h) against its formula
// evaluated by hand from NVIDIA/Megatron-LM@core_v0.9.0 megatron/training/training.py:98-144, and the
// measured-runs reader that turns a published TFLOP/s/GPU into tokens/s with it.
#include "search/megatron_reported_flops.h"
#include "search/layout_file.h"
#include "search_test_util.h"

namespace onboard {
namespace {

using test::HfModel;

// Mixtral 8x7B (h 4096, 32 layers, 32 heads, 8 KV groups, kv_channels 128, ffn 14336, top-2, SwiGLU, vocab
// 32000) at seq 4096: 12 * 32 * 4096^2 * [(1 + 8/32 + 4096/4096) * 1 + 14336/4096 * 2 * 1.5 +
// 32000/(2*32*4096)] = 6442450944 * (2.25 + 10.5 + 0.1220703125) = 82927681536 FLOPs per token (exact in
// binary).
TEST(MegatronReportedFlops, MixtralByTheV09Count) {
  const ModelIR m = HfModel("mixtral-8x7b-v0.1");
  auto f = MegatronCoreV09FlopsPerToken(m, 4096, 1);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_DOUBLE_EQ(*f, 82927681536.0);
  // The 468 TFLOP/s/GPU of the Megatron-Core MoE README, read as tokens/s/GPU.
  EXPECT_NEAR(468e12 / *f, 5643.47, 0.01);
  // tp 3 pads the vocab to a multiple of 384: 32256, the logits term 32256 / 262144.
  auto f3 = MegatronCoreV09FlopsPerToken(m, 4096, 3);
  ASSERT_TRUE(f3.ok());
  EXPECT_DOUBLE_EQ(*f3, 6442450944.0 * (2.25 + 10.5 + 32256.0 / 262144.0));
  // Dense Llama-3.1-8B (h 4096, 32 layers, 32 heads, 8 groups, ffn 14336, vocab 128256) at seq 8192: the MLP
  // term has k = 1.
  auto fl = MegatronCoreV09FlopsPerToken(HfModel("llama-3.1-8b"), 8192, 1);
  ASSERT_TRUE(fl.ok());
  EXPECT_DOUBLE_EQ(*fl, 6442450944.0 * ((1 + 0.25 + 2.0) + 3.5 * 1.5 + 128256.0 / 262144.0));
}

// Models the v0.9 arguments cannot express are refused with the layer field that differs.
TEST(MegatronReportedFlops, RefusesWhatTheCountCannotExpress) {
  auto mla = MegatronCoreV09FlopsPerToken(HfModel("deepseek-v3"), 4096, 1);
  ASSERT_FALSE(mla.ok());
  EXPECT_NE(mla.status().message().find("layers[0].attn.kind"), std::string::npos) << mla.status().message();
  ModelIR shared = HfModel("mixtral-8x7b-v0.1");
  shared.layers[5].moe.num_shared = 1;
  auto s = MegatronCoreV09FlopsPerToken(shared, 4096, 1);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("layers[5].moe.num_shared"), std::string::npos) << s.status().message();
  auto unknown = ReportedFlopsPerToken("megatron-lm-2021", HfModel("mixtral-8x7b-v0.1"), 4096, 1);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("megatron-lm-2021"), std::string::npos);
}

Expected<std::vector<LayoutRun>> TflopsOnlyRun(const std::string& model_file, const std::string& count) {
  const std::string text =
      R"({"configs":{"m":{"file":"models/hf/)" + model_file +
      R"("}},"runs":[{"id":"r","model":"m","hardware":"H100-80GB-SXM","gpus":64,"tp":1,"pp":4,
      "vp":8,"ep":8,"dp":16,"global_batch":256,"micro_batch":1,"seq":4096,"precision":"bf16","recompute":"none",
      "measured":{"tflops_per_gpu":468})" +
      count + "}]}";
  return ParseLayoutJson(text, std::string(ONBOARD_TEST_DATA) + "/inline.json");
}

// A row with only a TFLOP/s figure is costed when it names its source's count, skipped otherwise; a bad
// count names the row's field.
TEST(MegatronReportedFlops, ReaderConvertsANamedCount) {
  auto named =
      TflopsOnlyRun("mixtral-8x7b-v0.1.config.json", R"(,"tflops_count":{"formula":"megatron-core-v0.9"})");
  ASSERT_TRUE(named.ok()) << named.status().ToString();
  const LayoutRun& r = (*named)[0];
  EXPECT_TRUE(r.skipped.empty()) << r.skipped;
  ASSERT_TRUE(r.measured_tokens_per_s_per_gpu.has_value());
  EXPECT_NEAR(*r.measured_tokens_per_s_per_gpu, 468e12 / 82927681536.0, 1e-9);
  EXPECT_NEAR(*r.measured_step_s, 256.0 * 4096 / (*r.measured_tokens_per_s_per_gpu * 64), 1e-9);
  auto unnamed = TflopsOnlyRun("mixtral-8x7b-v0.1.config.json", "");
  ASSERT_TRUE(unnamed.ok());
  EXPECT_FALSE((*unnamed)[0].measured_tokens_per_s_per_gpu.has_value());
  EXPECT_NE((*unnamed)[0].skipped.find("only other metrics"), std::string::npos);
  for (const auto& [file, count] : std::vector<std::pair<std::string, std::string>>{
           {"mixtral-8x7b-v0.1.config.json", R"(,"tflops_count":{"formula":"nope"})"},
           {"mixtral-8x7b-v0.1.config.json", R"(,"tflops_count":"megatron-core-v0.9")"},
           {"deepseek-v3.config.json", R"(,"tflops_count":{"formula":"megatron-core-v0.9"})"}}) {
    auto bad = TflopsOnlyRun(file, count);
    ASSERT_FALSE(bad.ok()) << count;
    EXPECT_NE(bad.status().message().find("runs[0].tflops_count.formula"), std::string::npos)
        << bad.status().message();
  }
}

}  // namespace
}  // namespace onboard
