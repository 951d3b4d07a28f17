// Hostile checkpoints: each is refused as kBadInput (exit 2) with a message naming the file, the
// tensor and the expected vs actual value.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "backends/hf_model.h"
#include "tests/backends/hf_test_checkpoint.h"
#include "tests/parsers/safetensors_test_util.h"

namespace onboard {
namespace {

using hftest::Checkpoint;

std::string HostileTempDir() {
  std::string t = "/tmp/onboard_hfbad_XXXXXX";
  return mkdtemp(&t[0]);
}

// Opens and maps `dir`; returns the first error (Ok when everything loads).
Status Load(const std::string& dir) {
  Expected<HfForwardConfig> cfg = ReadHfForwardConfig(dir);
  if (!cfg.ok()) return cfg.status();
  Expected<SafetensorsCheckpoint> ck = SafetensorsCheckpoint::Open(dir);
  if (!ck.ok()) return ck.status();
  Expected<HfModelWeights> w = MapHfWeights(*cfg, *ck, {}, torch::kFloat);
  return w.ok() ? Status::Ok() : w.status();
}

void ExpectBad(const Status& st, const std::vector<std::string>& parts) {
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), ErrorCode::kBadInput) << st.message();
  EXPECT_EQ(ExitCodeFor(st.code()), 2);
  for (const std::string& p : parts) EXPECT_NE(st.message().find(p), std::string::npos) << st.message() << " lacks " << p;
}

TEST(HfHostileCheckpoint, GoodCheckpointLoads) {
  const std::string dir = HostileTempDir();
  hftest::MakeDense("llama").Write(dir);
  EXPECT_TRUE(Load(dir).ok()) << Load(dir).message();
}

TEST(HfHostileCheckpoint, ShapeMismatchNamesTensorExpectedAndActual) {
  Checkpoint c = hftest::MakeDense("llama");
  c.Add("model.layers.1.self_attn.k_proj.weight", {8, 32}, 0.1);
  const std::string dir = HostileTempDir();
  c.Write(dir);
  ExpectBad(Load(dir), {dir + "/model.safetensors", "model.layers.1.self_attn.k_proj.weight", "expected [16,32]", "[8,32]"});
}

TEST(HfHostileCheckpoint, MissingTensorNamesItAndItsShape) {
  Checkpoint c = hftest::MakeDense("llama");
  c.tensors.erase("model.layers.0.mlp.down_proj.weight");
  const std::string dir = HostileTempDir();
  c.Write(dir);
  ExpectBad(Load(dir), {dir, "model.layers.0.mlp.down_proj.weight", "missing", "[32,48]"});
}

TEST(HfHostileCheckpoint, UnmappedTensorIsNamed) {
  Checkpoint c = hftest::MakeDense("qwen3");
  c.Add("model.layers.0.self_attn.rogue.weight", {4}, 0.1);
  const std::string dir = HostileTempDir();
  c.Write(dir);
  ExpectBad(Load(dir), {"model.layers.0.self_attn.rogue.weight", "not mapped"});
}

TEST(HfHostileCheckpoint, DtypeLyingAboutByteCount) {
  const std::string dir = HostileTempDir();
  hftest::MakeDense("llama").Write(dir);
  // Replace the weights with a file whose header says BF16 [64,32] (4096 bytes) over 2048 bytes.
  testing_st::WriteBytes(dir + "/model.safetensors",
                         testing_st::RawFile(R"({"model.embed_tokens.weight":{"dtype":"BF16","shape":[64,32],"data_offsets":[0,2048]}})",
                                             std::string(2048, '\0')));
  ExpectBad(Load(dir), {dir + "/model.safetensors", "model.embed_tokens.weight", "4096 bytes expected", "[0,2048]"});
}

TEST(HfHostileCheckpoint, OverlappingOffsets) {
  const std::string dir = HostileTempDir();
  hftest::MakeDense("llama").Write(dir);
  testing_st::WriteBytes(dir + "/model.safetensors",
                         testing_st::RawFile(R"({"a":{"dtype":"F32","shape":[8],"data_offsets":[0,32]},)"
                                             R"("b":{"dtype":"F32","shape":[8],"data_offsets":[16,48]}})",
                                             std::string(48, '\0')));
  ExpectBad(Load(dir), {dir + "/model.safetensors", "b.data_offsets", "overlaps tensor 'a'"});
}

TEST(HfHostileCheckpoint, IndexNamingMissingShard) {
  const std::string dir = HostileTempDir();
  hftest::MakeDense("llama").Write(dir, 3);
  std::remove((dir + "/model-00002-of-00003.safetensors").c_str());
  ExpectBad(Load(dir), {dir + "/model.safetensors.index.json", "model-00002-of-00003.safetensors", "not in the directory"});
}

TEST(HfHostileCheckpoint, TensorInAnotherShardThanIndexSays) {
  const std::string dir = HostileTempDir();
  Checkpoint c = hftest::MakeDense("llama");
  c.Write(dir, 2);
  // Point one name at the other shard.
  std::ifstream in(dir + "/model.safetensors.index.json");
  nlohmann::json idx = nlohmann::json::parse(in);
  std::string& s = idx["weight_map"]["model.norm.weight"].get_ref<std::string&>();
  s = s == "model-00001-of-00002.safetensors" ? "model-00002-of-00002.safetensors" : "model-00001-of-00002.safetensors";
  std::ofstream(dir + "/model.safetensors.index.json") << idx.dump();
  ExpectBad(Load(dir), {"model.norm.weight", "not in the shard's header"});
}

TEST(HfHostileCheckpoint, UnsupportedFamilyNamesModelType) {
  Checkpoint c = hftest::MakeDense("llama");
  c.config["model_type"] = "minimax_m2";
  c.config["num_local_experts"] = 4;
  c.config["num_experts_per_tok"] = 2;
  const std::string dir = HostileTempDir();
  c.Write(dir);
  ExpectBad(Load(dir), {"model_type", "minimax_m2"});
}

}  // namespace
}  // namespace onboard
