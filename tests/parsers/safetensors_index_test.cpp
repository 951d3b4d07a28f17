// model.safetensors.index.json: the real gpt-oss-120b index (no shards) and a tiny sharded checkpoint.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "parsers/load_model.h"
#include "parsers/safetensors.h"
#include "tests/parsers/safetensors_test_util.h"

namespace onboard {
namespace {

using testing_st::MakeTempDir;
using testing_st::WriteBytes;

const std::string kGptOssIndex = std::string(ONBOARD_TEST_DATA) + "/safetensors/gpt-oss-120b.safetensors.index.json";
const std::string kGptOssConfig = std::string(ONBOARD_TEST_DATA) + "/hf/gpt-oss-120b.config.json";

TEST(SafetensorsIndex, GptOss120bIndexAlone) {
  auto inv = ReadSafetensorsIndex(kGptOssIndex);
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->tensors.size(), 687u);
  EXPECT_EQ(inv->declared_total_bytes, 65248815744);
  EXPECT_EQ(inv->shards.size(), 15u);
  EXPECT_EQ(inv->shards_read, 0);
  EXPECT_FALSE(inv->all_headers);
  const TensorInfo* t = inv->Find("model.layers.25.mlp.experts.gate_up_proj_blocks");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->file, "model-00000-of-00014.safetensors");
  EXPECT_FALSE(t->has_header);
}

TEST(SafetensorsIndex, GptOss120bCrossCheckAgainstConfigAgrees) {
  auto ir = LoadModel(kGptOssConfig);
  ASSERT_TRUE(ir.ok()) << ir.status().ToString();
  auto inv = ReadSafetensorsIndex(kGptOssIndex);
  ASSERT_TRUE(inv.ok());
  CrossCheckReport r = CrossCheckInventory(*inv, *ir);
  EXPECT_TRUE(r.missing.empty()) << r.missing.size() << " missing, first: " << (r.missing.empty() ? "" : r.missing[0]);
  EXPECT_TRUE(r.extra.empty()) << r.extra.size() << " extra, first: " << (r.extra.empty() ? "" : r.extra[0]);
  EXPECT_EQ(r.expected_tensors, 687);
  EXPECT_FALSE(r.shapes_known);
  EXPECT_TRUE(r.agree) << r.Summary();
  // The expected shapes' parameters agree with the IR's own count (MXFP4 blocks unpacked, scales 0).
  EXPECT_EQ(r.expected_params, r.ir_params);
}

// A two-shard tiny llama with its index: headers beside the index fill dtype/shape/bytes.
TEST(SafetensorsIndex, ShardsBesideTheIndexFillShapes) {
  const std::string dir = MakeTempDir();
  auto tensors = testing_st::TinyLlamaTensors();
  std::vector<TensorToWrite> a(tensors.begin(), tensors.begin() + 10), b(tensors.begin() + 10, tensors.end());
  ASSERT_TRUE(WriteSafetensorsFile(dir + "/model-00001-of-00002.safetensors", a).ok());
  ASSERT_TRUE(WriteSafetensorsFile(dir + "/model-00002-of-00002.safetensors", b).ok());
  nlohmann::json index;
  uint64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    index["weight_map"][tensors[i].name] =
        i < 10 ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
    total += tensors[i].data.size();
  }
  index["metadata"]["total_size"] = total;
  WriteBytes(dir + "/model.safetensors.index.json", index.dump());

  auto inv = ReadSafetensorsIndex(dir + "/model.safetensors.index.json");
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->shards_read, 2);
  EXPECT_TRUE(inv->all_headers);
  EXPECT_EQ(inv->DataBytes(), total);
  EXPECT_TRUE(inv->warnings.empty()) << inv->warnings[0];
  const TensorInfo* k = inv->Find("model.layers.1.self_attn.k_proj.weight");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->shape, (std::vector<int64_t>{16, 32}));
  EXPECT_EQ(k->dtype, DType::kBF16);

  CrossCheckReport r = CrossCheckInventory(*inv, testing_st::TinyLlamaIR());
  EXPECT_TRUE(r.shapes_known);
  EXPECT_TRUE(r.agree) << r.Summary();

  // A tensor the index places in a shard whose header lacks it.
  index["weight_map"]["model.ghost.weight"] = "model-00001-of-00002.safetensors";
  WriteBytes(dir + "/model.safetensors.index.json", index.dump());
  auto bad = ReadSafetensorsIndex(dir + "/model.safetensors.index.json");
  ASSERT_EQ(bad.status().code(), ErrorCode::kBadInput);
  EXPECT_NE(bad.status().message().find("weight_map.model.ghost.weight"), std::string::npos);
  EXPECT_NE(bad.status().message().find("model-00001-of-00002.safetensors"), std::string::npos);
}

TEST(SafetensorsIndex, BadIndexIsBadInput) {
  struct Case {
    const char* text;
    const char* field;
    const char* value;
  };
  const Case cases[] = {
      {"[1]", "(document)", "[1]"},
      {"{\"weight_map\": 3}", "weight_map", "3"},
      {"{\"weight_map\": {\"w\": \"../../etc/passwd\"}}", "weight_map.w", "../../etc/passwd"},
      {"{\"weight_map\": {\"w\": 7}}", "weight_map.w", "7"},
      {"{\"metadata\": {\"total_size\": -5}, \"weight_map\": {}}", "metadata.total_size", "-5"},
      {"{\"weight_map\": {\"w\": \"a.safetensors\"", "(document)", "weight_map"},
  };
  for (const Case& c : cases) {
    auto r = ParseSafetensorsIndexText(c.text, "idx.json", "");
    ASSERT_EQ(r.status().code(), ErrorCode::kBadInput) << c.text;
    const std::string& m = r.status().message();
    EXPECT_NE(m.find("idx.json"), std::string::npos) << m;
    EXPECT_NE(m.find(c.field), std::string::npos) << m;
    EXPECT_NE(m.find(c.value), std::string::npos) << m;
  }
  EXPECT_EQ(ReadSafetensorsIndex("/nonexistent/model.safetensors.index.json").status().code(), ErrorCode::kNotFound);
}

}  // namespace
}  // namespace onboard
