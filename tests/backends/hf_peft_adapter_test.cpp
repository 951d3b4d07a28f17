// PEFT LoRA export: the files carry PEFT's key names and config fields, read back bit-exactly, and
// the adapter merged onto the loaded weights computes what W + (alpha/r) B A (merged by plain loops
// into the test checkpoint) computes under the independent reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "backends/hf_model.h"
#include "backends/hf_peft_adapter.h"
#include "tests/backends/hf_reference_forward.h"

namespace onboard {
namespace {

std::string TempDir() {
  std::string t = "/tmp/onboard_peft_XXXXXX";
  return mkdtemp(&t[0]);
}

PeftLoraAdapter RandomAdapter() {
  torch::manual_seed(7);
  PeftLoraAdapter a;
  a.r = 4;
  a.alpha = 8;
  a.base_model = "test/tiny-llama";
  for (int l = 0; l < 2; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".self_attn.";
    a.modules.push_back({p + "q_proj", torch::randn({4, 32}), torch::randn({32, 4}) * 0.1});
    a.modules.push_back({p + "v_proj", torch::randn({4, 32}), torch::randn({16, 4}) * 0.1});
  }
  return a;
}

TEST(HfPeftAdapter, WritesPeftKeysAndConfig) {
  const std::string dir = TempDir();
  ASSERT_TRUE(WritePeftAdapter(dir, RandomAdapter()).ok());
  std::ifstream in(dir + "/adapter_config.json");
  const nlohmann::json cfg = nlohmann::json::parse(in);
  EXPECT_EQ(cfg["peft_type"], "LORA");
  EXPECT_EQ(cfg["r"], 4);
  EXPECT_EQ(cfg["lora_alpha"], 8.0);
  EXPECT_EQ(cfg["target_modules"], nlohmann::json({"self_attn.q_proj", "self_attn.v_proj"}));
  EXPECT_EQ(cfg["base_model_name_or_path"], "test/tiny-llama");
  Expected<TensorInventory> inv = ReadSafetensorsFile(dir + "/adapter_model.safetensors");
  ASSERT_TRUE(inv.ok());
  const TensorInfo* a = inv->Find("base_model.model.model.layers.1.self_attn.v_proj.lora_A.weight");
  const TensorInfo* b = inv->Find("base_model.model.model.layers.1.self_attn.v_proj.lora_B.weight");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{4, 32}));
  EXPECT_EQ(b->shape, (std::vector<int64_t>{16, 4}));
  EXPECT_EQ(inv->tensors.size(), 8u);
}

TEST(HfPeftAdapter, TargetModulesMatchOnlyTheAdaptedModulesUnderPeftsSuffixRule) {
  // A MoE layer with its shared experts adapted, its routed experts frozen, a dense layer's MLP, and
  // (core/lora_targets.h AdaptsRoutedExperts) a Mixtral-style MoE layer without a shared expert with
  // every one of its 12 routed experts adapted.
  PeftLoraAdapter a;
  a.r = 2;
  for (const char* m : {"model.layers.0.mlp.gate_proj", "model.layers.0.mlp.down_proj",
                        "model.layers.1.mlp.shared_experts.gate_proj", "model.layers.1.self_attn.q_proj"})
    a.modules.push_back({m, torch::zeros({2, 8}), torch::zeros({8, 2})});
  for (int e = 0; e < 12; ++e)
    for (const char* f : {"w1", "w2", "w3"})
      a.modules.push_back({"model.layers.2.block_sparse_moe.experts." + std::to_string(e) + "." + f,
                           torch::zeros({2, 8}), torch::zeros({8, 2})});
  const std::vector<std::string> targets = a.TargetModules();
  // Exactly the adapted paths past "layers.N.": 3 + 1 + 12 x 3.
  EXPECT_EQ(targets.size(), 40u);
  EXPECT_NE(std::find(targets.begin(), targets.end(), "block_sparse_moe.experts.11.w3"), targets.end());
  // PEFT (tuners_utils check_target_module_exists): a list entry matches a module path equal to it or
  // ending in "." + it.
  auto matched = [&](const std::string& module) {
    for (const std::string& t : targets)
      if (module == t || (module.size() > t.size() &&
                          module.compare(module.size() - t.size() - 1, t.size() + 1, "." + t) == 0))
        return true;
    return false;
  };
  for (const LoraModule& m : a.modules) EXPECT_TRUE(matched(m.module)) << m.module;
  for (const char* frozen :
       {"model.layers.1.mlp.experts.0.gate_proj", "model.layers.1.mlp.experts.3.down_proj",
        "model.layers.1.mlp.gate", "model.layers.1.self_attn.q_a_proj",
        "model.layers.2.block_sparse_moe.gate", "model.layers.2.block_sparse_moe.experts.12.w1",
        "model.layers.2.block_sparse_moe.experts.1"})
    EXPECT_FALSE(matched(frozen)) << frozen;
}

TEST(HfPeftAdapter, RoundTripsExactly) {
  const std::string dir = TempDir();
  const PeftLoraAdapter a = RandomAdapter();
  ASSERT_TRUE(WritePeftAdapter(dir, a).ok());
  Expected<PeftLoraAdapter> back = ReadPeftAdapter(dir);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->r, a.r);
  EXPECT_EQ(back->alpha, a.alpha);
  EXPECT_EQ(back->base_model, a.base_model);
  ASSERT_EQ(back->modules.size(), a.modules.size());
  for (const LoraModule& m : a.modules) {
    auto it = std::find_if(back->modules.begin(), back->modules.end(), [&](const LoraModule& x) { return x.module == m.module; });
    ASSERT_NE(it, back->modules.end()) << m.module;
    EXPECT_TRUE(torch::equal(it->a, m.a)) << m.module;
    EXPECT_TRUE(torch::equal(it->b, m.b)) << m.module;
  }
}

