// Expert co-activation measured by the probe (backends/probe_coactivation.h) and the placement made
// from it (backends/probe_coactivation_placement.h): the recorder on hand-made routings, the merge
// over ranks, then a real 4-rank probe told it runs on 2 nodes x 2 ranks, re-run with the
// co-activation placement: same loss curve bit for bit, fewer cross-node copies measured.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "backends/probe_coactivation.h"
#include "backends/probe_coactivation_placement.h"
#include "tests/backends/probe_test_util.h"

namespace onboard {
namespace {

using testing_probe::Losses;
using testing_probe::SmallConfig;
using testing_probe::SmallSpec;
using testing_probe::TempDir;

// 3 tokens, top-2 of 4 experts, experts {0,1} on EP rank 0 and {2,3} on EP rank 1; this is rank 0.
CoactivationRecorder ThreeTokens(int64_t ranks_per_node) {
  CoactivationRecorder rec;
  // EP ranks 0 and 1 on nodes (0, 1) or both on node 0; this is rank 0, on node 0.
  rec.Configure(/*experts=*/4, /*top_k=*/2, ranks_per_node == 1 ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{0, 0}, 0);
  const std::vector<int64_t> top = {0, 1, 2, 0, 3, 2};  // {0,1} {2,0} {3,2}
  rec.RecordRouting(/*layer=*/1, top.data(), 3, 2, {0, 0, 1, 1});
  rec.RecordDispatch(1, {3, 3}, /*row_bytes=*/64);  // rows to EP rank 0 (experts 0,1,0), rank 1 (2,3,2)
  return rec;
}

ProbeCoactivation Merged(const std::vector<nlohmann::json>& ranks, int64_t rpn, int64_t nodes) {
  ProbeCoactivation c;
  const Status st =
      MergeCoactivation(ranks, std::vector<std::string>(ranks.size(), "rank.json"), rpn, nodes, &c);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return c;
}

TEST(ProbeCoactivation, RecorderCountsPairsRanksNodesAndCrossNodeRows) {
  const ProbeCoactivation c = Merged({ThreeTokens(/*ranks_per_node=*/1).ToJson()}, 1, 2);  // 2 nodes
  ASSERT_EQ(c.layers.size(), 1u);
  const ProbeCoactivationLayer& l = c.layers[0];
  EXPECT_EQ(l.tokens, 3);
  ASSERT_EQ(l.pairs.size(), 3u);  // 0-1, 0-2, 2-3 once each (ties: lower ids first)
  EXPECT_EQ(l.pairs[0].a, 0);
  EXPECT_EQ(l.pairs[0].b, 1);
  EXPECT_EQ(l.pairs[2].a, 2);
  EXPECT_EQ(l.pairs[2].b, 3);
  EXPECT_EQ(l.ranks_hist, (std::vector<int64_t>{0, 2, 1}));
  EXPECT_EQ(l.nodes_hist, (std::vector<int64_t>{0, 2, 1}));
  EXPECT_EQ(l.remote_node_copies, 2);  // {0,2} and {3,2} reach node 1 once each
  EXPECT_EQ(l.rows, 6);
  EXPECT_EQ(l.cross_node_rows, 3);
  const ProbeTierTraffic t = LayerTraffic(l);
  EXPECT_DOUBLE_EQ(t.nodes_per_token, 4.0 / 3.0);
  EXPECT_DOUBLE_EQ(t.cross_node_rows_per_token, 1.0);
  EXPECT_DOUBLE_EQ(t.slow_tier_bytes_per_token, 2.0 * 3 * 64 / 3);
  // Negative: the same routings with both ranks on one node cross nothing.
  const ProbeCoactivation one = Merged({ThreeTokens(/*ranks_per_node=*/2).ToJson()}, 2, 1);
  EXPECT_EQ(one.layers[0].nodes_hist, (std::vector<int64_t>{0, 3, 0}));
  EXPECT_EQ(one.layers[0].cross_node_rows, 0);
  EXPECT_EQ(one.layers[0].remote_node_copies, 0);
  EXPECT_NE(FormatCoactivation(c).find("slow-tier bytes/token 128.0"), std::string::npos)
      << FormatCoactivation(c);
}

TEST(ProbeCoactivation, MergeSumsRanksAndRefusesMismatchedLayers) {
  const nlohmann::json a = ThreeTokens(1).ToJson();
  const ProbeCoactivation two = Merged({a, a}, 1, 2);
  EXPECT_EQ(two.layers[0].tokens, 6);
  EXPECT_EQ(two.layers[0].pairs[0].tokens, 2);
  EXPECT_EQ(two.layers[0].cross_node_rows, 6);
  EXPECT_EQ(SummedPairCounts(two, 4)[2][0], 2.0);
  nlohmann::json bad = a;
  bad["layers"][0]["layer"] = 3;
  ProbeCoactivation out;
  const Status st = MergeCoactivation({a, bad}, {"r0.json", "r1.json"}, 1, 2, &out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("r1.json"), std::string::npos) << st.message();
  bad = a;
  bad["layers"][0].erase("rows");
  EXPECT_FALSE(MergeCoactivation({bad}, {"r0.json"}, 1, 2, &out).ok());
}

// Exhaustive node split of 8 experts into 2 nodes x 4 (the 35 partitions): the intra-node pair
// weight of the best one, the mean over all, and of the contiguous split {0..3} {4..7}.
struct SplitStats {
  double best = 0, mean = 0, contiguous = 0;
};
SplitStats ExhaustiveSplits(const std::vector<std::vector<double>>& w) {
  SplitStats s;
  int n = 0;
  for (int mask = 0; mask < 256; ++mask) {
    if (__builtin_popcount(mask) != 4 || !(mask & 1)) continue;  // expert 0 on node 0
    double intra = 0;
    for (int i = 0; i < 8; ++i)
      for (int j = i + 1; j < 8; ++j)
        if (((mask >> i) & 1) == ((mask >> j) & 1)) intra += w[i][j];
    s.best = std::max(s.best, intra);
    s.mean += intra;
    ++n;
    if (mask == 0x0f) s.contiguous = intra;
  }
  s.mean /= n;
  return s;
}

// A probe result over 4 ranks = 2 nodes x 2 with even loads and these pair counts (one layer).
ProbeResult WithPairs(const std::vector<ExpertPairCount>& pairs) {
  ProbeResult p;
  p.spec.num_experts = 8;
  p.spec.top_k = 2;
  p.config.ranks = 4;
  p.config.ep = 4;
  p.config.ranks_per_node = 2;
  ProbeStep st;
  st.expert_load = {std::vector<int64_t>(8, 100)};
  p.steps.push_back(st);
  ProbeCoactivationLayer l;
  l.layer = 1;
  l.pairs = pairs;
  p.coactivation.ranks_per_node = 2;
  p.coactivation.nodes = 2;
  p.coactivation.top_k = 2;
  p.coactivation.layers = {l};
  return p;
}

TEST(ProbeCoactivation, PlacementFindsAPlantedGroupingAndNothingInAUniformMatrix) {
  // Planted: two groups of 4 experts, {1,3,4,6} and {0,2,5,7} (split by the contiguous
  // placement), co-selected 50 tokens per pair inside a group, 5 across.
  const std::vector<int64_t> group = {1, 0, 1, 0, 0, 1, 0, 1};  // node of each expert in the plant
  std::vector<ExpertPairCount> planted, uniform;
  for (int64_t a = 0; a < 8; ++a)
    for (int64_t b = a + 1; b < 8; ++b) {
      planted.push_back({a, b, group[a] == group[b] ? 50 : 5});
      uniform.push_back({a, b, 20});
    }
  const ProbeResult p = WithPairs(planted);
  Expected<ProbeCoactivationPlacement> r = PlaceFromProbeCoactivation(p);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (int64_t a = 0; a < 8; ++a)
    for (int64_t b = 0; b < 8; ++b)
      EXPECT_EQ(r->placement[a] / 2 == r->placement[b] / 2, group[a] == group[b]) << a << "," << b;
  const SplitStats s = ExhaustiveSplits(SummedPairCounts(p.coactivation, 8));
  EXPECT_EQ(static_cast<double>(r->intra_node_pairs_after), s.best);  // the optimum: 12 x 50
  EXPECT_EQ(r->intra_node_pairs_after, 600);
  EXPECT_LT(r->intra_node_pairs_before, r->intra_node_pairs_after);
  // Negative: every pair equally often: no split is better than the contiguous one.
  Expected<ProbeCoactivationPlacement> u = PlaceFromProbeCoactivation(WithPairs(uniform));
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->intra_node_pairs_after, u->intra_node_pairs_before);
}

// For top-2 routing a token spans 2 nodes exactly when its pair is split over nodes, so the
// measured nodes per token follows from the measured pairs and the placement.
void ExpectNodesFollowPairs(const ProbeResult& r, int64_t intra_node_pairs, const std::string& what) {
  int64_t tokens = 0, two_nodes = 0, pairs = 0;
  for (const ProbeCoactivationLayer& l : r.coactivation.layers) {
    tokens += l.tokens;
    two_nodes += l.nodes_hist[2];
    for (const ExpertPairCount& p : l.pairs) pairs += p.tokens;
    EXPECT_EQ(l.rows, 2 * l.tokens) << what;
  }
  EXPECT_EQ(pairs, tokens) << what << ": top-2 of distinct experts: one pair per token";
  EXPECT_EQ(two_nodes, pairs - intra_node_pairs) << what;
}

TEST(ProbeCoactivation, FourRanksTwoNodesPlacementCutsCrossNodeTrafficSameCurve) {
  // 4 ranks told they are 2 nodes x 2 ranks; fp32 with a fixed micro-batch: the curve does not
  // depend on the placement (probe_equivalence_test.cpp), so the re-run routes the same tokens.
  const ProxySpec spec = SmallSpec();
  ProbeConfig c = SmallConfig(4, TempDir("coact-before"));
  c.steps = 8;
  c.micro_batch = 2;
  c.ranks_per_node = 2;
  Expected<ProbeResult> before = RunProbeSpec(spec, c);
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  ASSERT_EQ(before->coactivation.layers.size(), 3u);
  EXPECT_EQ(before->coactivation.nodes, 2);
  EXPECT_EQ(before->coactivation.layers[0].tokens, c.steps * c.batch * c.seq);
  Expected<ProbeCoactivationPlacement> placed = PlaceFromProbeCoactivation(*before);
  ASSERT_TRUE(placed.ok()) << placed.status().ToString();
  ExpectNodesFollowPairs(*before, placed->intra_node_pairs_before, "contiguous");
  // What the measured pairs offer: every 2 x 4 node split, per MoE layer and summed.
  for (const ProbeCoactivationLayer& l : before->coactivation.layers) {
    ProbeCoactivation one = before->coactivation;
    one.layers = {l};
    const SplitStats st = ExhaustiveSplits(SummedPairCounts(one, 8));
    std::printf("layer %lld: intra-node pairs contiguous %.0f, mean split %.1f, best split %.0f of %lld\n",
                static_cast<long long>(l.layer), st.contiguous, st.mean, st.best, static_cast<long long>(l.tokens));
  }
  const SplitStats all = ExhaustiveSplits(SummedPairCounts(before->coactivation, 8));
  std::printf("summed: contiguous %.0f, mean split %.1f, best split %.0f; placement %lld -> %lld\n",
              all.contiguous, all.mean, all.best, static_cast<long long>(placed->intra_node_pairs_before),
              static_cast<long long>(placed->intra_node_pairs_after));
  ASSERT_GT(placed->intra_node_pairs_after, placed->intra_node_pairs_before);

  c.expert_placement = placed->placement;
  c.out_dir = TempDir("coact-after");
  Expected<ProbeResult> after = RunProbeSpec(spec, c);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(Losses(*after), Losses(*before)) << "placement changed the maths";
  for (size_t i = 0; i < after->steps.size(); ++i)
    EXPECT_EQ(after->steps[i].expert_load, before->steps[i].expert_load);
  ExpectNodesFollowPairs(*after, placed->intra_node_pairs_after, "co-activation placement");
  const ProbeTierTraffic tb = TotalTraffic(before->coactivation), ta = TotalTraffic(after->coactivation);
  EXPECT_LT(ta.nodes_per_token, tb.nodes_per_token);
  EXPECT_LT(ta.cross_node_copies_per_token, tb.cross_node_copies_per_token);
  EXPECT_LT(ta.slow_tier_bytes_per_token, tb.slow_tier_bytes_per_token);
  std::printf(
      "4 ranks = 2 nodes x 2, 3 MoE layers, %lld steps: nodes/token %.3f -> %.3f, node-dedup "
      "cross-node copies/token %.3f -> %.3f, cross-node rows/token %.3f -> %.3f, slow-tier "
      "bytes/token %.1f -> %.1f; intra-node pairs %lld -> %lld of %lld; rank max/mean %.3f -> %.3f\n",
      static_cast<long long>(c.steps), tb.nodes_per_token, ta.nodes_per_token, tb.cross_node_copies_per_token,
      ta.cross_node_copies_per_token, tb.cross_node_rows_per_token, ta.cross_node_rows_per_token,
      tb.slow_tier_bytes_per_token, ta.slow_tier_bytes_per_token,
      static_cast<long long>(placed->intra_node_pairs_before),
      static_cast<long long>(placed->intra_node_pairs_after),
      static_cast<long long>(placed->co_selected_pairs), placed->rank_max_over_mean_before,
      placed->rank_max_over_mean_after);
  // Negative: a one-node probe has no slow tier to cut.
  ProbeResult one = *before;
  one.config.ranks_per_node = 4;
  EXPECT_FALSE(PlaceFromProbeCoactivation(one).ok());
}

TEST(ProbeCoactivation, NodeLimitedRoutingKeepsEachTokenOnOneNode) {
  // The same 4-rank, 2-node run with and without max_route_nodes = 1 (DeepSeek-V3's M).
  const ProxySpec spec = SmallSpec();
  ProbeConfig c = SmallConfig(4, TempDir("coact-free"));
  c.steps = 6;
  c.micro_batch = 2;
  c.ranks_per_node = 2;
  Expected<ProbeResult> free_run = RunProbeSpec(spec, c);
  ASSERT_TRUE(free_run.ok()) << free_run.status().ToString();
  c.max_route_nodes = 1;
  c.out_dir = TempDir("coact-limited");
  Expected<ProbeResult> limited = RunProbeSpec(spec, c);
  ASSERT_TRUE(limited.ok()) << limited.status().ToString();
  for (const ProbeCoactivationLayer& l : limited->coactivation.layers) {
    EXPECT_EQ(l.nodes_hist[2], 0) << "layer " << l.layer << ": a token reached 2 nodes";
    EXPECT_EQ(l.nodes_hist[1], l.tokens);
  }
  // Negative: without the limit some tokens do span both nodes.
  int64_t spanning = 0;
  for (const ProbeCoactivationLayer& l : free_run->coactivation.layers) spanning += l.nodes_hist[2];
  EXPECT_GT(spanning, 0);
  const ProbeTierTraffic tf = TotalTraffic(free_run->coactivation), tl = TotalTraffic(limited->coactivation);
  // One node per token: a DeepEP-style dispatch sends it over the slow tier at most once. (The probe's
  // plain all-to-all rows need not drop: both of a token's rows may now go to the one remote node.)
  EXPECT_LT(tl.cross_node_copies_per_token, tf.cross_node_copies_per_token);
  EXPECT_LE(tl.cross_node_copies_per_token, 1.0 * static_cast<double>(limited->coactivation.layers.size()));
  ASSERT_EQ(limited->steps.size(), free_run->steps.size());
  EXPECT_TRUE(std::isfinite(limited->steps.back().loss));
  std::printf(
      "node-limited routing M=1 of 2 nodes, %lld steps: nodes/token %.3f -> %.3f, node-dedup copies/token "
      "%.3f -> %.3f, cross-node rows/token %.3f -> %.3f, slow-tier bytes/token %.1f -> %.1f; loss step 0 "
      "%.4f vs %.4f, last %.4f vs %.4f\n",
      static_cast<long long>(c.steps), tf.nodes_per_token, tl.nodes_per_token, tf.cross_node_copies_per_token,
      tl.cross_node_copies_per_token, tf.cross_node_rows_per_token, tl.cross_node_rows_per_token,
      tf.slow_tier_bytes_per_token, tl.slow_tier_bytes_per_token, free_run->steps[0].loss,
      limited->steps[0].loss, free_run->steps.back().loss, limited->steps.back().loss);
}

TEST(ProbeCoactivation, RanksPerNodeMustDivideRanks) {
  ProbeConfig c = SmallConfig(4, "/tmp/unused");
  c.ranks_per_node = 3;
  const Status st = c.Validate(SmallSpec());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("ranks_per_node"), std::string::npos) << st.message();
  c.ranks_per_node = 2;
  EXPECT_TRUE(c.Validate(SmallSpec()).ok());
  c.max_route_nodes = 3;  // more than the 2 nodes
  const Status m = c.Validate(SmallSpec());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.message().find("max_route_nodes"), std::string::npos) << m.message();
  c.max_route_nodes = 1;
  EXPECT_TRUE(c.Validate(SmallSpec()).ok());
}

}  // namespace
}  // namespace onboard
