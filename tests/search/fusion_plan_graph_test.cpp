// The fusion plan fed from an exported graph (search/fusion_plan_graph.h): the llama fixture confirms
// its IR terms and adds softmax attention; a graph whose SiLU sigmoid is also a graph output loses
// layer 0's gated-activation term, with the graph's reason; a post-LN encoder loses its norm prologues.
#include "search/fusion_plan_graph.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include <onnx/onnx_pb.h>

#include "parsers/load_model.h"
#include "parsers/onnx_model.h"
#include "search/fusion_plan_json.h"

namespace onboard {
namespace {

const std::string kOnnx = std::string(ONBOARD_TEST_DATA) + "/onnx/";

// The graph of `path` as a protobuf to edit (empty when unreadable).
onnx::ModelProto LoadProto(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  onnx::ModelProto mp;
  if (!mp.ParseFromString(os.str())) mp.Clear();
  return mp;
}

// The plan of the model in `path`, checked against its graph.
Expected<FusionPlan> GraphPlanOf(const std::string& path) {
  ONBOARD_ASSIGN_OR_RETURN(ModelIR m, LoadModel(path));
  return PlanFusionsForModelFile(m, path, FusionOptions{});
}

int CountKind(const std::vector<FusionTerm>& ts, FusionKind k) {
  int n = 0;
  for (const FusionTerm& t : ts) n += t.kind == k;
  return n;
}

TEST(FusionPlanGraph, LlamaGraphConfirmsTheIrTermsAndAddsSoftmaxAttention) {
  const std::string path = kOnnx + "llama_gqa_tiny.onnx";
  auto m = LoadModel(path);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  FusionOptions o;
  o.seq = 1024;
  const FusionPlan ir = PlanFusions(*m, o);
  bool from_graph = false;
  auto g = PlanFusionsForModelFile(*m, path, o, &from_graph);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_TRUE(from_graph);
  ASSERT_EQ(g->layers.size(), ir.layers.size());
  for (size_t i = 0; i < ir.layers.size(); ++i) {
    const LayerFusion& l = g->layers[i];
    EXPECT_TRUE(l.blocked.empty()) << "layer " << i;
    ASSERT_EQ(l.terms.size(), ir.layers[i].terms.size() + 1) << "layer " << i;
    const FusionTerm& s = l.terms.back();
    EXPECT_EQ(s.kind, FusionKind::kSoftmaxAttention);
    // Scores after the QK^T MatMul, the scale, the mask and the softmax: 2 x n x H x seq x 2 B.
    const double H = static_cast<double>(m->layers[i].attn.num_heads);
    EXPECT_GT(s.bytes_saved, 0);
    EXPECT_DOUBLE_EQ(std::fmod(s.bytes_saved, 2 * H * 1024 * 2), 0.0) << s.formula;
    EXPECT_GE(s.launches_saved, 2);
  }
  EXPECT_GT(g->SavedBytesPerToken(), ir.SavedBytesPerToken());
}

TEST(FusionPlanGraph, SigmoidAlsoAGraphOutputBlocksLayerZerosGatedActivation) {
  // The negative fixture (the llama graph edited through the protobuf API).
  onnx::ModelProto mp = LoadProto(kOnnx + "llama_gqa_tiny.onnx");
  ASSERT_GT(mp.graph().node_size(), 0);
  std::string sig;
  for (const auto& n : mp.graph().node())
    if (n.name() == "/layers.0/mlp/Sigmoid") sig = n.output(0);
  ASSERT_FALSE(sig.empty());
  mp.mutable_graph()->add_output()->set_name(sig);
  auto m = LoadModel(kOnnx + "llama_gqa_tiny.onnx");
  ASSERT_TRUE(m.ok());
  auto matches = FindOnnxFusionsInBytes(mp.SerializeAsString(), "edited.onnx");
  ASSERT_TRUE(matches.ok()) << matches.status().ToString();
  const FusionPlan ir = PlanFusions(*m);
  const FusionPlan g = ConfirmFusionsInGraph(ir, *m, *matches);
  EXPECT_EQ(CountKind(g.layers[0].terms, FusionKind::kGatedActivation), 0);
  ASSERT_EQ(CountKind(g.layers[0].blocked, FusionKind::kGatedActivation), 1);
  EXPECT_EQ(g.layers[0].blocked[0].blocked_by, "value " + sig + " is a graph output");
  EXPECT_EQ(CountKind(g.layers[1].terms, FusionKind::kGatedActivation), 1) << "layer 1 still fuses";
  EXPECT_DOUBLE_EQ(ir.layers[0].SavedBytesPerToken() + g.layers[0].terms.back().bytes_saved -
                       g.layers[0].SavedBytesPerToken(),
                   g.layers[0].blocked[0].bytes_saved)
      << "the blocked term leaves the totals";
  // The text and JSON name it.
  EXPECT_NE(FormatFusionPlan(g).find("NOT fused: gated activation"), std::string::npos);
  EXPECT_EQ(FusionPlanJson(g, false)["groups"][0]["blocked"][0]["blocked_by"],
            "value " + sig + " is a graph output");
}

TEST(FusionPlanGraph, PostNormEncoderLosesItsNormPrologues) {
  auto g = GraphPlanOf(kOnnx + "bert_encoder_tiny.onnx");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  int blocked = 0;
  for (const LayerFusion& l : g->layers) blocked += CountKind(l.blocked, FusionKind::kNormLinearPrologue);
  EXPECT_GT(blocked, 0);
}

// Blocked kNormLinearPrologue terms of one layer: "attention" / "mlp" per term, by its target.
std::vector<std::string> BlockedNorms(const LayerFusion& l) {
  std::vector<std::string> out;
  for (const FusionTerm& t : l.blocked)
    if (t.kind == FusionKind::kNormLinearPrologue) out.push_back(t.feeds_channel ? "mlp" : "attention");
  return out;
}

// A blocked norm blocks the term of what it feeds, not the term at its graph position: the real
// parallel-block export (scripts/export_onnx_fusion_fixtures.py) traces the MLP branch first and in
// layer 1 reuses the attention's normed input as the residual; the post-LN encoder's one norm match per
// layer is the FFN's. Matching by graph order blocks the other term in both.
TEST(FusionPlanGraph, NormTermsAreMatchedByWhatTheNormFeeds) {
  using V = std::vector<std::string>;
  const std::string par = kOnnx + "parallel_block_tiny.onnx";
  auto m = LoadModel(par);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto g = PlanFusionsForModelFile(*m, par, FusionOptions{});
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->layers.size(), 2u);
  EXPECT_EQ(BlockedNorms(g->layers[0]), V{});
  EXPECT_EQ(BlockedNorms(g->layers[1]), V{"attention"});
  int channel_norms = 0;
  for (const FusionTerm& t : g->layers[1].terms)
    channel_norms += t.kind == FusionKind::kNormLinearPrologue && t.feeds_channel;
  EXPECT_EQ(channel_norms, 1) << "layer 1's FFN norm still fuses";

