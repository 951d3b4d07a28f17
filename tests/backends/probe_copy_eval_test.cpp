// The copy task's held-out evaluation set (backends/probe_data.h kCopyEvalSequences; issue 12): the
// verdict judges the final weights on sequences no training step draws (the same on every layout:
// probe_pipeline_test.cpp ProbePipelineHeldOut.CopyHeldOutAccuracyMatchesOneProcessOnEveryLayout).
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace onboard
