// Fusable patterns in the PyTorch-exported fixtures (tests/data/onnx), and the same graphs edited through
// the protobuf API so that a pattern is broken (an intermediate with a second reader) and must not fuse.
#include "parsers/onnx_fusion_patterns.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include <onnx/onnx_pb.h>
#include <nlohmann/json.hpp>

#include "parsers/onnx_model.h"

namespace onboard {
namespace {

const std::string kData = std::string(ONBOARD_TEST_DATA) + "/onnx/";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

onnx::ModelProto Load(const std::string& name) {
  onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromString(ReadAll(kData + name)));
  return m;
}

std::vector<GraphFusionMatch> Find(const onnx::ModelProto& m, const std::string& origin) {
  auto r = FindOnnxFusionsInBytes(m.SerializeAsString(), origin);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::vector<GraphFusionMatch>{};
}

// (layer, pattern) -> {fusable, blocked} counts.
std::map<std::pair<int64_t, GraphPattern>, std::pair<int, int>> Count(
    const std::vector<GraphFusionMatch>& ms) {
  std::map<std::pair<int64_t, GraphPattern>, std::pair<int, int>> c;
  for (const auto& m : ms) (m.fusable ? c[{m.layer, m.pattern}].first : c[{m.layer, m.pattern}].second)++;
  return c;
}

const onnx::NodeProto* NodeNamed(const onnx::ModelProto& m, const std::string& name) {
  for (const auto& n : m.graph().node())
    if (n.name() == name) return &n;
  return nullptr;
}

TEST(OnnxFusionPatterns, LlamaLayersHaveEveryDecoderPatternFusable) {
  auto r = FindOnnxFusionsInFile(kData + "llama_gqa_tiny.onnx");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const auto c = Count(*r);
  for (int64_t l : {0, 1}) {
    // input_layernorm -> q/k/v and post_attention_layernorm -> gate/up; SiLU(gate) * up; softmax(QK^T)V.
    EXPECT_EQ(c.at({l, GraphPattern::kNormLinear}), std::make_pair(2, 0)) << "layer " << l;
    EXPECT_EQ(c.at({l, GraphPattern::kSiluMul}), std::make_pair(1, 0)) << "layer " << l;
    EXPECT_EQ(c.at({l, GraphPattern::kSoftmaxAttention}), std::make_pair(1, 0)) << "layer " << l;
  }
  for (const auto& m : *r) {
    if (m.pattern == GraphPattern::kNormLinear && m.layer == 0 && m.nodes.size() == 4) {
      EXPECT_NE(m.nodes[1].find("q_proj"), std::string::npos)
          << m.nodes[1];  // three projections read the norm
    }
    if (m.pattern == GraphPattern::kSiluMul && m.layer == 0) {
      EXPECT_EQ(m.nodes.front(), "/layers.0/mlp/gate_proj/MatMul");
      EXPECT_EQ(m.nodes.back(), "/layers.0/mlp/Mul_1");
      EXPECT_EQ(m.intermediates, 4);  // gate out, sigmoid, silu, up out
    }
  }
}

TEST(OnnxFusionPatterns, SigmoidAlsoAGraphOutputDoesNotFuse) {
  // The negative fixture: llama_gqa_tiny with layer 0's SiLU sigmoid also exported as a graph output.
  onnx::ModelProto m = Load("llama_gqa_tiny.onnx");
  const onnx::NodeProto* sig = NodeNamed(m, "/layers.0/mlp/Sigmoid");
  ASSERT_NE(sig, nullptr);
  m.mutable_graph()->add_output()->set_name(sig->output(0));
  const auto ms = Find(m, "sigmoid_exported.onnx");
  const auto c = Count(ms);
  EXPECT_EQ(c.at({0, GraphPattern::kSiluMul}), std::make_pair(0, 1));
  EXPECT_EQ(c.at({1, GraphPattern::kSiluMul}), std::make_pair(1, 0)) << "layer 1 is untouched";
  for (const auto& x : ms) {
    if (x.pattern == GraphPattern::kSiluMul && x.layer == 0) {
      EXPECT_EQ(x.blocker, "value " + sig->output(0) + " is a graph output");
    }
  }
}

TEST(OnnxFusionPatterns, SecondReaderOfTheScoresOrTheNormBlocksThem) {
  onnx::ModelProto m = Load("llama_gqa_tiny.onnx");
  const onnx::NodeProto* soft = NodeNamed(m, "/layers.1/self_attn/Softmax");
  const onnx::NodeProto* norm = NodeNamed(m, "/layers.1/post_attention_layernorm/Mul_1");
  ASSERT_NE(soft, nullptr);
  ASSERT_NE(norm, nullptr);
  const std::string probs = soft->output(0), normed = norm->output(0);
  for (const auto& [in, name] : {std::make_pair(probs, "/layers.1/self_attn/ProbsCopy"),
                                 std::make_pair(normed, "/layers.1/mlp/NormedCopy")}) {
    onnx::NodeProto* extra = m.mutable_graph()->add_node();
    extra->set_op_type("Identity");
    extra->set_name(name);
    extra->add_input(in);
    extra->add_output(std::string(name) + "_out");
  }
  const auto ms = Find(m, "second_reader.onnx");
  const auto c = Count(ms);
  EXPECT_EQ(c.at({1, GraphPattern::kSoftmaxAttention}), std::make_pair(0, 1));
  EXPECT_EQ(c.at({1, GraphPattern::kNormLinear}), std::make_pair(1, 1));
  EXPECT_EQ(c.at({0, GraphPattern::kSoftmaxAttention}), std::make_pair(1, 0));
  for (const auto& x : ms) {
    if (!x.fusable) {
      EXPECT_NE(x.blocker.find("is also read by node /layers.1/"), std::string::npos) << x.blocker;
    }
  }
}

TEST(OnnxFusionPatterns, PostNormEncoderNormIsTheResidualStream) {
  // BERT (post-LN): each LayerNorm output is both the next linears' input and the residual: it must be
  // written, so norm+linear does not fuse; attention and the GELU MLP have no SiLU.
  auto r = FindOnnxFusionsInFile(kData + "bert_encoder_tiny.onnx");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  int norm_fused = 0, norm_blocked = 0, softmax = 0, silu = 0;
  for (const auto& m : *r) {
    // The last layer's norm2 feeds only the head (outside the layers, -1): that one may fuse.
    if (m.pattern == GraphPattern::kNormLinear && m.layer >= 0) (m.fusable ? norm_fused : norm_blocked)++;
    if (m.pattern == GraphPattern::kSoftmaxAttention && m.fusable) ++softmax;
    if (m.pattern == GraphPattern::kSiluMul) ++silu;
  }
  EXPECT_EQ(norm_fused, 0);
  EXPECT_GT(norm_blocked, 0);
  EXPECT_GT(softmax, 0);
  EXPECT_EQ(silu, 0);
}

TEST(OnnxFusionPatterns, SigmoidIntoACustomKernelFusesUnlessReadElsewhere) {
  // A KDA-style export: beta = sigmoid(x) feeding a custom-domain kernel op in layer 0.
  for (bool second_reader : {false, true}) {
    onnx::ModelProto m = Load("llama_gqa_tiny.onnx");
    const onnx::NodeProto* q = NodeNamed(m, "/layers.0/self_attn/q_proj/MatMul");
    ASSERT_NE(q, nullptr);
    onnx::NodeProto* sig = m.mutable_graph()->add_node();
    sig->set_op_type("Sigmoid");
    sig->set_name("/layers.0/self_attn/beta/Sigmoid");
    sig->add_input(q->output(0));
    sig->add_output("beta_sigmoid");
    onnx::NodeProto* kda = m.mutable_graph()->add_node();
    kda->set_op_type("ChunkKDA");
    kda->set_domain("com.onboard");
    kda->set_name("/layers.0/self_attn/ChunkKDA");
    kda->add_input("beta_sigmoid");
    kda->add_output("kda_out");
    if (second_reader) m.mutable_graph()->add_output()->set_name("beta_sigmoid");
    const auto c = Count(Find(m, "kda_beta.onnx"));
    EXPECT_EQ(c.at({0, GraphPattern::kSigmoidIntoKernel}),
              second_reader ? std::make_pair(0, 1) : std::make_pair(1, 0));
  }
}

// The real export of scripts/export_kda_onnx_fixture.py (torch.onnx.export, python3-torch 1.13): the
// KDA recurrence is one com.onboard::ChunkKDA node fed by beta = sigmoid(b_proj(h)). Its truth file
// says per layer whether that sigmoid may run inside the kernel: layer 0 yes; layer 1 no, because its
// beta also scales v (a second reader). The output gate's sigmoid (Sigmoid_1) feeds a Mul, not the
// kernel, so it never matches; the SwiGLU MLPs still do.
TEST(OnnxFusionPatterns, RealKdaExportBetaSigmoidFusesIntoTheKernelUnlessReadElsewhere) {
  std::ifstream tf(kData + "kda_gated_tiny.truth.json");
  ASSERT_TRUE(tf.good());
  const nlohmann::json truth = nlohmann::json::parse(tf);
  auto info = AnalyzeOnnxFile(kData + "kda_gated_tiny.onnx");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->unique_params, truth.at("total_params").get<int64_t>());
  EXPECT_EQ(static_cast<int64_t>(info->ir.layers.size()), truth.at("num_layers").get<int64_t>());
  EXPECT_EQ(info->ir.hidden, truth.at("hidden_size").get<int64_t>());
  EXPECT_EQ(info->ir.vocab, truth.at("vocab_size").get<int64_t>());
  auto r = FindOnnxFusionsInFile(kData + "kda_gated_tiny.onnx");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::map<int64_t, const GraphFusionMatch*> into_kernel;
  for (const auto& m : *r) {
    if (m.pattern != GraphPattern::kSigmoidIntoKernel) continue;
    EXPECT_EQ(into_kernel.count(m.layer), 0u) << "two sigmoid->kernel matches in layer " << m.layer;
    into_kernel[m.layer] = &m;
    EXPECT_EQ(m.nodes.front().find("Sigmoid_1"), std::string::npos) << "the output gate fed no kernel";
  }
  ASSERT_EQ(into_kernel.size(), truth.at("sigmoid_into_kernel").size());
  for (const auto& want : truth.at("sigmoid_into_kernel")) {
    const int64_t l = want.at("layer").get<int64_t>();
    ASSERT_EQ(into_kernel.count(l), 1u) << "layer " << l;
    const GraphFusionMatch& m = *into_kernel.at(l);
    const std::string scope = "/layers." + std::to_string(l) + "/self_attn/";
    EXPECT_EQ(m.nodes.front(), scope + "Sigmoid");
    EXPECT_EQ(m.nodes.back(), scope + "ChunkKDA");
    EXPECT_EQ(m.fusable, want.at("fusable").get<bool>()) << "layer " << l << ": " << m.blocker;
    if (!m.fusable) {
      EXPECT_NE(m.blocker.find("is also read by node " + scope), std::string::npos) << m.blocker;
    }
  }
  const auto c = Count(*r);
  for (int64_t l : {0, 1})
    EXPECT_EQ(c.at({l, GraphPattern::kSiluMul}), std::make_pair(1, 0)) << "layer " << l;
}

