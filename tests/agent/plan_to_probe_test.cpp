// ApplyPlanToProbe: the plan's structure scaled to the probe's ranks; every factor that could not be
// kept carries a reason, and the kept ones carry none.
#include <gtest/gtest.h>

#include "agent/plan_to_probe.h"

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
  for (const char* f : {"sequence_parallel", "micro_batches"}) {
    ASSERT_NE(Find(*L, f), nullptr) << f;
    EXPECT_FALSE(Find(*L, f)->reason.empty()) << f;
  }
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

}  // namespace
}  // namespace onboard::agent
