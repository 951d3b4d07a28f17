// CrossCheckInventory on a tiny llama-shaped IR: agreement, then missing / extra / shape and
// parameter-count differences, each from a real file written into a temp dir.
#include <gtest/gtest.h>

#include <algorithm>

#include "parsers/safetensors.h"
#include "tests/parsers/safetensors_test_util.h"

namespace onboard {
namespace {

using testing_st::TinyLlamaIR;
using testing_st::TinyLlamaTensors;
using testing_st::Zeros;

TensorInventory WriteAndRead(const std::vector<TensorToWrite>& tensors) {
  const std::string path = testing_st::MakeTempDir() + "/model.safetensors";
  EXPECT_TRUE(WriteSafetensorsFile(path, tensors).ok());
  auto inv = ReadSafetensorsFile(path);
  EXPECT_TRUE(inv.ok()) << inv.status().ToString();
  return inv.ok() ? *inv : TensorInventory{};
}

TEST(SafetensorsCrossCheck, MatchingCheckpointAgrees) {
  const ModelIR ir = TinyLlamaIR();
  CrossCheckReport r = CrossCheckInventory(WriteAndRead(TinyLlamaTensors()), ir);
  EXPECT_TRUE(r.agree) << r.Summary();
  EXPECT_TRUE(r.shapes_known);
  EXPECT_EQ(r.expected_tensors, 21);
  EXPECT_EQ(r.inventory_tensors, 21);
  // 64*32 embed + 2 * (2*32 norms + 32*32*2 q,o + 16*32*2 k,v + 3*48*32 mlp) + 32 + 64*32 head
  const int64_t expected = 2048 + 2 * (64 + 2048 + 1024 + 4608) + 32 + 2048;
  EXPECT_EQ(r.ir_params, expected);
  EXPECT_EQ(r.inventory_params, expected);
  EXPECT_EQ(r.param_diff, 0);
}

TEST(SafetensorsCrossCheck, ReportsMissingExtraShapeAndParamDiff) {
  auto tensors = TinyLlamaTensors();
  // Missing: drop layer 1's v_proj.  Extra: an unknown tensor.  Shape: layer 0 up_proj is 40 wide.
  tensors.erase(std::remove_if(tensors.begin(), tensors.end(),
                               [](const TensorToWrite& t) { return t.name == "model.layers.1.self_attn.v_proj.weight"; }),
                tensors.end());
  tensors.push_back(Zeros("model.layers.0.mlp.adapter.weight", {4, 32}));
  for (auto& t : tensors)
    if (t.name == "model.layers.0.mlp.up_proj.weight") t = Zeros(t.name, {40, 32});

  CrossCheckReport r = CrossCheckInventory(WriteAndRead(tensors), TinyLlamaIR());
  EXPECT_FALSE(r.agree);
  EXPECT_EQ(r.missing, (std::vector<std::string>{"model.layers.1.self_attn.v_proj.weight"}));
  EXPECT_EQ(r.extra, (std::vector<std::string>{"model.layers.0.mlp.adapter.weight"}));
  ASSERT_EQ(r.shape_mismatch.size(), 1u);
  EXPECT_NE(r.shape_mismatch[0].find("expected [48,32] got [40,32]"), std::string::npos) << r.shape_mismatch[0];
  // -16*32 (v_proj) + 4*32 (adapter) - 8*32 (narrower up_proj)
  EXPECT_EQ(r.param_diff, -512 + 128 - 256);
  EXPECT_NE(r.Summary().find("DISAGREE"), std::string::npos);
}

TEST(SafetensorsCrossCheck, TiedEmbeddingsExpectNoHead) {
  ModelIR ir = TinyLlamaIR();
  ir.tied_embeddings = true;
  CrossCheckReport r = CrossCheckInventory(WriteAndRead(TinyLlamaTensors()), ir);
  EXPECT_EQ(r.extra, (std::vector<std::string>{"lm_head.weight"}));
  EXPECT_EQ(r.param_diff, 64 * 32);
}

}  // namespace
}  // namespace onboard
