// The flagship-shaped proxy learns the copy task in full and LoRA mode, a learning rate x1000 is
// reported as diverged (or NaN), and a rank that dies mid-probe fails the probe with its name.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "tests/backends/probe_test_util.h"

namespace onboard {
namespace {

using testing_probe::SmallConfig;
using testing_probe::SmallSpec;

std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TMPDIR");
  return std::string(base ? base : "/tmp") + "/onboard-probe-conv-" + name + "-" + std::to_string(getpid());
}

TEST(ProbeConvergence, FullFineTuningConverges) {
  ProbeConfig c = SmallConfig(2, TempDir("full"));
  c.steps = 40;
  c.lr = 1e-2;
  c.warmup = 4;
  Expected<ProbeResult> r = RunProbeSpec(SmallSpec(), c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->convergence, "converged") << FormatProbeResult(*r);
  EXPECT_NEAR(r->baseline_nats, std::log(16.0), 1e-9);
  EXPECT_EQ(r->floor_nats, 0.0);
  // The report carries time per collective and the cost model beside the measurement.
  const std::string text = FormatProbeResult(*r);
  EXPECT_NE(text.find("measured vs cost model"), std::string::npos);
  EXPECT_NE(text.find("a2a_ms"), std::string::npos);
}

TEST(ProbeConvergence, LoraConverges) {
  ProbeConfig c = SmallConfig(2, TempDir("lora"));
  c.mode = FinetuneMode::kLoRA;
  c.lora_rank = 4;
  c.steps = 40;
  c.lr = 1e-2;
  c.warmup = 4;
  // Default base phase (ceil(0.6 * 40) = 24 full steps on the source task: the next 16 letters,
  // 5% target letters), then adapters on the frozen base, judged at the default fraction 0.6.
  ASSERT_EQ(c.converge_fraction, 0.6);
  Expected<ProbeResult> r = RunProbeSpec(SmallSpec(), c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->convergence, "converged") << FormatProbeResult(*r);
  EXPECT_EQ(r->steps.size(), 40u);  // the curve is the adapter phase only
  EXPECT_LT(r->params.trainable, r->params.total / 2);
  // The base phase is reported beside the curve (a note in the text report and spec.notes).
  const std::string text = FormatProbeResult(*r);
  EXPECT_NE(text.find("LoRA base phase (not in the curve): 24 full-training steps"), std::string::npos) << text;
}

TEST(ProbeConvergence, LearningRateTimesThousandDiverges) {
  ProbeConfig c = SmallConfig(2, TempDir("div"));
  c.steps = 20;
  c.lr = 1e-2 * 1000;
  c.warmup = 2;
  Expected<ProbeResult> r = RunProbeSpec(SmallSpec(), c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->convergence == "diverged" || r->convergence == "nan") << FormatProbeResult(*r);
  EXPECT_NE(r->checks[0].find("step"), std::string::npos);  // the step is named
}

TEST(ProbeFault, KilledRankFailsTheProbeWithItsName) {
  ProbeConfig c = SmallConfig(2, TempDir("kill"));
  c.steps = 50;
  c.die_rank = 1;
  c.die_step = 2;
  c.timeout_s = 60;  // whatever happens, the launcher returns within 60 s
  Expected<ProbeResult> r = RunProbeSpec(SmallSpec(), c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kNetwork);
  EXPECT_NE(r.status().message().find("rank 1"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("signal 9"), std::string::npos) << r.status().message();
}

TEST(ProbeConfigCheck, MessagesNameTheFactors) {
  ProbeConfig c = SmallConfig(4, "");
  c.ep = 3;
  Status st = c.Validate(SmallSpec());
  EXPECT_EQ(st.code(), ErrorCode::kBadInput);
  EXPECT_NE(st.message().find("ep=3 must divide ranks=4"), std::string::npos) << st.message();
  c.ep = 4;
  c.batch = 6;
  st = c.Validate(SmallSpec());
  EXPECT_NE(st.message().find("batch=6"), std::string::npos) << st.message();
  c.batch = 8;
  c.micro_batch = 3;
  st = c.Validate(SmallSpec());
  EXPECT_NE(st.message().find("batch=8 must be a multiple of ranks=4 * micro_batch=3"), std::string::npos)
      << st.message();
  c.micro_batch = 2;
  EXPECT_TRUE(c.Validate(SmallSpec()).ok());
  EXPECT_EQ(c.micro_steps(), 1);
  c.micro_batch = 1;
  EXPECT_EQ(c.micro_steps(), 2);
  c.device = "tpu";
  st = c.Validate(SmallSpec());
  EXPECT_NE(st.message().find("'device'"), std::string::npos) << st.message();
  c.device = "cpu";
  c.expert_placement = {0, 0, 0, 1, 1, 2, 2, 3};
  st = c.Validate(SmallSpec());
  EXPECT_NE(st.message().find("EP rank 0 holds 3"), std::string::npos) << st.message();
  c.expert_placement.clear();
  c.worker_binary = "/nonexistent/onboard";
  c.out_dir = TempDir("missing");
  Expected<ProbeResult> r = RunProbeSpec(SmallSpec(), c);
  EXPECT_EQ(r.status().code(), ErrorCode::kNotFound);
}

}  // namespace
}  // namespace onboard
