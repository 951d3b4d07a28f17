// ApplyPlanToProbe: the plan's structure scaled to the probe's ranks; every factor that could not be
// kept carries a reason, and the kept ones carry none.
#include <gtest/gtest.h>

#include "agent/plan_to_probe.h"
#include "backends/probe_layout_check.h"

namespace onboard::agent {
namespace {

const ProbeFactor* Find(const ProbeLayout& L, const std::string& name) {
  for (const auto& f : L.factors)
    if (f.factor == name) return &f;
  return nullptr;
}

// The probe recipe's 16 sequences per rank under the demo plan's 32 micro-batches: two micro-steps
// (the accumulation path) of 8, not 16 of 1 (9x the step time, plan_to_probe.h); the factor says why.
TEST(ApplyPlanToProbe, MicroStepsAreCappedWhereEachMoreCostsAWholeForwardBackward) {
  Plan p;
  p.deg.dp_shard = 2;
  p.deg.ep = 2;
  p.num_micro_batches = 32;
  auto L = ApplyPlanToProbe(p, 2, 16, 8);
  ASSERT_TRUE(L.ok()) << L.status().ToString();
  EXPECT_EQ(L->micro_steps, kMaxProbeMicroSteps);
  EXPECT_EQ(L->micro_batch, 16 / kMaxProbeMicroSteps);
  ASSERT_NE(Find(*L, "micro_batches"), nullptr);
  EXPECT_NE(Find(*L, "micro_batches")->reason.find("capped at 2 micro-steps"), std::string::npos)
      << Find(*L, "micro_batches")->reason;
  p.num_micro_batches = 1;  // a plan without accumulation keeps one micro-step, with nothing to say
  L = ApplyPlanToProbe(p, 2, 16, 8);
  ASSERT_TRUE(L.ok());
  EXPECT_EQ(L->micro_steps, 1);
  EXPECT_TRUE(Find(*L, "micro_batches")->reason.empty());
}

TEST(ApplyPlanToProbe, DemoPlanKeepsEpAndShardingAndExplainsTheRest) {
  Plan p;  // the demo's chosen plan: tp=4 x fsdp=32 x ep=128, 32 micro-batches, sequence parallel
  p.deg.tp = 4;
  p.deg.dp_shard = 32;
  p.deg.ep = 128;
  p.deg.sequence_parallel = true;
  p.num_micro_batches = 32;
  p.recompute = {{"MoE", Recompute::kSelective}, {"KDA", Recompute::kNone}};
  auto L = ApplyPlanToProbe(p, 4, 2, 16);
  ASSERT_TRUE(L.ok()) << L.status().ToString();
  EXPECT_EQ(L->tp, 2);  // tp=4 x ep=128 on 128 devices -> tp=2 x ep=2 on 4 ranks (issue 17)
  EXPECT_EQ(L->ep, 2);
  EXPECT_EQ(L->fsdp, 2);
  EXPECT_EQ(L->replicas, 1);
  // Each TP group trains 2 ranks x 2 sequences, in at most kMaxProbeMicroSteps = 2 micro-steps.
  EXPECT_EQ(L->micro_steps, 2);
  EXPECT_EQ(L->micro_batch, 2);
  ASSERT_NE(Find(*L, "tp"), nullptr);
  EXPECT_TRUE(Find(*L, "tp")->reason.empty()) << Find(*L, "tp")->reason;  // scaled, structure kept
  ASSERT_NE(Find(*L, "micro_batches"), nullptr);
  EXPECT_FALSE(Find(*L, "micro_batches")->reason.empty());
  // Sequence parallelism is rehearsed over the probe's TP group (probe_tp.h).
  EXPECT_TRUE(L->sequence_parallel);
  ASSERT_NE(Find(*L, "sequence_parallel"), nullptr);
  EXPECT_EQ(Find(*L, "sequence_parallel")->probe, "on");
  EXPECT_TRUE(Find(*L, "sequence_parallel")->reason.empty()) << Find(*L, "sequence_parallel")->reason;
  // Recompute is kept per block kind; kinds the plan leaves out recompute none (its default).
  EXPECT_EQ(Find(*L, "recompute")->plan, "MoE=selective");
  EXPECT_EQ(Find(*L, "recompute")->probe, "*=none,KDA=none,MoE=selective");
  EXPECT_TRUE(Find(*L, "recompute")->reason.empty());
  EXPECT_EQ(L->recompute.at("MoE"), Recompute::kSelective);
  EXPECT_TRUE(Find(*L, "ep")->reason.empty());
  EXPECT_EQ(Find(*L, "pp"), nullptr);  // pp=1 in the plan: nothing to say
  EXPECT_EQ(L->ToJson()["factors"].size(), L->factors.size());
}

// A plan kind the proxy runs as another kind says so; one it has no block for is dropped, said.
TEST(ApplyPlanToProbe, RecomputeKindsMapOntoTheProxy) {
  Plan p;
  p.recompute = {
      {"GQA", Recompute::kFull}, {"GatedDeltaNet", Recompute::kSelective}, {"Mamba", Recompute::kFull}};
  auto L = ApplyPlanToProbe(p, 2, 2, 8);
  ASSERT_TRUE(L.ok());
  EXPECT_EQ(L->recompute.at("MLA"), Recompute::kFull);
  EXPECT_EQ(L->recompute.at("KDA"), Recompute::kSelective);
  EXPECT_EQ(L->recompute.count("Mamba"), 0u);
  const std::string why = Find(*L, "recompute")->reason;
  EXPECT_NE(why.find("GQA runs as the proxy's MLA"), std::string::npos) << why;
  EXPECT_NE(why.find("Mamba is no block kind of the proxy"), std::string::npos) << why;
}

// Without a TP group to split over, sequence parallelism and expert TP are dropped, with the reason;
// with one, expert TP runs over the whole TP group (etp = tp), said when the plan's etp differs.
TEST(ApplyPlanToProbe, SequenceParallelAndExpertTpNeedTheProbesTp) {
  Plan p;
  p.deg.tp = 8;
  p.deg.etp = 8;
  p.deg.sequence_parallel = true;
  auto L = ApplyPlanToProbe(p, 4, 2, 8);
  ASSERT_TRUE(L.ok()) << L.status().ToString();
  EXPECT_EQ(L->tp, 4);
  EXPECT_TRUE(L->sequence_parallel);
  EXPECT_EQ(L->etp, 4);
  EXPECT_NE(Find(*L, "etp")->reason.find("etp = tp=4"), std::string::npos) << Find(*L, "etp")->reason;
  p.deg.tp = 1;
  auto one = ApplyPlanToProbe(p, 4, 2, 8);
  ASSERT_TRUE(one.ok());
  EXPECT_FALSE(one->sequence_parallel);
  EXPECT_EQ(one->etp, 1);
  EXPECT_NE(Find(*one, "sequence_parallel")->reason.find("tp=1"), std::string::npos);
  EXPECT_NE(Find(*one, "etp")->reason.find("tp=1"), std::string::npos);
}

TEST(ApplyPlanToProbe, HybridShardingKeepsReplicas) {
  Plan p;
  p.deg.dp_replicate = 4;
  p.deg.dp_shard = 8;
  p.deg.ep = 8;
  auto L = ApplyPlanToProbe(p, 4, 2, 8);
  ASSERT_TRUE(L.ok());
  EXPECT_EQ(L->replicas, 2);
  EXPECT_EQ(L->fsdp, 2);
  EXPECT_EQ(L->ep, 4);
  auto two = ApplyPlanToProbe(p, 2, 2, 8);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->replicas, 1);
  EXPECT_FALSE(Find(*two, "replicas")->reason.empty());
}

TEST(ApplyPlanToProbe, PureDataParallelStaysReplicated) {
  Plan p;
  p.deg.dp_replicate = 8;
  auto L = ApplyPlanToProbe(p, 2, 2, 0);
  ASSERT_TRUE(L.ok());
  EXPECT_EQ(L->replicas, 2);
  EXPECT_EQ(L->fsdp, 1);
  for (const auto& f : L->factors) EXPECT_TRUE(f.reason.empty()) << f.factor << ": " << f.reason;
}

TEST(ApplyPlanToProbe, EpThatCannotBeScaledSaysWhy) {
  Plan p;
  p.deg.dp_shard = 8;
  p.deg.ep = 8;
  auto L = ApplyPlanToProbe(p, 3, 2, 4);
  ASSERT_TRUE(L.ok());
  EXPECT_EQ(L->ep, 1);
  const std::string& why = Find(*L, "ep")->reason;
  EXPECT_NE(why.find("ranks=3"), std::string::npos) << why;
  EXPECT_NE(why.find("experts=4"), std::string::npos) << why;
}

TEST(ApplyPlanToProbe, PlanTheProbeCanRunIsKeptWhole) {
  Plan p;
  p.deg.dp_shard = 64;
  p.deg.ep = 8;
  p.num_micro_batches = 2;
  auto L = ApplyPlanToProbe(p, 2, 4, 8);
  ASSERT_TRUE(L.ok());
  for (const auto& f : L->factors) EXPECT_TRUE(f.reason.empty()) << f.factor << ": " << f.reason;
  EXPECT_EQ(L->micro_steps, 2);
  EXPECT_EQ(L->micro_batch, 2);
}

// A tp the proxy's heads do not divide is lowered, and the factor says which size ruled it out.
TEST(ApplyPlanToProbe, TpThatDoesNotDivideTheProxyHeadsIsAdjustedWithAReason) {
  Plan p;
  p.deg.tp = 4;
  p.deg.dp_shard = 8;
  ProxySpec proxy;  // defaults: 2 KDA heads, 2 MLA heads, 2 indexer heads, vocab 256
  proxy.layers = {{ProxyMixer::kKDA, ProxyChannel::kDense}, {ProxyMixer::kMLA, ProxyChannel::kMoE}};
  auto L = ApplyPlanToProbe(p, 8, 2, 8, &proxy);  // ranks allow tp=4; the heads do not
  ASSERT_TRUE(L.ok()) << L.status().ToString();
  EXPECT_EQ(L->tp, 2);
  EXPECT_EQ(L->fsdp, 4);
  ASSERT_NE(Find(*L, "tp"), nullptr);
  EXPECT_NE(Find(*L, "tp")->reason.find("tp=4 does not divide the proxy's"), std::string::npos)
      << Find(*L, "tp")->reason;
  proxy.kda_heads = 3;  // no tp >= 2 fits: runs tp=1, and says why
  auto one = ApplyPlanToProbe(p, 8, 2, 8, &proxy);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->tp, 1);
  EXPECT_EQ(one->fsdp, 8);
  EXPECT_NE(Find(*one, "tp")->reason.find("kda_heads=3"), std::string::npos) << Find(*one, "tp")->reason;
}

