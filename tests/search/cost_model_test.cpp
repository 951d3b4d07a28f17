// Unit checks of the cost model's physical terms: alpha-beta collectives on tiers, pipeline bubble,
// Korthikanti activations, grouped-GEMM efficiency, balanced stage split, validation messages, and
// the localhost-cpu entry point the backend uses.
#include <cmath>

#include "search/cost_model.h"
#include "search/layout_file.h"
#include "search_test_util.h"

namespace onboard {
namespace {

Topology TwoTier() {
  Topology t;
  t.name = "t";
  t.num_devices = 64;
  t.device = {"x", 100, 0, 0, 80, 2000};
  t.tiers = {{"fast", 8, 100, 1, 1.0}, {"slow", 64, 10, 10, 1.0}};
  return t;
}

TEST(Collectives, AlphaBetaFormulas) {
  const Topology t = TwoTier();
  const CostCalibration cal;
  const double B = 1e9;
  // ring all-reduce inside the node: 2(n-1)a + 2(n-1)/n B/bw
  auto ar = CollectiveCost(t, cal, Collective::kAllReduce, 8, 1, B);
  EXPECT_NEAR(ar.seconds, 2 * 7 * 1e-6 + 2 * 7.0 / 8 * B / 100e9, 1e-12);
  EXPECT_EQ(ar.tier, "fast");
  // a stride-8 group of 8 spans 64 ranks: the slow tier.
  auto ag = CollectiveCost(t, cal, Collective::kAllGather, 8, 8, B);
  EXPECT_NEAR(ag.seconds, 7 * 10e-6 + 7.0 / 8 * B / 10e9, 1e-12);
  EXPECT_EQ(ag.tier, "slow");
  // all-to-all over 64: 7/64 of the traffic on the fast tier, 56/64 leaves the node.
  auto a2a = CollectiveCost(t, cal, Collective::kAllToAll, 64, 1, B);
  EXPECT_NEAR(a2a.seconds, (1 + 6) * 10e-6 + 56.0 / 64 * B / 10e9, 1e-9);
  // calibration scales bandwidth per tier
  CostCalibration slow;
  slow.tier_bandwidth = {1.0, 0.5};
  EXPECT_GT(CollectiveCost(t, slow, Collective::kAllToAll, 64, 1, B).seconds, 1.9 * 56.0 / 64 * B / 10e9);
}

// A ring over several nodes crosses the slow tier through every member's own NIC (NCCL spreads its
// rings over the rails): 8 members per node move their (n-1)/n B at 8 x 10 GB/s, not at one NIC's 10.
TEST(Collectives, RingsAcrossNodesUseEveryMembersLink) {
  const Topology t = TwoTier();
  const CostCalibration cal;
  const double B = 1e9;
  auto rs = CollectiveCost(t, cal, Collective::kReduceScatter, 16, 1, B);  // 2 nodes x 8
  EXPECT_EQ(rs.tier, "slow");
  EXPECT_NEAR(rs.seconds, 15 * 10e-6 + 15.0 / 16 * B / (8 * 10e9), 1e-12);
  auto ar = CollectiveCost(t, cal, Collective::kAllReduce, 32, 2, B);  // 4 per node (stride 2) x 16 nodes
  EXPECT_NEAR(ar.seconds, 2 * 31 * 10e-6 + 2 * 31.0 / 32 * B / (4 * 10e9), 1e-12);
  // A ring of sends (TE's CP ring) waits for its one slow hop: no spreading over the NICs.
  EXPECT_NEAR(CollectiveCost(t, cal, Collective::kRingP2P, 16, 1, B).seconds,
              15 * 10e-6 + 15.0 / 16 * B / 10e9, 1e-12);
  // Fast tier slower than the NICs together: the NVLink hops bound it.
  Topology thin = t;
  thin.tiers[0].bw_gbps = 40;
  EXPECT_NEAR(CollectiveCost(thin, cal, Collective::kAllGather, 16, 1, B).seconds,
              15 * 10e-6 + 15.0 / 16 * B / 40e9, 1e-12);
}

TEST(PipelineSplit, BalancesHeterogeneousLayers) {
  // Heavy layers every 4th (like MLA among KDA): the split must not exceed the best cap.
  std::vector<double> cost;
  for (int i = 0; i < 32; ++i) cost.push_back(i % 4 == 3 ? 3.0 : 1.0);
  auto starts = BalancedSplit(cost, 4);
  ASSERT_EQ(starts.size(), 4u);
  EXPECT_EQ(starts[0], 0);
  double worst = 0;
  for (size_t c = 0; c < starts.size(); ++c) {
    const int64_t end = c + 1 < starts.size() ? starts[c + 1] : 32;
    double s = 0;
    for (int64_t i = starts[c]; i < end; ++i) s += cost[i];
    worst = std::max(worst, s);
  }
  EXPECT_LE(worst, 48.0 / 4 + 3.0);
  EXPECT_EQ(BalancedSplit(std::vector<double>(5, 1.0), 5), (std::vector<int64_t>{0, 1, 2, 3, 4}));
}

// A GPT-style run from published_runs.json, costed with different plans.
struct GptFixture : ::testing::Test {
  void SetUp() override {
    runs = test::PublishedRuns();
    ASSERT_FALSE(runs.empty());
  }
  const LayoutRun& Run(const std::string& id) {
    for (const auto& r : runs)
      if (r.id == id) return r;
    ADD_FAILURE() << id;
    return runs.front();
  }
  std::vector<LayoutRun> runs;
};

TEST_F(GptFixture, BubbleFollows1F1BAndInterleavedFormulas) {
  const LayoutRun& run = Run("gpt3-175B/seqsel");
  const PlanRequest req = RequestForRun(run);
  for (int64_t v : {1, 3}) {
    Plan p = run.plan;
    p.deg.interleave = v;
    auto e = EvaluatePlan(req, p);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    double per_mb = 0;  // the critical stage's per-micro-batch time
    for (const auto& t : e->time_terms)
      if (t.name.rfind("compute.", 0) == 0 || t.name == "recompute" || t.name == "comm.tp") per_mb += t.exposed_s;
    per_mb /= static_cast<double>(p.num_micro_batches);
    EXPECT_NEAR(e->bubble_s, (8.0 - 1) / static_cast<double>(v) * per_mb, 1e-6 * per_mb) << "v=" << v;
  }
}

TEST_F(GptFixture, KorthikantiActivationFormula) {
  // sbh(34 + 5as/h) per layer without recompute, all 48 layers on one stage, t = 8, no SP:
  // sbh(10 + 24/t + 5as/(ht)); selective + SP: 34 sbh / t; full: 2 sbh per layer.
  const LayoutRun& run = Run("megatron-22B/seqsel");
  const PlanRequest req = RequestForRun(run);
  const double s = 2048, b = 4, h = 6144, a = 64, t = 8, L = 48;
  Plan none = run.plan;
  none.deg.sequence_parallel = false;
  none.recompute = {{"*", Recompute::kNone}};
  auto e0 = EvaluatePlan(req, none);
  ASSERT_TRUE(e0.ok());
  const double want0 = L * s * b * h * (10 + 24 / t + 5 * a * s / (h * t));
  EXPECT_NEAR(e0->memory.activations / want0, 1.0, 0.01);
  Plan sel = run.plan;
  auto e1 = EvaluatePlan(req, sel);
  ASSERT_TRUE(e1.ok());
  // The stored activations of the paper's Table 2, plus, once, what the layer being recomputed
  // holds again in its backward (Chen et al. 2016 sec. 4; memory_model.cpp): selective drops the
  // 5as/(ht) scores, full keeps 2sbh of the no-recompute sbh(10 + 24/t + 5as/(ht)).
  EXPECT_NEAR(e1->memory.activations / (L * 34 * s * b * h / t + 5 * a * s * s * b / t), 1.0, 0.01);
  Plan full = run.plan;
  full.deg.sequence_parallel = false;
  full.recompute = {{"*", Recompute::kFull}};
  auto e2 = EvaluatePlan(req, full);
  ASSERT_TRUE(e2.ok());
  EXPECT_NEAR(e2->memory.activations / (L * 2 * s * b * h + s * b * h * (8 + 24 / t + 5 * a * s / (h * t))),
              1.0, 0.01);
  // Recompute = extra forward: full costs more time than selective, which costs more than none.
  EXPECT_GT(e2->step_s, e1->step_s);
  // Mixed precision Adam without sharding: 18 bytes per parameter / t.
  const double params = 48 * (12 * h * h + 13 * h) + 51200 * h + 2048 * h + 2 * h;
  EXPECT_NEAR((e1->memory.weights + e1->memory.grads + e1->memory.optimizer) / (18 * params / t), 1.0, 0.01);
}

TEST_F(GptFixture, TensorParallelAllReduceCount) {
  const LayoutRun& run = Run("megatron-22B/seqsel");
  const PlanRequest req = RequestForRun(run);
  auto e = EvaluatePlan(req, run.plan);
  ASSERT_TRUE(e.ok());
  // 2 fwd + 2 bwd per layer (RS/AG pairs with SP) on 8192 tokens x 6144 x 2 bytes.
  const CostCalibration cal;
  const double one = CollectiveCost(run.topology, cal, Collective::kAllReduce, 8, 1, 8192.0 * 6144 * 2).seconds;
  bool found = false;
  for (const auto& t : e->time_terms) {
    if (t.name != "comm.tp") continue;
    found = true;
    EXPECT_NEAR(t.exposed_s, 48 * 4 * one, 1e-9);
  }
  EXPECT_TRUE(found);
}

TEST(CostModel, GroupedExpertGemmsAreLessEfficientWithSmallBatches) {
  // Same layout, fewer tokens per expert (lower EP => fewer tokens per expert per rank): the MoE
  // compute per routed FLOP rises.
  PlanRequest req = test::SeedRequest(FinetuneMode::kLoRA);
  req.seq = 512;  // 512 tokens x top-16 / (896/ep) experts: 1170 tokens per expert at ep=128, 73 at ep=8
  Plan p = test::MakePlan({1, 128, 1, 1, 128, 1, 1, false}, 512, 1, 1);
  p.mode = FinetuneMode::kLoRA;
  p.lora_rank = 16;
  p.recompute = {{"*", Recompute::kFull}};
  auto big = EvaluatePlan(req, p);
  p.deg.ep = 8;
  p.deg.expert_fsdp = 16;
  auto small = EvaluatePlan(req, p);
  ASSERT_TRUE(big.ok() && small.ok()) << big.status().ToString() << small.status().ToString();
  EXPECT_GT(small->compute_s_by_kind.at("MoE"), 1.3 * big->compute_s_by_kind.at("MoE"));
}

TEST(CostModel, InvalidPlansAreRejectedWithEveryFactor) {
  PlanRequest req = test::SeedRequest(FinetuneMode::kLoRA);
  Plan p;
  p.deg = {1, 128, 1, 1, 48, 1, 1, false};
  p.seq = 4096;
  p.global_batch = 128;
  p.mode = FinetuneMode::kLoRA;
  p.lora_rank = 16;
  auto e = EvaluatePlan(req, p);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("ep=48"), std::string::npos) << e.status().message();
  EXPECT_NE(e.status().message().find("128"), std::string::npos);
  p.deg = {1, 2, 64, 1, 64, 2, 1, true};
  auto e2 = EvaluatePlan(req, p);
  ASSERT_FALSE(e2.ok());
  EXPECT_NE(e2.status().message().find("tp=64 must divide attention heads=96"), std::string::npos)
      << e2.status().message();
}

// The entry point for the backend: cost a tiny proxy model on a measured "this machine" topology.
TEST(CostModel, LocalhostProxyEvaluation) {
  auto m = ModelFromDims(R"({"hidden":256,"ffn":1024,"heads":4,"layers":2,"vocab":1000,"seq":128,"gated":true})", "proxy");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  PlanRequest req;
  req.model = *m;
  req.topology = LocalhostTopology(2, 50.0, 5.0, 20.0, 8.0);
  req.seq = 128;
  const Plan p = test::MakePlan({1, 2, 1, 1, 1, 1, 1, false}, 128, 2, 1);
  auto e = EvaluatePlan(req, p);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_GT(e->step_s, 0);
  EXPECT_TRUE(e->fits);
  EXPECT_GT(e->tokens_per_s, 0);
  bool has_fsdp = false;
  for (const auto& t : e->time_terms) has_fsdp |= t.name == "comm.fsdp" && t.tier == "loopback";
  EXPECT_TRUE(has_fsdp);
}

}  // namespace
}  // namespace onboard
