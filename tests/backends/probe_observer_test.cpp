// ProbeObserver on a real multi-process probe (backends/probe.h): OnStep sees every recorded
// step of rank 0's steps.jsonl, in order, with the result's global values; a cancel raised from
// OnStep reaches the running workers (so the steps arrive while the probe runs, not at the end).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>

#include "backends/probe.h"
#include "tests/backends/probe_test_util.h"

namespace onboard {
namespace {

using testing_probe::SmallConfig;
using testing_probe::SmallSpec;
using testing_probe::TempDir;

class RecordingObserver : public ProbeObserver {
 public:
  explicit RecordingObserver(int64_t cancel_after = -1) : cancel_after_(cancel_after) {}
  void OnStep(const ProbeStep& s) override {
    std::lock_guard<std::mutex> lock(mu_);
    steps.push_back(s);
    if (cancel_after_ >= 0 && s.step >= cancel_after_) cancel_ = true;
  }
  bool cancelled() const override { return cancel_; }
  std::vector<ProbeStep> steps;

 private:
  std::mutex mu_;
  int64_t cancel_after_;
  std::atomic<bool> cancel_{false};
};

TEST(ProbeObserverSteps, TwoRankProbeDeliversEveryStepInOrder) {
  ProbeConfig c = SmallConfig(2, TempDir("observer"));
  c.steps = 8;
  c.mode = FinetuneMode::kLoRA;  // the base phase's steps are not recorded steps: not delivered
  c.base_steps = 3;
  RecordingObserver obs;
  Expected<ProbeResult> r = RunProbeSpec(SmallSpec(), c, &obs);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->steps.size(), 8u);
  ASSERT_EQ(obs.steps.size(), r->steps.size());
  for (size_t i = 0; i < obs.steps.size(); ++i) {
    const ProbeStep& o = obs.steps[i];
    const ProbeStep& m = r->steps[i];
    EXPECT_EQ(o.step, static_cast<int64_t>(i));
    // Global values: the same bits as the merged result.
    EXPECT_EQ(o.loss, m.loss) << "step " << i;
    EXPECT_EQ(o.grad_norm, m.grad_norm) << "step " << i;
    EXPECT_EQ(o.lr, m.lr) << "step " << i;
    EXPECT_EQ(o.accuracy, m.accuracy) << "step " << i;
    // Rank 0's own share: at most the merged (max / sum over ranks) values.
    EXPECT_LE(o.step_s, m.step_s) << "step " << i;
    ASSERT_EQ(o.expert_load.size(), m.expert_load.size());
    for (size_t l = 0; l < o.expert_load.size(); ++l)
      for (size_t e = 0; e < o.expert_load[l].size(); ++e)
        EXPECT_LE(o.expert_load[l][e], m.expert_load[l][e]);
  }
  // steps.jsonl stays beside the human log: one line per recorded step.
  std::ifstream f(c.out_dir + "/steps.jsonl");
  int64_t lines = 0;
  for (std::string line; std::getline(f, line);) ++lines;
  EXPECT_EQ(lines, 8);
}

TEST(ProbeObserverSteps, CancelFromOnStepStopsTheRunningProbe) {
  ProbeConfig c = SmallConfig(2, TempDir("observer-cancel"));
  c.steps = 100000;  // hours at this size: only a cancel that reaches the workers ends it in time
  c.timeout_s = 120;
  RecordingObserver obs(/*cancel_after=*/1);
  const auto t0 = std::chrono::steady_clock::now();
  Expected<ProbeResult> r = RunProbeSpec(SmallSpec(), c, &obs);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("cancelled"), std::string::npos) << r.status().message();
  ASSERT_GE(obs.steps.size(), 2u);
  EXPECT_LT(obs.steps.size(), 100000u);
  for (size_t i = 0; i < obs.steps.size(); ++i) EXPECT_EQ(obs.steps[i].step, static_cast<int64_t>(i));
  EXPECT_LT(wall, c.timeout_s) << "ended by the timeout, not by the cancel";
}

}  // namespace
}  // namespace onboard