TEST(ApplyPlanToProbe, BadRanksAreInputErrors) {
  EXPECT_EQ(ApplyPlanToProbe(Plan{}, 0, 2, 8).status().code(), ErrorCode::kBadInput);
  EXPECT_EQ(ApplyPlanToProbe(Plan{}, 2, 0, 8).status().code(), ErrorCode::kBadInput);
}

// A 4-layer proxy (the layers pipeline stages split; default heads and vocab).
ProxySpec FourLayerProxy() {
  ProxySpec s;
  s.layers = {{ProxyMixer::kKDA, ProxyChannel::kDense},
              {ProxyMixer::kKDA, ProxyChannel::kMoE},
              {ProxyMixer::kKDA, ProxyChannel::kMoE},
              {ProxyMixer::kMLA, ProxyChannel::kMoE}};
  return s;
}

// Pipeline parallelism (issue 17): pp scaled to the ranks and the proxy's layers, interleave while
// the proxy has a layer per chunk, the plan's split points scaled to the proxy's layers.
TEST(ApplyPlanToProbe, PipelineIsScaledDownWithReasons) {
  const ProxySpec proxy = FourLayerProxy();
  Plan p;
  p.deg.pp = 4;
  p.deg.interleave = 2;
  p.deg.dp_shard = 8;
  p.deg.ep = 8;
  p.num_micro_batches = 32;
  auto L = ApplyPlanToProbe(p, 4, 2, 8, &proxy, 61);
  ASSERT_TRUE(L.ok()) << L.status().ToString();
  EXPECT_EQ(L->pp, 2);  // at most half the ranks: the plan's fsdp and ep keep 2 data ranks
  EXPECT_NE(Find(*L, "pp")->reason.find("leaves >= 2 data ranks"), std::string::npos)
      << Find(*L, "pp")->reason;
  EXPECT_EQ(L->interleave, 2);  // 2 stages x 2 chunks = the 4 proxy layers
  EXPECT_EQ(L->fsdp, 2);
  EXPECT_EQ(L->ep, 2);
  EXPECT_EQ(L->micro_steps, 2);  // a data rank trains on pp x 2 sequences, capped at 2 micro-steps
  p.deg.dp_shard = 1;            // no data or expert parallelism: pp may take every rank
  p.deg.ep = 1;
  auto all = ApplyPlanToProbe(p, 4, 2, 8, &proxy, 61);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->pp, 4);
  EXPECT_TRUE(Find(*all, "pp")->reason.empty());
  EXPECT_EQ(all->interleave, 1);  // 4 stages x 2 chunks > 4 proxy layers
  EXPECT_NE(Find(*all, "interleave")->reason.find("proxy's layers=4"), std::string::npos);
  EXPECT_EQ(all->fsdp, 1);  // one data rank per stage
  auto two = ApplyPlanToProbe(p, 2, 2, 8, &proxy, 61);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->pp, 2);
  EXPECT_EQ(two->interleave, 2);
  EXPECT_NE(Find(*two, "pp")->reason.find("ranks=2"), std::string::npos);
  EXPECT_EQ(two->ToJson()["pp"], 2);
}

