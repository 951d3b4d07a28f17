// Loss-curve verdicts (validators/convergence.h) and probe measurement checks
// (validators/probe_checks.h).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "validators/convergence.h"
#include "validators/probe_checks.h"

namespace onboard {
namespace {

std::vector<double> Decay(int n, double from, double to) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(to + (from - to) * std::exp(-0.2 * i));
  return v;
}

TEST(Convergence, FallingCurveConverges) {
  auto r = CheckConvergence(Decay(40, 5.5, 0.5), {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->verdict, ConvergenceVerdict::kConverged);
  EXPECT_LT(r->ratio, 0.6);
}

TEST(Convergence, NaNNamesTheStep) {
  auto l = Decay(20, 5.5, 0.5);
  l[7] = std::numeric_limits<double>::quiet_NaN();
  auto r = CheckConvergence(l, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->verdict, ConvergenceVerdict::kNaN);
  EXPECT_EQ(r->step, 7);
  EXPECT_NE(r->message.find("step 7"), std::string::npos);
}

TEST(Convergence, SpikeAboveRunningMinimumIsDivergence) {
  auto l = Decay(20, 5.5, 1.0);
  l[12] = 30.0;
  auto r = CheckConvergence(l, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->verdict, ConvergenceVerdict::kDiverged);
  EXPECT_EQ(r->step, 12);
}

TEST(Convergence, SmallNoiseAtLowLossIsNotDivergence) {
  auto l = Decay(30, 5.5, 0.05);
  l[25] = l[24] * 2.5;  // 2.5x but far below the 0.5-nat margin
  auto r = CheckConvergence(l, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->verdict, ConvergenceVerdict::kConverged);
}

TEST(Convergence, FlatCurveIsPlateauAndShortFlatIsNotConverged) {
  std::vector<double> flat(30, 5.0);
  auto r = CheckConvergence(flat, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->verdict, ConvergenceVerdict::kPlateau);
  EXPECT_EQ(r->step, 20);
  auto s = CheckConvergence(Decay(6, 5.5, 4.0), {});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->verdict, ConvergenceVerdict::kNotConverged);
}

TEST(Convergence, BadInputs) {
  EXPECT_EQ(CheckConvergence({}, {}).status().code(), ErrorCode::kBadInput);
  ConvergenceCriteria c;
  c.target_fraction = 1.5;
  auto r = CheckConvergence({1.0}, c);
  EXPECT_NE(r.status().message().find("target_fraction"), std::string::npos);
}

TEST(ProbeChecks, CommShareFindsTheBottleneck) {
  std::vector<double> step = {0.10, 0.10};
  std::map<std::string, std::vector<double>> comm = {{"all_to_all", {0.05, 0.05}}, {"all_gather", {0.01, 0.01}}};
  auto r = CheckCommShare(step, comm);
  ASSERT_TRUE(r.ok());
  EXPECT_NEAR(r->share["all_to_all"], 0.5, 1e-12);
  EXPECT_NEAR(r->compute_share, 0.4, 1e-12);
  EXPECT_EQ(r->bottleneck, "all_to_all");
  comm["all_gather"] = {0.01};
  EXPECT_EQ(CheckCommShare(step, comm).status().code(), ErrorCode::kBadInput);
}

TEST(ProbeChecks, MemoryRatio) {
  auto r = CheckMemory(300.0, 100.0, 2.0);
  ASSERT_TRUE(r.ok());
  EXPECT_NEAR(r->ratio, 3.0, 1e-12);
  EXPECT_FALSE(r->within);
  EXPECT_TRUE(CheckMemory(150.0, 100.0, 2.0)->within);
  EXPECT_EQ(CheckMemory(0, 100.0, 2.0).status().code(), ErrorCode::kBadInput);
}

TEST(ProbeChecks, ExpertBalance) {
  auto r = CheckExpertBalance({{10, 10, 10, 10}, {40, 0, 0, 0}});
  ASSERT_TRUE(r.ok());
  EXPECT_NEAR(r->max_over_mean[0], 1.0, 1e-12);
  EXPECT_NEAR(r->max_over_mean[1], 4.0, 1e-12);
  EXPECT_EQ(r->worst_layer, 1);
  EXPECT_EQ(r->dead_experts[1], 3);
  EXPECT_FALSE(r->balanced);
  EXPECT_EQ(CheckExpertBalance({{1, 2}, {1}}).status().code(), ErrorCode::kBadInput);
}

}  // namespace
}  // namespace onboard
