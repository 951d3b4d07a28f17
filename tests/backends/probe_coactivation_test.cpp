// Expert co-activation measured by the probe (backends/probe_coactivation.h) and the placement made
// from it (backends/probe_coactivation_placement.h): the recorder on hand-made routings, the merge
// over ranks, then a real 4-rank probe told it runs on 2 nodes x 2 ranks, re-run with the
// co-activation placement: same loss curve bit for bit, fewer cross-node copies measured.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "backends/probe_coactivation.h"
#include "backends/probe_coactivation_placement.h"
#include "backends/probe_step_series.h"
#include "search/expert_placement.h"
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
  rec.Configure(/*experts=*/4, /*top_k=*/2,
                ranks_per_node == 1 ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{0, 0}, 0);
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
  // Another rank's other layer (a pipeline stage holds its own MoE layers) is merged beside it,
  // in layer order; the same layer with another histogram length is refused, naming the file.
  nlohmann::json other = a;
  other["layers"][0]["layer"] = 3;
  const ProbeCoactivation staged = Merged({other, a}, 1, 2);
  ASSERT_EQ(staged.layers.size(), 2u);
  EXPECT_EQ(staged.layers[0].layer, a["layers"][0]["layer"].get<int64_t>());
  EXPECT_EQ(staged.layers[1].layer, 3);
  EXPECT_EQ(staged.layers[0].tokens, 3);
  EXPECT_EQ(staged.layers[1].tokens, 3);
  nlohmann::json bad = a;
  bad["layers"][0]["ranks_hist"].push_back(0);
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
// best_capped: the best split whose node loads stay within max/mean <= cap (load: tokens per expert).
struct SplitStats {
  double best = 0, mean = 0, contiguous = 0, best_capped = 0;
};
SplitStats ExhaustiveSplits(const std::vector<std::vector<double>>& w, const std::vector<double>& load = {},
                            double cap = 0) {
  SplitStats s;
  int n = 0;
  for (int mask = 0; mask < 256; ++mask) {
    if (__builtin_popcount(mask) != 4 || !(mask & 1)) continue;  // expert 0 on node 0
    double intra = 0, node0 = 0, total = 0;
    for (int i = 0; i < 8; ++i) {
      for (int j = i + 1; j < 8; ++j)
        if (((mask >> i) & 1) == ((mask >> j) & 1)) intra += w[i][j];
      if (!load.empty()) node0 += ((mask >> i) & 1) ? load[i] : 0, total += load[i];
    }
    s.best = std::max(s.best, intra);
    if (!load.empty() && std::max(node0, total - node0) <= cap * total / 2)
      s.best_capped = std::max(s.best_capped, intra);
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

// Measured pairs of the i-th MoE layer that share a node under `placement` (expert -> EP rank).
int64_t IntraPairs(const ProbeCoactivationLayer& l, const std::vector<int64_t>& placement, int64_t rpn) {
  int64_t s = 0;
  for (const ExpertPairCount& p : l.pairs)
    if (placement[p.a] / rpn == placement[p.b] / rpn) s += p.tokens;
  return s;
}

// One probe (4 ranks = 2 nodes x 2, fp32, fixed micro-batch: the curve does not depend on the
// placement, so every run routes the same tokens) under three placements: the contiguous default,
// DeepSeek-EPLB-style load packing without replicas (search/expert_placement.h), and the per-layer
// co-activation placement, both from the first run's measurements.
struct PlacementRuns {
  ProbeResult contiguous, load_only, coact;
  ProbeCoactivationPlacement placed;
  int64_t intra_contiguous = 0, intra_load_only = 0, intra_coact = 0;  // measured pairs on one node
};

void RunPlacements(ProbeConfig c, const std::string& name, PlacementRuns* out) {
  const ProxySpec spec = SmallSpec();
  c.micro_batch = 2;
  c.ranks_per_node = 2;
  c.out_dir = TempDir(name + "-contiguous");
  Expected<ProbeResult> base = RunProbeSpec(spec, c);
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  out->contiguous = *base;
  Expected<ProbeCoactivationPlacement> placed = PlaceFromProbeCoactivation(*base);
  ASSERT_TRUE(placed.ok()) << placed.status().ToString();
  out->placed = *placed;
  ExpertPlacementRequest req;  // load-only, per layer, as EPLB places each layer
  req.ep_ranks = 4;
  req.ranks_per_node = 2;
  ProbeConfig lo = c, co = c;
  std::vector<std::vector<int64_t>> lo_layers;
  for (size_t i = 0; i < base->coactivation.layers.size(); ++i) {
    req.expert_load.assign(8, 0);
    for (const ProbeStep& s : base->steps)
      for (size_t e = 0; e < 8; ++e) req.expert_load[e] += static_cast<double>(s.expert_load[i][e]);
    Expected<ExpertPlacement> p = PlaceExperts(req);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    std::vector<int64_t> pl(8, 0);
    for (size_t r = 0; r < p->rank_experts.size(); ++r)
      for (int64_t e : p->rank_experts[r]) pl[e] = static_cast<int64_t>(r);
    lo_layers.push_back(pl);
    const ProbeCoactivationLayer& l = base->coactivation.layers[i];
    out->intra_contiguous += IntraPairs(l, {0, 0, 1, 1, 2, 2, 3, 3}, 2);
    out->intra_load_only += IntraPairs(l, pl, 2);
    out->intra_coact += IntraPairs(l, placed->placement_by_layer[i], 2);
  }
  lo.expert_placement = PerLayerPlacement(lo_layers);
  co.expert_placement = PerLayerPlacement(placed->placement_by_layer);
  lo.out_dir = TempDir(name + "-load-only");
  co.out_dir = TempDir(name + "-coact");
  Expected<ProbeResult> rl = RunProbeSpec(spec, lo), rc = RunProbeSpec(spec, co);
  ASSERT_TRUE(rl.ok()) << rl.status().ToString();
  ASSERT_TRUE(rc.ok()) << rc.status().ToString();
  out->load_only = *rl;
  out->coact = *rc;
  // The maths and the routing do not depend on the placement; the measured traffic follows the pairs.
  EXPECT_EQ(Losses(*rl), Losses(*base)) << "load-only placement changed the maths";
  EXPECT_EQ(Losses(*rc), Losses(*base)) << "co-activation placement changed the maths";
  for (size_t i = 0; i < base->steps.size(); ++i)
    EXPECT_EQ(rc->steps[i].expert_load, base->steps[i].expert_load);
  ExpectNodesFollowPairs(*base, out->intra_contiguous, "contiguous");
  ExpectNodesFollowPairs(*rl, out->intra_load_only, "load-only");
  ExpectNodesFollowPairs(*rc, out->intra_coact, "co-activation");
  EXPECT_EQ(out->intra_coact, placed->intra_node_pairs_by_layer_after);
  // What the measured pairs offer: every 2 x 4 node split of each layer.
  for (const ProbeCoactivationLayer& l : base->coactivation.layers) {
    ProbeCoactivation one = base->coactivation;
    one.layers = {l};
    const SplitStats st = ExhaustiveSplits(SummedPairCounts(one, 8));
    std::printf(
        "%s layer %lld: pairs on one node: contiguous %.0f, mean of the 35 splits %.1f, best %.0f (of "
        "%lld)\n",
        name.c_str(), static_cast<long long>(l.layer), st.contiguous, st.mean, st.best,
        static_cast<long long>(l.tokens));
  }
  const ProbeTierTraffic t0 = TotalTraffic(base->coactivation), tl = TotalTraffic(rl->coactivation),
                         tc = TotalTraffic(rc->coactivation);
  std::printf(
      "%s, 4 ranks = 2 nodes x 2, %lld steps; contiguous / load-only / co-activation: pairs on one node "
      "%lld / %lld / %lld of %lld; nodes/token %.3f / %.3f / %.3f; node-dedup cross-node copies/token "
      "%.3f / %.3f / %.3f; slow-tier bytes/token %.1f / %.1f / %.1f; rows per EP rank max/mean %.3f / %.3f / "
      "%.3f\n",
      name.c_str(), static_cast<long long>(c.steps), static_cast<long long>(out->intra_contiguous),
      static_cast<long long>(out->intra_load_only), static_cast<long long>(out->intra_coact),
      static_cast<long long>(placed->co_selected_pairs), t0.nodes_per_token, tl.nodes_per_token,
      tc.nodes_per_token, t0.cross_node_copies_per_token, tl.cross_node_copies_per_token,
      tc.cross_node_copies_per_token, t0.slow_tier_bytes_per_token, tl.slow_tier_bytes_per_token,
      tc.slow_tier_bytes_per_token, t0.rank_max_over_mean, tl.rank_max_over_mean, tc.rank_max_over_mean);
}

TEST(ProbeCoactivation, FourRanksTwoNodesCopyTaskPlacementFollowsMeasuredPairsSameCurve) {
  ProbeConfig c = SmallConfig(4, "");
  c.steps = 8;
  PlacementRuns r;
  RunPlacements(c, "copy", &r);
  if (HasFatalFailure()) return;
  EXPECT_EQ(r.contiguous.coactivation.nodes, 2);
  EXPECT_EQ(r.contiguous.coactivation.layers[0].tokens, c.steps * c.batch * c.seq);
  // The placement never keeps fewer measured pairs on one node than either default.
  EXPECT_GE(r.intra_coact, r.intra_contiguous);
  EXPECT_GE(r.intra_coact, r.intra_load_only);
  // Negative: a one-node probe has no slow tier to cut.
  ProbeResult one = r.contiguous;
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