TEST(ApplyPlanToProbe, PipelineThatCannotBeKeptSaysWhy) {
  const ProxySpec proxy = FourLayerProxy();
  Plan p;
  p.deg.pp = 2;
  auto L = ApplyPlanToProbe(p, 3, 2, 8, &proxy, 61);  // 2 does not divide 3 ranks
  ASSERT_TRUE(L.ok());
  EXPECT_EQ(L->pp, 1);
  EXPECT_NE(Find(*L, "pp")->reason.find("ranks=3"), std::string::npos) << Find(*L, "pp")->reason;
  auto unknown = ApplyPlanToProbe(p, 2, 2, 8);  // proxy not given
  ASSERT_TRUE(unknown.ok());
  EXPECT_EQ(unknown->pp, 1);
  EXPECT_FALSE(Find(*unknown, "pp")->reason.empty());
}

TEST(ApplyPlanToProbe, SplitPointsAreScaledOrReplacedWithAReason) {
  const ProxySpec proxy = FourLayerProxy();
  Plan p;
  p.deg.pp = 2;
  p.stage_layer_starts = {0, 40};
  auto L = ApplyPlanToProbe(p, 2, 2, 8, &proxy, 61);
  ASSERT_TRUE(L.ok());
  EXPECT_EQ(L->stage_layer_starts, (std::vector<int64_t>{0, 2}));  // 40 * 4 / 61 = 2
  EXPECT_TRUE(Find(*L, "stage_split")->reason.empty());
  p.stage_layer_starts = {0, 10};  // 10 * 4 / 61 = 0: the two stages would merge
  auto merged = ApplyPlanToProbe(p, 2, 2, 8, &proxy, 61);
  ASSERT_TRUE(merged.ok());
  EXPECT_TRUE(merged->stage_layer_starts.empty());
  EXPECT_NE(Find(*merged, "stage_split")->reason.find("merge"), std::string::npos);
}