const char* FeedsName(NormFeeds f) {
  return f == NormFeeds::kMixer ? "attention" : f == NormFeeds::kChannel ? "mlp" : "unknown";
}

// Per layer, the targets of its norm+linear matches in graph order, with ":blocked" when not fusable.
std::map<int64_t, std::vector<std::string>> NormTargets(const std::vector<GraphFusionMatch>& ms) {
  std::map<int64_t, std::vector<std::string>> out;
  for (const auto& m : ms)
    if (m.pattern == GraphPattern::kNormLinear && m.layer >= 0)
      out[m.layer].push_back(std::string(FeedsName(m.feeds)) + (m.fusable ? "" : ":blocked"));
  return out;
}

// What a norm feeds is read from the structure, on real exports: the usual order (llama, the KDA
// export, the MoE whose FFN norm feeds a router and experts); a post-LN encoder (BERT,
// nn.TransformerEncoderLayer), whose only norm+linear match per layer is norm1 -> linear1, the FFN's
// (its attention's packed in-projection is no plain linear match), which graph order took for the
// attention's; and the parallel-block export whose MLP branch is traced first, so its FFN norm leads
// in graph order. Its truth file says which norm of layer 1 must not fuse (the attention's: its
// output is also the residual).
TEST(OnnxFusionPatterns, NormTargetIsReadFromTheGraphNotFromItsOrder) {
  using V = std::vector<std::string>;
  for (const char* name : {"llama_gqa_tiny", "kda_gated_tiny", "mixtral_moe_tiny"}) {
    auto r = FindOnnxFusionsInFile(kData + name + ".onnx");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const auto t = NormTargets(*r);
    for (int64_t l : {0, 1}) EXPECT_EQ(t.at(l), (V{"attention", "mlp"})) << name << " layer " << l;
  }
  auto bert = FindOnnxFusionsInFile(kData + "bert_encoder_tiny.onnx");
  ASSERT_TRUE(bert.ok());
  for (const auto& [l, targets] : NormTargets(*bert))
    EXPECT_EQ(targets, (V{"mlp:blocked"})) << "bert layer " << l;  // the first norm a layer shows

  std::ifstream tf(kData + "parallel_block_tiny.truth.json");
  ASSERT_TRUE(tf.good());
  const nlohmann::json truth = nlohmann::json::parse(tf);
  auto r = FindOnnxFusionsInFile(kData + "parallel_block_tiny.onnx");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const auto t = NormTargets(*r);
  ASSERT_EQ(t.size(), truth.at("norm_linear").size());
  for (const auto& want : truth.at("norm_linear")) {
    const int64_t l = want.at("layer").get<int64_t>();
    V expected;
    for (const auto& target : want.at("graph_order")) {
      const std::string n = target.get<std::string>();
      expected.push_back(n + (want.at("fusable").at(n).get<bool>() ? "" : ":blocked"));
    }
    EXPECT_EQ(t.at(l), expected) << "parallel_block_tiny layer " << l;
  }
}

TEST(OnnxFusionPatterns, BadFileIsBadInputNamingIt) {
  auto r = FindOnnxFusionsInBytes("not a model", "junk.onnx");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kBadInput);
  EXPECT_NE(r.status().message().find("junk.onnx"), std::string::npos);
  EXPECT_EQ(FindOnnxFusionsInFile(kData + "missing.onnx").status().code(), ErrorCode::kNotFound);
}

}  // namespace
}  // namespace onboard
