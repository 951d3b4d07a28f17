// The ONNX layer analysis reads a KDA kernel exported as one custom-domain op (com.onboard::ChunkKDA in
// the real torch.onnx.export kda_gated_tiny.onnx, scripts/export_onnx_fusion_fixtures.py) as a KDA
// mixer, with the heads and head dims its truth file records. Negatives: the same graph without the
// op (or with the op under another name) is no KDA; a malformed op is kBadInput naming the node and
// the field.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <onnx/onnx_pb.h>
#include <nlohmann/json.hpp>

#include "parsers/onnx_model.h"

namespace onboard {
namespace {

const std::string kData = std::string(ONBOARD_TEST_DATA) + "/onnx/";
const std::string kOp0 = "/layers.0/self_attn/ChunkKDA";

onnx::ModelProto LoadKda() {
  std::ifstream in(kData + "kda_gated_tiny.onnx", std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromString(os.str()));
  return m;
}

onnx::NodeProto* FindNode(onnx::ModelProto& m, const std::string& name) {
  for (auto& n : *m.mutable_graph()->mutable_node())
    if (n.name() == name) return &n;
  return nullptr;
}

onnx::AttributeProto* FindAttr(onnx::NodeProto* n, const std::string& name) {
  for (auto& a : *n->mutable_attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

Expected<OnnxModelInfo> Analyze(const onnx::ModelProto& m, const std::string& origin) {
  return AnalyzeOnnxBytes(m.SerializeAsString(), origin);
}

std::string Warnings(const ModelIR& ir) {
  std::string s;
  for (const auto& w : ir.warnings) s += "  " + w + "\n";
  return s;
}

TEST(OnnxKdaMixer, RealExportReadsTheChunkKdaOpAsAKdaMixer) {
  std::ifstream tf(kData + "kda_gated_tiny.truth.json");
  ASSERT_TRUE(tf.good());
  const nlohmann::json want = nlohmann::json::parse(tf).at("mixer");
  auto info = AnalyzeOnnxFile(kData + "kda_gated_tiny.onnx");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  const ModelIR& ir = info->ir;
  ASSERT_EQ(ir.layers.size(), 2u);
  for (const LayerSpec& l : ir.layers) {
    const AttentionSpec& a = l.attn;
    EXPECT_EQ(MixerKindName(a.kind), want.at("kind").get<std::string>()) << "layer " << l.index;
    EXPECT_EQ(a.num_heads, want.at("num_heads").get<int64_t>());
    EXPECT_EQ(a.num_kv_heads, a.num_heads);
    EXPECT_EQ(a.head_dim, want.at("head_dim").get<int64_t>());
    EXPECT_EQ(a.num_v_heads, want.at("num_v_heads").get<int64_t>());
    EXPECT_EQ(a.v_head_dim, want.at("v_head_dim").get<int64_t>());
    EXPECT_EQ(GateFormName(a.gate_form), want.at("gate_form").get<std::string>());
    EXPECT_EQ(a.full_rank_gate, want.at("full_rank_gate").get<bool>());
    EXPECT_EQ(a.output_gate, want.at("output_gate").get<bool>());
    EXPECT_EQ(a.conv_kernel, 0);
    // The mixer's seven projections are not taken for the MLP's.
    EXPECT_EQ(l.channel, ChannelKind::kDenseMLP);
    EXPECT_EQ(ActivationName(l.mlp.act), want.at("mlp").get<std::string>());
    EXPECT_EQ(l.mlp.intermediate, want.at("intermediate_size").get<int64_t>());
  }
  EXPECT_EQ(Warnings(ir).find("no softmax attention"), std::string::npos) << Warnings(ir);
}

// The IR's KDA parameter formula counts a dt_bias [HV K], an o_norm [V] and a per-head A_log [HV];
// this export has a per-channel A_log [H K] and neither of the others, so the count differs and the
// reader says by how much instead of hiding it.
TEST(OnnxKdaMixer, ParameterFormulaGapIsAWarningWithBothCounts) {
  auto info = AnalyzeOnnxFile(kData + "kda_gated_tiny.onnx");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  const int64_t modelled = ComputeStats(info->ir, 1).total_params;
  ASSERT_NE(modelled, info->unique_params);
  const std::string w = Warnings(info->ir);
  EXPECT_NE(w.find("count " + std::to_string(modelled) + ", the graph's weights " +
                   std::to_string(info->unique_params)),
            std::string::npos)
      << w;
  // The llama fixture's formulas match its weights: no such warning.
  auto llama = AnalyzeOnnxFile(kData + "llama_gqa_tiny.onnx");
  ASSERT_TRUE(llama.ok());
  EXPECT_EQ(Warnings(llama->ir).find("parameter formulas"), std::string::npos) << Warnings(llama->ir);
}

// kda_kimi_tiny (the Kimi Linear layer: low-rank gate and output gate, o_norm): the low-rank gates'
// first projections (f_a, g_a) belong to the mixer, not to the MLP, whose 3 linears alone remain.
TEST(OnnxKdaMixer, LowRankGateProjectionsAreTheMixersNotTheMlps) {
  auto info = AnalyzeOnnxFile(kData + "kda_kimi_tiny.onnx");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  std::string notes;
  for (const auto& n : info->notes) notes += n + "\n";
  EXPECT_NE(notes.find("layer 0: dense MLP, 3 linears, width 128"), std::string::npos) << notes;
  EXPECT_NE(notes.find("gate bounded low-rank"), std::string::npos) << notes;
}

TEST(OnnxKdaMixer, GraphWithoutTheOpOrWithAnotherOpNameIsNoKda) {
  {
    onnx::ModelProto m = LoadKda();
    auto* nodes = m.mutable_graph()->mutable_node();
    for (int i = 0; i < nodes->size(); ++i)
      if (nodes->Get(i).op_type() == "ChunkKDA") nodes->DeleteSubrange(i--, 1);
    auto info = Analyze(m, "no_op.onnx");
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    for (const LayerSpec& l : info->ir.layers) EXPECT_NE(l.attn.kind, MixerKind::kKDA) << "layer " << l.index;
  }
  {
    onnx::ModelProto m = LoadKda();
    FindNode(m, kOp0)->set_op_type("SomeOtherKernel");
    auto info = Analyze(m, "renamed.onnx");
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    EXPECT_NE(info->ir.layers[0].attn.kind, MixerKind::kKDA);
    EXPECT_EQ(info->ir.layers[1].attn.kind, MixerKind::kKDA);
  }
  {
    onnx::ModelProto m = LoadKda();  // the standard domain: not a custom kernel
    FindNode(m, kOp0)->set_domain("");
    auto info = Analyze(m, "std_domain.onnx");
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    EXPECT_NE(info->ir.layers[0].attn.kind, MixerKind::kKDA);
  }
}

void ExpectBad(const onnx::ModelProto& m, const std::string& field, const std::string& value) {
  auto r = Analyze(m, "bad_kda.onnx");
  ASSERT_FALSE(r.ok()) << field;
  EXPECT_EQ(r.status().code(), ErrorCode::kBadInput);
  const std::string& msg = r.status().message();
  EXPECT_NE(msg.find("bad_kda.onnx"), std::string::npos) << msg;
  EXPECT_NE(msg.find("graph.node[" + kOp0 + "]." + field), std::string::npos) << msg;
  EXPECT_NE(msg.find("(got " + value), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

TEST(OnnxKdaMixer, MalformedOpIsBadInputNamingTheNodeAndField) {
  {
    onnx::ModelProto m = LoadKda();
    FindNode(m, kOp0)->clear_attribute();
    ExpectBad(m, "attribute.num_heads", "0");
  }
  {
    onnx::ModelProto m = LoadKda();
    FindAttr(FindNode(m, kOp0), "num_heads")->set_i(3);  // does not divide q's 64
    ExpectBad(m, "attribute.num_heads", "3");
  }
  {
    onnx::ModelProto m = LoadKda();
    onnx::AttributeProto* hd = FindNode(m, kOp0)->add_attribute();
    hd->set_name("head_dim");
    hd->set_type(onnx::AttributeProto::INT);
    hd->set_i(16);  // q 64 / 2 heads = 32
    ExpectBad(m, "attribute.head_dim", "16");
  }
  {
    onnx::ModelProto m = LoadKda();
    FindNode(m, kOp0)->mutable_input()->RemoveLast();  // beta dropped
    ExpectBad(m, "input", "4");
  }
  {
    onnx::ModelProto m = LoadKda();
    onnx::AttributeProto* hv = FindNode(m, kOp0)->add_attribute();
    hv->set_name("num_v_heads");
    hv->set_type(onnx::AttributeProto::INT);
    hv->set_i(3);  // not a multiple of 2 heads
    ExpectBad(m, "attribute.num_v_heads", "3");
  }
}

}  // namespace
}  // namespace onboard
