// `onboard probe CKPT --weights --json` with the layout flags, end to end through the real binary:
// --ep with --fsdp, --pp with --ep and --micro-batch (1F1B, the bubble in the JSON), --pp with --fsdp,
// --tp over kimi_k3's latent MoE (alone and with --ep x --fsdp).
// The JSON's held-out loss falls below the frozen checkpoint's and every rank reads less than the
// checkpoint (what one rank reads); factors that do not fit exit 2 with one line naming the flag and value.
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tests/backends/hf_test_checkpoint.h"
#include "tests/backends/hf_test_kimi_k3.h"
#include "tests/cli/onboard_runner.h"

namespace onboard {
namespace {

using clitest::Capture;
using clitest::RunOnboard;
using nlohmann::json;

std::string Checkpoint(const hftest::Checkpoint& c) {
  std::string t = "/tmp/onboard_probe_layouts_XXXXXX";
  const std::string dir = mkdtemp(&t[0]);
  c.Write(dir + "/ckpt");
  return dir;
}

// 30 steps of `batch` windows x 32 bytes of the prose text (the ProbeWeightsCli recipe).
std::string Args(const std::string& dir, const std::string& layout, int batch = 8) {
  return "probe " + dir + "/ckpt --weights --mode lora --steps 30 --seq 32 --batch " + std::to_string(batch) +
         " --text " + std::string(ONBOARD_TEST_DATA) + "/text/readme_prose.txt --out " + dir + "/out " +
         layout;
}

// Runs a layout, parses stdout's JSON; the held-out loss fell and each rank read less than the model.
json RunLayout(const std::string& dir, const std::string& layout, size_t ranks) {
  const clitest::CliRun r = RunOnboard(Args(dir, layout + " --json"), Capture::kStdout);
  const json j = json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << layout << ": " << r.out;
  if (j.is_discarded()) return json();
  std::printf("%s: exit %d, %s; bytes per rank %s of %s\n", layout.c_str(), r.code,
              j["verdict"].get<std::string>().c_str(), j["rank_bytes"].dump().c_str(),
              j["checkpoint_bytes"].dump().c_str());
  EXPECT_EQ(r.code, j["learned"].get<bool>() ? 0 : 7) << layout;
  EXPECT_LT(j["held_out_final"].get<double>(), j["held_out_frozen"].get<double>()) << layout;
  EXPECT_EQ(j["rank_bytes"].size(), ranks) << layout;
  for (const json& b : j["rank_bytes"])
    EXPECT_LT(b.get<uint64_t>(), j["checkpoint_bytes"].get<uint64_t>()) << layout;
  return j;
}

TEST(ProbeWeightsLayoutCli, ExpertParallelWithFsdpAndPipelineCombinations) {
  const std::string moe = Checkpoint(hftest::MakeMixtral(256));
  const std::string dense = Checkpoint(hftest::MakeDense("qwen2", 4, 256));
  json j = RunLayout(moe, "--ranks 2 --ep 2 --fsdp 2", 2);
  EXPECT_EQ(j.value("ep", 0), 2);
  EXPECT_EQ(j.value("fsdp", 0), 2);
  j = RunLayout(moe, "--ranks 4 --pp 2 --ep 2 --micro-batch 1", 4);
  EXPECT_EQ(j.value("microbatches", 0), 4);  // 8 windows / 2 data ranks / 1 per micro-batch
  ASSERT_TRUE(j.contains("pp_bubble")) << j.dump();
  EXPECT_EQ(j["pp_bubble"]["measured_by_stage"].size(), 2u);
  EXPECT_DOUBLE_EQ(j["pp_bubble"]["theory"].get<double>(), 1.0 / 5.0);
  j = RunLayout(dense, "--ranks 4 --pp 2 --fsdp 2", 4);
  EXPECT_EQ(j.value("pp", 0), 2);
}

// kimi_k3's latent MoE under --tp (layers 1-2: KDA and gated MLA, both with the latent MoE): alone, and
// with --ep x --fsdp on 4 ranks; the JSON reports the layout and each rank's bytes (below the model's).
TEST(ProbeWeightsLayoutCli, KimiK3LatentMoeUnderTensorParallelism) {
  const std::string k3 = Checkpoint(hftest::MakeKimiK3(256));
  json j = RunLayout(k3, "--layers 1-2 --ranks 2 --tp 2", 2);
  EXPECT_EQ(j.value("tp", 0), 2);
  j = RunLayout(k3, "--layers 1-2 --ranks 4 --tp 2 --ep 2 --fsdp 2", 4);
  EXPECT_EQ(j.value("tp", 0), 2);
  EXPECT_EQ(j.value("ep", 0), 2);
}

// Exit 2 and one line naming the flag and its value.
void ExpectOneLineBadInput(const std::string& dir, const std::string& layout, int batch,
                           const std::string& flag, const std::string& value) {
  const clitest::CliRun r = RunOnboard(Args(dir, layout, batch));
  EXPECT_EQ(r.code, 2) << layout << ": " << r.out;
  std::istringstream in(r.out);
  std::string line, last;
  int lines = 0;
  while (std::getline(in, line))
    if (!line.empty()) ++lines, last = line;
  EXPECT_EQ(lines, 1) << r.out;
  EXPECT_NE(last.find(flag), std::string::npos) << last;
  EXPECT_NE(last.find(value), std::string::npos) << last;
}

TEST(ProbeWeightsLayoutCli, FactorsThatDoNotFitExitTwoNamingTheFlag) {
  const std::string moe = Checkpoint(hftest::MakeMixtral(256));
  ExpectOneLineBadInput(moe, "--ranks 3 --ep 3", 6, "--ep", "num_experts=4");        // 4 experts over 3
  ExpectOneLineBadInput(moe, "--ranks 6 --ep 2 --fsdp 3", 6, "--fsdp", "3");         // neither nests
  ExpectOneLineBadInput(moe, "--ranks 2 --micro-batch 3", 8, "--micro-batch", "3");  // 4 windows per rank
  ExpectOneLineBadInput(moe, "--ranks 4 --pp 4", 8, "--pp", "layers loaded (2)");    // 2 layers, 4 stages
}

}  // namespace
}  // namespace onboard
