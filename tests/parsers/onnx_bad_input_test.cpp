// ONNX reader on hostile or edited input: truncation, random bytes, bad dims, external data, tied
// heads. Edited models start from the llama fixture, changed through the protobuf API.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include <onnx/onnx_pb.h>

#include "parsers/onnx_model.h"

namespace onboard {
namespace {

const std::string kLlama = std::string(ONBOARD_TEST_DATA) + "/onnx/llama_gqa_tiny.onnx";
constexpr int64_t kLlamaParams = 3283200;  // llama_gqa_tiny.truth.json

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

onnx::ModelProto LoadLlama() {
  onnx::ModelProto m;
  const std::string bytes = ReadAll(kLlama);
  EXPECT_TRUE(m.ParseFromString(bytes));
  return m;
}

onnx::TensorProto* FindInit(onnx::ModelProto& m, const std::string& name) {
  for (auto& t : *m.mutable_graph()->mutable_initializer())
    if (t.name() == name) return &t;
  return nullptr;
}

void ExpectBadInput(const Expected<OnnxModelInfo>& r, const std::vector<std::string>& parts) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kBadInput) << r.status().ToString();
  for (const auto& p : parts) EXPECT_NE(r.status().message().find(p), std::string::npos) << r.status().message();
  EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
}

TEST(OnnxBadInput, TruncatedFileIsBadInput) {
  const std::string bytes = ReadAll(kLlama);
  for (size_t cut : {bytes.size() / 2, bytes.size() - 3, size_t(100)})
    ExpectBadInput(AnalyzeOnnxBytes(bytes.substr(0, cut), "cut.onnx"), {"cut.onnx"});
}

TEST(OnnxBadInput, RandomBytesAreBadInput) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    std::string bytes(size_t(64 + trial * 97), '\0');
    for (char& ch : bytes) ch = static_cast<char>(rng() & 0xff);
    ExpectBadInput(AnalyzeOnnxBytes(bytes, "noise.onnx"), {"noise.onnx"});
  }
  ExpectBadInput(AnalyzeOnnxBytes("", "empty.onnx"), {"empty.onnx", "graph"});
}

TEST(OnnxBadInput, NegativeAndOverflowingDimsNameTheInitializer) {
  onnx::ModelProto m = LoadLlama();
  onnx::TensorProto* t = FindInit(m, "onnx::MatMul_1172");
  ASSERT_NE(t, nullptr);
  t->set_dims(0, -256);
  ExpectBadInput(AnalyzeOnnxBytes(m.SerializeAsString(), "neg.onnx"), {"neg.onnx", "onnx::MatMul_1172", "dims", "-256"});
  t->set_dims(0, int64_t(1) << 40);
  t->set_dims(1, int64_t(1) << 40);
  ExpectBadInput(AnalyzeOnnxBytes(m.SerializeAsString(), "big.onnx"),
                 {"big.onnx", "onnx::MatMul_1172", "1099511627776"});
}

TEST(OnnxBadInput, GraphWithoutLayerScopesIsBadInput) {
  onnx::ModelProto m = LoadLlama();
  for (auto& n : *m.mutable_graph()->mutable_node()) n.clear_name();
  ExpectBadInput(AnalyzeOnnxBytes(m.SerializeAsString(), "flat.onnx"), {"flat.onnx", "layers.N"});
  EXPECT_EQ(AnalyzeOnnxFile("/nonexistent/model.onnx").status().code(), ErrorCode::kNotFound);
}

TEST(OnnxExternalData, ExternalInitializersCountFromShapeWithoutReading) {
  onnx::ModelProto m = LoadLlama();
  for (const char* name : {"onnx::MatMul_1252", "embed_tokens.weight"}) {
    onnx::TensorProto* t = FindInit(m, name);
    ASSERT_NE(t, nullptr);
    t->clear_raw_data();
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    auto* loc = t->add_external_data();
    loc->set_key("location");
    loc->set_value("weights.bin");  // does not exist: must never be opened
  }
  auto info = AnalyzeOnnxBytes(m.SerializeAsString(), "external.onnx");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->external_initializers, 2);
  EXPECT_EQ(info->unique_params, kLlamaParams);
  EXPECT_EQ(ComputeStats(info->ir, 16).total_params, kLlamaParams);
  EXPECT_EQ(info->ir.vocab, 1000);
  EXPECT_FALSE(info->ir.tied_embeddings);
}

