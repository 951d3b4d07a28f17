// Recompute per block kind (ProbeConfig::recompute): none / selective / full change what is kept
// for backward, never the arithmetic. Real 2-process probes (fsdp=2, ep=2, Gloo):
//   - the loss and grad-norm curves are bit-identical across policies (== on doubles);
//   - the negative control, another micro-batch split of the same step (a different summation
//     order, ~1e-7 apart), fails the same bit-identity check;
//   - the live-tensor peak (tracking allocator) orders none > selective > full;
//   - the live-tensor measurements are deterministic: the same run twice gives the same bytes at
//     every step on every rank (peak, step start, each unit's held bytes: rank<r>.memory.jsonl).
//     Gloo's worker thread used to drop its reference to a finished collective's tensors some
//     microseconds after wait() returned, so the peak moved by a few KB with thread timing
//     (c10d_compat.cpp Wait).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "tests/backends/probe_test_util.h"

namespace onboard {
namespace {

using testing_probe::SmallConfig;
using testing_probe::SmallSpec;
using testing_probe::TempDir;

ProbeResult RunWith(const std::map<std::string, Recompute>& rc, const std::string& name,
                    int64_t micro_batch = 0) {
  ProbeConfig c = SmallConfig(2, TempDir(name));
  c.steps = 6;
  c.recompute = rc;
  c.micro_batch = micro_batch;
  return testing_probe::RunExpectingOk(SmallSpec(), c);
}

// Steps whose loss or grad norm differ in any bit.
int DifferingSteps(const ProbeResult& a, const ProbeResult& b) {
  if (a.steps.size() != b.steps.size() || a.steps.empty()) return -1;
  int n = 0;
  for (size_t i = 0; i < a.steps.size(); ++i)
    n += a.steps[i].loss != b.steps[i].loss || a.steps[i].grad_norm != b.steps[i].grad_norm;
  return n;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

int64_t LivePeak(const ProbeResult& r) {
  int64_t p = 0;
  for (int64_t b : r.rank_live_peak_bytes) p = std::max(p, b);
  return p;
}

TEST(ProbeRecompute, LossCurveBitIdenticalAcrossPolicies) {
  const ProbeResult full = RunWith({}, "rc-full");
  const ProbeResult none = RunWith({{"*", Recompute::kNone}}, "rc-none");
  const ProbeResult sel = RunWith({{"*", Recompute::kSelective}}, "rc-sel");
  const ProbeResult mixed = RunWith({{"KDA", Recompute::kSelective},
                                     {"DSA", Recompute::kNone},
                                     {"MoE", Recompute::kFull},
                                     {"MLP", Recompute::kNone}},
                                    "rc-mixed");
  ASSERT_EQ(full.steps.size(), 6u);
  EXPECT_EQ(DifferingSteps(none, full), 0);
  EXPECT_EQ(DifferingSteps(sel, full), 0);
  EXPECT_EQ(DifferingSteps(mixed, full), 0);
  EXPECT_EQ(none.steps.back().expert_load, full.steps.back().expert_load);  // counted once per forward
  // Negative control: the same step split into 2 micro-batches per rank sums in another order.
  const ProbeResult split = RunWith({{"*", Recompute::kNone}}, "rc-split", 2);
  EXPECT_GT(DifferingSteps(split, none), 0) << "the bit-identity check cannot see a summation-order change";
  // What is kept for backward differs: per rank, every rank measured.
  ASSERT_EQ(full.rank_live_peak_bytes.size(), 2u);
  EXPECT_GT(LivePeak(none), LivePeak(sel));
  EXPECT_GT(LivePeak(sel), LivePeak(full));
  EXPECT_GT(full.steps.back().live_peak_bytes, 0);
  // The same run again: the same bytes at every step (merged: max over ranks) and per rank.
  const ProbeResult again = RunWith({{"*", Recompute::kNone}}, "rc-none-again");
  EXPECT_EQ(again.rank_live_peak_bytes, none.rank_live_peak_bytes);
  ASSERT_EQ(again.steps.size(), none.steps.size());
  for (size_t i = 0; i < none.steps.size(); ++i)
    EXPECT_EQ(again.steps[i].live_peak_bytes, none.steps[i].live_peak_bytes) << "step " << i;
  // Every rank's memory terms (rank<r>.memory.jsonl: step start, peak, each unit's held bytes).
  for (int r = 0; r < 2; ++r) {
    const std::string file = "/rank" + std::to_string(r) + ".memory.jsonl";
    const std::string a = ReadFile(TempDir("rc-none") + file), b = ReadFile(TempDir("rc-none-again") + file);
    EXPECT_NE(a.find("\"unit_held_bytes\": ["), std::string::npos) << a;
    EXPECT_EQ(a, b) << "rank " << r;
  }
}

}  // namespace
}  // namespace onboard
