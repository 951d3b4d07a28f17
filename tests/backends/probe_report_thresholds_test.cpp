// Issue 10: the probe's own report (FinishProbeResult, backends/probe_report.cpp) judges comm share,
// expert balance and divergence with the thresholds passed in on ProbeConfig::thresholds (one home:
// validators/probe_observations.h), the ones `onboard run` hands its rules too (agent/probe_recipe.cpp),
// not with a default of its own. Synthetic step records, no workers: the same records judged
// under the defaults and under other thresholds must give the other verdicts.
#include <gtest/gtest.h>

#include <string>

#include "backends/probe_report.h"
#include "tests/backends/probe_test_util.h"

namespace onboard {
namespace {

// 8 steps of 100 ms with 30 ms of all-to-all (comm share 0.30), a loss that falls, and expert 0
// taking 30 of 100 tokens per step (max/mean 2.4 over 8 experts).
ProbeResult Judged(const ObservationThresholds& th, const std::vector<double>& losses) {
  ProbeResult r;
  r.spec = testing_probe::SmallSpec();
  r.config.ranks = 1;
  r.config.batch = 8;
  r.config.seq = 16;
  r.config.steps = static_cast<int64_t>(losses.size());
  r.config.thresholds = th;
  for (size_t i = 0; i < losses.size(); ++i) {
    ProbeStep s;
    s.step = static_cast<int64_t>(i);
    s.loss = losses[i];
    s.accuracy = 0.1;
    s.step_s = 0.1;
    s.comm.all_to_all_s = 0.03;
    s.compute_s = 0.07;
    s.expert_load = {{30, 10, 10, 10, 10, 10, 10, 10}};
    r.steps.push_back(s);
  }
  backends::FinishProbeResult(&r);
  return r;
}

std::string Checks(const ProbeResult& r) {
  std::string all;
  for (const std::string& c : r.checks) all += c + "\n";
  return all;
}

const std::vector<double> kFalling = {5.5, 5.0, 4.6, 4.2, 3.9, 3.6, 3.4, 3.2};

TEST(ProbeReportThresholds, CommShareAndExpertBalanceAreJudgedWithThePassedThresholds) {
  const ObservationThresholds defaults;
  const std::string d = Checks(Judged(defaults, kFalling));
  EXPECT_EQ(d.find("communication-bound"), std::string::npos) << d;  // 0.30 <= 0.35
  EXPECT_NE(d.find("> 1.25: imbalanced"), std::string::npos) << d;   // 2.4 > 1.25
  ObservationThresholds other;
  other.comm_share = 0.2;
  other.expert_imbalance = 3.0;
  const std::string o = Checks(Judged(other, kFalling));
  EXPECT_NE(o.find("communication 30% above 20%"), std::string::npos) << o;
  EXPECT_NE(o.find("<= 3: balanced"), std::string::npos) << o;
}

TEST(ProbeReportThresholds, DivergenceFactorIsThePassedOne) {
  // Falls to 2.5, then climbs to 4.4: 1.76x the running minimum, and above the copy task's
  // no-learning ln(32) = 3.47 nats (a spike below it is not a divergence: learning_verdict.cpp).
  const std::vector<double> climb = {5.5, 4.5, 3.5, 2.5, 3.0, 3.6, 4.0, 4.4};
  EXPECT_NE(Judged(ObservationThresholds{}, climb).convergence, "diverged");  // default factor 2
  ObservationThresholds strict;
  strict.divergence_factor = 1.5;
  EXPECT_EQ(Judged(strict, climb).convergence, "diverged");
}

TEST(ProbeReportThresholds, OutOfRangeThresholdsAreRefusedByTheConfigsValidate) {
  ProbeConfig c;
  c.thresholds.comm_share = 1.5;
  Status st = c.Validate(testing_probe::SmallSpec());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("thresholds.comm_share"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace onboard
