// `onboard inspect` through the built binary: exit 0 and the flagship's facts; exit 2 with a single
// stderr line naming file, field and value for bad configs; --json; a model directory with a
// safetensors index beside config.json.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tests/cli/onboard_runner.h"

namespace {

using onboard::clitest::Capture;
using onboard::clitest::CliRun;

CliRun Inspect(const std::string& args, Capture capture = Capture::kStdout) {
  return onboard::clitest::RunOnboard("inspect " + args, capture);
}

const std::string kData = std::string(ONBOARD_TEST_DATA) + "/hf/";

int Lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

TEST(InspectCli, FlagshipText) {
  const CliRun r = Inspect(std::string(ONBOARD_SOURCE_DIR) + "/examples/flagship/config.json");
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* s : {"1: KDA", "2-93: 68 KDA", "+ 24 DSA[MLA", "MoE 896x top-16", "latent 3584", "moonvit",
                        "active", "FLOPs/token at seq 4096", "weights"})
    EXPECT_NE(r.out.find(s), std::string::npos) << "missing '" << s << "' in\n" << r.out;
}

TEST(InspectCli, FlagshipJson) {
  const CliRun r = Inspect(kData + "flagship.config.json --json --seq 8192");
  ASSERT_EQ(r.code, 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["layers"].size(), 93u);
  EXPECT_EQ(j["totals"]["seq"], 8192);
  const double total = j["totals"]["params"].get<double>();
  EXPECT_GT(total, 2.70e12);
  EXPECT_LT(total, 2.90e12);
  EXPECT_EQ(j["layers"][3]["mixer"]["kind"], "DSA");
  EXPECT_EQ(j["layers"][0]["mixer"]["kind"], "KDA");
  EXPECT_EQ(j["vision"]["kind"], "moonvit");
}

TEST(InspectCli, FusionPlanTextAndJson) {
  const CliRun r = Inspect(kData + "flagship.config.json --fusion");
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* s : {"fusion plan (activations 2 B", "KDA prologue", "DSA indexer+top-k", "router+top-k+permute",
                        "MoE unpermute+combine", "B/token = ", "model total:"})
    EXPECT_NE(r.out.find(s), std::string::npos) << "missing '" << s << "' in\n" << r.out;
  const CliRun plain = Inspect(kData + "flagship.config.json");
  EXPECT_EQ(plain.out.find("fusion plan"), std::string::npos) << "only with --fusion";
  const CliRun j = Inspect(kData + "flagship.config.json --json --fusion --seq 8192");
  ASSERT_EQ(j.code, 0);
  const nlohmann::json f = nlohmann::json::parse(j.out)["fusion"];
  EXPECT_EQ(f["seq"], 8192);
  EXPECT_EQ(f["layers"].size(), 93u);
  EXPECT_GT(f["bytes_saved_per_token"].get<double>(), 0);
  EXPECT_FALSE(f["groups"].empty());
}

TEST(InspectCli, QuantisedPrecisionFusesEachNormWithItsQuantise) {
  // fp8 / mxfp8 / nvfp4 GEMM inputs: the norms fuse with the quantise step (search/fusion_plan.cpp), not
  // with the GEMM prologue; bf16 (the default) keeps the prologue form. A precision no GEMM takes exits 2.
  const CliRun bf16 = Inspect(kData + "flagship.config.json --fusion");
  ASSERT_EQ(bf16.code, 0) << bf16.out;
  EXPECT_EQ(bf16.out.find("norm+quantise"), std::string::npos) << bf16.out;
  for (const char* p : {"fp8", "mxfp8", "nvfp4"}) {
    const CliRun r = Inspect(kData + "flagship.config.json --fusion --precision " + p);
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("norm+quantise"), std::string::npos) << p << ":\n" << r.out;
  }
  const CliRun bad = Inspect(kData + "flagship.config.json --fusion --precision fp32", Capture::kStderr);
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_EQ(Lines(bad.out), 1) << bad.out;
  EXPECT_NE(bad.out.find("precision"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("fp32"), std::string::npos) << bad.out;
}

TEST(InspectCli, OnnxFusionPlanReadsTheGraph) {
  // The exported graph materialises softmax scores: the plan from the graph adds that fusion.
  const CliRun r = Inspect(std::string(ONBOARD_TEST_DATA) + "/onnx/llama_gqa_tiny.onnx --fusion --seq 1024");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("softmax attention          QK^T -> 2 scale/mask ops -> softmax -> PV"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("NOT fused"), std::string::npos) << r.out;
}

TEST(InspectCli, BadFilesExitTwoWithOneLine) {
  struct Case {
    std::string file;
    std::vector<std::string> words;
  };
  const std::vector<Case> cases = {
      {"bad/truncated.config.json", {"truncated.config.json", "invalid JSON", "line"}},
      {"bad/negative-heads.config.json", {"negative-heads.config.json", "num_attention_heads", "-32"}},
      {"bad/string-hidden.config.json", {"string-hidden.config.json", "hidden_size", "\"2048\""}},
      {"bad/does-not-exist.json", {"does-not-exist.json", "not found"}},
  };
  for (const Case& c : cases) {
    const CliRun r = Inspect(kData + c.file, Capture::kStderr);
    EXPECT_EQ(r.code, 2) << c.file << ": " << r.out;
    EXPECT_EQ(Lines(r.out), 1) << c.file << ": " << r.out;
    for (const std::string& w : c.words) EXPECT_NE(r.out.find(w), std::string::npos) << c.file << ": " << r.out;
  }
  EXPECT_EQ(Inspect(kData + "flagship.config.json --seq 0", Capture::kStderr).code, 2);
}

TEST(InspectCli, OnnxFile) {
  const CliRun r = Inspect(std::string(ONBOARD_TEST_DATA) + "/onnx/llama_gqa_tiny.onnx --json");
  ASSERT_EQ(r.code, 0) << r.out.substr(0, 400);
  EXPECT_EQ(nlohmann::json::parse(r.out)["totals"]["params"], 3283200);  // llama_gqa_tiny.truth.json
}

TEST(InspectCli, DirectoryWithSafetensorsIndexCrossChecks) {
  const std::string dir = ::testing::TempDir() + "inspect_gpt_oss";
  mkdir(dir.c_str(), 0755);
  const auto copy = [](const std::string& from, const std::string& to) {
    std::ifstream in(from, std::ios::binary);
    std::ofstream(to, std::ios::binary) << in.rdbuf();
  };
  copy(kData + "gpt-oss-120b.config.json", dir + "/config.json");
  copy(std::string(ONBOARD_TEST_DATA) + "/safetensors/gpt-oss-120b.safetensors.index.json",
       dir + "/model.safetensors.index.json");
  const CliRun r = Inspect(dir + " --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["totals"]["params"], 116829156672);
  ASSERT_TRUE(j.contains("safetensors")) << r.out.substr(0, 400);
  EXPECT_TRUE(j["safetensors"]["missing"].empty()) << j["safetensors"].dump();
  EXPECT_TRUE(j["safetensors"]["extra"].empty()) << j["safetensors"].dump();
}

}  // namespace
