// Rule expert_routing (agent/rules/rules_expert_routing.cpp) on probe results built here: 4 ranks
// declared as 2 nodes x 2, top-2 routing, with a nodes-per-token histogram planted; the plan is the
// tiny test model's (tests/data/agent/tiny_kimi.config.json, 8 experts top-2) searched with a deepep
// dispatcher and EP over all 8 devices, on 2 nodes x 4 (tiny_2x4) or 4 nodes x 2 (inline).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "agent/orchestrator_stages.h"
#include "agent/rules/rules.h"
#include "orchestrator_test_support.h"
#include "parsers/load_model.h"
#include "search/ep_a2a_traffic.h"

namespace onboard::agent {
namespace {

// Probe over `ranks` ranks, `ranks_per_node` each, one EP group over all ranks; one MoE layer whose
// tokens reach 1 node (`one`) or 2 nodes (`two`).
ProbeResult RoutingProbe(int64_t one, int64_t two, int64_t ranks_per_node) {
  ProbeResult p;
  p.spec.num_experts = 8;
  p.spec.top_k = 2;
  p.config.ranks = 4;
  p.config.ep = 4;
  p.config.ranks_per_node = ranks_per_node;
  ProbeCoactivationLayer l;
  l.layer = 1;
  l.tokens = one + two;
  l.nodes_hist = {0, one, two};
  l.ranks_hist = {0, 0, one + two};
  p.coactivation.ranks_per_node = ranks_per_node;
  p.coactivation.nodes = p.config.nodes();
  p.coactivation.top_k = 2;
  p.coactivation.layers = {l};
  return p;
}

// 4 nodes x 2 H200: the plan's EP group over 8 devices spans N = 4 nodes (the probe's N_p is 2).
const char* kFourByTwo =
    R"({"name": "tiny-4x2", "num_devices": 8,
        "device": {"name": "H200-141GB", "tflops_bf16": 989, "tflops_fp8": 1979, "hbm_gib": 140, "hbm_gbps": 4800},
        "tiers": [{"name": "nvlink", "group_size": 2, "bw_gbps": 450, "latency_us": 5, "efficiency": 0.7},
                  {"name": "ib", "group_size": 8, "bw_gbps": 50, "latency_us": 10, "efficiency": 0.9}]})";

// The tiny model's request (model included) and its best plan with ep = 8 and `dispatcher`.
struct TinyPlanned {
  PlanRequest req;
  PlanCandidate best;
};
TinyPlanned TinyPlan(const std::string& topology, EpDispatcher dispatcher) {
  TinyPlanned t;
  Expected<ModelIR> m = LoadModel(testing::TinyModel());
  EXPECT_TRUE(m.ok()) << m.status().message();
  Expected<Topology> topo = ResolveTopology(topology);
  EXPECT_TRUE(topo.ok()) << topo.status().message();
  t.req.model = *m;
  t.req.topology = *topo;
  t.req.mode = FinetuneMode::kLoRA;
  t.req.lora_rank = 8;
  t.req.ep_dispatcher = dispatcher;
  t.req.constraints.ep = 8;
  Expected<SearchResult> s = SearchPlans(t.req);
  EXPECT_TRUE(s.ok()) << s.status().message();
  t.best = s->best;
  return t;
}

TEST(RuleExpertRouting, TransfersTheConcentrationToThePlansNodesAndTopK) {
  // U(8, 8) = 8 (1 - (7/8)^8) = 5.25113; c = 0.2 -> 1 + 0.2 x 4.25113 = 1.85023 nodes per token.
  EXPECT_NEAR(UniformNodesPerToken(8, 8), 5.251129, 1e-6);
  EXPECT_NEAR(TransferNodesPerToken(0.2, 8, 8, 0), 1.850226, 1e-6);
  EXPECT_DOUBLE_EQ(TransferNodesPerToken(1.0, 8, 8, 0), UniformNodesPerToken(8, 8));  // uniform stays uniform
  EXPECT_DOUBLE_EQ(TransferNodesPerToken(0.0, 8, 8, 0), 1.0);   // one node stays one node
  EXPECT_DOUBLE_EQ(TransferNodesPerToken(3.0, 8, 8, 0), 8.0);   // capped at min(k, N)
  EXPECT_DOUBLE_EQ(TransferNodesPerToken(3.0, 8, 8, 4), 4.0);   // and at max_route_nodes
  EXPECT_DOUBLE_EQ(TransferNodesPerToken(3.0, 16, 2, 0), 2.0);  // k < N
}