  const std::string bert = kOnnx + "bert_encoder_tiny.onnx";
  auto b = LoadModel(bert);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  auto gb = PlanFusionsForModelFile(*b, bert, FusionOptions{});
  ASSERT_TRUE(gb.ok()) << gb.status().ToString();
  for (const LayerFusion& l : gb->layers) EXPECT_EQ(BlockedNorms(l), V{"mlp"}) << "bert layer " << l.layer;
}

// The real KDA export (com.onboard::ChunkKDA, read as a KDA mixer by parsers/onnx_kda_mixer.cpp): each
// layer's plan has the KDA prologue's three terms with 2 heads x 32 (gate 2 x 64 x 4 B, q/k 2 x 128 x
// 2 B, beta 2 x 2 x 2 B). Layer 0's beta sigmoid is read only by the kernel: all three fuse. Layer 1's
// beta also scales v: its beta term is blocked with the graph's reason, the gate and q/k terms stay.
// Negative: the graph without the op has no KDA prologue term at all.
TEST(FusionPlanGraph, KdaExportPlansTheKdaPrologueAndBlocksOnlyTheSharedBetaSigmoid) {
  const std::string path = kOnnx + "kda_gated_tiny.onnx";
  auto g = GraphPlanOf(path);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->layers.size(), 2u);
  auto kda_bytes = [](const std::vector<FusionTerm>& ts, bool beta) {
    double b = 0;
    for (const FusionTerm& t : ts)
      if (t.kind == FusionKind::kKdaPrologue && t.beta_sigmoid == beta) b += t.bytes_saved;
    return b;
  };
  const LayerFusion& l0 = g->layers[0];
  EXPECT_EQ(CountKind(l0.terms, FusionKind::kKdaPrologue), 3);
  EXPECT_TRUE(l0.blocked.empty());
  EXPECT_DOUBLE_EQ(kda_bytes(l0.terms, false), 2 * 64 * 4 + 2 * 128 * 2);
  EXPECT_DOUBLE_EQ(kda_bytes(l0.terms, true), 2 * 2 * 2);
  const LayerFusion& l1 = g->layers[1];
  EXPECT_EQ(CountKind(l1.terms, FusionKind::kKdaPrologue), 2);
  EXPECT_DOUBLE_EQ(kda_bytes(l1.terms, false), 2 * 64 * 4 + 2 * 128 * 2);
  ASSERT_EQ(CountKind(l1.blocked, FusionKind::kKdaPrologue), 1);
  EXPECT_TRUE(l1.blocked[0].beta_sigmoid);
  EXPECT_NE(l1.blocked[0].blocked_by.find("/layers.1/self_attn/"), std::string::npos)
      << l1.blocked[0].blocked_by;
  EXPECT_NE(FormatFusionPlan(*g).find("NOT fused: KDA prologue    beta sigmoid -> KDA kernel"),
            std::string::npos)
      << FormatFusionPlan(*g);

  onnx::ModelProto mp = LoadProto(path);
  ASSERT_GT(mp.graph().node_size(), 0);
  auto* nodes = mp.mutable_graph()->mutable_node();
  for (int i = 0; i < nodes->size(); ++i)
    if (nodes->Get(i).op_type() == "ChunkKDA") nodes->DeleteSubrange(i--, 1);
  auto no_op = ParseOnnxBytes(mp.SerializeAsString(), "no_kda_op.onnx");
  ASSERT_TRUE(no_op.ok()) << no_op.status().ToString();
  for (const LayerFusion& l : PlanFusions(*no_op).layers)
    EXPECT_EQ(CountKind(l.terms, FusionKind::kKdaPrologue), 0) << "layer " << l.layer;
}

TEST(FusionPlanGraph, ConfigModelsUseTheIrPlanOnly) {
  auto m = LoadModel(std::string(ONBOARD_TEST_DATA) + "/hf/flagship.config.json");
  ASSERT_TRUE(m.ok());
  bool from_graph = true;
  auto g = PlanFusionsForModelFile(*m, std::string(ONBOARD_TEST_DATA) + "/hf/flagship.config.json", {},
                                   &from_graph);
  ASSERT_TRUE(g.ok());
  EXPECT_FALSE(from_graph);
  EXPECT_EQ(FormatFusionPlan(*g), FormatFusionPlan(PlanFusions(*m)));
}

}  // namespace
}  // namespace onboard
