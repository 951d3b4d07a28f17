// Issue 10: `onboard run` hands the probe the run's observation thresholds (agent/probe_recipe.cpp),
// so the probe's own report (probe.txt) and the loop's rules judge with the same numbers; without a
// request override both are ObservationThresholds' defaults, the ones `onboard probe` uses.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "agent/orchestrator.h"
#include "agent/probe_recipe.h"
#include "orchestrator_test_support.h"

namespace onboard::agent {
namespace {

TEST(ProbeRecipeThresholds, TheRunsThresholdsReachTheProbeConfig) {
  RunRequest req;
  const ProbeConfig d = ProbeRecipe(req);
  const ObservationThresholds defaults;
  EXPECT_EQ(d.thresholds.comm_share, defaults.comm_share);
  EXPECT_EQ(d.thresholds.expert_imbalance, defaults.expert_imbalance);
  EXPECT_EQ(d.thresholds.divergence_factor, defaults.divergence_factor);
  EXPECT_EQ(DefaultProbeConfig(req.mode).thresholds.comm_share, defaults.comm_share);  // `onboard probe`
  req.thresholds.comm_share = 0.05;
  req.thresholds.expert_imbalance = 3.0;
  req.thresholds.divergence_factor = 1.5;
  const ProbeConfig c = ProbeRecipe(req);
  EXPECT_EQ(c.thresholds.comm_share, 0.05);
  EXPECT_EQ(c.thresholds.expert_imbalance, 3.0);
  EXPECT_EQ(c.thresholds.divergence_factor, 1.5);
}

// Issue 18: the run's probe ranks per node reach the probe (its nodes are what the expert rules
// measure), and a value that does not divide the ranks is refused naming the field and value.
TEST(ProbeRecipeNodes, RanksPerNodeReachTheProbeAndABadOneIsRefused) {
  RunRequest req = testing::TinyRequest("/tmp/unused", /*probe=*/true, /*kernels=*/false);
  EXPECT_EQ(ProbeRecipe(req).ranks_per_node, 0);  // default: one node
  req.probe.ranks = 4;
  req.probe.ranks_per_node = 2;
  const ProbeConfig c = ProbeRecipe(req);
  EXPECT_EQ(c.ranks_per_node, 2);
  EXPECT_EQ(c.nodes(), 2);
  EXPECT_TRUE(req.Validate().ok()) << req.Validate().ToString();
  req.probe.ranks_per_node = 3;
  const Status st = req.Validate();
  EXPECT_EQ(st.code(), ErrorCode::kBadInput);
  EXPECT_NE(st.message().find("ranks_per_node"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("3"), std::string::npos) << st.message();
}

// End to end: a real 2-rank probe round of `onboard run`'s loop writes probe.txt judged with the
// request's thresholds (expert balance against 50, comm share against 0.1%), not the defaults
// (1.25, 35%).
TEST(ProbeRecipeThresholds, TheRunsProbeReportJudgesWithTheRunsThresholds) {
  ASSERT_TRUE(std::filesystem::exists(testing::OnboardBinary())) << "build the onboard binary first";
  const std::string out = testing::FreshDir("thresholds");
  RunRequest r = testing::TinyRequest(out, /*probe=*/true, /*kernels=*/false);
  r.max_rounds = 1;
  r.thresholds.expert_imbalance = 50;
  r.thresholds.comm_share = 0.001;
  CollectingEventSink sink;
  CancelToken cancel;
  auto res = RunOnboarding(r, sink, cancel);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  std::ifstream f(out + "/probe/round1/probe.txt");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string txt = ss.str();
  EXPECT_NE(txt.find("<= 50: balanced"), std::string::npos) << txt;
  EXPECT_NE(txt.find("above 0.1% "), std::string::npos) << txt;
  EXPECT_EQ(txt.find(" 1.25: "), std::string::npos) << txt;  // the default expert threshold
}

}  // namespace
}  // namespace onboard::agent