TEST(RuleExpertRouting, ConcentratedRoutingFiresWithTheTransferredNodesPerToken) {
  // Probe: 90 % of tokens on one node, 10 % on two: D_p = 1.1 of U(2, 2) = 1.5 -> c = 0.2.
  ProbeResult p = RoutingProbe(90, 10, /*ranks_per_node=*/2);
  // Plan: 4 nodes, k = 2: U(4, 2) = 1.75 -> D = 1 + 0.2 x 0.75 = 1.15 (the plan used 1.75).
  TinyPlanned t = TinyPlan(kFourByTwo, EpDispatcher::kDeepEP);
  RoundEvidence ev;
  ev.round = 1;
  ev.probe = &p;
  ev.plan = &t.best;
  ev.plan_request = &t.req;
  LoopKnobs k;
  auto d = RuleExpertRouting(ev, Thresholds{}, k);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->rule, "expert_routing");
  EXPECT_NEAR(d->observed["concentration"].get<double>(), 0.2, 1e-12);
  EXPECT_DOUBLE_EQ(d->observed["plan_nodes"].get<double>(), 4.0);
  EXPECT_NEAR(d->observed["plan_nodes_per_token_used"].get<double>(), 1.75, 1e-12);
  EXPECT_NEAR(k.expert_nodes_per_token, 1.15, 1e-12);
  EXPECT_TRUE(k.replan);
  EXPECT_FALSE(k.reprobe);
  EXPECT_EQ(d->changed["expert_nodes_per_token"][1].get<double>(), k.expert_nodes_per_token);
  // Fewer slow-tier copies for the same layout: the a2a term shrinks, and "before" is the plan's own.
  const double before = d->observed["ep_a2a_s_before"].get<double>();
  const double after = d->observed["ep_a2a_s_after"].get<double>();
  double searched = 0;
  for (const TimeTerm& term : t.best.estimate.time_terms)
    if (term.name == "comm.ep_a2a") searched = term.exposed_s;
  EXPECT_GT(before, 0);
  EXPECT_DOUBLE_EQ(before, searched);
  EXPECT_LT(after, before);
  EXPECT_NE(d->action.find("->"), std::string::npos);
  // With the measured value now the plan's, the rule has nothing left to change.
  TinyPlanned t2 = t;
  t2.req.expert_nodes_per_token = k.expert_nodes_per_token;
  ev.plan_request = &t2.req;
  LoopKnobs k2 = k;
  EXPECT_FALSE(RuleExpertRouting(ev, Thresholds{}, k2).has_value());
}

TEST(RuleExpertRouting, UniformRoutingOneNodeOrPlainAllToAllDoNotFire) {
  TinyPlanned t = TinyPlan(kFourByTwo, EpDispatcher::kDeepEP);
  RoundEvidence ev;
  ev.plan = &t.best;
  ev.plan_request = &t.req;
  LoopKnobs k;
  ProbeResult uniform = RoutingProbe(50, 50, 2);  // D_p = 1.5 = U(2, 2): c = 1, D = U(4, 2) = used
  ev.probe = &uniform;
  EXPECT_FALSE(RuleExpertRouting(ev, Thresholds{}, k).has_value());
  ProbeResult one_node = RoutingProbe(90, 10, /*ranks_per_node=*/4);  // all 4 ranks on one node
  ev.probe = &one_node;
  EXPECT_FALSE(RuleExpertRouting(ev, Thresholds{}, k).has_value());
  ProbeResult concentrated = RoutingProbe(90, 10, 2);
  ev.probe = &concentrated;
  Thresholds lax;
  lax.expert_nodes_change = 0.5;  // |1.15 / 1.75 - 1| = 0.34: the threshold passed in decides
  EXPECT_FALSE(RuleExpertRouting(ev, lax, k).has_value());
  TinyPlanned plain = TinyPlan(kFourByTwo, EpDispatcher::kAllToAll);  // D does not enter its cost
  ev.plan = &plain.best;
  ev.plan_request = &plain.req;
  EXPECT_FALSE(RuleExpertRouting(ev, Thresholds{}, k).has_value());
  EXPECT_EQ(k.expert_nodes_per_token, 0);
  EXPECT_FALSE(k.replan);
}

// The loop's path: StagePlan (round 0), the rule on that plan, StagePlan again (the re-plan): the
// re-planned request carries the transferred nodes per token, and its a2a term costs it.
TEST(RuleExpertRouting, ReplannedRequestCarriesTheMeasuredNodesPerToken) {
  RunState st;
  st.req = testing::TinyRequest(testing::FreshDir("expert_routing_replan"), false, false);
  st.req.ep_dispatcher = EpDispatcher::kDeepEP;
  st.knobs.plan_constraints.ep = 8;  // EP over both nodes of tiny_2x4
  ASSERT_TRUE(StageParse(st).ok());
  ASSERT_TRUE(StagePlan(st, 0, "initial").ok());
  PlanRequest req = st.plans.back().request;
  req.model = st.model;
  EXPECT_EQ(req.expert_nodes_per_token, 0);
  ProbeResult p = RoutingProbe(90, 10, 2);  // c = 0.2 -> D = 1 + 0.2 x (U(2, 2) - 1) = 1.1
  RoundEvidence ev;
  ev.round = 1;
  ev.probe = &p;
  ev.plan = &st.plans.back().search.best;
  ev.plan_request = &req;
  auto d = RuleExpertRouting(ev, st.req.thresholds, st.knobs);
  ASSERT_TRUE(d.has_value());
  EXPECT_NEAR(st.knobs.expert_nodes_per_token, 1.1, 1e-12);
  ASSERT_TRUE(StagePlan(st, 1, "expert_routing").ok());
  const PlanRound& replanned = st.plans.back();
  EXPECT_EQ(replanned.request.expert_nodes_per_token, st.knobs.expert_nodes_per_token);
  std::string formula;
  for (const TimeTerm& term : replanned.search.best.estimate.time_terms)
    if (term.name == "comm.ep_a2a") formula = term.formula;
  EXPECT_NE(formula.find("1.1 nodes/token of 2"), std::string::npos) << formula;
  std::filesystem::remove_all(st.req.out_dir);
}

}  // namespace
}  // namespace onboard::agent