TEST(HfPeftAdapter, MergedAdapterMatchesLoopMergedReference) {
  hftest::Checkpoint c = hftest::MakeDense("llama");
  const std::string dir = TempDir();
  c.Write(dir + "/base");
  const std::string adir = dir + "/adapter";
  ASSERT_TRUE(WritePeftAdapter(adir, RandomAdapter()).ok());
  Expected<PeftLoraAdapter> a = ReadPeftAdapter(adir);
  ASSERT_TRUE(a.ok());
  // Ours: load the base, merge each module's A/B into the loaded weight.
  Expected<HfForwardConfig> cfg = ReadHfForwardConfig(dir + "/base");
  Expected<SafetensorsCheckpoint> ck = SafetensorsCheckpoint::Open(dir + "/base");
  ASSERT_TRUE(cfg.ok() && ck.ok());
  Expected<HfModelWeights> w = MapHfWeights(*cfg, *ck, {}, torch::kDouble);
  ASSERT_TRUE(w.ok());
  for (const LoraModule& m : a->modules) {
    const int64_t layer = m.module[13] - '0';
    HfLinear& lin = m.module.find("q_proj") != std::string::npos ? w->layers[size_t(layer)].attn.q : w->layers[size_t(layer)].attn.v;
    lin.w = MergeLora(lin.w, m, a->r, a->alpha);
  }
  const std::vector<int64_t> ids = {1, 5, 9, 13};
  const torch::Tensor ours = HfForward(*cfg, *w, ids);
  // Reference: W[o][i] += alpha/r * sum_k B[o][k] A[k][i], in loops, on the test's own values.
  for (const LoraModule& m : a->modules) {
    std::vector<double>& W = c.tensors.at(m.module + ".weight").v;
    const int64_t out = m.b.size(0), in = m.a.size(1);
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i) {
        double s = 0;
        for (int64_t k = 0; k < a->r; ++k) s += m.b[o][k].item<double>() * m.a[k][i].item<double>();
        W[size_t(o * in + i)] += a->alpha / double(a->r) * s;
      }
  }
  const hftest::Mat ref = hftest::Reference(c).Logits(ids);
  double diff = 0, moved = 0;
  const hftest::Mat base = hftest::Reference(hftest::MakeDense("llama")).Logits(ids);
  for (size_t t = 0; t < ref.size(); ++t)
    for (size_t v = 0; v < ref[t].size(); ++v) {
      diff = std::max(diff, std::fabs(ours[int64_t(t)][int64_t(v)].item<double>() - ref[t][v]));
      moved = std::max(moved, std::fabs(base[t][v] - ref[t][v]));
    }
  EXPECT_LT(diff, 1e-6);   // float32 adapter values, fp64 compute
  EXPECT_GT(moved, 1e-2);  // the adapter changes the logits: the comparison can fail
}

TEST(HfPeftAdapter, WrongRankIsRefused) {
  const std::string dir = TempDir();
  PeftLoraAdapter a = RandomAdapter();
  a.modules[0].a = torch::randn({3, 32});
  ASSERT_TRUE(WritePeftAdapter(dir, a).ok());
  Expected<PeftLoraAdapter> back = ReadPeftAdapter(dir);
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(back.status().code(), ErrorCode::kBadInput);
  EXPECT_NE(back.status().message().find("lora_A.weight.shape"), std::string::npos) << back.status().message();
}

TEST(HfPeftAdapter, FusedParametersRoundTripAsTargetParameters) {
  // A fused parameter's wrapper (A [r*E, in], B [out, r*E], E = 2) beside a module: the config lists
  // it in target_parameters, not target_modules; the file reads back with both; a file without one
  // has no target_parameters; B whose columns are not A's rows is refused naming its key.
  const std::string dir = TempDir(), plain = TempDir(), bad = TempDir();
  ASSERT_TRUE(WritePeftAdapter(plain, RandomAdapter()).ok());
  EXPECT_FALSE(
      nlohmann::json::parse(std::ifstream(plain + "/adapter_config.json")).contains("target_parameters"));
  PeftLoraAdapter a = RandomAdapter();
  a.modules.push_back({"model.layers.0.mlp.experts", torch::randn({8, 16}), torch::randn({32, 8})});
  a.target_parameters = {"mlp.experts.down_proj"};
  ASSERT_TRUE(WritePeftAdapter(dir, a).ok());
  const nlohmann::json cfg = nlohmann::json::parse(std::ifstream(dir + "/adapter_config.json"));
  EXPECT_EQ(cfg["target_parameters"], nlohmann::json({"mlp.experts.down_proj"}));
  EXPECT_EQ(cfg["target_modules"], nlohmann::json({"self_attn.q_proj", "self_attn.v_proj"}));
  Expected<PeftLoraAdapter> back = ReadPeftAdapter(dir);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->target_parameters, a.target_parameters);
  ASSERT_EQ(back->modules.size(), 5u);
  EXPECT_EQ(back->modules[0].module, "model.layers.0.mlp.experts");
  EXPECT_TRUE(back->modules[0].b.equal(a.modules.back().b));
  a.modules.back().b = torch::randn({32, 12});
  ASSERT_TRUE(WritePeftAdapter(bad, a).ok());
  Expected<PeftLoraAdapter> refused = ReadPeftAdapter(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("mlp.experts.lora_B.weight"), std::string::npos)
      << refused.status().message();
}

}  // namespace
}  // namespace onboard
