// Node-deduplicated expert dispatch (ProbeConfig::ep_dispatcher "deepep", backends/probe_node_dedup.h)
// on a 4-rank probe declared as 2 nodes x 2 ranks (copy task, fp32, micro-batch 2, 6 steps):
//   - the loss curve, grad norms and expert loads equal the plain all-to-all's bit for bit: the
//     combine sums a token's outputs per node first, but with top_k = 2 every partial sum has at
//     most two terms (fp addition commutes), and so does every gradient sum of the backward;
//   - with top_k = 4 (3 steps) the per-node pre-reduction does reorder sums: equal within
//     kNodeDedupTol, the measured max relative difference printed;
//   - the rows the dispatch actually sends across nodes are strictly fewer than the plain
//     all-to-all's and equal, layer by layer, the node-deduplicated copies the co-activation
//     recorder counts from the routing (remote nodes holding >= 1 of a token's experts);
//   - negative: ONBOARD_PROBE_DEDUP_FAULT=drop_forward (gateways forward zeros) leaves the tolerance;
//   - the knob refuses unknown values, one node, EP groups inside one node, and moe_overlap.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "backends/probe_coactivation.h"
#include "tests/backends/probe_test_util.h"

namespace onboard {
namespace {

using testing_probe::SmallConfig;
using testing_probe::SmallSpec;
using testing_probe::TempDir;

using testing_probe::FirstStepDifference;

// Loss and grad norm, relative, for top_k > 2 (see the printed value).
constexpr double kNodeDedupTol = 1e-5;

ProbeConfig NodeDedupConfig(const std::string& dispatcher, const std::string& tag, int64_t steps = 6) {
  ProbeConfig c = SmallConfig(4, TempDir("dedup-" + tag));
  c.steps = steps;
  c.micro_batch = 2;
  c.ranks_per_node = 2;
  c.ep_dispatcher = dispatcher;
  return c;
}

// Largest relative difference of loss or grad norm over the steps (infinite if lengths differ).
double NodeDedupMaxRel(const ProbeResult& a, const ProbeResult& b) {
  if (a.steps.size() != b.steps.size() || a.steps.empty()) return INFINITY;
  double m = 0;
  for (size_t i = 0; i < a.steps.size(); ++i) {
    m = std::max(m, std::abs(a.steps[i].loss - b.steps[i].loss) / std::abs(b.steps[i].loss));
    m = std::max(m, std::abs(a.steps[i].grad_norm - b.steps[i].grad_norm) / std::abs(b.steps[i].grad_norm));
  }
  return m;
}

TEST(ProbeNodeDedup, FourRanksTwoNodesSameCurveFewerCrossNodeRows) {
  const ProxySpec spec = SmallSpec();
  Expected<ProbeResult> plain = RunProbeSpec(spec, NodeDedupConfig("alltoall", "plain"));
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  Expected<ProbeResult> dedup = RunProbeSpec(spec, NodeDedupConfig("deepep", "deepep"));
  ASSERT_TRUE(dedup.ok()) << dedup.status().ToString();
  // (a) the same curve, bit for bit.
  EXPECT_EQ(FirstStepDifference(*dedup, *plain), "");
  const double rel = NodeDedupMaxRel(*dedup, *plain);
  // (b) actual slow-tier rows = the recorder's node-deduplicated copies, per layer; fewer than plain.
  ASSERT_EQ(dedup->coactivation.layers.size(), plain->coactivation.layers.size());
  ASSERT_FALSE(dedup->coactivation.layers.empty());
  for (const ProbeCoactivationLayer& l : dedup->coactivation.layers) {
    EXPECT_EQ(l.cross_node_rows, l.remote_node_copies) << "layer " << l.layer;
    EXPECT_GT(l.remote_node_copies, 0) << "layer " << l.layer;
  }
  const ProbeTierTraffic tp = TotalTraffic(plain->coactivation), td = TotalTraffic(dedup->coactivation);
  EXPECT_LT(td.cross_node_rows_per_token, tp.cross_node_rows_per_token);
  EXPECT_DOUBLE_EQ(td.cross_node_rows_per_token, td.cross_node_copies_per_token);
  EXPECT_LT(td.slow_tier_bytes_per_token, tp.slow_tier_bytes_per_token);
  std::printf(
      "node-dedup, 2 nodes x 2 ranks, %zu steps: max relative difference (loss, grad norm) %.3e; cross-node "
      "rows/token %.3f -> %.3f (dedup copies from the routing %.3f), slow-tier bytes/token %.1f -> %.1f\n",
      dedup->steps.size(), rel, tp.cross_node_rows_per_token, td.cross_node_rows_per_token,
      td.cross_node_copies_per_token, tp.slow_tier_bytes_per_token, td.slow_tier_bytes_per_token);
}

TEST(ProbeNodeDedup, GatewayDroppingTheForwardChangesTheCurve) {
  // Negative control of the test above: the gateways forward zeros for the slow-tier rows.
  const ProxySpec spec = SmallSpec();
  Expected<ProbeResult> plain = RunProbeSpec(spec, NodeDedupConfig("alltoall", "plain-f"));
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  ASSERT_EQ(setenv("ONBOARD_PROBE_DEDUP_FAULT", "drop_forward", 1), 0);  // inherited by the workers
  Expected<ProbeResult> bad = RunProbeSpec(spec, NodeDedupConfig("deepep", "fault"));
  unsetenv("ONBOARD_PROBE_DEDUP_FAULT");
  ASSERT_TRUE(bad.ok()) << bad.status().ToString();
  EXPECT_NE(FirstStepDifference(*bad, *plain), "");
  const double rel = NodeDedupMaxRel(*bad, *plain);
  EXPECT_GT(rel, 100 * kNodeDedupTol);
  std::printf("node-dedup fault drop_forward: max relative difference %.3e\n", rel);
}

TEST(ProbeNodeDedup, TopFourPreReducedCombineWithinTolerance) {
  ProxySpec spec = SmallSpec();
  spec.top_k = 4;  // tokens on both nodes with two experts on one: per-node sums reorder the k terms
  Expected<ProbeResult> plain = RunProbeSpec(spec, NodeDedupConfig("alltoall", "plain-k4", 3));
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  Expected<ProbeResult> dedup = RunProbeSpec(spec, NodeDedupConfig("deepep", "deepep-k4", 3));
  ASSERT_TRUE(dedup.ok()) << dedup.status().ToString();
  const double rel = NodeDedupMaxRel(*dedup, *plain);
  EXPECT_LT(rel, kNodeDedupTol);
  for (const ProbeCoactivationLayer& l : dedup->coactivation.layers)
    EXPECT_EQ(l.cross_node_rows, l.remote_node_copies) << "layer " << l.layer;
  std::printf("node-dedup top_k=4, %zu steps: max relative difference (loss, grad norm) %.3e (%s)\n",
              dedup->steps.size(), rel, FirstStepDifference(*dedup, *plain).c_str());
}

TEST(ProbeNodeDedup, KnobRefusesBadValuesAndLayouts) {
  ProbeConfig c = NodeDedupConfig("deepep", "unused");
  EXPECT_TRUE(c.Validate(SmallSpec()).ok());
  auto refused = [&](const ProbeConfig& x, const std::string& value) {
    const Status st = x.Validate(SmallSpec());
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find("ep_dispatcher"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(value), std::string::npos) << st.message();
    EXPECT_EQ(st.message().find('\n'), std::string::npos) << st.message();
  };
  ProbeConfig x = c;
  x.ep_dispatcher = "hybridep";  // the plan's third dispatcher: not in the probe
  refused(x, "hybridep");
  x.ep_dispatcher = "bogus";
  refused(x, "bogus");
  x = c;
  x.ranks_per_node = 0;  // one node
  refused(x, "deepep");
  x = c;
  x.ep = 2;  // EP groups {0,1} and {2,3}: each inside one node
  refused(x, "deepep");
  x = c;
  x.moe_overlap = true;
  refused(x, "deepep");
  x = c;
  x.ep_dispatcher = "alltoall";
  x.ranks_per_node = 0;
  EXPECT_TRUE(x.Validate(SmallSpec()).ok());
}

}  // namespace
}  // namespace onboard
