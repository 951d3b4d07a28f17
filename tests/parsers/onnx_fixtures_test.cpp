// Each ONNX fixture must reproduce EVERY field of its *.truth.json (nested), and its parameter count
// exactly, both counted directly from the graph's weights and through ComputeStats(IR). A truth field
// this test does not know how to read fails loudly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <fstream>

#include <nlohmann/json.hpp>

#include "parsers/onnx_model.h"

namespace onboard {
namespace {

using json = nlohmann::json;

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

const LayerSpec* FirstLayer(const ModelIR& ir, ChannelKind kind) {
  for (const LayerSpec& l : ir.layers)
    if (l.channel == kind) return &l;
  return nullptr;
}

// The observed value of one truth field; nullopt = this test does not know the field.
std::optional<json> Observed(const OnnxModelInfo& info, const std::string& key) {
  const ModelIR& ir = info.ir;
  if (ir.layers.empty()) return json("no layers");
  const LayerSpec& l0 = ir.layers.front();
  const LayerSpec* dense = FirstLayer(ir, ChannelKind::kDenseMLP);
  const LayerSpec* moe = FirstLayer(ir, ChannelKind::kMoE);
  if (key == "attention") return json(Lower(MixerKindName(l0.attn.kind)));
  if (key == "family") return json(ir.family);
  if (key == "head_dim") return json(l0.attn.head_dim);
  if (key == "hidden_size") return json(ir.hidden);
  if (key == "intermediate_size") return json(dense ? dense->mlp.intermediate : moe->moe.expert_intermediate);
  if (key == "mlp") return json(ActivationName(dense ? dense->mlp.act : moe->moe.act));
  if (key == "norm") return json(l0.norm_bias ? "layernorm" : "rmsnorm");
  if (key == "num_heads") return json(l0.attn.num_heads);
  if (key == "num_kv_heads") return json(l0.attn.num_kv_heads);
  if (key == "num_layers") return json(ir.layers.size());
  if (key == "vocab_size") return json(ir.vocab);
  if (key == "total_params") return json(info.unique_params);
  if (key == "kda") {  // the KDA mixer's own fields (kda_kimi_tiny: read from a com.onboard::ChunkKDA op)
    const AttentionSpec& a = l0.attn;
    if (a.kind != MixerKind::kKDA) return json(nullptr);
    return json{{"conv_kernel", a.conv_kernel},
                {"gate_form", GateFormName(a.gate_form)},
                {"gate_lower_bound", a.gate_lower_bound},
                {"full_rank_gate", a.full_rank_gate},
                {"output_gate", a.output_gate},
                {"num_v_heads", a.num_v_heads},
                {"v_head_dim", a.v_head_dim},
                {"qk_norm", a.qk_norm}};
  }
  if (key == "moe") {
    if (moe == nullptr) return json(nullptr);
    return json{{"num_experts", moe->moe.num_experts},
                {"top_k", moe->moe.top_k},
                {"expert_intermediate_size", moe->moe.expert_intermediate}};
  }
  return std::nullopt;
}

// Compares truth against observed, recursing into objects so nested fields are checked one by one.
void ExpectMatches(const json& truth, const json& observed, const std::string& path) {
  if (truth.is_object() && observed.is_object()) {
    for (auto it = truth.begin(); it != truth.end(); ++it) {
      ASSERT_TRUE(observed.contains(it.key())) << path << "." << it.key() << ": field not produced";
      ExpectMatches(*it, observed.at(it.key()), path + "." + it.key());
    }
    EXPECT_EQ(truth.size(), observed.size()) << path << ": observed has fields truth lacks: " << observed.dump();
    return;
  }
  EXPECT_EQ(truth, observed) << path;
}

class OnnxFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(OnnxFixture, ReproducesEveryTruthField) {
  const std::string base = std::string(ONBOARD_TEST_DATA) + "/onnx/" + GetParam();
  std::ifstream tf(base + ".truth.json");
  ASSERT_TRUE(tf.good()) << base << ".truth.json";
  const json truth = json::parse(tf);
  ASSERT_TRUE(truth.is_object());

  auto info = AnalyzeOnnxFile(base + ".onnx");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  std::string notes;
  for (const auto& n : info->notes) notes += "  note: " + n + "\n";
  for (const auto& w : info->ir.warnings) notes += "  warning: " + w + "\n";

  for (auto it = truth.begin(); it != truth.end(); ++it) {
    auto obs = Observed(*info, it.key());
    if (!obs) {
      ADD_FAILURE() << "truth field '" << it.key() << "' is not read by this test: add it to Observed()";
      continue;
    }
    ExpectMatches(*it, *obs, it.key());
  }
  // The IR's own count (ComputeStats) must agree with the direct count from the graph's weights.
  EXPECT_EQ(ComputeStats(info->ir, 128).total_params, truth.at("total_params").get<int64_t>()) << notes;
  // Every layer agrees with layer 0 on the attention shape (these fixtures are homogeneous).
  for (const LayerSpec& l : info->ir.layers) {
    EXPECT_EQ(l.attn.num_heads, info->ir.layers[0].attn.num_heads) << "layer " << l.index;
    EXPECT_EQ(l.attn.num_kv_heads, info->ir.layers[0].attn.num_kv_heads) << "layer " << l.index;
  }
  EXPECT_TRUE(info->ir.warnings.empty()) << notes;
  EXPECT_EQ(info->external_initializers, 0);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, OnnxFixture,
                         ::testing::Values("bert_encoder_tiny", "llama_gqa_tiny", "mixtral_moe_tiny",
                                           "kda_kimi_tiny"));

}  // namespace
}  // namespace onboard
