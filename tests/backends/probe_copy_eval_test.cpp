// The copy task's held-out evaluation (backends/probe_data.h kCopyEvalSequences; issue 12): the
// verdict judges the final weights on sequences no training step draws, the same on every layout.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "backends/probe_data.h"
#include "tests/backends/probe_test_util.h"

namespace onboard {
namespace {

using testing_probe::SmallConfig;
using testing_probe::SmallSpec;
using testing_probe::TempDir;

bool SameRows(const at::Tensor& a, const at::Tensor& b) { return a.sizes() == b.sizes() && a.equal(b); }

// The evaluation rows are copy sequences (second half = first half), fixed, drawn at a step no
// training step uses, and rows past `end` are padding that counts nothing.
TEST(ProbeCopyEval, EvaluationSequencesAreFixedCopiesNeverDrawnByTraining) {
  const ProbeConfig c = SmallConfig(1, TempDir("copy-eval-data"));
  const backends::ProbeData data(SmallSpec(), c);
  ASSERT_TRUE(data.status().ok()) << data.status().ToString();
  const int64_t h = backends::CopyHalf(c.seq);
  EXPECT_EQ(data.HeldOutWindows(), backends::kCopyEvalSequences);
  EXPECT_EQ(data.HeldOutCountedTokens(), backends::kCopyEvalSequences * h);
  const backends::Batch a = data.GetHeldOut(0, 8, 6), b = data.GetHeldOut(0, 8, 6);
  EXPECT_TRUE(SameRows(a.tokens, b.tokens));  // fixed
  for (int64_t i = 0; i < 8; ++i) {
    EXPECT_TRUE(SameRows(a.tokens[i].narrow(0, 1, h), a.tokens[i].narrow(0, h + 2, h))) << "row " << i;
    EXPECT_EQ(a.mask[i].sum().item<double>(), i < 6 ? static_cast<double>(h) : 0.0) << "row " << i;
  }
  // Negative: the rows of training steps 0..steps-1 are other sequences.
  for (int64_t s = 0; s < c.steps; ++s)
    EXPECT_FALSE(SameRows(a.tokens.narrow(0, 0, 6), data.Get(s, 0, 6).tokens)) << "step " << s;
  // Text and lookup keep their own held-out rules: lookup has none.
  ProbeConfig lookup = c;
  lookup.task = ProbeTask::kLookup;
  EXPECT_EQ(backends::ProbeData(SmallSpec(), lookup).HeldOutWindows(), 0);
}

// Every layout evaluates the one process's 1024 sequences: the same held-out loss and accuracy
// (4 data ranks: 256 rows each; tp=2 x pp=2: one data rank, the stages' sends), and the verdict's
// skill is that held-out accuracy.
TEST(ProbeCopyEval, HeldOutAccuracyMatchesOneProcessOnEveryLayout) {
  auto run = [&](int64_t ranks, int64_t tp, int64_t pp, const std::string& dir) {
    ProbeConfig c = SmallConfig(ranks, TempDir(dir));
    c.steps = 4;
    c.micro_batch = 2;
    c.tp = tp;
    c.pp = pp;
    Expected<ProbeResult> r = RunProbeSpec(SmallSpec(), c);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : ProbeResult{};
  };
  const ProbeResult one = run(1, 1, 1, "copy-eval-one"), tppp = run(4, 2, 2, "copy-eval-tp2pp2"),
                    dp4 = run(4, 1, 1, "copy-eval-dp4");
  std::printf(
      "held-out after 4 steps: 1 process loss %.6f acc %.4f, tp=2 x pp=2 %.6f %.4f, 4 data ranks %.6f %.4f\n",
      one.held_out_loss, one.held_out_accuracy, tppp.held_out_loss, tppp.held_out_accuracy, dp4.held_out_loss,
      dp4.held_out_accuracy);
  ASSERT_TRUE(std::isfinite(one.held_out_loss));
  EXPECT_EQ(one.held_out_tokens, backends::kCopyEvalSequences * backends::CopyHalf(16));
  const double one_hit = 1.0 / static_cast<double>(one.held_out_tokens);
  for (const ProbeResult* r : {&tppp, &dp4}) {
    EXPECT_LT(std::abs(r->held_out_loss - one.held_out_loss) / one.held_out_loss, 1e-4);
    EXPECT_NEAR(r->held_out_accuracy, one.held_out_accuracy, 2 * one_hit);  // an argmax tie at most
  }
  EXPECT_DOUBLE_EQ(one.skill, one.held_out_accuracy);
  EXPECT_DOUBLE_EQ(one.final_loss, one.held_out_loss);
  EXPECT_TRUE(std::isfinite(one.last_steps_accuracy));
}

}  // namespace
}  // namespace onboard
