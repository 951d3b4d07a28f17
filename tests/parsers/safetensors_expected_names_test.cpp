// ExpectedTensorNames against the real configs in tests/data/hf: for every family whose tensor names
// are enumerated, the shapes it implies must carry exactly the parameters ComputeStats counts from the
// same IR (two independent derivations), with no duplicate names.
#include <gtest/gtest.h>

#include <set>

#include "parsers/load_model.h"
#include "parsers/safetensors.h"

namespace onboard {
namespace {

struct Case {
  const char* config;
  int64_t tensors;  // HF checkpoint tensor count without MTP layers / fp8 scales (from the model's index)
};

class ExpectedNames : public ::testing::TestWithParam<Case> {};

TEST_P(ExpectedNames, ShapesCarryTheIrParameterCount) {
  auto ir = LoadModel(std::string(ONBOARD_TEST_DATA) + "/hf/" + GetParam().config);
  ASSERT_TRUE(ir.ok()) << ir.status().ToString();
  std::vector<std::string> warnings;
  const auto names = ExpectedTensorNames(*ir, &warnings);
  EXPECT_TRUE(warnings.empty()) << warnings.front();
  std::set<std::string> unique;
  int64_t params = 0;
  for (const auto& t : names) {
    EXPECT_TRUE(unique.insert(t.name).second) << "duplicate " << t.name;
    params += t.params;
  }
  EXPECT_EQ(int64_t(names.size()), GetParam().tensors);
  EXPECT_EQ(params, ComputeStats(*ir, 1).total_params);
}

// Tensor counts of the published checkpoints' indexes: llama-3.1-8b 291, mixtral-8x7b 995,
// qwen3-30b-a3b 18867, gpt-oss-120b 687 (tests/data/safetensors). DeepSeek-V3's index also holds the MTP
// layer and fp8 scales, so it is checked separately below.
INSTANTIATE_TEST_SUITE_P(Configs, ExpectedNames,
                         ::testing::Values(Case{"llama-3.1-8b.config.json", 291},
                                           Case{"mixtral-8x7b-v0.1.config.json", 995},
                                           Case{"qwen3-30b-a3b.config.json", 18867},
                                           Case{"gpt-oss-120b.config.json", 687}));

TEST(ExpectedNamesDeepSeek, MlaAndSharedExpertsCarryTheIrParameterCount) {
  auto ir = LoadModel(std::string(ONBOARD_TEST_DATA) + "/hf/deepseek-v3.config.json");
  ASSERT_TRUE(ir.ok()) << ir.status().ToString();
  std::vector<std::string> warnings;
  const auto names = ExpectedTensorNames(*ir, &warnings);
  int64_t params = 0;
  for (const auto& t : names) params += t.params;
  EXPECT_EQ(params, ComputeStats(*ir, 1).total_params);
  std::set<std::string> set;
  for (const auto& t : names) set.insert(t.name);
  EXPECT_TRUE(set.count("model.layers.0.self_attn.kv_a_proj_with_mqa.weight"));
  EXPECT_TRUE(set.count("model.layers.3.mlp.shared_experts.down_proj.weight"));
  EXPECT_TRUE(set.count("model.layers.3.mlp.experts.255.up_proj.weight"));
  EXPECT_TRUE(set.count("model.layers.3.mlp.gate.e_score_correction_bias"));
  EXPECT_FALSE(set.count("model.layers.2.mlp.gate.weight"));  // first_k_dense_replace = 3
}

TEST(ExpectedNamesGuard, AbsurdModelIsNotEnumerated) {
  ModelIR m;
  m.model_type = "mixtral";
  m.vocab = m.hidden = 8;
  LayerSpec l;
  l.channel = ChannelKind::kMoE;
  l.moe.num_experts = 1 << 20;
  for (int i = 0; i < 100; ++i) m.layers.push_back(l);
  std::vector<std::string> warnings;
  EXPECT_TRUE(ExpectedTensorNames(m, &warnings).empty());
  ASSERT_EQ(warnings.size(), 1u);
}

}  // namespace
}  // namespace onboard
