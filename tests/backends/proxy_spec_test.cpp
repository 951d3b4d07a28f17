// ProxyFromModel keeps the flagship's structure: 3:1 KDA:MLA, dense first layer, latent MoE with
// shared experts, sigmoid router, DSA indexer.
#include <gtest/gtest.h>

#include "backends/probe.h"
#include "parsers/load_model.h"

namespace onboard {
namespace {

TEST(ProxyFromModel, FlagshipPatternSurvives) {
  Expected<ModelIR> m = LoadModel(std::string(ONBOARD_TEST_DATA) + "/hf/flagship.config.json");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ProxySpec s = ProxyFromModel(*m, 2);
  ASSERT_EQ(s.num_layers(), 8);
  int64_t kda = 0, mla = 0;
  for (const ProxyLayer& l : s.layers) (l.mixer == ProxyMixer::kKDA ? kda : mla) += 1;
  EXPECT_EQ(kda, 6);
  EXPECT_EQ(mla, 2);
  EXPECT_EQ(s.layers[3].mixer, ProxyMixer::kMLA);
  EXPECT_EQ(s.layers[0].channel, ProxyChannel::kDense);  // first_k_dense_replace = 1
  EXPECT_EQ(s.layers[1].channel, ProxyChannel::kMoE);
  EXPECT_GT(s.latent_dim, 0);
  EXPECT_GT(s.num_shared, 0);
  EXPECT_GT(s.index_topk, 0);
  EXPECT_EQ(s.router, RouterActivation::kSigmoid);
  EXPECT_TRUE(s.Validate().ok()) << s.Validate().ToString();
  // The proxy as a ModelIR keeps the kinds for the cost model.
  ModelIR p = ProxyToModelIR(s);
  EXPECT_EQ(p.layers[0].attn.kind, MixerKind::kKDA);
  EXPECT_EQ(p.layers[3].attn.kind, MixerKind::kDSA);
  EXPECT_EQ(p.layers[3].moe.latent_dim, s.latent_dim);
}

// RoPE follows the source model: the softmax-attention models rotate their rope dims; the
// linear-attention hybrids (flagship, Kimi-Linear: mla_use_nope) keep NoPE MLA.
TEST(ProxyFromModel, RopeFollowsTheSourceAttention) {
  for (const char* f : {"llama-3.1-8b", "mixtral-8x7b-v0.1", "qwen3-30b-a3b", "deepseek-v3"}) {
    Expected<ModelIR> m = LoadModel(std::string(ONBOARD_TEST_DATA) + "/hf/" + f + ".config.json");
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_TRUE(ProxyFromModel(*m).rope) << f;
  }
  for (const char* f : {"flagship", "kimi-linear-48b-a3b-instruct"}) {
    Expected<ModelIR> m = LoadModel(std::string(ONBOARD_TEST_DATA) + "/hf/" + f + ".config.json");
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_FALSE(ProxyFromModel(*m).rope) << f;
  }
  ProxySpec s;
  s.layers = {{ProxyMixer::kMLA, ProxyChannel::kDense}};
  s.rope = true;
  s.qk_rope_dim = 7;  // pairs are rotated: an odd width is refused with its name
  Status st = s.Validate();
  EXPECT_NE(st.ToString().find("qk_rope_dim"), std::string::npos) << st.ToString();
  s.qk_rope_dim = 8;
  ProbeConfig c;
  ProxySpec back;
  ProbeConfig cback;
  c.control = kControlNoLookback;
  ASSERT_TRUE(ProbeSpecConfigFromJson(ProbeSpecConfigToJson(s, c), &back, &cback).ok());
  EXPECT_TRUE(back.rope);
  EXPECT_EQ(cback.control, kControlNoLookback);
}

// The MLA output gate follows the source model (issue 12): only the flagship's gated MLA
// (mla_use_output_gate) has one; Kimi-Linear's MLA and the softmax models' attention do not. Before,
// ProxySpec's default (true) gave every proxy a gate.
TEST(ProxyFromModel, OutputGateFollowsTheSourceAttention) {
  for (const char* f : {"flagship", "kimi-linear-48b-a3b-instruct", "llama-3.1-8b", "mixtral-8x7b-v0.1",
                        "qwen3-30b-a3b", "deepseek-v3"}) {
    Expected<ModelIR> m = LoadModel(std::string(ONBOARD_TEST_DATA) + "/hf/" + f + ".config.json");
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ(ProxyFromModel(*m).mla_output_gate, std::string(f) == "flagship") << f;
  }
}

TEST(ProxyFromModel, SoftmaxModelMapsToMla) {
  Expected<ModelIR> m = LoadModel(std::string(ONBOARD_TEST_DATA) + "/hf/mixtral-8x7b-v0.1.config.json");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ProxySpec s = ProxyFromModel(*m);
  for (const ProxyLayer& l : s.layers) EXPECT_EQ(l.mixer, ProxyMixer::kMLA);
  EXPECT_EQ(s.router, RouterActivation::kSoftmax);
  EXPECT_EQ(s.latent_dim, 0);
  EXPECT_FALSE(s.notes.empty());
}

TEST(ProxySpec, ValidateNamesField) {
  ProxySpec s;
  s.layers = {{ProxyMixer::kKDA, ProxyChannel::kMoE}};
  s.top_k = 9;
  Status st = s.Validate();
  EXPECT_EQ(st.code(), ErrorCode::kBadInput);
  EXPECT_NE(st.message().find("top_k"), std::string::npos);
  s.top_k = 2;
  s.chunk = 64;  // 64 * 5 > 80
  EXPECT_NE(s.Validate().message().find("chunk"), std::string::npos);
}

TEST(ProbeJson, SpecAndConfigRoundTrip) {
  ProxySpec s;
  s.layers = {{ProxyMixer::kKDA, ProxyChannel::kDense}, {ProxyMixer::kMLA, ProxyChannel::kMoE}};
  s.router = RouterActivation::kSoftmax;
  ProbeConfig c;
  c.ranks = 2;
  c.mode = FinetuneMode::kLoRA;
  c.expert_placement = {1, 0, 1, 0, 1, 0, 1, 0};
  c.micro_batch = 2;
  c.device = "cuda";
  ProxySpec s2;
  ProbeConfig c2;
  ASSERT_TRUE(ProbeSpecConfigFromJson(ProbeSpecConfigToJson(s, c), &s2, &c2).ok());
  EXPECT_EQ(s2.PatternString(), s.PatternString());
  EXPECT_EQ(s2.router, RouterActivation::kSoftmax);
  EXPECT_EQ(c2.mode, FinetuneMode::kLoRA);
  EXPECT_EQ(c2.expert_placement, c.expert_placement);
  EXPECT_EQ(c2.micro_batch, 2);
  EXPECT_EQ(c2.device, "cuda");
  EXPECT_EQ(ProbeSpecConfigFromJson("{", &s2, &c2).code(), ErrorCode::kBadInput);
}

// The task is typed (core/probe_task.h): every task name round-trips through the probe JSON, and an
// unknown one is refused naming the field and the value (it used to be read as the copy task).
TEST(ProbeJson, TaskRoundTripsAndAnUnknownTaskIsRefused) {
  ProxySpec s;
  s.layers = {{ProxyMixer::kKDA, ProxyChannel::kDense}};
  for (ProbeTask t : {ProbeTask::kCopy, ProbeTask::kText, ProbeTask::kLookup, ProbeTask::kImage}) {
    ProbeConfig c;
    c.task = t;
    ProxySpec s2;
    ProbeConfig c2;
    ASSERT_TRUE(ProbeSpecConfigFromJson(ProbeSpecConfigToJson(s, c), &s2, &c2).ok()) << ProbeTaskName(t);
    EXPECT_EQ(c2.task, t);
  }
  std::string text = ProbeSpecConfigToJson(s, ProbeConfig{});
  const std::string copy = "\"task\": \"copy\"";
  ASSERT_NE(text.find(copy), std::string::npos) << text;
  text.replace(text.find(copy), copy.size(), "\"task\": \"sort\"");
  ProxySpec s2;
  ProbeConfig c2;
  const Status st = ProbeSpecConfigFromJson(text, &s2, &c2);
  EXPECT_EQ(st.code(), ErrorCode::kBadInput);
  EXPECT_EQ(
      st.message(),
      "probe spec: field 'json': probe config: field 'task': must be copy, text, lookup or image (got sort)");
}

}  // namespace
}  // namespace onboard
