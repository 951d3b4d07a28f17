// Issue 18, overlap through the loop: a real `onboard run` of the tiny model whose probe runs on 4
// processes declared as 2 nodes x 2 (c10d/Gloo on loopback). Round 1 waits on each expert
// all-to-all as soon as it is posted; the expert_overlap rule (threshold 0 here, so any exposed
// exchange fires it and the test does not hang on the host's timing) turns ProbeConfig::moe_overlap
// on, and round 2's probe really runs the dispatch / combine under the shared expert: its
// report.json round carries overlap on and a hidden all-to-all time, and report.md shows both rounds
// and the exposed all-to-all before -> after.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "orchestrator_test_support.h"

namespace onboard::agent {
namespace {

namespace fs = std::filesystem;

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in, nullptr, false);
}

TEST(ExpertOverlapE2E, Round2ProbesWithTheExchangeUnderTheSharedExpertAndTheReportShowsBoth) {
  ASSERT_TRUE(fs::exists(testing::OnboardBinary())) << "build the onboard binary first (probe workers)";
  const std::string out = testing::FreshDir("overlap");
  RunRequest r = testing::TinyRequest(out, /*probe=*/true, /*kernels=*/false);
  r.mode = FinetuneMode::kFull;
  r.probe.ranks = 4;
  r.probe.ranks_per_node = 2;
  r.probe.steps = 3;
  r.thresholds.expert_a2a_exposed_share = 0.0;
  CollectingEventSink sink;
  auto res = RunOnboarding(r, sink, CancelToken{});
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  ASSERT_EQ(res->rounds, 2);
  const nlohmann::json rep = ReadJson(out + "/report.json");
  ASSERT_FALSE(rep.is_discarded());
  // Step 1: the decision, in round 1.
  bool fired = false;
  for (const auto& d : rep["decisions"]) fired = fired || (d["rule"] == "expert_overlap" && d["round"] == 1);
  EXPECT_TRUE(fired) << rep["decisions"].dump();
  // Step 2: what each round's probe really ran.
  const nlohmann::json& e1 = rep["probe"]["rounds"][0]["expert_comm"];
  const nlohmann::json& e2 = rep["probe"]["rounds"][1]["expert_comm"];
  ASSERT_TRUE(e1.is_object() && e2.is_object()) << rep["probe"]["rounds"].dump();
  EXPECT_EQ(e1["nodes"], 2);
  EXPECT_FALSE(e1["overlap"].get<bool>());
  EXPECT_GT(e1["a2a_exposed_s"].get<double>(), 0.0);
  EXPECT_TRUE(e2["overlap"].get<bool>());
  // In flight under the shared expert's compute; without the overlap only the post-to-wait bookkeeping
  // counts as hidden (measured: 8 us round 1, 0.87 ms round 2 on the shared 2-core machine).
  EXPECT_GT(e2["a2a_hidden_s"].get<double>(), e1["a2a_hidden_s"].get<double>());
  // Step 3: the report draws both rounds and the change.
  std::ifstream md(out + "/report.md");
  const std::string text((std::istreambuf_iterator<char>(md)), {});
  EXPECT_NE(text.find("### Expert communication by probe round"), std::string::npos);
  EXPECT_NE(text.find("| 2 | 2 x 2 |"), std::string::npos) << text;
  EXPECT_NE(text.find("all-to-all exposed s/step"), std::string::npos) << text;
  fs::remove_all(out);
}

}  // namespace
}  // namespace onboard::agent
