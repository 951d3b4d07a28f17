// Loss-curve verdicts (validators/convergence.h) and probe observations
// (validators/probe_observations.h).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "validators/convergence.h"
#include "validators/probe_observations.h"

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

TEST(ProbeObservations, CommShareLeavesOutTheWarmUpStepAndNamesTheLargestKind) {
  StepTimes t;
  t.step_s = {1.0, 0.10, 0.10};  // step 0: one-off set-up (left out)
  t.seconds_by_kind = {{"all_to_all", {0.9, 0.05, 0.05}}, {"all_gather", {0.0, 0.01, 0.01}}};
  const ObservationThresholds th;
  auto r = ObserveCommShare(t, th);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->steps, 2);
  EXPECT_NEAR(r->share_by_kind["all_to_all"], 0.5, 1e-12);
  EXPECT_NEAR(r->share, 0.6, 1e-12);
  EXPECT_NEAR(r->compute_s, 0.04, 1e-12);
  EXPECT_EQ(r->largest, "all_to_all");
  EXPECT_TRUE(r->comm_bound);  // 0.6 > 0.35
  ObservationThresholds lax;
  lax.comm_share = 0.7;  // the threshold passed in decides
  EXPECT_FALSE(ObserveCommShare(t, lax)->comm_bound);
  t.seconds_by_kind["all_gather"] = {0.01};
  EXPECT_EQ(ObserveCommShare(t, th).status().code(), ErrorCode::kBadInput);
}

// The probe's report and the loop's rule used 0.3 and 0.35 before; one threshold now.
TEST(ProbeObservations, CommShareBetweenTheOldThresholdsIsNotCommBound) {
  StepTimes t;
  t.step_s = {0.1, 0.1};
  t.seconds_by_kind = {{"all_reduce", {0.032, 0.032}}};
  EXPECT_FALSE(ObserveCommShare(t, ObservationThresholds{})->comm_bound);  // 0.32
}

TEST(ProbeChecks, MemoryRatio) {
  auto r = CheckMemory(300.0, 100.0, 2.0);
  ASSERT_TRUE(r.ok());
  EXPECT_NEAR(r->ratio, 3.0, 1e-12);
  EXPECT_FALSE(r->within);
  EXPECT_TRUE(CheckMemory(150.0, 100.0, 2.0)->within);
  EXPECT_EQ(CheckMemory(0, 100.0, 2.0).status().code(), ErrorCode::kBadInput);
}

TEST(ProbeObservations, ExpertBalance) {
  const ObservationThresholds th;
  auto r = ObserveExpertBalance({{10, 10, 10, 10}, {40, 0, 0, 0}}, th);
  ASSERT_TRUE(r.ok());
  EXPECT_NEAR(r->max_over_mean[0], 1.0, 1e-12);
  EXPECT_NEAR(r->max_over_mean[1], 4.0, 1e-12);
  EXPECT_EQ(r->worst_layer, 1);
  EXPECT_EQ(r->dead_experts[1], 3);
  EXPECT_FALSE(r->balanced);
  EXPECT_EQ(ObserveExpertBalance({{1, 2}, {1}}, th).status().code(), ErrorCode::kBadInput);
}

// 1.4 max/mean: the probe's report called it balanced (threshold 2.0) while the loop re-placed
// experts (1.25). One threshold: imbalanced for both.
TEST(ProbeObservations, ExpertImbalanceBetweenTheOldThresholdsIsImbalanced) {
  const ObservationThresholds th;
  auto r = ObserveExpertBalance({{14, 10, 10, 6}}, th);
  ASSERT_TRUE(r.ok());
  EXPECT_NEAR(r->worst, 1.4, 1e-12);
  EXPECT_FALSE(r->balanced);
  const RankBalance rb = ObserveRankBalance({14, 10, 10, 6}, 1, {}, th);
  EXPECT_TRUE(rb.imbalanced);
  EXPECT_TRUE(ObserveExpertBalance({{12, 10, 10, 8}}, th)->balanced);  // 1.2
}

TEST(ProbeObservations, RankBalanceUsesThePlacement) {
  const ObservationThresholds th;
  // Experts 0,1 hot: contiguous placement puts both on rank 0; {0,1,0,1} spreads them.
  const std::vector<double> load = {30, 30, 10, 10};
  const RankBalance contiguous = ObserveRankBalance(load, 2, {}, th);
  EXPECT_NEAR(contiguous.rank_max_over_mean, 1.5, 1e-12);
  EXPECT_TRUE(contiguous.imbalanced);
  const RankBalance spread = ObserveRankBalance(load, 2, {0, 1, 0, 1}, th);
  EXPECT_NEAR(spread.rank_max_over_mean, 1.0, 1e-12);
  EXPECT_FALSE(spread.imbalanced);
}

TEST(ProbeObservations, DivergenceUsesTheRunningMinimumAndTheFactorPassedIn) {
  const std::vector<double> blow_up = {4, 3, 2, 1, 1, 1, 1, 1, 3.5, 3.5};
  auto d = ObserveDivergence(blow_up, ObservationThresholds{});
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->diverged);
  EXPECT_EQ(d->curve.step, 8);
  ObservationThresholds lax;
  lax.divergence_factor = 4.0;
  EXPECT_FALSE(ObserveDivergence(blow_up, lax)->diverged);
  EXPECT_TRUE(ObserveDivergence({3, 2, NAN}, lax)->diverged);
  lax.divergence_factor = 1.0;
  EXPECT_EQ(ObserveDivergence(blow_up, lax).status().code(), ErrorCode::kBadInput);
}

}  // namespace
}  // namespace onboard