// tp and pp follow the probe's one rank order (pp outermost, data ranks, tp innermost): pp divides
// the ranks tp leaves, the data ranks are ranks / (tp * pp), and the layout passes the probe's own
// check (backends/probe_layout_check.h). Negative: pp taken over all ranks instead (tp=2 x pp=4 on
// 8 ranks) leaves ep=2 no data ranks, and the check names it.
TEST(ApplyPlanToProbe, TpAndPpShareOneRankOrder) {
  const ProxySpec proxy = FourLayerProxy();
  Plan p;
  p.deg.tp = 4;
  p.deg.pp = 4;
  p.deg.dp_shard = 8;
  p.deg.ep = 8;
  auto L = ApplyPlanToProbe(p, 8, 2, 8, &proxy, 61);
  ASSERT_TRUE(L.ok()) << L.status().ToString();
  EXPECT_EQ(L->tp, 2);  // the proxy's 2 heads
  EXPECT_EQ(L->pp, 2);  // half of ranks/tp=4, so that 2 data ranks remain
  EXPECT_EQ(L->ep, 2);
  EXPECT_EQ(L->fsdp, 2);
  EXPECT_EQ(L->tp * L->pp * L->fsdp * L->replicas, 8);
  ProbeConfig c;
  c.ranks = 8;
  c.batch = 16;
  c.tp = L->tp;
  c.pp = L->pp;
  c.interleave = L->interleave;
  c.ep = L->ep;
  c.fsdp = L->fsdp;
  c.micro_batch = L->micro_batch;
  EXPECT_TRUE(ValidateParallelFactors(c, proxy).ok()) << ValidateParallelFactors(c, proxy).ToString();
  c.pp = 4;
  c.interleave = 1;
  const Status bad = ValidateParallelFactors(c, proxy);
  EXPECT_NE(bad.message().find("ep=2 must divide ranks/(tp*pp)=1"), std::string::npos) << bad.ToString();
  c.pp = 8;
  c.ep = 8;  // every factor named: ep then divides the ranks tp leaves
  const std::string both = ValidateParallelFactors(c, proxy).message();
  EXPECT_NE(both.find("pp=8 must divide ranks/tp=4"), std::string::npos) << both;
  EXPECT_NE(both.find("ep=8 must divide ranks/tp=4"), std::string::npos) << both;
}

}  // namespace
}  // namespace onboard::agent