// A tied head exported as a constant-folded transposed copy of the embedding counts once.
TEST(OnnxTiedHead, TransposedCopyOfEmbeddingIsTiedAndCountedOnce) {
  onnx::ModelProto m = LoadLlama();
  const onnx::TensorProto* embed = FindInit(m, "embed_tokens.weight");
  onnx::TensorProto* head = FindInit(m, "onnx::MatMul_1252");
  ASSERT_TRUE(embed && head);
  const int64_t V = embed->dims(0), H = embed->dims(1);
  ASSERT_EQ(head->dims(0), H);
  const std::string& src = embed->raw_data();
  std::string dst(src.size(), '\0');
  for (int64_t v = 0; v < V; ++v)
    for (int64_t h = 0; h < H; ++h) std::memcpy(&dst[size_t(h * V + v) * 4], &src[size_t(v * H + h) * 4], 4);
  head->set_raw_data(dst);
  auto info = AnalyzeOnnxBytes(m.SerializeAsString(), "tied.onnx");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_TRUE(info->ir.tied_embeddings);
  EXPECT_EQ(info->unique_params, kLlamaParams - V * H);
  EXPECT_EQ(ComputeStats(info->ir, 16).total_params, kLlamaParams - V * H);

  // The same head reading the embedding through a Transpose node: one tensor, two readers.
  onnx::ModelProto t = LoadLlama();
  auto* g = t.mutable_graph();
  for (auto& n : *g->mutable_node())
    if (n.name() == "/lm_head/MatMul") n.set_input(1, "embed_tokens.weight_T");
  auto* tr = g->add_node();
  tr->set_op_type("Transpose");
  tr->set_name("/lm_head/Transpose");
  tr->add_input("embed_tokens.weight");
  tr->add_output("embed_tokens.weight_T");
  auto shared = AnalyzeOnnxBytes(t.SerializeAsString(), "tied_transpose.onnx");
  ASSERT_TRUE(shared.ok()) << shared.status().ToString();
  EXPECT_TRUE(shared->ir.tied_embeddings);
  // The now-unused onnx::MatMul_1252 initializer is still in the file and counts as a stray weight.
  EXPECT_EQ(shared->unique_params, kLlamaParams);
  EXPECT_EQ(shared->ir.extra_params, V * H);
  EXPECT_GE(shared->shared_initializers, 1);
  EXPECT_EQ(ComputeStats(shared->ir, 16).total_params, kLlamaParams);
}

// With the q Reshape's target no longer constant, head_dim comes from the 1/sqrt(d) score scale.
TEST(OnnxHeadDim, FallsBackToTheScoreScaleConstant) {
  onnx::ModelProto m = LoadLlama();
  int edited = 0;
  for (auto& n : *m.mutable_graph()->mutable_node()) {
    const std::string& name = n.name();
    const std::string suffix = "/self_attn/Reshape";
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      n.set_input(1, name.substr(0, name.size() - 7) + "Shape_output_0");  // a runtime shape
      ++edited;
    }
  }
  ASSERT_EQ(edited, 4);
  auto info = AnalyzeOnnxBytes(m.SerializeAsString(), "scale.onnx");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->ir.layers[0].attn.head_dim, 32);
  EXPECT_EQ(info->ir.layers[3].attn.num_kv_heads, 2);
  bool from_scale = false;
  for (const auto& note : info->notes) from_scale = from_scale || note.find("scale constant") != std::string::npos;
  EXPECT_TRUE(from_scale);
}

}  // namespace
}  // namespace onboard
