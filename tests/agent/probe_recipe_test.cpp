// Issue 10: `onboard run` hands the probe the run's observation thresholds (agent/probe_recipe.cpp),
// so the probe's own report (probe.txt) and the loop's rules judge with the same numbers; without a
// request override both are ObservationThresholds' defaults, the ones `onboard probe` uses.
#include <gtest/gtest.h>

#include "agent/probe_recipe.h"

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

}  // namespace
}  // namespace onboard::agent
